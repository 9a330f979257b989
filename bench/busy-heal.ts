/**
 * Busy keys and healing (`npm run bench -- --scenario busy-heal`): what becomes of held slots (strict) and drift
 * (utilization) on keys that are never quiet, while faults keep making them, with the settler running on the
 * component's schedule beside the traffic.
 *
 * Each row runs the system the component deploys (local/deployment/deployment.ts) on a fresh engine, in one mode at
 * one shard count: the client from its `clientConfig` output, the consumer and its stream mapping from its consumer's
 * environment (local/deployment/pipeline.ts), and the settler from its settler function's environment and schedule,
 * compressed (local/twin/settler.ts), run as its handler runs it (runtime/lambda/settler.ts), with calls in flight:
 * nothing holds the traffic back for it. A few keys are written without pause for `--windows` quiet windows, while
 * - calls die between their writes and strict deletes lose their release (local/harness/call-faults.ts, placed by
 *   bench/busy-heal-plan.ts), each one unit of drift, counted when it happens;
 * - another writer hard-deletes live client items (one unit each: best-effort keeps their units).
 * The log gives, against a hundredth of the window, the longest time a key had no call in flight (the traffic's
 * pause) and the longest gap between two writes' answers (which adds the engine's answer time: one DynamoDB Local
 * serves the traffic, the consumer and the settler, and its stalls under the settler's reads are not DynamoDB's).
 * At the end of each window, with the traffic running, it sums |best-effort - live client items| over the keys; an
 * observer checks the mode's bound over and over meanwhile (`busyBoundHolds`). Then the traffic stops, the stream
 * drains, and it reads the sum once more and checks that eventual is exact. The pure half, with the compressed times
 * and why they keep the heal's assumptions, is bench/busy-heal-plan.ts.
 */
import { DeleteItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { deployLocally, type LocalDeployment } from "../local/deployment/deployment";
import { queryPartition } from "../runtime/heal/partition";
import { LOCAL_FATAL_QUEUE, startPipeline } from "../local/deployment/pipeline";
import { startEngine } from "../local/engine/engine";
import { seededRandom } from "../local/engine/faults";
import { CallsInFlight } from "../local/harness/calls";
import { CallFaults } from "../local/harness/call-faults";
import { snapshotKey } from "../local/harness/observe";
import { twinSettlerSpec } from "../local/twin/settler";
import { HybridCounterClient, type CounterMode } from "../runtime/client/client";
import { settle, type SettleReport } from "../runtime/heal/settle";
import { settlerConfigFromEnv } from "../runtime/heal/settler-config";
import { ENV } from "../runtime/shared/config";
import { isLive } from "../runtime/shared/selection";
import { jsonLogger } from "../runtime/shared/telemetry";
import { sqsFatalQueue } from "../runtime/stream/fatal";
import { shardCount } from "../runtime/shards/layout";
import { componentArgs } from "./hot-key-ceiling";
import {
    BUSY_KEYS,
    BUSY_MODES,
    CLIENT_DEADLINE_MS,
    COMPRESSION,
    DELETE_RATIO,
    OTHER_DELETE_EVERY_MS,
    REQUEST_LIFETIME_BUDGET_MS,
    STRICT_LIMIT,
    WORKERS_PER_KEY,
    assertCompressionCovers,
    busyBoundHolds,
    busyHealRow,
    busyThroughout,
    faultAfter,
    faultBefore,
    scheduledFault,
    type CallFault,
    longestGap,
    longestIdle,
    type BusyHealOptions,
    type BusyHealRow,
} from "./busy-heal-plan";

/** The pause between two observations of the bound while the traffic runs. */
const OBSERVE_EVERY_MS = 50;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Layout = LocalDeployment["clientLayout"];

/** What a call of the scenario carries: the rules of busy-heal-plan.ts read its mode, operation and fault. */
export interface BusyCallFault {
    readonly mode: CounterMode;
    readonly operation: "create" | "delete";
    readonly fault: CallFault;
}

/**
 * The scenario's API client on `dynamodb`: the component's client (its `clientConfig`, the scenario's deadline), with
 * the call faults of busy-heal-plan.ts on its requests; `onDrift` hears each fault's drift when it happens.
 */
export function busyClient(
    deployment: LocalDeployment,
    dynamodb: DynamoDBClient,
    mode: CounterMode,
    onDrift: (drift: number) => void,
    deadlineMs = CLIENT_DEADLINE_MS,
    ledgerPeriodSeconds?: number,
): { faults: CallFaults<BusyCallFault>; counter: HybridCounterClient } {
    const faults = new CallFaults<BusyCallFault>(deployment.clientLayout, {
        decide: (call, request) => faultBefore({ ...call, ...call.fault }, request),
        after: (call, request) => faultAfter({ ...call, ...call.fault }, request),
        onDrift: (_key, drift) => onDrift(drift),
    });
    faults.attach(dynamodb);
    const counter = new HybridCounterClient({
        ...deployment.clientConfig,
        dynamodb,
        mode,
        deadlineMs,
        ...(ledgerPeriodSeconds === undefined ? {} : { ledgerPeriodSeconds }),
    });
    return { faults, counter };
}

/**
 * Best-effort as the API's client reads it (`count()`: every shard, consistent), then the live client items (one
 * consistent Query of the user's partition). Reading best-effort through the client keeps this reader right whatever
 * items the counting keeps best-effort in.
 */
export async function readKey(
    counter: Pick<HybridCounterClient, "count">,
    reader: DynamoDBClient,
    layout: Layout,
    key: string,
): Promise<{ bestEffort: number; clientLive: number }> {
    const { bestEffort } = await counter.count(key);
    const items = await queryPartition(reader, { tableName: layout.tableName, partitionKey: layout.partitionKey, key });
    const clientLive = items.filter((item) => isLive(item, layout) && item[layout.tokenAttribute] !== undefined).length;
    return { bestEffort, clientLive };
}

let rowsRun = 0;

/** One row: a fresh engine and deployment, `windows` quiet windows of busy traffic with faults, the drain, the checks. */
export async function measureBusyRow(
    mode: CounterMode,
    shards: number,
    options: BusyHealOptions,
    log: (line: string) => void,
): Promise<BusyHealRow> {
    const engine = await startEngine();
    const clients: Array<{ destroy(): void }> = [];
    const client = () => {
        const c = engine.dynamodb();
        clients.push(c);
        return c;
    };
    try {
        const name = `busy${++rowsRun}`;
        const deployment = await deployLocally(client(), name, componentArgs(mode, shards));
        const layout = deployment.clientLayout;
        if (layout.countersTableName === layout.tableName) {
            throw new Error("the busy-key scenario reads the counters table apart from the user's table");
        }
        const spec = twinSettlerSpec(deployment.resources, name, COMPRESSION);
        if (spec === undefined) {
            throw new Error("the component deployed no settler");
        }
        const windowMs = spec.quietWindowMs;
        assertCompressionCovers(windowMs, CLIENT_DEADLINE_MS);
        // The settler as its handler builds itself from its environment (runtime/lambda/settler.ts).
        const settlerConfig = settlerConfigFromEnv({ ...spec.environment, [ENV.fatalQueueUrl]: LOCAL_FATAL_QUEUE });
        const pipeline = startPipeline(deployment, { dynamodb: client(), streams: engine.streams() }, { functionName: "busy-heal" });
        const settlerDb = client();
        const fatal = sqsFatalQueue(
            pipeline.queues.client(),
            LOCAL_FATAL_QUEUE,
            jsonLogger("busy-heal-settler", () => undefined),
        );

        let driftMade = 0;
        const otherDeletes = new Map<string, number>(BUSY_KEYS.map((k) => [k, 0]));
        const api = client();
        let longestRequestMs = 0;
        api.middlewareStack.add(
            (next) => async (args) => {
                const sent = Date.now();
                try {
                    return await next(args);
                } finally {
                    longestRequestMs = Math.max(longestRequestMs, Date.now() - sent);
                }
            },
            { step: "initialize", name: "busyHealRequestTime", priority: "low" },
        );
        const { faults, counter } = busyClient(
            deployment,
            api,
            mode,
            (drift) => (driftMade += drift),
            CLIENT_DEADLINE_MS,
            spec.ledgerPeriodSeconds,
        );
        const calls = new CallsInFlight();
        const tracked = calls.wrap(counter);

        let done = false;
        let apiErrors = 0;
        const errorsByName: Record<string, number> = {};
        const surfaced = (out: { dead: boolean; error?: unknown }) => {
            if (!out.dead && out.error !== undefined) {
                apiErrors++;
                const name = out.error instanceof Error ? out.error.name : "non-Error";
                errorsByName[name] = (errorsByName[name] ?? 0) + 1;
            }
        };
        let boundViolations = 0;
        const live = new Map<string, string[]>(BUSY_KEYS.map((k) => [k, []]));
        const observer = client();
        const observerCounter = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: observer, mode });
        const observe = async (key: string) => {
            const during = calls.window(key);
            const others = otherDeletes.get(key)!;
            const read = await readKey(observerCounter, observer, layout, key);
            const raced = during();
            if (!busyBoundHolds(mode, { ...read, ...raced, otherDeletes: others }, STRICT_LIMIT)) {
                boundViolations++;
            }
            return Math.abs(read.bestEffort - read.clientLive);
        };

        const consuming = (async () => {
            while (!done) {
                const read = await pipeline.emulator.poll();
                pipeline.emulator.start();
                if (read === 0) {
                    await sleep(25);
                }
            }
            await pipeline.emulator.settled();
        })();
        // Per key, [started, ended] of each of its calls: the traffic pauses a key only while none is in flight.
        const callTimes = new Map<string, Array<[number, number]>>(BUSY_KEYS.map((k) => [k, []]));
        const timed = async <T>(key: string, call: () => Promise<T>): Promise<T> => {
            const times: [number, number] = [Date.now(), Number.POSITIVE_INFINITY];
            callTimes.get(key)!.push(times);
            try {
                return await call();
            } finally {
                times[1] = Date.now();
            }
        };
        const worker = async (key: string, seed: number) => {
            const random = seededRandom(seed);
            let creates = 0;
            let deletes = 0;
            while (!done) {
                const ids = live.get(key)!;
                if (ids.length > 0 && random() < DELETE_RATIO) {
                    const id = ids.splice(Math.floor(random() * ids.length), 1)[0]!;
                    const fault = scheduledFault(mode, "delete", deletes++);
                    const out = await timed(key, () => faults.run({ mode, operation: "delete", fault }, () => tracked.delete(key, id)));
                    surfaced(out);
                } else {
                    const id = `${key}-${seed}-${creates}`;
                    const fault = scheduledFault(mode, "create", creates++);
                    const out = await timed(key, () =>
                        faults.run({ mode, operation: "create", fault }, async () =>
                            mode === "strict"
                                ? (await tracked.tryCreate(key, id, STRICT_LIMIT, { payload: "x" })).created
                                : (await tracked.create(key, id, { payload: "x" })).created,
                        ),
                    );
                    surfaced(out);
                    if (!out.dead && out.result === true) {
                        ids.push(id);
                    }
                }
            }
        };
        // Another writer: hard-deletes a live client item (one whose creating call returned) of each key in turn.
        const otherWriter = async () => {
            const random = seededRandom(options.seed + 7);
            const writer = client();
            for (let turn = 0; !done; turn++) {
                await sleep(OTHER_DELETE_EVERY_MS);
                const key = BUSY_KEYS[turn % BUSY_KEYS.length]!;
                const ids = live.get(key)!;
                if (ids.length === 0 || done) {
                    continue;
                }
                const id = ids.splice(Math.floor(random() * ids.length), 1)[0]!;
                otherDeletes.set(key, otherDeletes.get(key)! + 1);
                try {
                    await writer.send(
                        new DeleteItemCommand({
                            TableName: layout.tableName,
                            Key: { [layout.partitionKey]: { S: key }, [layout.sortKey]: { S: id } },
                            ConditionExpression: "attribute_exists(#token) AND NOT #deleted = :true",
                            ExpressionAttributeNames: { "#token": layout.tokenAttribute, "#deleted": layout.deletedAttribute },
                            ExpressionAttributeValues: { ":true": { BOOL: true } },
                        }),
                    );
                    driftMade++;
                } catch {
                    // Not live any more: nothing removed, no drift.
                }
            }
        };
        const runs: Array<{ start: number; end: number; report: SettleReport }> = [];
        const settling = (async () => {
            while (!done) {
                const start = Date.now();
                try {
                    const report = await settle({
                        config: settlerConfig,
                        dynamodb: settlerDb,
                        mode: settlerConfig.mode,
                        quietWindowMs: settlerConfig.quietWindowMs,
                        keyBudget: settlerConfig.keyBudget,
                        fatal,
                    });
                    runs.push({ start, end: Date.now(), report });
                } catch {
                    // A failed run: the next one goes on, as the next scheduled invocation would.
                }
                for (let waited = Date.now() - start; waited < spec.periodMs && !done; waited += 50) {
                    await sleep(Math.min(50, spec.periodMs - waited));
                }
            }
        })();
        const observing = (async () => {
            for (let i = 0; !done; i++) {
                await observe(BUSY_KEYS[i % BUSY_KEYS.length]!);
                // About 20 observations a second, as the twin's: light on the engine the traffic shares.
                await sleep(OBSERVE_EVERY_MS);
            }
        })();

        const started = Date.now();
        const traffic = BUSY_KEYS.flatMap((key, k) =>
            Array.from({ length: WORKERS_PER_KEY }, (_, w) => worker(key, options.seed * 1_000 + k * 100 + w)),
        );
        const others = otherWriter();
        const byWindow: number[] = [];
        for (let window = 1; window <= options.windows; window++) {
            await sleep(Math.max(0, started + window * windowMs - Date.now()));
            let sum = 0;
            for (const key of BUSY_KEYS) {
                sum += await observe(key);
            }
            byWindow.push(sum);
            log(`  busy-heal ${mode} ${shards} shard(s): window ${window}/${options.windows}, |best-effort - live| ${sum}`);
        }
        done = true;
        const stopped = Date.now();
        await Promise.all([...traffic, others, settling, observing, consuming]);
        await pipeline.emulator.drain({ idlePolls: 3, pollIntervalMs: 50 });

        let end = 0;
        let exact = true;
        for (const key of BUSY_KEYS) {
            end += await observe(key);
            const s = await snapshotKey(observer, layout.tableName, layout, key, layout.countersTableName, shardCount(layout));
            exact &&= s.eventual === s.live && s.softDeleted === 0;
        }
        const writes = (key: string) => faults.writes.get(key) ?? [];
        const healsOnBusyKeys = runs
            .filter((r) => r.end <= stopped && BUSY_KEYS.every((key) => busyThroughout(writes(key), r.start - windowMs, r.end, windowMs)))
            .reduce((n, r) => n + r.report.healed, 0);
        const gap = Math.max(...BUSY_KEYS.map((key) => longestGap(writes(key), started + 100)));
        const idle = Math.max(...BUSY_KEYS.map((key) => longestIdle(callTimes.get(key)!, started + 100, stopped)));
        log(
            `  busy-heal ${mode} ${shards} shard(s): ${runs.length} settler runs; a hundredth of the window is ${windowMs / 100} ms: ` +
                `longest time a key had no call in flight ${idle} ms, longest gap between two writes' answers ${gap} ms; ` +
                `longest request ${longestRequestMs} ms (budget ${REQUEST_LIFETIME_BUDGET_MS} ms)`,
        );
        if (apiErrors > 0) {
            log(`  busy-heal ${mode} ${shards} shard(s): API errors by name: ${JSON.stringify(errorsByName)}`);
        }
        return busyHealRow(mode, shards, { byWindow, driftMade, healsOnBusyKeys, end, boundViolations, apiErrors, exact });
    } finally {
        for (const c of clients) {
            c.destroy();
        }
        await engine.stop();
    }
}

/** Every mode at every shard count, one row each. */
export async function runBusyHeal(options: BusyHealOptions, log: (line: string) => void): Promise<{ rows: BusyHealRow[] }> {
    const rows: BusyHealRow[] = [];
    for (const mode of BUSY_MODES) {
        for (const shards of options.shards) {
            rows.push(await measureBusyRow(mode, shards, options, log));
        }
    }
    return { rows };
}
