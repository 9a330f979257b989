/**
 * The hot-key ceiling (`npm run bench -- --scenario hot-key-ceiling --partition-wcu 10`): how fast one
 * counter key can take creates before its partition throttles the API's best-effort writes, per mode and
 * per shard count of its counters.
 *
 * Every step runs the system the component deploys (bench/system.ts: its tables, its clientConfig, its
 * shipped functions behind the mapping emulator with its stream mapping's settings) on a fresh deployment, offers a steady create rate on ONE key (paced, not a closed loop) with the consumer
 * running beside the API, then drains the pipeline and checks it. The parity layer meters the counters
 * table at `--partition-wcu` per partition key value (a shard's best-effort item; shard 0 also holds the
 * eventual item), and the user's table per item at the same rate: the most split for heat gives a tenant whose
 * items spread over sort keys. DynamoDB's 1,000 WCU/s is out of DynamoDB Local's reach on two cores; scaled
 * down, the ratio of the API's 1 WCU per best-effort write and the consumer's one write of the eventual item
 * per batch to one partition's capacity stays DynamoDB's.
 *
 * What a step checks, besides the throttled share the search runs on (hot-key-ceiling-plan.ts):
 * - the mode's bound at observations during the step and after the drain (`boundHolds`), read in the
 *   order that cannot raise a false alarm while creates run (`observeBound`);
 * - after the drain, eventual == live items ("exact");
 * - errors the client surfaced to callers;
 * - the read capacity of one `count()`, as DynamoDB Local reports it (ReturnConsumedCapacity).
 */
import {
    DeleteTableCommand,
    GetItemCommand,
    QueryCommand,
    type AttributeValue,
    type ConsumedCapacity,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware, InitializeMiddleware } from "@smithy/types";
import type { HybridCounterComponentArgs } from "../components/args";
import { deployLocally, type LocalDeployment } from "../local/deployment/deployment";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import type { TableMetering } from "../local/engine/parity-model";
import { snapshotKey } from "../local/harness/observe";
import { runWorkload, type WorkloadResult } from "../local/harness/workload";
import { HybridCounterClient, type CounterMode } from "../runtime/client/client";
import { bestEffortKey } from "../runtime/shared/keys";
import { isLive } from "../runtime/shared/selection";
import { shardCount } from "../runtime/shards/layout";
import { startBenchSystem, withServers, type BenchServers, type BenchSystem } from "./system";
import {
    CEILING_MODES,
    boundHolds,
    ceilingRow,
    searchCeiling,
    type BoundObservation,
    type CeilingReport,
    type CeilingStep,
    type RefusalCost,
} from "./hot-key-ceiling-plan";

export interface HotKeyCeilingOptions {
    /** Write units per second of each partition of the counters table (and of each item of the user's table). */
    readonly partitionWcu: number;
    readonly shards: readonly number[];
    /** Seconds of offered load per step. */
    readonly stepSeconds: number;
    /** Steps per search (per mode and shard count). */
    readonly maxSteps: number;
    readonly seed: number;
    /** Where to draw the report as an SVG chart, when given. */
    readonly chart?: string;
}

/** The one key every step drives. */
const KEY = "hot-key";
/** Strict mode is measured for its throughput and its bound, never refused by its limit. */
const STRICT_LIMIT = 1_000_000_000;
/**
 * Callers the paced workload may hold open at once (a create takes tens of milliseconds, throttled ones longer, and
 * longer still on a loaded machine): enough that the offered rate, not the callers, is what a step measures at 16
 * shards' rates.
 */
const PACED_CONCURRENCY = 64;
/** How often the bound is observed while creates run. */
const OBSERVE_EVERY_MS = 500;
/** DynamoDB's read units per write unit of one partition (3,000 / 1,000), kept when the rate is scaled. */
const READS_PER_WRITE_UNIT = 3;

/** The component's args for a mode and a shard count: the one place a shard count reaches the system. */
export function componentArgs(mode: CounterMode, shards: number): HybridCounterComponentArgs {
    return { counterMode: mode, ...(shards === 1 ? {} : { counterShards: shards }) };
}

/**
 * Counts the API's best-effort write requests, and those throttled, on a client: in the deserialize step,
 * inside the SDK's retries and the client's single-attempt wrapper (runtime/shared/retry.ts), so that each
 * request is counted once and its error is seen with the service's name.
 */
function countBestEffortWrites(client: DynamoDBClient, layout: LocalDeployment["clientLayout"]) {
    const counts = { requests: 0, throttled: 0 };
    const sortKey = bestEffortKey(layout, KEY, 0)[layout.sortKey]?.S;
    const middleware: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const input = args.input as { TableName?: string; Key?: Record<string, AttributeValue> };
        if (
            context.commandName !== "UpdateItemCommand" ||
            input.TableName !== layout.countersTableName ||
            input.Key?.[layout.sortKey]?.S !== sortKey
        ) {
            return next(args);
        }
        counts.requests++;
        try {
            return await next(args);
        } catch (error) {
            const name = (error as Error).name;
            if (name === "ThrottlingException" || name === "ProvisionedThroughputExceededException") {
                counts.throttled++;
            }
            throw error;
        }
    };
    client.middlewareStack.add(middleware, { step: "deserialize", name: "hotKeyCeilingBestEffort", priority: "high" });
    return counts;
}

/**
 * Reads best-effort and the live items in the order that cannot report a violation that did not happen while
 * creates run: utilization reads best-effort first (live only grows, so a later live is no smaller), strict
 * reads live first (best-effort only grows: a slot is released only when a put certainly wrote nothing, and
 * these puts, one per item of a table metered per item, are not throttled).
 */
export async function observeBound(
    reader: DynamoDBClient,
    layout: LocalDeployment["clientLayout"],
    mode: CounterMode,
): Promise<BoundObservation> {
    // Shard by shard: each shard only grows in strict mode (read after live) and only moves with live items in
    // utilization mode (read before live), so the order argument holds for the sum.
    const readBestEffort = async () => {
        let sum = 0;
        for (let shard = 0; shard < shardCount(layout); shard++) {
            const out = await reader.send(
                new GetItemCommand({
                    TableName: layout.countersTableName,
                    Key: bestEffortKey(layout, KEY, shard),
                    ConsistentRead: true,
                }),
            );
            sum += Number(out.Item?.[layout.countAttribute]?.N ?? 0);
        }
        return sum;
    };
    const readLive = async () => {
        let live = 0;
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await reader.send(
                new QueryCommand({
                    TableName: layout.tableName,
                    ConsistentRead: true,
                    KeyConditionExpression: "#pk = :key",
                    ExpressionAttributeNames: { "#pk": layout.partitionKey },
                    ExpressionAttributeValues: { ":key": { S: KEY } },
                    ExclusiveStartKey: start,
                }),
            );
            live += (page.Items ?? []).filter((item) => isLive(item, layout)).length;
            start = page.LastEvaluatedKey;
        } while (start);
        return live;
    };
    if (mode === "utilization") {
        const bestEffort = await readBestEffort();
        return { bestEffort, live: await readLive() };
    }
    const live = await readLive();
    return { bestEffort: await readBestEffort(), live };
}

/** The read capacity one `count()` of the deployed client consumes. */
async function countReadUnits(engine: LocalEngine, deployment: LocalDeployment): Promise<number> {
    const dynamodb = engine.dynamodb();
    let units = 0;
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName !== "QueryCommand") {
            return next(args);
        }
        const result = await next({ ...args, input: { ...args.input, ReturnConsumedCapacity: "TOTAL" } as ServiceInputTypes });
        const consumed = (result.output as { ConsumedCapacity?: ConsumedCapacity }).ConsumedCapacity;
        units += consumed?.CapacityUnits ?? 0;
        return result;
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: "hotKeyCeilingCountRcu" });
    try {
        await new HybridCounterClient({ ...deployment.clientConfig, dynamodb }).count(KEY);
        return units;
    } finally {
        dynamodb.destroy();
    }
}

let deployments = 0;

/**
 * A slot every 1/perSecond seconds, whichever caller takes it: an offered rate, not a closed loop. A caller
 * whose slot would fall at or after `deadline` gets none: it waits for the deadline only, and `stop` ends it.
 */
function offeredRate(perSecond: number, deadline: number): { pace: () => Promise<void>; stop: () => boolean } {
    // Each slot sits in the middle of its 1/perSecond interval, so a step of T seconds holds T x perSecond slots.
    let next = Date.now() + 500 / perSecond;
    return {
        pace: async () => {
            const at = Math.max(next, Date.now());
            const until = Math.min(at, deadline);
            if (at < deadline) {
                next = at + 1000 / perSecond;
            }
            // A timer may fire a millisecond early by the wall clock: wait until the clock says so.
            while (Date.now() < until) {
                await new Promise((r) => setTimeout(r, until - Date.now()));
            }
        },
        stop: () => Date.now() >= deadline,
    };
}

/** What a step measured, and what the progress line shows beside it. */
export interface MeasuredStep extends CeilingStep {
    readonly created: number;
    readonly unavailable: number;
    readonly bestEffortRequests: number;
    readonly consumerRetries: number;
    readonly dlq: number;
    /** Records per consumer invocation: what the consumer's one write per key per batch spreads over. */
    readonly recordsPerInvocation: number;
    /** Seconds spent deploying, offering load, draining and checking. */
    readonly seconds: { deploy: number; load: number; drain: number; check: number };
}

/** The offered load of a step, with the consumer and the bound's observer beside it; then both are waited for. */
async function offerStep(
    system: BenchSystem,
    observe: () => Promise<number>,
    mode: CounterMode,
    rate: number,
    options: HotKeyCeilingOptions,
): Promise<{ workload: WorkloadResult; boundViolations: number }> {
    let apiDone = false;
    let boundViolations = 0;
    const consuming = system.pipeline.runUntil(() => apiDone);
    const observing = (async () => {
        while (!apiDone) {
            boundViolations += await observe();
            await new Promise((r) => setTimeout(r, OBSERVE_EVERY_MS));
        }
    })();
    const workload = await runWorkload(system.client, {
        ops: Number.MAX_SAFE_INTEGER,
        keys: [KEY],
        concurrency: PACED_CONCURRENCY,
        deleteRatio: 0,
        limit: mode === "strict" ? STRICT_LIMIT : undefined,
        seed: options.seed,
        ...offeredRate(rate, Date.now() + options.stepSeconds * 1000),
    }).finally(() => (apiDone = true));
    await Promise.all([consuming, observing]);
    return { workload, boundViolations };
}

/** One step: a fresh deployment of the component, `rate` creates per second on one key for `stepSeconds`, a drain, the checks. */
export async function measureStep(
    servers: BenchServers,
    meterings: Map<string, TableMetering>,
    mode: CounterMode,
    shards: number,
    rate: number,
    options: HotKeyCeilingOptions,
): Promise<MeasuredStep> {
    const t0 = Date.now();
    let consumerRetries = 0;
    const system = await startBenchSystem(servers, `ceiling-${++deployments}`, {
        args: componentArgs(mode, shards),
        onInvoked: (_event, response) => (consumerRetries += response.batchItemFailures.length > 0 ? 1 : 0),
    });
    const observer = servers.engine.dynamodb({ direct: true });
    try {
        const { deployment, pipeline } = system;
        const layout = deployment.clientLayout;
        if (layout.countersTableName === layout.tableName) {
            throw new Error("the hot-key ceiling measures the counters table apart from the user's table");
        }
        const scaled = { writeUnitsPerSecond: options.partitionWcu, readUnitsPerSecond: options.partitionWcu * READS_PER_WRITE_UNIT };
        meterings.set(layout.countersTableName, { ...scaled, per: "partition" });
        meterings.set(layout.tableName, { ...scaled, per: "item" });
        const bestEffort = countBestEffortWrites(system.api, layout);

        const observe = async () => (boundHolds(mode, await observeBound(observer, layout, mode), STRICT_LIMIT) ? 0 : 1);
        const started = Date.now();
        const { workload, boundViolations: during } = await offerStep(system, observe, mode, rate, options);
        const loaded = Date.now();
        const seconds = (loaded - started) / 1000;
        await pipeline.drain();
        const drained = Date.now();
        const boundViolations = during + (await observe());
        const s = await snapshotKey(observer, layout, KEY);
        const countRcu = await countReadUnits(servers.engine, deployment);
        for (const table of [layout.tableName, layout.countersTableName]) {
            await system.admin.send(new DeleteTableCommand({ TableName: table }));
            meterings.delete(table);
        }
        return {
            offeredOpsPerSec: rate,
            sustainedOpsPerSec: workload.created / seconds,
            throttledBestEffortShare: bestEffort.requests === 0 ? 0 : bestEffort.throttled / bestEffort.requests,
            exact: s.eventual === s.live,
            boundViolations,
            apiErrors: workload.apiErrors.length,
            countRcu,
            created: workload.created,
            unavailable: workload.unavailable,
            bestEffortRequests: bestEffort.requests,
            consumerRetries,
            dlq: pipeline.counts.toFirstDlq,
            recordsPerInvocation: pipeline.emulator.stats.recordsDelivered / Math.max(1, pipeline.emulator.stats.invocations),
            seconds: {
                deploy: (started - t0) / 1000,
                load: seconds,
                drain: (drained - loaded) / 1000,
                check: (Date.now() - drained) / 1000,
            },
        };
    } finally {
        observer.destroy();
        system.close();
    }
}

/**
 * The first rate offered: a create costs 1 WCU on one of its key's shards (its best-effort write), and the consumer's
 * write of the eventual item lands on shard 0 once per batch; half of what the shards take leaves room for both.
 */
export function firstRate(partitionWcu: number, shards = 1): number {
    return (partitionWcu * shards) / 2;
}

/** The limit the refusal measurement fills its key to: a quota of 2 in each of 16 shards. */
const REFUSAL_LIMIT = 32;
/** Refused calls measured per shard count. */
const REFUSALS = 20;

/**
 * Strict mode at its limit: fills one key of a fresh deployment to REFUSAL_LIMIT with tryCreate, then sends
 * REFUSALS more and counts what each refused one sent (requests, and the capacity DynamoDB Local reports).
 */
export async function measureRefusals(engine: LocalEngine, shards: number): Promise<RefusalCost> {
    const admin = engine.dynamodb();
    const deployment = await deployLocally(admin, `refusals-${++deployments}`, componentArgs("strict", shards));
    const api = engine.dynamodb();
    const client = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: api });
    for (let i = 0; i < REFUSAL_LIMIT; i++) {
        if (!(await client.tryCreate(KEY, `fill-${i}`, REFUSAL_LIMIT)).created) {
            throw new Error(`the refusal measurement could not fill its key: create ${i} of ${REFUSAL_LIMIT} refused`);
        }
    }
    const metered = { requests: 0, writeUnits: 0, readUnits: 0 };
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        metered.requests++;
        const name = context.commandName ?? "";
        const input = { ...args.input, ReturnConsumedCapacity: "TOTAL" } as ServiceInputTypes;
        try {
            const result = await next({ ...args, input });
            const consumed = (result.output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }).ConsumedCapacity;
            const units = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []).reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
            if (name.startsWith("Update") || name.startsWith("Put") || name.startsWith("TransactWrite")) {
                metered.writeUnits += units;
            } else {
                metered.readUnits += units;
            }
            return result;
        } catch (error) {
            // A refused conditional write consumes a write unit (capacity.ts).
            metered.writeUnits += name.startsWith("Update") ? 1 : 0;
            throw error;
        }
    };
    api.middlewareStack.add(middleware, { step: "initialize", name: "hotKeyCeilingRefusals" });
    let exact = true;
    for (let i = 0; i < REFUSALS; i++) {
        const result = await client.tryCreate(KEY, `refused-${i}`, REFUSAL_LIMIT);
        exact &&= !result.created && result.reason === "limit" && result.count === REFUSAL_LIMIT;
    }
    const s = await snapshotKey(admin, deployment.clientLayout, KEY);
    exact &&= s.bestEffort === REFUSAL_LIMIT && s.live === REFUSAL_LIMIT;
    for (const table of [deployment.clientLayout.tableName, deployment.clientLayout.countersTableName]) {
        await admin.send(new DeleteTableCommand({ TableName: table }));
    }
    admin.destroy();
    api.destroy();
    const per = (n: number) => Math.round((n / REFUSALS) * 100) / 100;
    return {
        shards,
        limit: REFUSAL_LIMIT,
        requestsPerRefusal: per(metered.requests),
        writeUnitsPerRefusal: per(metered.writeUnits),
        readUnitsPerRefusal: per(metered.readUnits),
        exact,
    };
}

/** One step's progress line. */
function describeStep(mode: CounterMode, shards: number, rate: number, step: MeasuredStep): string {
    const t = step.seconds;
    return (
        `  ${mode} ${shards} shard(s) ` +
        `(${[t.deploy, t.load, t.drain, t.check].map((n) => n.toFixed(1)).join("+")} s deploy+load+drain+check): ` +
        `${rate.toFixed(2)}/s offered, ${step.sustainedOpsPerSec.toFixed(2)}/s created, ` +
        `${step.bestEffortRequests} best-effort writes, ${(step.throttledBestEffortShare * 100).toFixed(1)}% throttled; ` +
        `${step.exact ? "exact" : "NOT EXACT"}, ${step.boundViolations} bound violations, ${step.apiErrors} API errors, ` +
        `${step.unavailable} unavailable, ${step.recordsPerInvocation.toFixed(1)} records per invocation, ` +
        `${step.consumerRetries} consumer retries, ${step.dlq} to the DLQ`
    );
}

/** Searches each mode and shard count on fresh servers; one row each. */
export async function runHotKeyCeiling(options: HotKeyCeilingOptions, log: (line: string) => void): Promise<CeilingReport> {
    const report: CeilingReport = { partitionWcu: options.partitionWcu, rows: [] };
    for (const mode of CEILING_MODES) {
        for (const shards of options.shards) {
            const meterings = new Map<string, TableMetering>();
            const search = await withServers({ parity: { metering: (table) => meterings.get(table) } }, (servers) =>
                searchCeiling(
                    async (rate) => {
                        const step = await measureStep(servers, meterings, mode, shards, rate, options);
                        log(describeStep(mode, shards, rate, step));
                        return step;
                    },
                    (step) => step.throttledBestEffortShare,
                    { startRate: firstRate(options.partitionWcu, shards), maxSteps: options.maxSteps },
                ),
            );
            report.rows.push(ceilingRow(mode, shards, search));
        }
    }
    const engine = await startEngine({});
    try {
        report.atLimit = [];
        for (const shards of options.shards) {
            report.atLimit.push(await measureRefusals(engine, shards));
        }
    } finally {
        await engine.stop();
    }
    return report;
}

/** The report for people: one line per row. */
export function formatHotKeyCeiling(report: CeilingReport): string[] {
    return [
        `Hot-key ceiling: one key's counters partition metered at ${report.partitionWcu} WCU/s, the user's table per item at the same rate`,
        ...report.rows.map(
            (r) =>
                `  ${r.mode.padEnd(11)} shards ${String(r.shards).padEnd(3)} ${r.sustainedOpsPerSec.toFixed(2)} creates/s ` +
                `(${(r.throttledBestEffortShare * 100).toFixed(2)}% of best-effort writes throttled), ` +
                `${r.exact ? "exact" : "NOT EXACT"}, ${r.boundViolations} bound violations, ${r.apiErrors} API errors, count() ${r.countRcu} RCU`,
        ),
        ...(report.atLimit ?? []).map(
            (a) =>
                `  strict at its limit (${a.limit}), shards ${String(a.shards).padEnd(3)} a refused tryCreate sends ${a.requestsPerRefusal} requests, ` +
                `${a.writeUnitsPerRefusal} WCU and ${a.readUnitsPerRefusal} RCU${a.exact ? "" : " (NOT EXACT)"}`,
        ),
    ];
}
