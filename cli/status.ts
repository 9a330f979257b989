/**
 * `status [--key K]`: both counters, live, pending and malformed items and held slots; without a key, the table, worst
 * keys first. A sharded key's counters are the sums over its shards; `--key` lists each shard too. On a multi-region
 * counter `--key` lists each member region's counters and items and their sums (cli/status-regions.ts); the summary
 * is the region the command runs as.
 */
import { readKeyStatus, readTableStatus, type KeyStatus } from "../runtime/ops/status";
import { UsageError } from "./context";
import { readRegionsKeyStatus, type RegionsKeyStatus } from "./status-regions";
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
                    if (options.key?.length === 0) {
                        throw new UsageError("--key must not be empty");
                    }
                    const top = Number(options.top);
                    if (options.key === undefined && (!Number.isInteger(top) || top < 1)) {
                        throw new UsageError(`--top must be a positive integer (got "${options.top}")`);
                    }
                    const target = await ctx.countedTarget();
                    const deps = { config: target.table, dynamodb: ctx.dynamodb() };
                    if (options.key !== undefined) {
                        const regions = target.table.regions;
                        if (regions !== undefined) {
                            const r = await readRegionsKeyStatus(options.key, { ...deps, config: { ...target.table, regions } });
                            ctx.result(r, () => regionsText(r, regions.current));
                            return;
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
                    const summary = await readTableStatus({ ...deps, limit: top, signal: ctx.abort.signal });
                    const { all: _all, ...shown } = summary;
                    ctx.result(shown, () => {
                        const t = summary.totals;
                        const regions = target.table.regions;
                        const lines = [
                            ...(regions === undefined ? [] : [`region ${regions.current}: the keys it counts, the lives it owns`]),
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

/** A multi-region key: a row per region, the sums, count()'s value, and each region's shards when sharded. */
function regionsText(r: RegionsKeyStatus, readIn: string): string {
    const regionRow = (s: RegionsKeyStatus["regions"][number]) => [
        `${s.region}${s.home ? " (home)" : ""}`,
        s.bestEffort,
        s.eventual,
        s.live,
        s.pendingCreates,
        s.pendingDeletes,
        s.malformed,
        s.heldSlots,
        s.drift,
    ];
    const sum = ["sum", r.bestEffort, r.eventual, r.live, r.pendingCreates, r.pendingDeletes, r.malformed, r.heldSlots, r.drift];
    const shards = r.regions.flatMap((s) =>
        s.shards === undefined ? [] : s.shards.map((h) => [`${s.region} ${h.shard}`, h.bestEffort, h.eventual, h.homed, h.others]),
    );
    return [
        `${r.key}: value ${r.value} (the sum over regions of max(best-effort, eventual)), read in ${readIn}'s replica`,
        table(["region", ...COLUMNS.slice(1)], [...r.regions.map(regionRow), sum]),
        ...(shards.length === 0 ? [] : [table(["region shard", ...SHARD_COLUMNS.slice(1)], shards)]),
        r.exact ? "exact" : "not exact: run `reconcile --key` with --region set to each region that is not exact",
    ].join("\n");
}
