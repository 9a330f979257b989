/**
 * Invariant: every harness's functions are the ones the component deploys, configured by their own environments.
 *
 * The system behind the API, as the component deploys it, on the local servers: the consumer behind the mapping
 * emulator (the stream mapping's settings as declared, the tumbling window included), the first DLQ with the
 * component's redrive policy and the redrive behind it, the fatal queue, the settler, and (when the deployment has a
 * threshold topic) a topic on the local SNS server with an SQS subscription the harness reads. Each function reads its
 * environment as the deployed function does, with the local queue URLs and topic ARN in place of the deployed ones.
 * The functions are built from source on a client the harness gives (meters and faults attach to it), or are the
 * shipped bundles (local/deployment/bundles.ts). A harness that differs says so through an option named for what it
 * changes (the metrics namespace, a sweep point's batching), never through a copy of the settings.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { SNSClient } from "@aws-sdk/client-sns";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { bundlePathsUnder, findPackageRoot, type BundlePaths } from "../../components/bundles";
import { ENV, handlerConfigFromEnv, type HandlerConfig } from "../../runtime/shared/config";
import { createStreamHandler, type StreamEvent, type StreamResponse } from "../../runtime/stream/consumer";
import { createRedriveHandler } from "../../runtime/stream/redrive";
import { sqsFatalQueue } from "../../runtime/stream/fatal";
import { snsEventSink } from "../../runtime/limits/publish";
import { settle, type SettleReport } from "../../runtime/heal/settle";
import { settlerConfigFromEnv } from "../../runtime/heal/settler-config";
import { jsonLogger, type LineSink } from "../../runtime/shared/telemetry";
import { lambdaContext } from "../aws/lambda-context";
import { MappingEmulator, type MappingEmulatorOptions, type MappingSettings, type StreamInvokeEvent } from "../aws/mapping-emulator";
import { pollQueueOnce, type LocalQueue, type LocalSqs } from "../aws/sqs";
import { TopicInbox } from "../aws/topic-inbox";
import type { ThresholdEvent } from "../../runtime/limits/thresholds";
import { loadBundle } from "./bundles";
import type { LocalDeployment } from "./deployment";

/** The functions built from source, on `dynamodb` (the consumer's, the redrive's and the settler's client). */
export interface SourceFunctions {
    readonly kind: "source";
    readonly dynamodb: DynamoDBClient;
    /** Where the functions' log and metric lines go. @default dropped (Lambda sends them to CloudWatch) */
    readonly sink?: LineSink;
}

/** The shipped bundles, each with SDK clients of its own sent to `dynamodbEndpoint` and the local SQS server. */
export interface BundledFunctions {
    readonly kind: "bundles";
    readonly dynamodbEndpoint: string;
    /** @default the package's dist/bundles */
    readonly paths?: BundlePaths;
}

export interface PipelineOptions {
    /** The local SQS and SNS server: the queues and the threshold topic are created there. */
    readonly sqs: LocalSqs;
    /** The client the mapping reads the user's table's stream through. */
    readonly streams: DynamoDBStreamsClient;
    readonly functions: SourceFunctions | BundledFunctions;
    /** Names the queues and the topic, so that several pipelines share one server. @default the user's table's name */
    readonly prefix?: string;
    /** Replaces the namespace of the functions' metrics. @default their environment's */
    readonly metricsNamespace?: string;
    /** Replaces the mapping's batch size and batching window (a sweep point); every other setting stays the component's. */
    readonly batching?: Pick<MappingSettings, "batchSize" | "maximumBatchingWindowInSeconds">;
    /** The first DLQ's visibility timeout (s), short so a failed redrive comes back within a run. @default 2 */
    readonly visibilityTimeoutSeconds?: number;
    /** Called with every record the mapping read and will deliver, when GetRecords returned it. */
    readonly onRead?: MappingEmulatorOptions["onRead"];
    /** Called with every invocation's event and the consumer's response, before the mapping acts on it. */
    readonly onInvoked?: (event: StreamInvokeEvent, response: StreamResponse) => void;
    /** Wraps every invocation of a function (a harness mutes the bundles' stdout this way). */
    readonly around?: <R>(invocation: () => Promise<R>) => Promise<R>;
}

/** The environments the functions run with: the deployed ones, local queue URLs and topic ARN in place. */
export interface LocalEnvironments {
    readonly consumer: Record<string, string>;
    readonly redrive: Record<string, string>;
    readonly settler?: Record<string, string>;
}

export interface LocalPipeline {
    /** The consumer's configuration, as it reads its (local) environment. */
    readonly config: HandlerConfig;
    /** The stream mapping's settings the emulator runs. */
    readonly settings: MappingSettings;
    readonly environments: LocalEnvironments;
    readonly consumer: (event: StreamEvent) => Promise<StreamResponse>;
    readonly redrive: (event: SQSEvent) => Promise<SQSBatchResponse>;
    /** One settler run; undefined when the component deploys no settler. */
    readonly settler?: () => Promise<SettleReport>;
    /** The functions' DynamoDB clients (one shared client when built from source). */
    readonly clients: { readonly consumer: DynamoDBClient; readonly redrive: DynamoDBClient; readonly settler?: DynamoDBClient };
    /** The stream mapping: the harness polls it, starts or delivers its batches, and drains it. */
    readonly emulator: MappingEmulator;
    readonly queues: { readonly first: LocalQueue; readonly fatal: LocalQueue };
    /** The threshold topic's subscription; undefined when the deployment has no topic. */
    readonly thresholds?: TopicInbox<ThresholdEvent>;
    /** Batches the mapping sent to the first DLQ, and first-DLQ messages the redrive applied. */
    readonly counts: { toFirstDlq: number; redriven: number };
    /** One pass of the first DLQ's mapping: receive, invoke the redrive, delete what it applied. */
    redrivePass(): Promise<void>;
    /** Messages in a queue, visible or in flight. */
    depth(queue: LocalQueue): Promise<number>;
    /** Polls, delivers and redrives until the stream, the mapping and the first DLQ are all empty. */
    drain(timeoutMs?: number): Promise<void>;
    /**
     * Runs the mapping's poller (the function runs while the next page is read, as Lambda's poller does), the first
     * DLQ's, and the topic's subscriber, until `done()`; then waits for the invocations in flight.
     */
    runUntil(done: () => boolean): Promise<void>;
    /** Releases the SDK clients the pipeline made. */
    close(): void;
}

/** The deployed environments with the local queue URLs and topic ARN (and `metricsNamespace`, when given). */
export function localEnvironments(
    deployment: LocalDeployment,
    local: { readonly fatalQueueUrl: string; readonly thresholdTopicArn?: string; readonly metricsNamespace?: string },
): LocalEnvironments {
    const { system } = deployment;
    const localize = (environment: Record<string, string>): Record<string, string> => ({
        ...environment,
        ...(environment[ENV.fatalQueueUrl] === undefined ? {} : { [ENV.fatalQueueUrl]: local.fatalQueueUrl }),
        ...(environment[ENV.thresholdTopicArn] === undefined || local.thresholdTopicArn === undefined
            ? {}
            : { [ENV.thresholdTopicArn]: local.thresholdTopicArn }),
        ...(local.metricsNamespace === undefined ? {} : { [ENV.metricsNamespace]: local.metricsNamespace }),
    });
    return {
        consumer: localize(system.consumer.environment),
        redrive: localize(system.redrive.environment),
        ...(system.settler === undefined ? {} : { settler: localize(system.settler.function.environment) }),
    };
}

interface Functions {
    readonly consumer: (event: StreamEvent, context: ReturnType<typeof lambdaContext>) => Promise<StreamResponse>;
    readonly redrive: (event: SQSEvent, context: ReturnType<typeof lambdaContext>) => Promise<SQSBatchResponse>;
    readonly settler?: () => Promise<SettleReport>;
    readonly clients: LocalPipeline["clients"];
    readonly made: Array<{ destroy(): void }>;
}

/** The functions from source: the handlers' factories with the deps each entry point gives them. */
function sourceFunctions(
    environments: LocalEnvironments,
    streams: DynamoDBStreamsClient,
    server: LocalSqs,
    source: SourceFunctions,
): Functions {
    const sink = source.sink ?? (() => undefined);
    const sqs: SQSClient = server.client();
    const sns: SNSClient = server.sns();
    const deps = (environment: Record<string, string>, service: string) => {
        const config = handlerConfigFromEnv(environment);
        const logger = jsonLogger(service, sink);
        const topic = config.thresholdTopicArn;
        return {
            config,
            dynamodb: source.dynamodb,
            streams,
            fatal: sqsFatalQueue(sqs, config.fatalQueueUrl, logger),
            sendEvents: topic === undefined ? async () => true : snsEventSink(sns, topic, logger),
            sink,
        };
    };
    const settlerEnvironment = environments.settler;
    const settler =
        settlerEnvironment === undefined
            ? undefined
            : () => {
                  const config = settlerConfigFromEnv(settlerEnvironment);
                  const topic = config.thresholdTopicArn;
                  const sendEvents = topic === undefined ? undefined : snsEventSink(sns, topic, jsonLogger("hybrid-counter-settler", sink));
                  return settle({
                      config,
                      dynamodb: source.dynamodb,
                      keyBudget: config.keyBudget,
                      auditItems: config.auditItems,
                      ...(sendEvents ? { sendEvents } : {}),
                  });
              };
    return {
        consumer: createStreamHandler(deps(environments.consumer, "hybrid-counter-consumer")),
        redrive: createRedriveHandler(deps(environments.redrive, "hybrid-counter-redrive")),
        ...(settler === undefined ? {} : { settler }),
        clients: { consumer: source.dynamodb, redrive: source.dynamodb, ...(settler === undefined ? {} : { settler: source.dynamodb }) },
        made: [sqs, sns],
    };
}

/** The shipped bundles, each loaded with its environment. */
function bundledFunctions(environments: LocalEnvironments, server: LocalSqs, bundled: BundledFunctions): Functions {
    const paths = bundled.paths ?? bundlePathsUnder(findPackageRoot(__dirname));
    const endpoints = { dynamodb: bundled.dynamodbEndpoint, messaging: server.endpoint };
    const consumer = loadBundle<Functions["consumer"]>(paths.streamConsumer, environments.consumer, endpoints);
    const redrive = loadBundle<Functions["redrive"]>(paths.redrive, environments.redrive, endpoints);
    const settler =
        environments.settler === undefined
            ? undefined
            : loadBundle<() => Promise<SettleReport>>(paths.settler, environments.settler, endpoints);
    return {
        consumer: consumer.handler,
        redrive: redrive.handler,
        ...(settler === undefined ? {} : { settler: settler.handler }),
        clients: {
            consumer: consumer.clients.dynamodb,
            redrive: redrive.clients.dynamodb,
            ...(settler === undefined ? {} : { settler: settler.clients.dynamodb }),
        },
        made: [],
    };
}

/**
 * Creates the queues (and the topic with its subscription) on the local server, builds the functions from the
 * deployment's environments, and the mapping emulator from its stream mapping. Nothing runs until the harness polls
 * the emulator.
 */
export async function startPipeline(deployment: LocalDeployment, options: PipelineOptions): Promise<LocalPipeline> {
    const { system } = deployment;
    const server = options.sqs;
    const prefix = options.prefix ?? system.table.name;
    const fatal = await server.createQueue(`${prefix}-fatal`);
    const first = await server.createQueue(`${prefix}-first`, {
        VisibilityTimeout: String(options.visibilityTimeoutSeconds ?? 2),
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: fatal.arn, maxReceiveCount: system.maxReceiveCount }),
    });
    const thresholds =
        system.thresholdTopicArn === undefined ? undefined : await TopicInbox.start<ThresholdEvent>(server, `${prefix}-thresholds`);
    const environments = localEnvironments(deployment, {
        fatalQueueUrl: fatal.url,
        ...(thresholds === undefined ? {} : { thresholdTopicArn: thresholds.topicArn }),
        ...(options.metricsNamespace === undefined ? {} : { metricsNamespace: options.metricsNamespace }),
    });
    const functions =
        options.functions.kind === "source"
            ? sourceFunctions(environments, options.streams, server, options.functions)
            : bundledFunctions(environments, server, options.functions);
    const around = options.around ?? (<R>(invocation: () => Promise<R>) => invocation());
    const sqs = server.client();
    const counts = { toFirstDlq: 0, redriven: 0 };
    const settings: MappingSettings = { ...system.streamMapping, ...options.batching };
    const consume = (event: StreamEvent) =>
        around(() => functions.consumer(event, lambdaContext(system.consumer.name, system.consumer.timeoutSeconds * 1000)));
    const emulator = new MappingEmulator({
        streams: options.streams,
        streamArn: deployment.streamArn,
        settings,
        functionArn: `arn:aws:lambda:ddblocal:000000000000:function:${system.consumer.name}`,
        ...(options.onRead === undefined ? {} : { onRead: options.onRead }),
        invoke: async (event) => {
            const response = await consume(event);
            options.onInvoked?.(event, response);
            return response;
        },
        onFailure: async (record) => {
            await sqs.send(new SendMessageCommand({ QueueUrl: first.url, MessageBody: JSON.stringify(record) }));
            counts.toFirstDlq++;
        },
    });
    const redrive = (event: SQSEvent) =>
        around(() => functions.redrive(event, lambdaContext(system.redrive.name, system.redrive.timeoutSeconds * 1000)));
    const settler = functions.settler;
    const pipeline: LocalPipeline = {
        config: handlerConfigFromEnv(environments.consumer),
        settings,
        environments,
        consumer: consume,
        redrive,
        ...(settler === undefined ? {} : { settler: () => around(settler) }),
        clients: functions.clients,
        emulator,
        queues: { first, fatal },
        ...(thresholds === undefined ? {} : { thresholds }),
        counts,
        async redrivePass() {
            counts.redriven += (await pollQueueOnce(sqs, first, system.redriveBatchSize, redrive)).deleted;
        },
        depth: (queue) => queueDepth(sqs, queue),
        drain: (timeoutMs) => drainPipeline(pipeline, timeoutMs),
        runUntil: (done) => runPipeline(pipeline, done),
        close() {
            for (const client of [sqs, ...functions.made]) {
                client.destroy();
            }
            thresholds?.close();
        },
    };
    return pipeline;
}

async function queueDepth(sqs: SQSClient, queue: LocalQueue): Promise<number> {
    const { Attributes: a } = await sqs.send(
        new GetQueueAttributesCommand({
            QueueUrl: queue.url,
            AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        }),
    );
    return Number(a?.ApproximateNumberOfMessages ?? 0) + Number(a?.ApproximateNumberOfMessagesNotVisible ?? 0);
}

async function runPipeline(pipeline: LocalPipeline, done: () => boolean): Promise<void> {
    while (!done()) {
        const read = await pipeline.emulator.poll();
        pipeline.emulator.start();
        await pipeline.redrivePass();
        await pipeline.thresholds?.receive();
        if (read === 0) {
            await new Promise((r) => setTimeout(r, 25));
        }
    }
    await pipeline.emulator.settled();
}

/**
 * The stream drained, the first DLQ redriven (a failed message comes back after its visibility timeout, or moves to
 * the fatal queue), and what that wrote drained too. Throws after `timeoutMs`.
 */
async function drainPipeline(pipeline: LocalPipeline, timeoutMs = 120_000): Promise<void> {
    const by = Date.now() + timeoutMs;
    for (;;) {
        await pipeline.emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
        await pipeline.redrivePass();
        if ((await pipeline.depth(pipeline.queues.first)) === 0 && pipeline.emulator.backlog === 0) {
            await pipeline.emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
            return;
        }
        if (Date.now() > by) {
            throw new Error(`the pipeline did not drain within ${timeoutMs} ms (backlog ${pipeline.emulator.backlog})`);
        }
        await new Promise((r) => setTimeout(r, 200));
    }
}
