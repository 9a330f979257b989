/**
 * The command registry: one module per command, each a thin adapter over a runtime function.
 *
 * To add a command, write `cli/<name>.ts` exporting a `CliCommand` and add it to `COMMANDS`. The
 * adapter declares its flags with commander and wraps its action in `run`, which builds the context
 * (config, clients, output, Ctrl-C), maps errors to one line and an exit code, and closes the clients.
 */
import type { Command } from "commander";
import type { CliContext } from "./context";
import { backfillCommand } from "./backfill";
import { devCommand } from "./dev";
import { fatalCommand } from "./fatal";
import { healCommand } from "./heal";
import { reconcileCommand } from "./reconcile";
import { redriveCommand } from "./redrive";
import { statusCommand } from "./status";

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

export const COMMANDS: readonly CliCommand[] = [
    statusCommand,
    reconcileCommand,
    healCommand,
    backfillCommand,
    fatalCommand,
    redriveCommand,
    devCommand,
];
