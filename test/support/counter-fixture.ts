/**
 * A counter on DynamoDB Local for the runtime tests, built as the component deploys it: the user's table with its
 * stream, the counters table with the heal index (or the same-table placement), the API's client built from
 * `clientConfig`, the consumer and the redrive driven by the mapping emulator with the component's settings (tumbling
 * window included), a local fatal queue and first DLQ, threshold events captured, and a clock the test can move.
 *
 * The clock: the client, the handlers and the heal read `Date.now`, which `clock.advance` moves for the whole process
 * until `close` (DynamoDB Local does not check request signatures' times). Move it only between calls: a test of
 * time's passage (a life turning old, a tombstone settling) says so by moving it.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { Context } from "aws-lambda";
import { HybridCounterClient } from "../../runtime/client/client";
import { DEFAULT_LAYOUT, clientConfigOf, type CounterMode, type CounterTableLayout, type HandlerConfig } from "../../runtime/shared/config";
import { createStreamHandler, type StreamEvent, type StreamResponse } from "../../runtime/stream/consumer";
import { createRedriveHandler } from "../../runtime/stream/redrive";
import type { FatalMessage } from "../../runtime/stream/fatal";
import type { ThresholdEvent } from "../../runtime/limits/thresholds";
import { healKey, type HealResult } from "../../runtime/heal/heal";
import { settle, type SettleReport } from "../../runtime/heal/settle";
import type { LocalEngine } from "../../local/engine/engine";
import { injectFaults, seededRandom, type FaultKind, type FaultStats } from "../../local/engine/faults";
import { LAMBDA_DEFAULTS, MappingEmulator, type MappingSettings, type OnFailureRecord } from "../../local/aws/mapping-emulator";
import { untimedContext } from "../../local/aws/lambda-context";
import { snapshotKey, type KeyObservation } from "../../local/harness/observe";
import { LocalQueues, sqsEvent } from "../../local/aws/sqs";
import { createCounterTable, createCountersTable } from "../../local/engine/table";

let tables = 0;

export const FIRST_DLQ_URL = "https://sqs.local/000000000000/first-dlq";

/** The mapping settings the component deploys (components/pipeline.ts): bounded retries, bisect, partial batches, a tumbling window. */
export const COMPONENT_SETTINGS: MappingSettings = {
    ...LAMBDA_DEFAULTS,
    batchSize: 100,
    maximumRetryAttempts: 10,
    maximumRecordAgeInSeconds: 21_600,
    bisectBatchOnFunctionError: true,
    reportBatchItemFailures: true,
    tumblingWindowInSeconds: 900,
};

export interface FixtureOptions {
    /** Where the counter items live. @default "separate" (the component's default) */
    readonly placement?: "separate" | "same-table";
    readonly layout?: Partial<CounterTableLayout>;
    /** @default 1 */
    readonly counterShards?: number;
    /** @default "utilization" */
    readonly mode?: CounterMode;
    /** The ledger period. @default 600 (the component's `healQuietWindowSeconds`) */
    readonly periodSeconds?: number;
    /** Threshold fractions. @default [0.8, 1] */
    readonly thresholds?: readonly number[];
    /** Whether a threshold topic is configured (events are captured in `events`). @default true */
    readonly topic?: boolean;
    /** @default 90 */
    readonly usageRetentionDays?: number;
    readonly settings?: Partial<MappingSettings>;
    /** The client's deadline. @default 60000 (DynamoDB Local on a loaded machine can hold an item lock for seconds) */
    readonly deadlineMs?: number;
    readonly clientFaults?: { readonly rate: number; readonly kinds?: FaultKind[]; readonly seed: number };
    readonly consumerFaults?: { readonly rate: number; readonly kinds?: FaultKind[]; readonly seed: number };
    /** Wraps each consumer invocation (to crash it, deliver it twice, look at it). */
    readonly wrapInvoke?: (invoke: (event: StreamEvent) => Promise<StreamResponse>) => (event: StreamEvent) => Promise<unknown>;
}

export interface CounterFixture {
    readonly config: HandlerConfig;
    readonly streamArn: string;
    readonly client: HybridCounterClient;
    readonly clientDynamo: DynamoDBClient;
    readonly consumerDynamo: DynamoDBClient;
    /** A client with no faults, for reading what the tables hold. */
    readonly reader: DynamoDBClient;
    readonly emulator: MappingEmulator;
    readonly queues: LocalQueues;
    readonly consumer: (event: StreamEvent, context?: Context) => Promise<StreamResponse>;
    readonly redrive: ReturnType<typeof createRedriveHandler>;
    /** Messages parked on the fatal queue. */
    readonly fatal: FatalMessage[];
    /** Threshold events sent to the topic. */
    readonly events: ThresholdEvent[];
    readonly logs: string[];
    readonly clientFaults?: FaultStats;
    readonly consumerFaults?: FaultStats;
    readonly clock: { advance(ms: number): void; readonly offsetMs: number };
    /** Delivers every record the stream holds (the emulator's drain). */
    drain(): Promise<void>;
    /** Redrives every first-DLQ message once; returns how many were applied. */
    redriveAll(): Promise<number>;
    /** One settler run, with the heal reading this fixture's config. */
    settle(options?: { keyBudget?: number; auditItems?: number }): Promise<SettleReport>;
    heal(key: string): Promise<HealResult>;
    snapshot(key: string): Promise<KeyObservation>;
    close(): void;
}

/** Builds a counter (see the top). */
export async function counterFixture(engine: LocalEngine, options: FixtureOptions = {}): Promise<CounterFixture> {
    const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, ...options.layout };
    const tableName = `counter-test-${++tables}-${process.pid}`;
    const sameTable = options.placement === "same-table";
    const reader = engine.dynamodb();
    const { streamArn } = await createCounterTable(reader, tableName, layout, "NEW_AND_OLD_IMAGES", { healIndex: sameTable });
    const countersTableName = sameTable ? tableName : `${tableName}-counters`;
    if (!sameTable) {
        await createCountersTable(reader, countersTableName, layout, { healIndex: true });
    }
    const config: HandlerConfig = {
        ...layout,
        tableName,
        countersTableName,
        mode: options.mode ?? "utilization",
        periodMs: (options.periodSeconds ?? 600) * 1000,
        ...(options.counterShards === undefined || options.counterShards === 1 ? {} : { counterShards: options.counterShards }),
        fatalQueueUrl: "https://sqs.local/000000000000/fatal",
        metricsNamespace: "HybridCounterTest",
        thresholds: options.thresholds ?? [0.8, 1],
        ...(options.topic === false ? {} : { thresholdTopicArn: "arn:aws:sns:us-east-1:000000000000:thresholds" }),
        usageRetentionDays: options.usageRetentionDays ?? 90,
    };
    const clientDynamo = engine.dynamodb();
    const consumerDynamo = engine.dynamodb();
    const faults = (client: DynamoDBClient, spec: FixtureOptions["clientFaults"]) =>
        spec === undefined ? undefined : injectFaults(client, { ...spec, random: seededRandom(spec.seed) });
    const clientFaults = faults(clientDynamo, options.clientFaults);
    const consumerFaults = faults(consumerDynamo, options.consumerFaults);
    const queues = new LocalQueues();
    const logs: string[] = [];
    const sink = (line: string) => void logs.push(line);
    const fatalMessages: FatalMessage[] = [];
    const events: ThresholdEvent[] = [];
    const deps = {
        config,
        dynamodb: consumerDynamo,
        streams: engine.streams(),
        fatal: { park: async (message: FatalMessage) => (fatalMessages.push(message), true) },
        sendEvents: async (sent: readonly ThresholdEvent[]) => (events.push(...sent), true),
        sink,
    };
    const consumer = createStreamHandler(deps);
    const redrive = createRedriveHandler(deps);
    const call = (event: StreamEvent) => consumer(event, untimedContext("consumer", 60_000));
    const invoke = options.wrapInvoke ? options.wrapInvoke(call) : call;
    const emulator = new MappingEmulator({
        streams: engine.streams(),
        streamArn,
        settings: { ...COMPONENT_SETTINGS, ...options.settings },
        invoke: invoke as never,
        onFailure: (record: OnFailureRecord) => void queues.send(FIRST_DLQ_URL, JSON.stringify(record)),
    });
    const client = new HybridCounterClient({ ...clientConfigOf(config), dynamodb: clientDynamo, deadlineMs: options.deadlineMs ?? 60_000 });
    const realNow = Date.now;
    let offsetMs = 0;
    const clock = {
        advance(ms: number) {
            offsetMs += ms;
            Date.now = () => realNow() + offsetMs;
        },
        get offsetMs() {
            return offsetMs;
        },
    };
    return {
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
        fatal: fatalMessages,
        events,
        logs,
        ...(clientFaults === undefined ? {} : { clientFaults }),
        ...(consumerFaults === undefined ? {} : { consumerFaults }),
        clock,
        drain: () => emulator.drain(),
        async redriveAll() {
            const messages = queues.receive(FIRST_DLQ_URL, 1_000);
            const failed = [];
            for (const message of messages) {
                const response = await redrive(
                    sqsEvent([message], "arn:aws:sqs:us-east-1:000000000000:first-dlq"),
                    untimedContext("redrive", 60_000),
                );
                if (response.batchItemFailures.some((f) => f.itemIdentifier === message.messageId)) {
                    failed.push(message);
                }
            }
            queues.release(FIRST_DLQ_URL, failed);
            return messages.length - failed.length;
        },
        settle: (settleOptions = {}) => settle({ config, dynamodb: reader, sendEvents: deps.sendEvents, ...settleOptions }),
        heal: (key) => healKey(key, { config, dynamodb: reader }),
        snapshot: (key) => snapshotKey(reader, config, key),
        close() {
            Date.now = realNow;
            for (const c of [reader, clientDynamo, consumerDynamo]) {
                c.destroy();
            }
        },
    };
}
