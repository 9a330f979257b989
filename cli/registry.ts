/**
 * The command registry: one module per command, each a thin adapter over a runtime function.
 *
 * To add a command, write `cli/<name>.ts` exporting a `CliCommand` (cli/command.ts) and add it to `COMMANDS`. The
 * adapter declares its flags with commander and wraps its action in `run`, which builds the context
 * (config, clients, output, Ctrl-C), maps errors to one line and an exit code, and closes the clients.
 */
import { backfillCommand } from "./backfill";
import { devCommand } from "./dev";
import { fatalCommand } from "./fatal";
import { healCommand } from "./heal";
import { limitsCommand } from "./limits";
import { reconcileCommand } from "./reconcile";
import { redriveCommand } from "./redrive";
import { statusCommand } from "./status";
import { usageCommand } from "./usage";
import type { CliCommand } from "./command";

export const COMMANDS: readonly CliCommand[] = [
    statusCommand,
    reconcileCommand,
    healCommand,
    backfillCommand,
    fatalCommand,
    redriveCommand,
    limitsCommand,
    usageCommand,
    devCommand,
];
