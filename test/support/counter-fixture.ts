/**
 * A counter system on DynamoDB Local for the runtime tests: a table with its real stream, the
 * API-side client, the stream consumer driven by the mapping emulator, a local fatal queue and
 * first DLQ, and helpers that read the ground truth from the table.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { strict as assert } from "node:assert";
import { HybridCounterClient, type CounterMode } from "../../runtime/client/client";
import { DEFAULT_LAYOUT, type CounterTableLayout, type HandlerConfig } from "../../runtime/shared/config";
import { createStreamHandler } from "../../runtime/stream/consumer";
import { createRedriveHandler } from "../../runtime/stream/redrive";
import type { LocalEngine } from "../../local/engine/engine";
import { injectFaults, seededRandom, type FaultKind, type FaultStats } from "../../local/engine/faults";
import { LAMBDA_DEFAULTS, MappingEmulator, type MappingSettings, type OnFailureRecord } from "../../local/aws/mapping-emulator";
import { lambdaContext } from "../../local/aws/lambda-context";
import { snapshotKey, type KeyObservation, type KeySnapshot } from "../../local/harness/observe";
import { CallsInFlight, NO_CALLS, type CallsDuring } from "../../local/harness/calls";
import { LocalQueues, sqsEvent } from "../../local/aws/sqs";
import { shardOfPartitionKey } from "../../runtime/shards/layout";
import { createCounterTable, createCountersTable } from "../../local/engine/table";

let tableCounter = 0;

export const FATAL_QUEUE_URL = "https://sqs.local/000000000000/fatal";
export const FIRST_DLQ_URL = "https://sqs.local/000000000000/first-dlq";

/** The mapping settings the component deploys with (bounded retries, bisect, partial batch responses). */
export const COMPONENT_LIKE_SETTINGS: MappingSettings = {
    ...LAMBDA_DEFAULTS,
    batchSize: 100,
    maximumRetryAttempts: 10,
    maximumRecordAgeInSeconds: 21_600,
    bisectBatchOnFunctionError: true,
    reportBatchItemFailures: true,
};

export interface FixtureOptions {
    /**
     * Where the counter items live. "separate": a counters table beside the user's, as the component
     * creates by default. The API-side client on this branch still writes best-effort to the user's
     * table, so tests that read best-effort through the client use "same-table". @default "same-table"
     */
    readonly placement?: "separate" | "same-table";
    readonly layout?: Partial<CounterTableLayout>;
    /** Shards of every key's counting (runtime/shards/layout.ts); above 1 needs placement "separate". @default 1 */
    readonly counterShards?: number;
    readonly mode?: CounterMode;
    readonly settings?: Partial<MappingSettings>;
    /** Faults in the API-side client's DynamoDB calls. */
    readonly clientFaults?: { rate: number; kinds?: FaultKind[]; seed: number };
    /** Faults in the consumer's DynamoDB calls. */
    readonly consumerFaults?: { rate: number; kinds?: FaultKind[]; seed: number };
    /** The consumer's timeout: its retry budget is this less a safety margin. @default 10000 */
    readonly functionTimeoutMs?: number;
    /** Wraps the consumer invocation (to crash after commit, or to deliver twice). */
    readonly wrapInvoke?: (
        invoke: (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>,
    ) => (event: DynamoDBStreamEvent) => Promise<unknown>;
}

export interface CounterFixture {
    readonly tableName: string;
    /** The counters table: the user's table itself in the same-table placement. */
    readonly countersTableName: string;
    readonly layout: CounterTableLayout;
    readonly config: HandlerConfig;
    readonly streamArn: string;
    readonly client: HybridCounterClient;
    readonly clientDynamo: DynamoDBClient;
    readonly consumerDynamo: DynamoDBClient;
    /** A clean client for reading the ground truth (no faults). */
    readonly reader: DynamoDBClient;
    readonly emulator: MappingEmulator;
    readonly queues: LocalQueues;
    readonly consumer: (event: DynamoDBStreamEvent, context?: Context) => Promise<DynamoDBBatchResponse>;
    readonly redrive: ReturnType<typeof createRedriveHandler>;
    readonly logs: string[];
    readonly clientFaults?: FaultStats;
    readonly consumerFaults?: FaultStats;
    /** Redrives every message in the first DLQ once; returns how many were fully counted. */
    redriveAll(): Promise<number>;
    snapshot(key: string): Promise<Snapshot>;
    /** The snapshot with the live items the client wrote (best-effort's own share). */
    observe(key: string): Promise<Observation>;
    /**
     * The observation, with the client's calls of the key in flight while it read (none in the same-table placement,
     * where it is one read): what a bound check must allow it (local/harness/calls.ts, window).
     */
    observeDuring(key: string): Promise<{ observation: Observation; during: CallsDuring }>;
    keys(): Promise<string[]>;
    close(): void;
}

export type Snapshot = KeySnapshot;
export type Observation = Omit<KeyObservation, "pages">;

export async function counterFixture(engine: LocalEngine, options: FixtureOptions = {}): Promise<CounterFixture> {
    const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, ...options.layout };
    const tableName = `counter-test-${++tableCounter}-${process.pid}`;
    const reader = engine.dynamodb();
    const { streamArn } = await createCounterTable(reader, tableName, layout);
    const countersTableName = options.placement === "separate" ? `${tableName}-counters` : tableName;
    if (countersTableName !== tableName) {
        await createCountersTable(reader, countersTableName, layout);
    }
    const config: HandlerConfig = {
        ...layout,
        tableName,
        countersTableName,
        ...(options.counterShards === undefined || options.counterShards === 1 ? {} : { counterShards: options.counterShards }),
        fatalQueueUrl: FATAL_QUEUE_URL,
        metricsNamespace: "HybridCounterTest",
    };

    const clientDynamo = engine.dynamodb();
    const consumerDynamo = engine.dynamodb();
    const clientFaults = options.clientFaults
        ? injectFaults(clientDynamo, { ...options.clientFaults, random: seededRandom(options.clientFaults.seed) })
        : undefined;
    const consumerFaults = options.consumerFaults
        ? injectFaults(consumerDynamo, { ...options.consumerFaults, random: seededRandom(options.consumerFaults.seed) })
        : undefined;

    const queues = new LocalQueues();
    const sqs = queues.client();
    const logs: string[] = [];
    const sink = (line: string) => logs.push(line);

    const consumer = createStreamHandler({ config, dynamodb: consumerDynamo, sqs, sink });
    const redrive = createRedriveHandler({ config, dynamodb: consumerDynamo, streams: engine.streams(), sqs, sink });
    const timeoutMs = options.functionTimeoutMs ?? 10_000;
    const call = (e: DynamoDBStreamEvent) => consumer(e, lambdaContext("consumer", timeoutMs));
    const invoke = options.wrapInvoke ? options.wrapInvoke(call) : call;
    const emulator = new MappingEmulator({
        streams: engine.streams(),
        streamArn,
        settings: { ...COMPONENT_LIKE_SETTINGS, ...options.settings },
        invoke,
        onFailure: (record: OnFailureRecord) => {
            queues.send(FIRST_DLQ_URL, JSON.stringify(record));
        },
    });
    // DynamoDB Local on a loaded machine can keep a write waiting on an item lock for seconds (it answers a
    // 500 "timed out ... waiting for a lock" that real DynamoDB never does): the deadline here is the longest
    // the client allows, so that these tests measure counting, not the engine's lock waits.
    const client = new HybridCounterClient({
        ...layout,
        tableName,
        countersTableName,
        ...(config.counterShards === undefined ? {} : { counterShards: config.counterShards }),
        dynamodb: clientDynamo,
        mode: options.mode,
        deadlineMs: 60_000,
    });
    // Its calls counted, whoever makes them: an observation that reads two tables learns which calls it overlapped.
    const calls = new CallsInFlight();
    Object.assign(client, calls.wrap(client));

    const fixture: CounterFixture = {
        tableName,
        countersTableName,
        layout,
        config,
        streamArn,
        client,
        clientDynamo,
        consumerDynamo,
        reader,
        emulator,
        queues,
        consumer,
        redrive,
        logs,
        clientFaults,
        consumerFaults,
        async redriveAll() {
            // As the component maps the first DLQ: one message per redrive invocation, each with its own budget.
            const messages = queues.receive(FIRST_DLQ_URL, 1_000);
            const failedMessages = [];
            for (const message of messages) {
                const response = await redrive(
                    sqsEvent([message], "arn:aws:sqs:us-east-1:000000000000:first-dlq"),
                    lambdaContext("redrive", timeoutMs),
                );
                if (response.batchItemFailures.some((f) => f.itemIdentifier === message.messageId)) {
                    failedMessages.push(message);
                }
            }
            queues.release(FIRST_DLQ_URL, failedMessages);
            return messages.length - failedMessages.length;
        },
        async snapshot(key) {
            return snapshot(reader, tableName, layout, key, countersTableName, config.counterShards);
        },
        async observe(key) {
            return observe(reader, tableName, layout, key, countersTableName, config.counterShards);
        },
        async observeDuring(key) {
            const during = calls.window(key);
            const observation = await observe(reader, tableName, layout, key, countersTableName, config.counterShards);
            // One Query of one partition reads one instant; reads of two tables do not.
            return { observation, during: countersTableName === tableName ? NO_CALLS : during() };
        },
        async keys() {
            const keys = new Set<string>();
            for (const table of new Set([tableName, countersTableName])) {
                let start: Record<string, AttributeValue> | undefined;
                do {
                    const page = await reader.send(new ScanCommand({ TableName: table, ExclusiveStartKey: start, ConsistentRead: true }));
                    for (const item of page.Items ?? []) {
                        keys.add(shardOfPartitionKey(item[layout.partitionKey]!.S!, config.counterShards ?? 1).key);
                    }
                    start = page.LastEvaluatedKey;
                } while (start);
            }
            return [...keys].sort();
        },
        close() {
            reader.destroy();
            clientDynamo.destroy();
            consumerDynamo.destroy();
        },
    };
    return fixture;
}

/** One observation of a key; fails the test if the partition did not fit one read. */
export async function snapshot(
    reader: DynamoDBClient,
    tableName: string,
    layout: CounterTableLayout,
    key: string,
    countersTableName: string = tableName,
    counterShards = 1,
): Promise<Snapshot> {
    const { clientLive: _, shards: _shards, ...s } = await observe(reader, tableName, layout, key, countersTableName, counterShards);
    return s;
}

async function observe(
    reader: DynamoDBClient,
    tableName: string,
    layout: CounterTableLayout,
    key: string,
    countersTableName: string,
    counterShards = 1,
): Promise<Observation> {
    const { pages, ...s } = await snapshotKey(reader, tableName, layout, key, countersTableName, counterShards);
    const expected = countersTableName === tableName ? 1 : 1 + counterShards;
    assert.equal(pages, expected, `key ${key} spans ${pages} pages: the snapshot would not be one observation per table`);
    return s;
}

/** After the stream has drained: eventual == live == counted markers for every key, and nothing is left soft-deleted. */
export async function assertExact(fixture: CounterFixture): Promise<Map<string, Snapshot>> {
    const all = new Map<string, Snapshot>();
    for (const key of await fixture.keys()) {
        const s = await fixture.snapshot(key);
        all.set(key, s);
        assert.equal(s.eventual, s.live, `key ${key}: eventual ${s.eventual} != live ${s.live}`);
        assert.equal(s.counted, s.live, `key ${key}: ${s.counted} counted markers != live ${s.live}`);
        assert.equal(s.softDeleted, 0, `key ${key}: ${s.softDeleted} soft-deleted items were not removed`);
    }
    return all;
}

/**
 * Snapshots the keys round-robin until `work` settles, checking `invariant` on every observation.
 * Returns the number of observations and every violation seen.
 */
export async function observeWhile<T>(
    fixture: CounterFixture,
    keys: readonly string[],
    work: Promise<T>,
    invariant: (s: Observation, during: CallsDuring) => string | undefined,
): Promise<{ result: T; observations: number; violations: string[] }> {
    let done = false;
    const settled = work.finally(() => {
        done = true;
    });
    let observations = 0;
    const violations: string[] = [];
    const observe = async () => {
        for (let i = 0; !done; i++) {
            const key = keys[i % keys.length]!;
            const { observation: s, during } = await fixture.observeDuring(key);
            observations++;
            const problem = invariant(s, during);
            if (problem) {
                violations.push(`${key}: ${problem} (${JSON.stringify({ ...s, during })})`);
            }
        }
    };
    const [result] = await Promise.all([settled, observe()]);
    return { result, observations, violations };
}

/**
 * The bounds an observation may see crossed by the calls in flight while it read, and by no more: the best-effort
 * read comes first, so utilization allows the deletes in flight and strict the creates (local/harness/calls.ts, window).
 */
export const utilizationInvariant = (s: Snapshot, during: CallsDuring = NO_CALLS): string | undefined =>
    s.bestEffort > s.live + during.deletes
        ? `best-effort ${s.bestEffort} > live ${s.live}${during.deletes > 0 ? ` + ${during.deletes} deletes in flight` : ""}`
        : undefined;

/**
 * Strict mode while a table is adopted: best-effort covers the items the client wrote (the backfill adds
 * the others as it reaches them), and the client never admitted one past the limit. Items that existed
 * before, or that other writers put, may take `live` past the limit: they were never the client's to refuse.
 */
export const strictAdoptionInvariant =
    (limit: number) =>
    (s: Observation, during: CallsDuring = NO_CALLS): string | undefined =>
        s.bestEffort + during.creates < s.clientLive
            ? `best-effort ${s.bestEffort}${during.creates > 0 ? ` + ${during.creates} creates in flight` : ""} < client-written live ${s.clientLive}`
            : s.clientLive > limit
              ? `client-written live ${s.clientLive} > limit ${limit}`
              : undefined;

export const strictInvariant =
    (limit: number) =>
    (s: Snapshot, during: CallsDuring = NO_CALLS): string | undefined =>
        s.bestEffort + during.creates < s.live
            ? `best-effort ${s.bestEffort}${during.creates > 0 ? ` + ${during.creates} creates in flight` : ""} < live ${s.live}`
            : s.live > limit
              ? `live ${s.live} > limit ${limit}`
              : undefined;
