/**
 * The benchmark's flags (`npm run bench -- [options]`): parsed and checked before anything starts, each bad flag or
 * value a one-line BenchUsageError naming it (exit code 2).
 */
import { parseArgs } from "node:util";
import type { CounterMode } from "../runtime/client/client";
import { BusyHealUsageError, DEFAULT_SECONDS, parseBusyShards, parseSeconds, type BusyHealOptions } from "./busy-heal-plan";
import { CeilingUsageError, parseShards } from "./hot-key-ceiling-plan";
import type { HotKeyCeilingOptions } from "./hot-key-ceiling";

/** The counters the approaches scenario compares (bench/approaches.ts). */
export const APPROACHES = ["hybrid", "atomic-counter", "transaction-crt"] as const;
export type Approach = (typeof APPROACHES)[number];
/** The hybrid's modes, one row each. */
export const MODES: readonly CounterMode[] = ["utilization", "strict"];
/** Where the hot-tenant scenario keeps the counter items (bench/hot-tenant.ts). */
export const PLACEMENTS = ["tenant-partition", "own-table"] as const;
export type CounterPlacement = (typeof PLACEMENTS)[number];

/** The approaches scenario's workloads: one hot key, and `--many-keys` keys. */
export const WORKLOADS = ["hot-key", "many-keys"] as const;
export type WorkloadName = (typeof WORKLOADS)[number];

export const SCENARIOS = ["all", "approaches", "hot-tenant", "backfill", "busy-heal", "hot-key-ceiling"] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface Options {
    approaches: Approach[];
    /** The hybrid's modes, one row each. */
    modes: CounterMode[];
    workloads: WorkloadName[];
    ops: number;
    concurrency: number;
    faults: number;
    seed: number;
    manyKeys: number;
    backfillItems: number;
    json: boolean;
    /** False with --no-parity: DynamoDB Local without the parity layer (local/engine/parity.ts). */
    parity: boolean;
    scenarios: { approaches: boolean; hotTenant: boolean; backfill: boolean; healing: boolean };
    itemBytes: number;
    placements: CounterPlacement[];
    /** The healing rows: with --scenario busy-heal, its own flags; with all, its defaults. */
    busy: BusyHealOptions;
    /** With --scenario hot-key-ceiling: that scenario alone, with its own flags (bench/hot-key-ceiling.ts). */
    ceiling?: HotKeyCeilingOptions;
}

export const BENCH_USAGE = `Usage: npm run bench -- [options]

Measures the hybrid counter, in each mode, against the other approaches on DynamoDB Local, each run on fresh servers
with the system the component deploys, and prints ratios measured in the same run.

Options:
  --ops <n>                operations per run (10..1000000, default 1500)
  --concurrency <n>        concurrent API calls (1..256, default 8)
  --faults <rate>          injected fault rate (0..1, default 0.02)
  --seed <n>               workload seed (default 1)
  --many-keys <n>          keys of the many-keys workload (2..10000, default 64)
  --backfill-items <n>     items of the backfill scenario (100..1000000, default 20000)
  --approaches <list>      comma-separated: ${APPROACHES.join(", ")}
  --modes <list>           the hybrid's modes, comma-separated: ${MODES.join(", ")} (default both)
  --workloads <list>       comma-separated: ${WORKLOADS.join(", ")} (default both)
  --scenario <name>        ${SCENARIOS.join(", ")} (default all: every one but
                           hot-key-ceiling, which runs alone)
  --item-bytes <n>         item size of the hot-tenant scenario (default 16384)
  --counters <list>        comma-separated placements: ${PLACEMENTS.join(", ")}
  --no-parity              DynamoDB Local without the parity layer
  --json                   one JSON document on stdout, progress on stderr
  --sweep                  the performance sweep instead (its own options)
  -h, --help               this text

The busy-heal scenario (the healing rows of all): keys written without pause, in both modes, at 1 and 4 shards, while
faults drift them (calls that die between their writes, lost releases, another writer's deletes) and the settler runs
beside the traffic as deployed, its schedule compressed. It reports what the heals cost per key healed and the held
slots (strict) and undercount (utilization) left. These size its rows (with --scenario all too); with --scenario
busy-heal it takes only them, --modes, --seed and --json:
  --seconds <n>            seconds of traffic per row (10..3600, default ${DEFAULT_SECONDS})
  --shards <list>          comma-separated shard counts (default 1,4; at most 16)

The hot-key-ceiling scenario: the highest steady create rate on one key at which fewer than 1% of the API's
best-effort writes are throttled, in both modes, searched by doubling then bisecting the offered rate. It
takes only --seed, --json and these:
  --partition-wcu <n>      WCU/s of each partition of the counters table, and of each item of the user's
                           table (1..1000, default 10; DynamoDB's 1,000 is beyond DynamoDB Local's reach)
  --shards <list>          comma-separated shard counts of each key's counters (default 1,4,16; at most 16)
  --step-seconds <s>       seconds of offered load per step of the search (2..120, default 10)
  --max-steps <n>          steps per search, per mode and shard count (1..20, default 6)
  --chart <path>           also draw the sustained rates per shard count as an SVG bar chart
`;

/** The flags each scenario that runs alone takes; any other is a usage error with it. */
const ALONE_FLAGS: Partial<Record<Scenario, readonly string[]>> = {
    "hot-key-ceiling": ["scenario", "partition-wcu", "shards", "step-seconds", "max-steps", "chart", "seed", "json", "help"],
    "busy-heal": ["scenario", "modes", "seconds", "shards", "seed", "json", "help"],
};
/** Flags that belong to one scenario alone. */
const OWNED_FLAGS: Record<string, readonly Scenario[]> = {
    "partition-wcu": ["hot-key-ceiling"],
    "step-seconds": ["hot-key-ceiling"],
    "max-steps": ["hot-key-ceiling"],
    chart: ["hot-key-ceiling"],
    shards: ["hot-key-ceiling", "busy-heal", "all"],
    seconds: ["busy-heal", "all"],
};

/** A bad flag or value: one line naming it, exit code 2. */
export class BenchUsageError extends Error {}

const FLAGS = {
    ops: { type: "string" },
    concurrency: { type: "string" },
    faults: { type: "string" },
    seed: { type: "string" },
    "many-keys": { type: "string" },
    "backfill-items": { type: "string" },
    approaches: { type: "string" },
    modes: { type: "string" },
    workloads: { type: "string" },
    json: { type: "boolean" },
    "no-parity": { type: "boolean" },
    scenario: { type: "string" },
    "item-bytes": { type: "string" },
    counters: { type: "string" },
    "partition-wcu": { type: "string" },
    shards: { type: "string" },
    "step-seconds": { type: "string" },
    "max-steps": { type: "string" },
    chart: { type: "string" },
    seconds: { type: "string" },
    help: { type: "boolean", short: "h" },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof FLAGS; strict: true }>>["values"];

function parsed(argv: string[]): Values {
    try {
        return parseArgs({ args: argv, strict: true, options: FLAGS }).values;
    } catch (error) {
        // node:util's own message names the flag ("Unknown option '--x'"); keep its first sentence.
        throw new BenchUsageError((error as Error).message.split(". ")[0]!.replace(/\.$/, ""));
    }
}

function num(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
    const n = raw === undefined ? fallback : Number(raw);
    if (!Number.isFinite(n) || n < min || n > max) {
        throw new BenchUsageError(`--${name} must be a number from ${min} to ${max}`);
    }
    return n;
}

/** A comma-separated list whose every item is one of `allowed`. */
function listOf<T extends string>(name: string, raw: string | undefined, allowed: readonly T[]): T[] {
    const items = (raw ?? allowed.join(",")).split(",") as T[];
    for (const item of items) {
        if (!allowed.includes(item)) {
            throw new BenchUsageError(`--${name} takes a comma-separated list of ${allowed.join(", ")} (got "${item}")`);
        }
    }
    return items;
}

/** Refuses a flag the scenario does not take. */
function checkScenarioFlags(scenario: Scenario, values: Values): void {
    const given = Object.keys(values).filter((flag) => values[flag as keyof Values] !== undefined);
    const alone = ALONE_FLAGS[scenario];
    for (const flag of given) {
        if (alone !== undefined && !alone.includes(flag)) {
            throw new BenchUsageError(`--${flag} does not apply to --scenario ${scenario}`);
        }
        const owners = OWNED_FLAGS[flag];
        if (owners !== undefined && !owners.includes(scenario)) {
            throw new BenchUsageError(`--${flag} applies only to --scenario ${owners.join(" or --scenario ")}`);
        }
    }
}

/** A scenario's own usage error, as the bench's. */
function usage<T>(parse: () => T): T {
    try {
        return parse();
    } catch (error) {
        throw error instanceof CeilingUsageError || error instanceof BusyHealUsageError ? new BenchUsageError(error.message) : error;
    }
}

function ceilingOptions(values: Values): HotKeyCeilingOptions {
    return {
        partitionWcu: num("partition-wcu", values["partition-wcu"], 10, 1, 1_000),
        shards: usage(() => parseShards(values.shards)),
        stepSeconds: num("step-seconds", values["step-seconds"], 10, 2, 120),
        maxSteps: Math.floor(num("max-steps", values["max-steps"], 6, 1, 20)),
        seed: num("seed", values.seed, 1, 0, 2 ** 31),
        ...(values.chart === undefined ? {} : { chart: values.chart }),
    };
}

export function parseOptions(argv: string[]): Options | "help" {
    const values = parsed(argv);
    if (values.help) {
        return "help";
    }
    const scenario = (values.scenario ?? "all") as Scenario;
    if (!SCENARIOS.includes(scenario)) {
        throw new BenchUsageError(`--scenario takes ${SCENARIOS.join(", ")} (got "${scenario}")`);
    }
    checkScenarioFlags(scenario, values);
    const seed = num("seed", values.seed, 1, 0, 2 ** 31);
    const runs = (name: Scenario) => scenario === "all" || scenario === name;
    return {
        approaches: listOf("approaches", values.approaches, APPROACHES),
        modes: listOf("modes", values.modes, MODES),
        workloads: listOf("workloads", values.workloads, WORKLOADS),
        ops: num("ops", values.ops, 1_500, 10, 1_000_000),
        concurrency: num("concurrency", values.concurrency, 8, 1, 256),
        faults: num("faults", values.faults, 0.02, 0, 1),
        seed,
        manyKeys: num("many-keys", values["many-keys"], 64, 2, 10_000),
        backfillItems: num("backfill-items", values["backfill-items"], 20_000, 100, 1_000_000),
        json: values.json ?? false,
        parity: !(values["no-parity"] ?? false),
        scenarios: {
            approaches: runs("approaches"),
            hotTenant: runs("hot-tenant"),
            backfill: runs("backfill"),
            healing: runs("busy-heal"),
        },
        itemBytes: num("item-bytes", values["item-bytes"], 16_384, 1, 350_000),
        placements: listOf("counters", values.counters, PLACEMENTS),
        busy: {
            modes: listOf("modes", values.modes, MODES),
            seconds: usage(() => parseSeconds(values.seconds)),
            shards: usage(() => parseBusyShards(values.shards)),
            seed,
        },
        ...(scenario === "hot-key-ceiling" ? { ceiling: ceilingOptions(values) } : {}),
    };
}
