/**
 * `status [--key K]`: both counters, live, pending and malformed items and held slots; without a key, the table, worst
 * keys first. A sharded key's counters are the sums over its shards; `--key` lists each shard too.
 */
import { readKeyStatus, readTableStatus, type KeyStatus } from "../runtime/ops/status";
import { UsageError } from "./context";
import { table } from "./format";
import type { CliCommand } from "./command";

const COLUMNS = ["key", "best-effort", "eventual", "live", "pending creates", "pending deletes", "malformed", "held slots", "drift"];
// What a heal sets a shard's best-effort to, and apart from it the items no heal counts (runtime/ops/status.ts).
const SHARD_COLUMNS = ["shard", "best-effort", "eventual partial", "client items homed here", "other writers' items"];
const row = (s: KeyStatus) => [
    s.key,
    s.bestEffort,
    s.eventual,
    s.live,
    s.pendingCreates,
    s.pendingDeletes,
    s.malformed,
    s.heldSlots,
    s.drift,
];

export const statusCommand: CliCommand = {
    name: "status",
    register(program, run) {
        program
            .command("status")
            .description("show a key's counters and items, or a table-wide summary with the worst keys first")
            .option("--key <key>", "one counter key (partition key value)")
            .option("--top <n>", "how many keys the summary lists", "20")
            .action(
                run<{ key?: string; top: string }>(async (ctx, options) => {
                    const target = ctx.counter();
                    const deps = { config: target.table, dynamodb: ctx.dynamodb() };
                    if (options.key !== undefined) {
                        if (options.key.length === 0) {
                            throw new UsageError("--key must not be empty");
                        }
                        const s = await readKeyStatus(options.key, deps);
                        ctx.result(s, () =>
                            [
                                table(COLUMNS, [row(s)]),
                                ...(s.shards === undefined
                                    ? []
                                    : [
                                          table(
                                              SHARD_COLUMNS,
                                              s.shards.map((h) => [h.shard, h.bestEffort, h.eventual, h.homed, h.others]),
                                          ),
                                      ]),
                                s.exact ? "exact" : "not exact: run `reconcile --key` (see `fatal list`)",
                            ].join("\n"),
                        );
                        return;
                    }
                    const top = Number(options.top);
                    if (!Number.isInteger(top) || top < 1) {
                        throw new UsageError(`--top must be a positive integer (got "${options.top}")`);
                    }
                    const summary = await readTableStatus({ ...deps, limit: top, signal: ctx.abort.signal });
                    const { all: _all, ...shown } = summary;
                    ctx.result(shown, () => {
                        const t = summary.totals;
                        const lines = [
                            `${summary.keys} keys, ${summary.exactKeys} exact; totals: best-effort ${t.bestEffort}, eventual ${t.eventual}, live ${t.live}, ` +
                                `pending creates ${t.pendingCreates}, pending deletes ${t.pendingDeletes}, malformed ${t.malformed}, held slots ${t.heldSlots}`,
                        ];
                        if (summary.worst.length > 0) {
                            lines.push("", table(COLUMNS, summary.worst.map(row)));
                        }
                        return lines.join("\n");
                    });
                }),
            );
    },
};
