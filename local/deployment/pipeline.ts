/**
 * Invariant: every harness's consumer is the one the component deploys, built from its outputs.
 *
 * The stream path the bench, the sweep, the hot-tenant scenario and the hot-key ceiling run: the handler
 * reads the consumer's environment as the deployed function does (`handlerConfigFromEnv`), with the local
 * fatal queue's name in place of the queue URL, and the mapping emulator runs the stream mapping's settings
 * as the component declares them, on the deployment's stream, invoking the handler with the consumer's
 * timeout. A harness that differs says so through an option named for what it changes (the metrics
 * namespace, per-record transactions, a sweep point's batching), never through a copy of the settings.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { ENV, handlerConfigFromEnv, type HandlerConfig } from "../../runtime/shared/config";
import { createStreamHandler } from "../../runtime/stream/consumer";
import { lambdaContext } from "../aws/lambda-context";
import { MappingEmulator, type MappingEmulatorOptions, type MappingSettings } from "../aws/mapping-emulator";
import { LocalQueues } from "../aws/sqs";
import type { LocalDeployment } from "./deployment";

/** The fatal queue's name on the pipeline's LocalQueues: the consumer parks poison records there. */
export const LOCAL_FATAL_QUEUE = "local-fatal";
/** The on-failure destination's name on the pipeline's LocalQueues: the mapping sends a batch it gave up on there. */
export const LOCAL_FIRST_DLQ = "first-dlq";

/** The clients the pipeline runs on; meters, faults and commit watchers a harness attached to them stay on. */
export interface PipelineClients {
    /** The consumer's DynamoDB client. */
    readonly dynamodb: DynamoDBClient;
    /** The client the mapping reads the user's table's stream through. */
    readonly streams: DynamoDBStreamsClient;
}

export interface PipelineOptions {
    /** The function name of the Lambda context each invocation gets ("bench", "sweep"). */
    readonly functionName: string;
    /** Replaces the namespace of the consumer's metrics. @default the consumer's environment's */
    readonly metricsNamespace?: string;
    /** False: one transaction per record (the paper's consumer), for comparison. @default true */
    readonly aggregate?: boolean;
    /** Replaces the mapping's batch size and batching window (a sweep point); every other setting stays the component's. */
    readonly batching?: Pick<MappingSettings, "batchSize" | "maximumBatchingWindowInSeconds">;
    /** Called with every record the mapping read and will deliver, when GetRecords returned it. */
    readonly onRead?: MappingEmulatorOptions["onRead"];
    /** Called with every invocation's event and the handler's response, before the mapping acts on it. */
    readonly onInvoked?: (event: DynamoDBStreamEvent, response: DynamoDBBatchResponse) => void;
}

export interface LocalPipeline {
    /** The consumer's configuration, as the handler read it from its environment. */
    readonly config: HandlerConfig;
    /** The stream mapping's settings the emulator runs. */
    readonly settings: MappingSettings;
    /** The consumer handler, as the deployed function builds it. */
    readonly handler: (event: DynamoDBStreamEvent, context?: Context) => Promise<DynamoDBBatchResponse>;
    /** The stream mapping: the harness polls it, starts or delivers its batches, and drains it. */
    readonly emulator: MappingEmulator;
    /** Holds the fatal queue (LOCAL_FATAL_QUEUE) and the on-failure destination (LOCAL_FIRST_DLQ). */
    readonly queues: LocalQueues;
}

/**
 * The consumer's environment as the component deploys it, with the local fatal queue's name in place of the
 * queue URL (and `metricsNamespace`, when given, in place of the namespace).
 */
export function localConsumerEnvironment(deployment: LocalDeployment, metricsNamespace?: string): Record<string, string> {
    return {
        ...deployment.system.consumer.environment,
        [ENV.fatalQueueUrl]: LOCAL_FATAL_QUEUE,
        ...(metricsNamespace === undefined ? {} : { [ENV.metricsNamespace]: metricsNamespace }),
    };
}

/**
 * Builds the consumer from the deployment's consumer environment and the mapping emulator from its stream
 * mapping, on `clients`. Nothing runs until the harness polls the emulator. The handler's logs and metrics
 * are dropped (Lambda would send them to CloudWatch).
 */
export function startPipeline(deployment: LocalDeployment, clients: PipelineClients, options: PipelineOptions): LocalPipeline {
    const { system } = deployment;
    const config = handlerConfigFromEnv(localConsumerEnvironment(deployment, options.metricsNamespace));
    const settings: MappingSettings = { ...system.streamMapping, ...options.batching };
    const queues = new LocalQueues();
    const handler = createStreamHandler({
        config,
        dynamodb: clients.dynamodb,
        sqs: queues.client(),
        sink: () => undefined,
        aggregate: options.aggregate,
    });
    const emulator = new MappingEmulator({
        streams: clients.streams,
        streamArn: deployment.streamArn,
        settings,
        onRead: options.onRead,
        invoke: async (event: DynamoDBStreamEvent) => {
            const response = await handler(event, lambdaContext(options.functionName, system.consumer.timeoutSeconds * 1000));
            options.onInvoked?.(event, response);
            return response;
        },
        onFailure: (record) => {
            queues.send(LOCAL_FIRST_DLQ, JSON.stringify(record));
        },
    });
    return { config, settings, handler, emulator, queues };
}
