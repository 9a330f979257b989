/**
 * The redrive Lambda handler: drains the first dead-letter queue.
 *
 * Lambda's on-failure destination receives metadata only (the shard and the sequence range of the
 * batch that exhausted its retries), so the redrive re-reads those records from the stream and
 * counts them with the same logic as the consumer. Counting is idempotent, so records of the range
 * that were counted before are skipped.
 *
 * Failure contract, per message:
 * - Counted: the message is deleted.
 * - Could not count yet (contention, throttling, an outage): reported in batchItemFailures; SQS
 *   redelivers it after the visibility timeout and moves it to the fatal queue after the queue's
 *   maxReceiveCount.
 * - The records are gone (stream retention is 24 hours, or the stream was deleted), or the message
 *   does not describe a batch of this table's stream: a plain message for operators is sent to the
 *   fatal queue and the message is deleted. If that send fails, the message is reported as failed.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import type { HandlerConfig } from "../shared/config";
import { remainingTime } from "./consumer";
import { describeError } from "../shared/aws-errors";
import { countRecords } from "./counting";
import { MalformedRedriveMessageError } from "../shared/errors";
import { sqsFatalQueue, type FatalQueue } from "./fatal";
import { readRange, type SequenceRange } from "./stream-reader";
import { jsonLogger, Metrics, stdoutSink, type LineSink } from "../shared/telemetry";

export interface RedriveHandlerDeps {
    readonly config: HandlerConfig;
    readonly dynamodb: DynamoDBClient;
    readonly streams: DynamoDBStreamsClient;
    readonly sqs: SQSClient;
    readonly sink?: LineSink;
    readonly fatal?: FatalQueue;
}

/**
 * Errors of the Streams API that mean the records can no longer be read. (An expired iterator only
 * means the read took too long: it is retried like any other failure.)
 */
const GONE = new Set(["TrimmedDataAccessException", "ResourceNotFoundException"]);

/**
 * Parses the on-failure record Lambda sends for a stream batch. Throws MalformedRedriveMessageError
 * naming the field when it is not one, or when it names another table's stream.
 */
export function parseBatchInfo(body: string, tableName: string): SequenceRange & { batchSize?: number } {
    let parsed: unknown;
    try {
        parsed = JSON.parse(body);
    } catch {
        throw new MalformedRedriveMessageError("body", "is not JSON");
    }
    const info = (parsed as { DDBStreamBatchInfo?: Record<string, unknown> } | null)?.DDBStreamBatchInfo;
    if (info === null || typeof info !== "object") {
        throw new MalformedRedriveMessageError("DDBStreamBatchInfo", "is missing");
    }
    const text = (field: string, pattern: RegExp): string => {
        const value = info[field];
        if (typeof value !== "string" || !pattern.test(value)) {
            throw new MalformedRedriveMessageError(`DDBStreamBatchInfo.${field}`, `must match ${pattern}`);
        }
        return value;
    };
    const streamArn = text("streamArn", /^arn:[^:]+:dynamodb:[^:]*:[^:]*:table\/[^/]+\/stream\/.+$/);
    const table = streamArn.split(":table/")[1]!.split("/stream/")[0];
    if (table !== tableName) {
        throw new MalformedRedriveMessageError("DDBStreamBatchInfo.streamArn", `names table "${table}", not "${tableName}"`);
    }
    return {
        streamArn,
        shardId: text("shardId", /^[\w.-]{1,128}$/),
        startSequenceNumber: text("startSequenceNumber", /^\d{1,64}$/),
        endSequenceNumber: text("endSequenceNumber", /^\d{1,64}$/),
        batchSize: typeof info.batchSize === "number" ? info.batchSize : undefined,
    };
}

export function createRedriveHandler(deps: RedriveHandlerDeps): (event: SQSEvent, context?: Context) => Promise<SQSBatchResponse> {
    const sink = deps.sink ?? stdoutSink;
    const logger = jsonLogger("hybrid-counter-redrive", sink);
    const fatal = deps.fatal ?? sqsFatalQueue(deps.sqs, deps.config.fatalQueueUrl, logger);

    const redriveOne = async (message: SQSRecord, metrics: Metrics, remainingMs: () => number): Promise<boolean> => {
        let range: SequenceRange;
        try {
            range = parseBatchInfo(message.body, deps.config.tableName);
        } catch (error) {
            const problem = error instanceof MalformedRedriveMessageError ? error.message : String(error);
            logger.log("error", "redrive message is not a batch of this table's stream", { messageId: message.messageId, problem });
            return fatal.park({
                reason: "malformed-redrive-message",
                problem,
                detail: { messageId: message.messageId, body: message.body },
            });
        }
        let records;
        try {
            records = await readRange(deps.streams, range);
        } catch (error) {
            const name = error instanceof Error ? error.name : "";
            if (!GONE.has(name)) {
                logger.log("warn", "could not read the batch from the stream; will retry", { ...range, error: describeError(error) });
                return false;
            }
            metrics.add("BatchesExpired");
            logger.log("error", "dead-lettered records are no longer in the stream", { ...range, error: name });
            return fatal.park({
                reason: "records-expired",
                problem:
                    `The records ${range.startSequenceNumber} to ${range.endSequenceNumber} of shard ${range.shardId} ` +
                    `could not be read from the stream (${name}): DynamoDB keeps stream records for 24 hours. ` +
                    `They were never counted, so the eventual counter of the keys they touched may be off until it is ` +
                    `reconciled from the table (see docs/operating.md, "Operating it").`,
                detail: { ...range, messageId: message.messageId, onFailureRecord: safeJson(message.body) },
            });
        }
        const outcome = await countRecords(records, {
            config: deps.config,
            dynamodb: deps.dynamodb,
            fatal,
            logger,
            metrics,
            remainingMs,
        });
        if (outcome.failedSequenceNumber !== undefined) {
            logger.log("warn", "redriven batch not fully counted; will retry", { ...range, checkpoint: outcome.failedSequenceNumber });
            return false;
        }
        metrics.add("BatchesRedriven");
        logger.log("info", "batch redriven", {
            ...range,
            records: records.length,
            counted: outcome.counted,
            duplicates: outcome.duplicates,
        });
        return true;
    };

    return async (event, context) => {
        const metrics = new Metrics(deps.config.metricsNamespace, "hybrid-counter-redrive", sink);
        const remainingMs = remainingTime(context);
        const failures: SQSBatchResponse["batchItemFailures"] = [];
        try {
            for (const message of event?.Records ?? []) {
                if (!(await redriveOne(message, metrics, remainingMs))) {
                    failures.push({ itemIdentifier: message.messageId });
                }
            }
        } finally {
            metrics.add("BatchItemFailures", failures.length);
            metrics.flush();
        }
        return { batchItemFailures: failures };
    };
}

function safeJson(body: string): unknown {
    try {
        return JSON.parse(body);
    } catch {
        return body;
    }
}
