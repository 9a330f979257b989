/**
 * What a command module exports, apart from the registry that lists the commands, so that a command
 * never imports the registry that imports it.
 */
import type { Command } from "commander";
import type { CliContext } from "./context";

/**
 * What an action returns: its exit code (0 when nothing is returned). Arguments are commander's:
 * the positional arguments, then the command's own options.
 */
export type Action<O> = (ctx: CliContext, options: O, args: string[]) => Promise<number | void>;

/** Wraps an action into a commander action handler. */
export type Run = <O>(action: Action<O>) => (...commanderArgs: unknown[]) => Promise<void>;

export interface CliCommand {
    readonly name: string;
    register(program: Command, run: Run): void;
}
