/**
 * What the stream-path tests drive and watch beside the counter fixture (counter-fixture.ts):
 * - the requests a DynamoDB client sends, each with how it ended, and which counter item each write is for;
 * - refusals of chosen requests, before they reach the table (so they write nothing), with an error no layer retries;
 * - a consumer of the fixture's counter built with parts of the test's own (a fatal queue that refuses,
 *   a topic that fails), a mapping emulator that delivers to it, and events built from the stream's own records;
 * - the stream shard's frontier as stored;
 * - two stream shards applying records of one key at once, in a chosen order.
 */
import {
    GetItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
    type UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import { DescribeStreamCommand, type DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { InitializeMiddleware } from "@smithy/types";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { untimedContext } from "../../local/aws/lambda-context";
import { MappingEmulator, type MappingSettings, type StreamInvokeEvent } from "../../local/aws/mapping-emulator";
import type { LocalEngine } from "../../local/engine/engine";
import type { ThresholdEvent } from "../../runtime/limits/thresholds";
import { eventualKey, streamPartitionKey, streamShardKey } from "../../runtime/shared/keys";
import { applyRecords, type ApplyContext, type ApplyOutcome } from "../../runtime/stream/apply";
import { createStreamHandler, type StreamEvent, type StreamResponse } from "../../runtime/stream/consumer";
import { parseRecord, type ParsedRecord } from "../../runtime/stream/records";
import type { FatalMessage, FatalQueue } from "../../runtime/stream/fatal";
import { FRONTIER_ATTRIBUTE } from "../../runtime/stream/progress";
import { COMPONENT_SETTINGS, FIRST_DLQ_URL, type CounterFixture } from "./counter-fixture";
import { readStream } from "./stream-records";

/** One request a client sent (one `send`: the SDK's own retries within it are not seen), and how it ended. */
export interface SentRequest {
    readonly command: string;
    readonly input: Record<string, unknown>;
    /** undefined while in flight; else whether it succeeded. */
    ok?: boolean;
    error?: string;
}

let names = 0;

/** Records every request `client` sends from now on. */
export function recordRequests(client: DynamoDBClient): SentRequest[] {
    const sent: SentRequest[] = [];
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const request: SentRequest = {
            command: (context.commandName ?? "").replace(/Command$/, ""),
            input: structuredClone(args.input) as Record<string, unknown>,
        };
        sent.push(request);
        try {
            const result = await next(args);
            request.ok = true;
            return result;
        } catch (error) {
            request.ok = false;
            request.error = (error as Error).name;
            throw error;
        }
    };
    client.middlewareStack.add(middleware, { step: "initialize", name: `recordRequests${++names}`, priority: "high" });
    return sent;
}

const WRITES = new Set(["PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"]);

/** The writes among `requests`. */
export function writesOf(requests: readonly SentRequest[]): SentRequest[] {
    return requests.filter((r) => WRITES.has(r.command));
}

/** What a write is for: `eventual:<key>`, `progress`, `table` (the user's table), or `counters` (any other counter item). */
export function targetOf(config: CounterFixture["config"], request: SentRequest): string {
    const input = request.input as { TableName?: string; Key?: Record<string, AttributeValue>; Item?: Record<string, AttributeValue> };
    const key = input.Key ?? input.Item ?? {};
    const partition = key[config.partitionKey]?.S ?? "";
    const sort = key[config.sortKey]?.S ?? "";
    if (input.TableName === config.tableName && !sort.startsWith(config.counterPrefix)) {
        return "table";
    }
    if (partition === streamPartitionKey(config)) {
        return "progress";
    }
    return sort === eventualKey(config, partition)[config.sortKey]?.S ? `eventual:${partition}` : "counters";
}

/**
 * The eventual writes among `requests` that applied records (they add to the count: ADD), and succeeded, as
 * `{ key: the sum they added }`.
 */
export function appliedSums(config: CounterFixture["config"], requests: readonly SentRequest[]): Record<string, number[]> {
    const sums: Record<string, number[]> = {};
    for (const request of requests) {
        const target = targetOf(config, request);
        const input = request.input as unknown as UpdateItemCommandInput;
        if (
            request.command === "UpdateItem" &&
            request.ok === true &&
            target.startsWith("eventual:") &&
            (input.UpdateExpression ?? "").startsWith("ADD #c ")
        ) {
            const key = target.slice("eventual:".length);
            (sums[key] ??= []).push(Number(input.ExpressionAttributeValues?.[":d"]?.N));
        }
    }
    return sums;
}

/** A refusal no layer retries: the request reaches nothing. */
function refusal(): Error {
    return Object.assign(new Error("refused by the test before it reached the table"), { name: "AccessDeniedException" });
}

/** Refuses, before they reach the table, the requests of `client` that `refuse` picks while it is switched on. */
export function refuseRequests(
    client: DynamoDBClient,
    refuse: (command: string, input: Record<string, unknown>) => boolean,
): { on: boolean; refused: number } {
    const switch_ = { on: true, refused: 0 };
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (switch_.on && refuse((context.commandName ?? "").replace(/Command$/, ""), args.input as Record<string, unknown>)) {
            switch_.refused++;
            throw refusal();
        }
        return next(args);
    };
    // Inside the recorder (priority "high" there), so refused requests are recorded too.
    client.middlewareStack.add(middleware, { step: "initialize", name: `refuseRequests${++names}`, priority: "low" });
    return switch_;
}

/** The stream's only shard (DynamoDB Local gives a table's stream one), and its records so far. */
export async function theShard(engine: LocalEngine, f: CounterFixture): Promise<{ shardId: string; records: DynamoDBRecord[] }> {
    const streams = engine.streams();
    const description = await streams.send(new DescribeStreamCommand({ StreamArn: f.streamArn }));
    const shards = description.StreamDescription?.Shards ?? [];
    assert.equal(shards.length, 1, "the table's stream has one shard");
    const records = await readStream(streams, f.streamArn);
    streams.destroy();
    return { shardId: shards[0]!.ShardId!, records };
}

/** The event a mapping with a tumbling window delivers for `records` of `shardId`. */
export function eventOf(f: CounterFixture, shardId: string, records: readonly DynamoDBRecord[]): StreamEvent {
    return { Records: [...records], shardId, eventSourceARN: f.streamArn, state: {}, isFinalInvokeForWindow: false };
}

/** The sequence numbers of `records`, in order. */
export function sequencesOf(records: readonly DynamoDBRecord[]): string[] {
    return records.map((r) => r.dynamodb!.SequenceNumber!);
}

/** The parts of a handler a test may replace. */
export interface HandlerParts {
    readonly dynamodb?: DynamoDBClient;
    readonly streams?: DynamoDBStreamsClient;
    readonly fatal?: FatalQueue;
    readonly sendEvents?: (events: readonly ThresholdEvent[]) => Promise<boolean>;
}

function depsOf(engine: LocalEngine, f: CounterFixture, parts: HandlerParts) {
    return {
        config: f.config,
        dynamodb: parts.dynamodb ?? f.consumerDynamo,
        streams: parts.streams ?? engine.streams(),
        fatal: parts.fatal ?? { park: async (message: FatalMessage) => (f.fatal.push(message), true) },
        sendEvents: parts.sendEvents ?? (async (sent: readonly ThresholdEvent[]) => (f.events.push(...sent), true)),
        sink: (line: string) => void f.logs.push(line),
    };
}

/** Another consumer instance of the fixture's counter (a process of its own: its own cache of frontiers). */
export function consumerOf(
    engine: LocalEngine,
    f: CounterFixture,
    parts: HandlerParts = {},
): (event: StreamEvent) => Promise<StreamResponse> {
    const handler = createStreamHandler(depsOf(engine, f, parts));
    return (event) => handler(event, untimedContext("consumer", 60_000));
}

/** A mapping emulator with the component's settings that delivers the fixture's stream to `invoke`, its failures to the fixture's first DLQ. */
export function mappingOf(
    engine: LocalEngine,
    f: CounterFixture,
    invoke: (event: StreamEvent) => Promise<unknown>,
    settings: Partial<MappingSettings> = {},
): MappingEmulator {
    return new MappingEmulator({
        streams: engine.streams(),
        streamArn: f.streamArn,
        settings: { ...COMPONENT_SETTINGS, ...settings },
        invoke: invoke as (event: StreamInvokeEvent) => Promise<unknown>,
        onFailure: (record) => void f.queues.send(FIRST_DLQ_URL, JSON.stringify(record)),
    });
}

/** The stream shard's frontier as stored: `hc_applied`, undefined when no batch of it was applied. */
export async function storedFrontier(f: CounterFixture, shardId: string): Promise<string | undefined> {
    const response = await f.reader.send(
        new GetItemCommand({ TableName: f.config.countersTableName, Key: streamShardKey(f.config, shardId), ConsistentRead: true }),
    );
    return response.Item?.[FRONTIER_ATTRIBUTE]?.S;
}

/** The eventual item of `key` as stored (undefined: none). */
export async function eventualItem(f: CounterFixture, key: string): Promise<Record<string, AttributeValue> | undefined> {
    const response = await f.reader.send(
        new GetItemCommand({ TableName: f.config.countersTableName, Key: eventualKey(f.config, key), ConsistentRead: true }),
    );
    return response.Item;
}

/** What a test puts around one consumer invocation of the fixture's mapping. */
export type InvokeWrap = (invoke: (event: StreamEvent) => Promise<StreamResponse>, event: StreamEvent) => Promise<unknown>;

/**
 * The fixture's `wrapInvoke`, set once the fixture exists: `hook.wrap` (when set) runs each invocation the mapping
 * makes; unset, the consumer is invoked as it is.
 */
export class InvokeHook {
    wrap: InvokeWrap | undefined;
    readonly option = (invoke: (event: StreamEvent) => Promise<StreamResponse>) => (event: StreamEvent) =>
        this.wrap === undefined ? invoke(event) : this.wrap(invoke, event);
}

/** A promise and the function that resolves it. */
export function deferred(): { promise: Promise<void>; resolve: () => void } {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
}

/**
 * Creates `creates` items of `key` through the client (ids `<key>-<n>`, n from `first`), then deletes the first
 * `deletes` of them.
 */
export async function write(f: CounterFixture, key: string, creates: number, deletes = 0, first = 0): Promise<void> {
    for (let i = first; i < first + creates; i++) {
        assert.equal((await f.client.create(key, `${key}-${i}`)).created, true);
    }
    for (let i = first; i < first + deletes; i++) {
        await f.client.delete(key, `${key}-${i}`);
    }
}

/** Asserts that each key's eventual count is its live counted items, and is `expected`. */
export async function assertExact(f: CounterFixture, expected: Record<string, number>): Promise<void> {
    for (const [key, count] of Object.entries(expected)) {
        const snapshot = await f.snapshot(key);
        assert.deepEqual(
            { key, eventual: snapshot.eventual, counted: snapshot.counted, live: snapshot.live },
            { key, eventual: count, counted: count, live: count },
        );
    }
}

/** A run of one stream shard's records, applied as the consumer applies them (runtime/stream/apply.ts). */
export interface ShardRunSpec {
    readonly shardId: string;
    readonly records: readonly DynamoDBRecord[];
    readonly sendEvents?: (events: readonly ThresholdEvent[]) => Promise<boolean>;
}

/**
 * Two stream shards writing `key` at once: `late` reads the key's eventual item and holds its write while `early` is
 * applied to the end; then `late` writes. Records are parsed as delivered (their times included).
 */
export async function applyInterleaved(
    engine: LocalEngine,
    f: CounterFixture,
    key: string,
    early: ShardRunSpec,
    late: ShardRunSpec,
): Promise<[ApplyOutcome, ApplyOutcome]> {
    const lateDynamo = engine.dynamodb();
    const lateAtWrite = deferred();
    const earlyDone = deferred();
    lateDynamo.middlewareStack.add(
        (next, context) => async (args) => {
            if (
                context.commandName === "UpdateItemCommand" &&
                targetOf(f.config, { command: "UpdateItem", input: args.input as Record<string, unknown> }) === `eventual:${key}`
            ) {
                lateAtWrite.resolve();
                await earlyDone.promise;
            }
            return next(args);
        },
        { step: "initialize", name: "holdLateShard" },
    );
    const context = (dynamodb: DynamoDBClient, run: ShardRunSpec): ApplyContext => ({
        config: f.config,
        dynamodb,
        deleteTokenAttribute: `${f.config.tokenAttribute}_delete`,
        sendEvents: run.sendEvents ?? (async (sent) => (f.events.push(...sent), true)),
        remainingMs: () => 60_000,
    });
    const parsed = (run: ShardRunSpec) => run.records.map((r) => (parseRecord(r, f.config) as { record: ParsedRecord }).record);
    try {
        const lateRun = applyRecords(parsed(late), late.shardId, context(lateDynamo, late));
        await Promise.race([lateAtWrite.promise, lateRun]);
        const earlyOutcome = await applyRecords(parsed(early), early.shardId, context(f.consumerDynamo, early));
        earlyDone.resolve();
        return [earlyOutcome, await lateRun];
    } finally {
        earlyDone.resolve();
        lateDynamo.destroy();
    }
}
