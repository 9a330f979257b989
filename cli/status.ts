/**
 * `status [--key K] [--top N]`: a key's counters and items (runtime/ops/status.ts), or a table-wide summary with the
 * worst keys first. A sharded key lists each shard's best-effort and what a heal sets it to; on a multi-region counter
 * `--key` lists each member region and their sums, and the summary is the region the command runs as. Reads only.
 */
import type { KeyStatus, RegionStatus, ShardStatus, StatusCounts } from "../runtime/ops/status";
import { readKeyStatus, readTableStatus } from "../runtime/ops/status-read";
import { integerFlag, keyFlag } from "./options";
import { table } from "./format";
import type { CliCommand } from "./command";

export const COLUMNS = [
    "key",
    "best-effort",
    "eventual",
    "live",
    "counted",
    "pending creates",
    "pending deletes",
    "malformed",
    "held slots",
    "drift",
];

export const cells = (first: string, s: StatusCounts): Array<string | number> => [
    first,
    s.bestEffort,
    s.eventual,
    s.live,
    s.counted,
    s.pendingCreates,
    s.pendingDeletes,
    s.malformed,
    s.heldSlots,
    s.drift,
];

function shardTable(first: string, rows: ReadonlyArray<{ label: string; shard: ShardStatus }>): string {
    return table(
        [first, "best-effort", "heal target"],
        rows.map((r) => [r.label, r.shard.bestEffort, r.shard.target]),
    );
}

/** What to do about a key that is not exact, one line each. */
export function advice(s: KeyStatus): string[] {
    if (s.exact) {
        return [s.heldSlots > 0 ? `exact; ${s.heldSlots} held slot(s): \`heal --key ${s.key}\` gives them back` : "exact"];
    }
    const lines: string[] = [];
    if (s.drift !== 0) {
        lines.push(
            `eventual is ${s.drift > 0 ? "above" : "below"} its counted items by ${Math.abs(s.drift)}: once the stream has drained, ` +
                `\`reconcile --key ${s.key}\` (see \`fatal list\`)`,
        );
    }
    if (s.pendingCreates > 0) {
        lines.push(
            `${s.pendingCreates} live item(s) not flagged yet: the consumer flags them when their records arrive, or \`backfill\` does`,
        );
    }
    if (s.pendingDeletes > 0) {
        lines.push(
            `${s.pendingDeletes} tombstone(s) left for the settler: \`heal --key ${s.key}\` removes those no put attempt can reach any more`,
        );
    }
    return lines.map((line, i) => `${i === 0 ? "not exact" : "and"}: ${line}`);
}

function keyText(s: KeyStatus): string {
    const limit = s.limit === undefined ? [] : [`limit ${s.limit} (the key's own)`];
    if (s.regions === undefined) {
        const shards =
            s.shards === undefined
                ? []
                : [
                      shardTable(
                          "shard",
                          s.shards.map((shard) => ({ label: String(shard.shard), shard })),
                      ),
                  ];
        return [table(COLUMNS, [cells(s.key, s)]), ...limit, ...shards, ...advice(s)].join("\n");
    }
    return regionsText(s, s.regions, limit);
}

/** A multi-region key: a row per region, the sums, count()'s value, and each region's shards when sharded. */
function regionsText(s: KeyStatus, regions: readonly RegionStatus[], limit: string[]): string {
    const shards = regions.flatMap((r) => (r.shards ?? []).map((shard) => ({ label: `${r.region} ${shard.shard}`, shard })));
    const notExact = regions.filter((r) => !r.exact).map((r) => r.region);
    return [
        `${s.key}: value ${s.value} (the sum over regions of max(best-effort, eventual))`,
        table(["region", ...COLUMNS.slice(1)], [...regions.map((r) => cells(`${r.region}${r.home ? " (home)" : ""}`, r)), cells("sum", s)]),
        ...limit,
        ...(shards.length === 0 ? [] : [shardTable("region shard", shards)]),
        notExact.length === 0
            ? "exact"
            : `not exact in ${notExact.join(", ")}: run \`status\`, \`reconcile\` or \`heal\` with --region set to each`,
    ].join("\n");
}

export const statusCommand: CliCommand = {
    name: "status",
    register(program, run) {
        program
            .command("status")
            .description("show a key's counters and items, or a table-wide summary with the worst keys first (reads only)")
            .option("--key <key>", "one counter key (partition key value)")
            .option("--top <n>", "how many keys the summary lists, 1..10000", "20")
            .action(
                run<{ key?: string; top: string }>(async (ctx, options) => {
                    const key = options.key === undefined ? undefined : keyFlag("--key", options.key);
                    const top = integerFlag("--top", options.top, 1, 10_000)!;
                    const deps = { config: await ctx.countedConfig(), dynamodb: ctx.dynamodb() };
                    if (key !== undefined) {
                        const s = await readKeyStatus(key, deps);
                        ctx.result(s, () => keyText(s));
                        return;
                    }
                    const summary = await readTableStatus({ ...deps, limit: top, signal: ctx.abort.signal });
                    const { all: _all, ...shown } = summary;
                    ctx.result(shown, () => {
                        const t = summary.totals;
                        const region = deps.config.regions?.current;
                        const lines = [
                            ...(region === undefined ? [] : [`region ${region}: the keys it counts, the lives it owns`]),
                            `${summary.keys} keys, ${summary.exactKeys} exact; totals: best-effort ${t.bestEffort}, eventual ${t.eventual}, ` +
                                `live ${t.live}, counted ${t.counted}, pending creates ${t.pendingCreates}, pending deletes ${t.pendingDeletes}, ` +
                                `malformed ${t.malformed}, held slots ${t.heldSlots}, drift ${t.drift}`,
                        ];
                        if (summary.worst.length > 0) {
                            lines.push(
                                "",
                                table(
                                    COLUMNS,
                                    summary.worst.map((s) => cells(s.key, s)),
                                ),
                            );
                        }
                        return lines.join("\n");
                    });
                }),
            );
    },
};
