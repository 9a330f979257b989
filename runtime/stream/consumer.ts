/**
 * The stream consumer Lambda handler.
 *
 * Failure contract:
 * - A record that can never be counted (poison) is sent in full to the fatal queue, counted in the
 *   `PoisonRecords` metric, and the shard moves on.
 * - Work that cannot commit within the invocation (contention past the retry budget, throttling, a
 *   DynamoDB outage) is reported through ReportBatchItemFailures: the lowest uncounted record's
 *   SequenceNumber. Lambda redelivers from there; already-counted records are skipped by condition.
 * - The handler throws (a full batch failure, retried and bisected by Lambda) only when a poison
 *   record without a sequence number cannot be parked, or its configuration is wrong.
 */
import type { ConsumedCapacity, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from "aws-lambda";
import type { HandlerConfig } from "../shared/config";
import { countRecords, type CountOutcome } from "./counting";
import { sqsFatalQueue, type FatalQueue } from "./fatal";
import { jsonLogger, Metrics, stdoutSink, type LineSink, type Logger } from "../shared/telemetry";

export interface StreamHandlerDeps {
    readonly config: HandlerConfig;
    readonly dynamodb: DynamoDBClient;
    readonly sqs: SQSClient;
    /** Where logs and EMF metric lines go. Default: stdout. */
    readonly sink?: LineSink;
    /** Overrides the fatal queue built from `sqs` and `config.fatalQueueUrl`. */
    readonly fatal?: FatalQueue;
    readonly onConsumedCapacity?: (capacity: ConsumedCapacity[]) => void;
    /** False: one transaction per record (the paper's design), for comparison. @default true */
    readonly aggregate?: boolean;
}

/** The budget when no Lambda context says how long is left (local runs, tests). */
const DEFAULT_BUDGET_MS = 60_000;

export function remainingTime(context: Pick<Context, "getRemainingTimeInMillis"> | undefined): () => number {
    if (context && typeof context.getRemainingTimeInMillis === "function") {
        return () => context.getRemainingTimeInMillis();
    }
    const deadline = Date.now() + DEFAULT_BUDGET_MS;
    return () => deadline - Date.now();
}

export function createStreamHandler(
    deps: StreamHandlerDeps,
): (event: DynamoDBStreamEvent, context?: Context) => Promise<DynamoDBBatchResponse> {
    const sink = deps.sink ?? stdoutSink;
    const logger = jsonLogger("hybrid-counter-consumer", sink);
    const fatal = deps.fatal ?? sqsFatalQueue(deps.sqs, deps.config.fatalQueueUrl, logger);
    return async (event, context) => {
        const metrics = new Metrics(deps.config.metricsNamespace, "hybrid-counter-consumer", sink);
        try {
            const records: DynamoDBRecord[] = Array.isArray(event?.Records) ? event.Records : [];
            const outcome = await countRecords(records, {
                config: deps.config,
                dynamodb: deps.dynamodb,
                fatal,
                logger,
                metrics,
                remainingMs: remainingTime(context),
                onConsumedCapacity: deps.onConsumedCapacity,
                aggregate: deps.aggregate,
            });
            return batchResponse(outcome, metrics, logger);
        } finally {
            metrics.flush();
        }
    };
}

function batchResponse(outcome: CountOutcome, metrics: Metrics, logger: Logger): DynamoDBBatchResponse {
    logger.log("info", "batch processed", {
        counted: outcome.counted,
        duplicates: outcome.duplicates,
        ignored: outcome.ignored,
        poison: outcome.poison,
        checkpoint: outcome.failedSequenceNumber,
    });
    if (outcome.failedSequenceNumber === undefined) {
        return { batchItemFailures: [] };
    }
    metrics.add("BatchItemFailures");
    // Lambda checkpoints at the lowest reported sequence number and redelivers everything after it.
    return { batchItemFailures: [{ itemIdentifier: outcome.failedSequenceNumber }] };
}
