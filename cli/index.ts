#!/usr/bin/env node
/**
 * `hybrid-counter`: the operator CLI (`npx hybrid-counter <command>`).
 *
 * Commands live one per module (see registry.ts). This entry builds the commander program, runs the
 * command, and turns every outcome into an exit code: 0 ok, 1 the operation failed, 2 usage, 130
 * interrupted. Errors are one line on stderr; `--verbose` adds the stack.
 */
import { Command, CommanderError } from "commander";
import { addGlobalFlags, CliContext, describeFailure, EXIT, type GlobalFlags } from "./context";
import type { Run } from "./command";
import { COMMANDS } from "./registry";

const VERSION = "0.1.0";

/** Builds the program; `exit` receives the exit code of a finished action. */
export function buildProgram(exit: (code: number) => void): Command {
    const program = new Command("hybrid-counter")
        .description(
            "Operate a hybrid-counter: status, reconcile, heal, backfill, the fatal queue, redrive, limits, usage, and a local pipeline (dev).",
        )
        .version(VERSION)
        .exitOverride()
        .showSuggestionAfterError(true)
        .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });
    addGlobalFlags(program);

    const run: Run =
        (action) =>
        async (...commanderArgs: unknown[]) => {
            const command = commanderArgs.at(-1) as Command;
            const options = commanderArgs.at(-2) as never;
            const args = commanderArgs.slice(0, -2) as string[];
            const flags = command.optsWithGlobals<GlobalFlags>();
            const ctx = new CliContext(flags);
            let interrupts = 0;
            const onSigint = () => {
                if (++interrupts > 1) {
                    process.stderr.write("\ninterrupted twice: exiting now\n");
                    process.exit(EXIT.interrupted);
                }
                process.stderr.write("\ninterrupted: finishing the unit of work in progress (Ctrl-C again to quit at once)\n");
                ctx.abort.abort();
            };
            process.on("SIGINT", onSigint);
            try {
                exit((await action(ctx, options, args)) ?? EXIT.ok);
            } catch (error) {
                if (ctx.abort.signal.aborted) {
                    process.stderr.write("interrupted: nothing is left half-done; run it again to finish\n");
                    exit(EXIT.interrupted);
                    return;
                }
                const failure = describeFailure(error, flags);
                process.stderr.write(`error: ${failure.message}\n`);
                if (flags.verbose && error instanceof Error && error.stack) {
                    process.stderr.write(`${error.stack}\n`);
                }
                exit(failure.code);
            } finally {
                process.off("SIGINT", onSigint);
                ctx.close();
            }
        };
    for (const command of COMMANDS) {
        command.register(program, run);
    }
    return program;
}

export async function main(argv: readonly string[]): Promise<number> {
    let code: number = EXIT.ok;
    const program = buildProgram((c) => (code = c));
    try {
        await program.parseAsync([...argv], { from: "user" });
    } catch (error) {
        if (error instanceof CommanderError) {
            // Commander has printed its one-line message (or the help / version).
            return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
        }
        throw error;
    }
    return code;
}

if (require.main === module) {
    main(process.argv.slice(2)).then(
        (code) => {
            process.exitCode = code;
        },
        (error: unknown) => {
            process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
            if (process.argv.includes("--verbose") && error instanceof Error) {
                process.stderr.write(`${error.stack}\n`);
            }
            process.exitCode = EXIT.failed;
        },
    );
}
