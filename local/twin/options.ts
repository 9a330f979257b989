/** What every run of the twin takes, one region or several (twin.ts, regions.ts), and its command line. */
import * as path from "node:path";
import { parseArgs } from "node:util";
import type { CounterMode } from "../../runtime/client/client";
import { LOCAL_REGIONS } from "../regions/deployment";

/** The workload and the system it runs on. */
export interface TwinWorkloadOptions {
    readonly ops: number;
    readonly keys: number;
    readonly concurrency: number;
    readonly deleteRatio: number;
    /** Every key's stored limit (setLimit before the workload); creates are tryCreate without a limit. */
    readonly limit: number;
    readonly mode: CounterMode;
    readonly faults: number;
    readonly seed: number;
    /** Seconds to keep the workload running; 0: run `ops` operations. Infinity with --watch. */
    readonly durationSeconds: number;
    /** False with --no-parity: DynamoDB Local without the parity layer (local/engine/parity.ts). */
    readonly parity?: boolean;
    /** Shards of each key's counting (the component's `counterShards`), when given. @default 1 */
    readonly shards?: number;
}

export interface TwinOptions extends TwinWorkloadOptions {
    readonly json: boolean;
    readonly chart: string;
    /** Items written before the counter attaches, counted by a backfill before the workload. */
    readonly seedItems: number;
    /** How many keys the chart shows, worst first. */
    readonly chartKeys: number;
    /** Regions of a global table, each its own engine (local/twin/regions.ts); undefined: one region. */
    readonly regions?: number;
    /** With `regions`: how long a write takes to reach the other regions. */
    readonly replicationDelayMs?: number;
}

/** How many API errors the report lists (it counts them all). */
export const API_ERRORS_LISTED = 20;

/** The twin's keys (tenants). */
export function twinKeys(count: number): string[] {
    return Array.from({ length: count }, (_, i) => `tenant-${String(i).padStart(3, "0")}`);
}

export const USAGE = `Usage: npm start -- [options]

Runs the system HybridCounterComponent deploys on DynamoDB Local, drives it with a workload and
reports what it measured. Without --ops, the workload runs for a minute.

Options:
  --ops <n>            operations to run, instead of a minute
  --duration <s>       run the workload for this many seconds (default 60)
  --watch              run until Ctrl-C
  --keys <n>           counter keys (tenants) (default 8)
  --concurrency <n>    concurrent API callers (default 8)
  --delete-ratio <r>   share of operations that delete a live item, 0..1 (default 0.3)
  --limit <n>          every key's stored limit (setLimit before the workload; creates are tryCreate
                       without a limit, so they run under it) (default 20)
  --mode <m>           utilization | strict (default utilization)
  --shards <n>         spread each key's counting over n partitions of the counters table, 1..16 (default 1)
  --faults <rate>      probability 0..1 of an injected fault per DynamoDB attempt, in the API and the
                       consumer: TransactionConflict, throttling, 500 before and after commit (default 0.02)
  --seed <n>           random seed (default 1)
  --regions <n>        run n regions of a global table, 2..6, each on its own DynamoDB Local, replicated
                       last-writer-wins; the report adds per-region figures
  --replication-delay-ms <n>
                       with --regions: how long a write takes to reach the other regions (default 100)
  --seed-items <n>     items written before the counter attaches, counted by a backfill run first (default 0)
  --json               print one final JSON report and nothing else on stdout
  --no-parity          run DynamoDB Local without the parity layer (AWS's transaction size, partition
                       throughput and transaction billing are enforced by default), to compare
  --chart <path>       where to write the SVG chart (default twin-output/chart.svg)
  --chart-keys <n>     keys in the chart, worst first (default 3)
  -h, --help           show this help`;

export class UsageError extends Error {
    override name = "UsageError";
}

const FLAGS = {
    ops: { type: "string" },
    keys: { type: "string" },
    concurrency: { type: "string" },
    "delete-ratio": { type: "string" },
    limit: { type: "string" },
    mode: { type: "string" },
    shards: { type: "string" },
    regions: { type: "string" },
    "replication-delay-ms": { type: "string" },
    faults: { type: "string" },
    seed: { type: "string" },
    "seed-items": { type: "string" },
    duration: { type: "string" },
    watch: { type: "boolean" },
    json: { type: "boolean" },
    chart: { type: "string" },
    "no-parity": { type: "boolean" },
    "chart-keys": { type: "string" },
    help: { type: "boolean", short: "h" },
} as const;

/** Reads numbers from flags, collecting a problem per bad one. */
class Numbers {
    readonly problems: string[] = [];

    integer(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
        if (raw === undefined) {
            return fallback;
        }
        const n = Number(raw);
        if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) {
            this.problems.push(`--${name} must be an integer from ${min} to ${max} (got "${raw}")`);
            return fallback;
        }
        return n;
    }

    ratio(name: string, raw: string | undefined, fallback: number): number {
        if (raw === undefined) {
            return fallback;
        }
        const n = Number(raw);
        if (raw.trim() === "" || !Number.isFinite(n) || n < 0 || n > 1) {
            this.problems.push(`--${name} must be a number from 0 to 1 (got "${raw}")`);
            return fallback;
        }
        return n;
    }
}

/** The run's length: a number of operations, a duration, or until Ctrl-C; a minute when nothing says. */
function runLength(v: { ops?: string; duration?: string; watch?: boolean }, n: Numbers): { ops: number; durationSeconds: number } {
    const given = [v.ops !== undefined && "--ops", v.duration !== undefined && "--duration", v.watch === true && "--watch"].filter(
        (f) => f !== false,
    );
    if (given.length > 1) {
        n.problems.push(`${given.join(" and ")} exclude each other`);
    }
    if (v.watch) {
        return { ops: 0, durationSeconds: Infinity };
    }
    if (v.ops !== undefined) {
        return { ops: n.integer("ops", v.ops, 3_000, 1, 10_000_000), durationSeconds: 0 };
    }
    return { ops: 0, durationSeconds: n.integer("duration", v.duration, 60, 1, 86_400) };
}

export function parseTwinArgs(argv: readonly string[]): TwinOptions | "help" {
    let parsed;
    try {
        parsed = parseArgs({ args: [...argv], strict: true, allowPositionals: false, options: FLAGS });
    } catch (error) {
        throw new UsageError((error as Error).message);
    }
    const v = parsed.values;
    if (v.help) {
        return "help";
    }
    const n = new Numbers();
    const mode = v.mode ?? "utilization";
    if (mode !== "utilization" && mode !== "strict") {
        n.problems.push(`--mode must be utilization or strict (got "${mode}")`);
    }
    const shards = v.shards === undefined ? undefined : n.integer("shards", v.shards, 1, 1, 16);
    const options: TwinOptions = {
        ...runLength(v, n),
        keys: n.integer("keys", v.keys, 8, 1, 10_000),
        concurrency: n.integer("concurrency", v.concurrency, 8, 1, 256),
        deleteRatio: n.ratio("delete-ratio", v["delete-ratio"], 0.3),
        limit: n.integer("limit", v.limit, 20, 1, 1_000_000),
        mode: mode as CounterMode,
        ...(shards === undefined ? {} : { shards }),
        faults: n.ratio("faults", v.faults, 0.02),
        seed: n.integer("seed", v.seed, 1, 0, 2 ** 31),
        json: v.json ?? false,
        chart: v.chart ?? path.join("twin-output", "chart.svg"),
        chartKeys: n.integer("chart-keys", v["chart-keys"], 3, 1, 16),
        ...(v["no-parity"] ? { parity: false } : {}),
        seedItems: n.integer("seed-items", v["seed-items"], 0, 0, 1_000_000),
    };
    const regions = v.regions === undefined ? undefined : n.integer("regions", v.regions, 2, 2, LOCAL_REGIONS.length);
    if (regions === undefined && v["replication-delay-ms"] !== undefined) {
        n.problems.push("--replication-delay-ms needs --regions");
    }
    const replicationDelayMs = n.integer("replication-delay-ms", v["replication-delay-ms"], 100, 0, 600_000);
    if (regions !== undefined && options.seedItems > 0) {
        n.problems.push("--seed-items is not supported with --regions");
    }
    if (n.problems.length > 0) {
        throw new UsageError(n.problems.join("\n"));
    }
    return regions === undefined ? options : { ...options, regions, replicationDelayMs };
}
