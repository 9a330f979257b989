/**
 * `reconcile --key K... | --all`: sets keys' eventual counts from their items (runtime/ops/reconcile.ts), for records
 * the stream lost (a records-expired message), with progress. Every count write is conditional on the eventual item
 * read twice around the items; a key written meanwhile is answered busy and left as it is.
 */
import { reconcileAll, reconcileKeys, type ReconcileKeysResult } from "../runtime/ops/reconcile-all";
import { EXIT, UsageError } from "./context";
import { table } from "./format";
import { keyFlag } from "./options";
import type { CliCommand } from "./command";

function resultText(result: ReconcileKeysResult): string {
    const lines =
        result.results.length === 0
            ? ["nothing to reconcile"]
            : [
                  table(
                      ["key", "outcome", "eventual before", "eventual after", "counted items", "not flagged"],
                      result.results.map((r) => [r.key, r.outcome, r.eventualBefore, r.eventualAfter, r.items, r.unflagged]),
                  ),
              ];
    if (result.notStarted.length > 0) {
        lines.push(`interrupted: ${result.notStarted.length} keys not started (run it again)`);
    }
    if (result.results.some((r) => r.outcome === "pending")) {
        lines.push(
            "pending: live items are not flagged yet: run `backfill` (the stream counts each once flagged), then reconcile again once it has",
        );
    }
    if (result.results.some((r) => r.outcome === "busy")) {
        lines.push("busy: the key was written while it was read: run it again once its writes have stopped");
    }
    for (const r of result.refused ?? []) {
        lines.push(`refused ${JSON.stringify(r.key)}: [key] ${r.problem}; its items can never be counted`);
    }
    return lines.join("\n");
}

export const reconcileCommand: CliCommand = {
    name: "reconcile",
    register(program, run) {
        program
            .command("reconcile")
            .description(
                "set keys' eventual counts from their items, for records the stream lost; run it once the stream has drained " +
                    "(the consumer's iterator age near zero): a record still on its way would be counted again",
            )
            .option("--key <key...>", "counter keys to reconcile")
            .option("--all", "every key whose eventual count is off its items, or with items not flagged yet (scans the table)")
            .action(
                run<{ key?: string[]; all?: boolean }>(async (ctx, options) => {
                    if ((options.key === undefined) === (options.all !== true)) {
                        throw new UsageError(options.all ? "--key and --all exclude each other" : "--key <key> or --all is required");
                    }
                    const keys = options.key?.map((key) => keyFlag("--key", key));
                    const config = await ctx.countedConfig();
                    const bar = ctx.progress();
                    const deps = {
                        config,
                        dynamodb: ctx.dynamodb(),
                        signal: ctx.abort.signal,
                        onKey: (r: { key: string }, done: number) => bar.tick(done, r.key),
                    };
                    let result: ReconcileKeysResult;
                    try {
                        if (keys === undefined) {
                            result = await reconcileAll({ ...deps, onPlanned: (planned) => bar.start(planned.length, "reconcile") });
                        } else {
                            bar.start(keys.length, "reconcile");
                            result = await reconcileKeys(keys, deps);
                        }
                    } finally {
                        bar.stop();
                    }
                    ctx.result(result, () => resultText(result));
                    if (result.notStarted.length > 0) {
                        return EXIT.interrupted;
                    }
                    return result.incomplete || result.refused !== undefined ? EXIT.failed : EXIT.ok;
                }),
            );
    },
};
