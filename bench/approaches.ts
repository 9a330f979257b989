/**
 * The approaches scenario (`npm run bench -- --scenario approaches`): one workload, seeded, on a hot key and on many
 * keys, through the hybrid counter in each mode and through the two counters AWS's article compares it with, under the
 * same injected faults, each run on servers of its own beside its own yardstick.
 *
 * Throughput is a ratio to the raw PutItem rate of the same engine measured right before the run: DynamoDB Local on a
 * shared 2-core machine is the bottleneck, and absolute figures mean little. Write units are billed as DynamoDB bills
 * them (local/engine/capacity.ts), split between the API's calls and the functions that apply stream records (the
 * consumer and the redrive), per operation (one create or one delete) and per stream record the consumer was given.
 *
 * Each hybrid row is two runs: one with the consumer paused while the API runs (the API's rate alone, its cost, and
 * then the consumer's rate draining the backlog alone) and one with the consumer beside the API, as in production (the
 * API's rate with the consumer competing for the engine, and the lag from an API call's return to the commit that
 * counted it).
 */
import { PutItemCommand, QueryCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { attributeTo, meterWrites } from "../local/engine/capacity";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { createCounterTable } from "../local/engine/table";
import { snapshotKey } from "../local/harness/observe";
import { runWorkload, type WorkloadResult, type WorkloadTarget } from "../local/harness/workload";
import type { CounterMode } from "../runtime/client/client";
import { TOMBSTONE_SETTLED_MS } from "../runtime/stream/effects";
import { atomicCounter, BASELINE_COUNTER_SK, transactionWithToken } from "./baselines";
import type { Approach } from "./options";
import { clockAhead, consumerUnits, r2, startBenchSystem, withServers, type BenchServers, type BenchSystem } from "./system";

export const DESCRIPTIONS: Record<Approach, string> = {
    hybrid: "this package: best-effort written by the API, eventual by the consumer (one write per key per batch)",
    "atomic-counter": "AWS blog approach 1: UpdateItem ADD after the write",
    "transaction-crt": "AWS blog approach 4: one transaction with a client request token",
};

/** Strict rows create through tryCreate under this limit: no run reaches it, so no create is refused for it. */
const STRICT_LIMIT = 1_000_000_000;
/** Operations of each yardstick: enough to steady the rate, and no more than a short run needs. */
const yardstickOps = (ops: number) => Math.min(1_500, Math.max(200, ops));

export interface ApproachOptions {
    readonly ops: number;
    readonly concurrency: number;
    readonly faults: number;
    readonly seed: number;
    /** False with --no-parity: DynamoDB Local without the parity layer (local/engine/parity.ts). */
    readonly parity: boolean;
}

/** One workload: a name and its keys. */
export interface Workload {
    readonly name: string;
    readonly keys: readonly string[];
}

/** What one run measures. */
export interface ApproachRun {
    readonly approach: Approach;
    /** The hybrid's mode; null for the other approaches. */
    readonly mode: CounterMode | null;
    readonly workload: Workload;
    /** The consumer runs beside the API (lag) rather than after it (cost, rates alone). */
    readonly consumerDuringApi: boolean;
    /** Where the hybrid's counter items go. @default "separate" */
    readonly placement?: "separate" | "same-table";
}

export interface Row {
    scenario: string;
    approach: Approach;
    mode: CounterMode | null;
    ops: number;
    opsPerSec: number;
    /** Raw PutItem/s measured right before this run, on the same engine. */
    rawPutPerSec: number;
    /** API ops/s divided by that raw PutItem/s, with no consumer competing for the engine. */
    ratioToRawPut: number;
    /** The same ratio with the consumer running beside the API (hybrid only). */
    ratioWithConsumer: number | null;
    /**
     * create and delete: billed API write units per call of the kind; api, consumer, settler and total: per operation.
     * The settler's part (hybrid only, measured in the run with the consumer paused) is one run of the deployed
     * settler once no put attempt of the run's lives can land: it removes the tombstones the deletes left and heals
     * the keys the run listed.
     */
    wcuPerOp: { create: number | null; delete: number | null; api: number; consumer: number; settler: number | null; total: number };
    /**
     * The consumer's and the redrive's billed write units per stream record the mapping delivered to the consumer, and
     * per record that moved a count (hybrid only).
     */
    consumerWcuPerRecord: { delivered: number; counted: number } | null;
    /** The same, in the run with the consumer beside the API: smaller batches, as a consumer that keeps up sees them. */
    consumerWcuPerRecordWithConsumer: { delivered: number; counted: number } | null;
    apiErrors: number;
    /** The count limits are enforced on (eventual for the hybrid), after the pipeline drained: keys exact, units over/under. */
    accuracy: { exactKeys: number; keys: number; overcount: number; undercount: number };
    /** Best-effort against live items at the end, summed over the keys (hybrid only). */
    bestEffort: { under: number; over: number } | null;
    /** Soft-deleted items left at the end, summed over the keys (hybrid only, after the settler's run). */
    tombstonesLeft: number | null;
    consumerLagMs: { p50: number; p99: number } | null;
    /** Records counted per second while the consumer drained the backlog alone (hybrid only). */
    consumerRecordsPerSec: number | null;
    /** Stream records the mapping read, delivered after its filter, and counted (hybrid only). */
    stream: { read: number; delivered: number; counted: number } | null;
}

let tables = 0;

/** Raw PutItem rate of this engine with this concurrency: the yardstick for every ratio. */
async function rawPutRate(client: DynamoDBClient, ops: number, concurrency: number): Promise<number> {
    const tableName = `bench-raw-${++tables}`;
    await createCounterTable(client, tableName);
    let next = 0;
    const started = Date.now();
    await Promise.all(
        Array.from({ length: concurrency }, async () => {
            while (next < ops) {
                const i = next++;
                await client.send(
                    new PutItemCommand({ TableName: tableName, Item: { pk: { S: `k${i % 8}` }, sk: { S: `r${i}` }, payload: { S: "x" } } }),
                );
            }
        }),
    );
    return ops / ((Date.now() - started) / 1000);
}

/** Wraps `target` so that each call's writes are attributed to its kind, and counts the calls. */
function attributed(target: WorkloadTarget): { target: WorkloadTarget; calls: { create: number; delete: number } } {
    const calls = { create: 0, delete: 0 };
    return {
        calls,
        target: {
            create: (...a) => (calls.create++, attributeTo("create", () => target.create(...a))),
            tryCreate: (...a) => (calls.create++, attributeTo("create", () => target.tryCreate(...a))),
            delete: (...a) => (calls.delete++, attributeTo("delete", () => target.delete(...a))),
        },
    };
}

function workloadOptions(run: ApproachRun, options: ApproachOptions) {
    return {
        ops: options.ops,
        keys: run.workload.keys,
        concurrency: options.concurrency,
        deleteRatio: 0.3,
        seed: options.seed,
        ...(run.mode === "strict" ? { limit: STRICT_LIMIT } : {}),
    };
}

/** The API's cost per call kind and per operation. */
function apiCost(meter: { billed: number; byKind: Map<string, number> }, calls: { create: number; delete: number }, ops: number) {
    return {
        create: calls.create > 0 ? r2((meter.byKind.get("create") ?? 0) / calls.create) : null,
        delete: calls.delete > 0 ? r2((meter.byKind.get("delete") ?? 0) / calls.delete) : null,
        api: r2(meter.billed / ops),
    };
}

/** One hybrid run on `servers`: the workload, the consumer beside it or after it, the drain, the checks. */
async function measureHybrid(servers: BenchServers, run: ApproachRun, options: ApproachOptions, rawPut: number): Promise<Row> {
    const system = await startBenchSystem(servers, `bench-${++tables}`, {
        args: { counterMode: run.mode ?? "utilization", counterPlacement: run.placement ?? "separate" },
        faults: { rate: options.faults, seed: options.seed },
    });
    try {
        const { pipeline, lag } = system;
        const { target, calls } = attributed(system.client);
        let done = false;
        const consuming = run.consumerDuringApi ? pipeline.runUntil(() => done) : Promise.resolve();
        const started = Date.now();
        const result = await runWorkload(target, workloadOptions(run, options), (r) => {
            const e = r.events.at(-1);
            if (e) {
                lag.wrote(e);
            }
        }).finally(() => (done = true));
        const apiSeconds = (Date.now() - started) / 1000;
        await consuming;
        const drainStarted = Date.now();
        await pipeline.drain();
        const drainSeconds = (Date.now() - drainStarted) / 1000;
        const consumer = consumerUnits(system);
        const st = pipeline.emulator.stats;
        const settler = run.consumerDuringApi ? null : await settleAfterRun(system);
        const api = system.meters.api.billed;
        return {
            ...rowHead(run, result, apiSeconds, rawPut),
            wcuPerOp: {
                ...apiCost(system.meters.api, calls, result.ops),
                consumer: r2(consumer / result.ops),
                settler: settler === null ? null : r2(settler / result.ops),
                total: r2((api + consumer + (settler ?? 0)) / result.ops),
            },
            consumerWcuPerRecord: {
                delivered: r2(consumer / Math.max(1, st.recordsDelivered)),
                counted: r2(consumer / Math.max(1, lag.counted)),
            },
            consumerWcuPerRecordWithConsumer: null,
            apiErrors: result.apiErrors.length,
            ...(await hybridAccuracy(system, run.workload.keys)),
            consumerLagMs: run.consumerDuringApi ? { p50: lag.figures().p50, p99: lag.figures().p99 } : null,
            consumerRecordsPerSec: run.consumerDuringApi ? null : r2(lag.counted / drainSeconds),
            stream: { read: st.recordsRead, delivered: st.recordsDelivered, counted: lag.counted },
        };
    } finally {
        system.close();
    }
}

/**
 * The settler's write units for what the run left it: once the clock is past a put's reach for every life of the run
 * (runtime/heal/heal-window.ts), one run of the deployed settler, then the drain of what it wrote.
 */
async function settleAfterRun(system: BenchSystem): Promise<number> {
    const { settler } = system.pipeline;
    const client = system.pipeline.clients.settler;
    if (settler === undefined || client === undefined) {
        return 0;
    }
    const meter = meterWrites(client);
    const restore = clockAhead(TOMBSTONE_SETTLED_MS + 1_000); // past every claim and every tombstone
    try {
        await settler();
        await system.pipeline.drain();
    } finally {
        restore();
    }
    return meter.billed;
}

/** The fields every row starts with. */
function rowHead(run: ApproachRun, result: WorkloadResult, apiSeconds: number, rawPut: number) {
    const opsPerSec = result.ops / apiSeconds;
    return {
        scenario: run.workload.name,
        approach: run.approach,
        mode: run.mode,
        ops: result.ops,
        opsPerSec: r2(opsPerSec),
        rawPutPerSec: Math.round(rawPut),
        ratioToRawPut: r2(opsPerSec / rawPut),
        ratioWithConsumer: null,
    };
}

/** Eventual against the live items of each key, and best-effort's distance from them. */
async function hybridAccuracy(
    system: BenchSystem,
    keys: readonly string[],
): Promise<Pick<Row, "accuracy" | "bestEffort" | "tombstonesLeft">> {
    const accuracy = { exactKeys: 0, keys: keys.length, overcount: 0, undercount: 0 };
    const bestEffort = { under: 0, over: 0 };
    let tombstonesLeft = 0;
    for (const key of keys) {
        const s = await snapshotKey(system.admin, system.deployment.clientLayout, key);
        accuracy.exactKeys += s.eventual === s.live ? 1 : 0;
        accuracy.overcount += Math.max(0, s.eventual - s.live);
        accuracy.undercount += Math.max(0, s.live - s.eventual);
        bestEffort.under += Math.max(0, s.live - s.bestEffort);
        bestEffort.over += Math.max(0, s.bestEffort - s.live);
        tombstonesLeft += s.softDeleted;
    }
    return { accuracy, bestEffort, tombstonesLeft };
}

/** One run of AWS's atomic counter or transaction on a plain table. */
async function measureBaseline(servers: BenchServers, run: ApproachRun, options: ApproachOptions, rawPut: number): Promise<Row> {
    const admin = servers.engine.dynamodb();
    const api = servers.engine.dynamodb();
    try {
        const tableName = `bench-${++tables}`;
        await createCounterTable(admin, tableName);
        const meter = meterWrites(api);
        injectFaults(api, { rate: options.faults, random: seededRandom(options.seed + 1) });
        const counter = run.approach === "atomic-counter" ? atomicCounter(api, tableName) : transactionWithToken(api, tableName);
        const { target, calls } = attributed(counter);
        const started = Date.now();
        const result = await runWorkload(target, workloadOptions(run, options));
        const apiSeconds = (Date.now() - started) / 1000;
        const accuracy = { exactKeys: 0, keys: run.workload.keys.length, overcount: 0, undercount: 0 };
        for (const key of run.workload.keys) {
            const { live, counter: count } = await countLive(admin, tableName, key);
            accuracy.exactKeys += count === live ? 1 : 0;
            accuracy.overcount += Math.max(0, count - live);
            accuracy.undercount += Math.max(0, live - count);
        }
        return {
            ...rowHead(run, result, apiSeconds, rawPut),
            wcuPerOp: { ...apiCost(meter, calls, result.ops), consumer: 0, settler: null, total: r2(meter.billed / result.ops) },
            consumerWcuPerRecord: null,
            consumerWcuPerRecordWithConsumer: null,
            apiErrors: result.apiErrors.length,
            accuracy,
            bestEffort: null,
            tombstonesLeft: null,
            consumerLagMs: null,
            consumerRecordsPerSec: null,
            stream: null,
        };
    } finally {
        admin.destroy();
        api.destroy();
    }
}

/** A baseline key's live items and its counter item. */
async function countLive(client: DynamoDBClient, tableName: string, key: string): Promise<{ live: number; counter: number }> {
    let live = 0;
    let counter = 0;
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await client.send(
            new QueryCommand({
                TableName: tableName,
                ConsistentRead: true,
                KeyConditionExpression: "pk = :k",
                ExpressionAttributeValues: { ":k": { S: key } },
                ExclusiveStartKey: start,
            }),
        );
        for (const item of page.Items ?? []) {
            if (item.sk?.S === BASELINE_COUNTER_SK) {
                counter = Number(item.count?.N ?? 0);
            } else {
                live++;
            }
        }
        start = page.LastEvaluatedKey;
    } while (start);
    return { live, counter };
}

/** One run on fresh servers, beside its own yardstick (the engine warmed up by a first one). */
export async function measureApproach(run: ApproachRun, options: ApproachOptions): Promise<Row> {
    return withServers({ parity: options.parity }, async (servers) => {
        const yardstick = servers.engine.dynamodb();
        let rawPut: number;
        try {
            await rawPutRate(yardstick, yardstickOps(options.ops), options.concurrency);
            rawPut = await rawPutRate(yardstick, yardstickOps(options.ops), options.concurrency);
        } finally {
            yardstick.destroy();
        }
        return run.approach === "hybrid" ? measureHybrid(servers, run, options, rawPut) : measureBaseline(servers, run, options, rawPut);
    });
}

/**
 * The stream records the consumer is given on a hot key, with the counters in their own table and beside the user's
 * items: beside them, the counter items' own writes are records of the user's stream too, which the mapping delivers
 * (it filters nothing: the consumer's frontier needs every record of a shard) and the consumer counts nothing for.
 */
export interface StreamNoise {
    readonly separate: Row["stream"];
    readonly sameTable: Row["stream"];
}

export interface ApproachesReport {
    readonly rows: Row[];
    readonly streamNoise: StreamNoise | null;
}

/** Every approach (the hybrid in each of `modes`) on each workload; then the hot key's stream noise. */
export async function runApproaches(
    options: ApproachOptions & { approaches: readonly Approach[]; modes: readonly CounterMode[]; workloads: readonly Workload[] },
    log: (line: string) => void,
): Promise<ApproachesReport> {
    const rows: Row[] = [];
    for (const workload of options.workloads) {
        for (const approach of options.approaches) {
            for (const mode of approach === "hybrid" ? options.modes : [null]) {
                const run: ApproachRun = { approach, mode, workload, consumerDuringApi: false };
                const row = await measureApproach(run, options);
                if (approach === "hybrid") {
                    // Lag needs the consumer running beside the API, as in production.
                    const concurrent = await measureApproach({ ...run, consumerDuringApi: true }, options);
                    row.consumerLagMs = concurrent.consumerLagMs;
                    row.ratioWithConsumer = concurrent.ratioToRawPut;
                    row.consumerWcuPerRecordWithConsumer = concurrent.consumerWcuPerRecord;
                }
                rows.push(row);
                const name = mode === null ? approach : `${approach} ${mode}`;
                log(`  ${workload.name.padEnd(8)} ${name.padEnd(18)} done: ${row.ratioToRawPut} x raw PutItem (${row.rawPutPerSec}/s)`);
            }
        }
    }
    const hot = options.workloads.find((w) => w.keys.length === 1);
    const hybridHot = rows.find((r) => r.approach === "hybrid" && r.scenario === hot?.name && r.mode === options.modes[0]);
    let streamNoise: StreamNoise | null = null;
    if (hot !== undefined && hybridHot !== undefined) {
        const sameTable = await measureApproach(
            { approach: "hybrid", mode: hybridHot.mode, workload: hot, consumerDuringApi: false, placement: "same-table" },
            options,
        );
        streamNoise = { separate: hybridHot.stream, sameTable: sameTable.stream };
    }
    return { rows, streamNoise };
}
