/**
 * The redrive Lambda handler: drains the first dead-letter queue.
 *
 * Lambda's on-failure destination receives metadata only (the stream shard and the sequence range of a batch that
 * exhausted its retries). The consumer applies such records itself when its shard's next batch arrives (progress.ts);
 * the redrive does it when no next batch comes. It applies every record of the message's shard from the shard's
 * frontier to the message's end, re-read from the stream, exactly as the consumer does (consumer.ts): so no key's
 * mark passes a record left unapplied, whichever of the two gets there first, and records applied twice change
 * nothing the first did not.
 *
 * Failure contract, per message:
 * - Applied (or found applied): the message is deleted.
 * - Could not apply yet (throttling, an outage): reported in batchItemFailures; SQS delivers it again and, after the
 *   queue's maxReceiveCount, moves it to the fatal queue.
 * - The records are gone (older than 24 hours): a records-expired message goes to the fatal queue (the keys need a
 *   reconcile) and the range is closed. A message that is not a batch of this table's stream goes there as
 *   malformed-redrive-message. If the fatal queue refuses, the message is reported failed.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import type { HandlerConfig } from "../shared/config";
import { MalformedRedriveMessageError } from "../shared/errors";
import { jsonLogger, Metrics, stdoutSink, type LineSink } from "../shared/telemetry";
import { applyAfter, Frontiers, readSkipped, remainingTime, SPAN_MAX_RECORDS, type ShardRun, type StreamHandlerDeps } from "./consumer";
import { readFrontier } from "./progress";
import { compareSequences } from "./records";
import type { EventSink } from "./apply";
import type { FatalQueue } from "./fatal";

export interface RedriveHandlerDeps {
    readonly config: HandlerConfig;
    readonly dynamodb: DynamoDBClient;
    readonly streams: DynamoDBStreamsClient;
    readonly fatal: FatalQueue;
    readonly sendEvents: EventSink;
    readonly sink?: LineSink;
}

/** A batch Lambda gave up on, as its on-failure record names it. */
export interface BatchInfo {
    readonly streamArn: string;
    readonly shardId: string;
    readonly startSequenceNumber: string;
    readonly endSequenceNumber: string;
}

/** Parses Lambda's on-failure record for a stream batch; throws MalformedRedriveMessageError naming the field. */
export function parseBatchInfo(body: string, tableName: string): BatchInfo {
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
        startSequenceNumber: text("startSequenceNumber", /^\d{1,40}$/),
        endSequenceNumber: text("endSequenceNumber", /^\d{1,40}$/),
    };
}

/** Applies every record of `info`'s shard from its frontier to the message's end; false when that could not be done yet. */
export async function redriveRange(info: BatchInfo, run: ShardRun): Promise<boolean> {
    const { config, dynamodb } = run.deps;
    const frontier = await readFrontier(config, dynamodb, info.shardId);
    if (frontier !== undefined && compareSequences(frontier, info.endSequenceNumber) >= 0) {
        return true;
    }
    const span = await readSkipped({ after: frontier, until: info.endSequenceNumber, inclusive: true, max: SPAN_MAX_RECORDS }, run);
    if (span === undefined) {
        return false;
    }
    const records = span.records;
    const failedFrom = await applyAfter(frontier, records, run, true);
    if (failedFrom !== undefined || !span.complete) {
        // Not all applied yet: the message comes back, and the next receive goes on from the frontier.
        return false;
    }
    // Every record up to the message's end is applied (those the stream no longer held went to the fatal queue).
    if (records.length === 0 || compareSequences(records.at(-1)!.dynamodb!.SequenceNumber!, info.endSequenceNumber) < 0) {
        await run.frontiers.advance(info.shardId, info.endSequenceNumber, 0, true);
    }
    return true;
}

export function createRedriveHandler(deps: RedriveHandlerDeps): (event: SQSEvent, context?: Context) => Promise<SQSBatchResponse> {
    const sink = deps.sink ?? stdoutSink;
    const logger = jsonLogger("hybrid-counter-redrive", sink);
    const frontiers = new Frontiers(deps);
    const redriveOne = async (message: SQSRecord, metrics: Metrics, remainingMs: () => number): Promise<boolean> => {
        let info: BatchInfo;
        try {
            info = parseBatchInfo(message.body, deps.config.tableName);
        } catch (error) {
            const problem = error instanceof MalformedRedriveMessageError ? error.message : String(error);
            logger.log("error", "redrive message is not a batch of this table's stream", { messageId: message.messageId, problem });
            return deps.fatal.park({
                reason: "malformed-redrive-message",
                problem,
                detail: { messageId: message.messageId, body: message.body },
            });
        }
        const run: ShardRun = {
            deps: deps as StreamHandlerDeps,
            shardId: info.shardId,
            streamArn: info.streamArn,
            logger,
            metrics,
            remainingMs,
            frontiers,
        };
        try {
            return await redriveRange(info, run);
        } catch (error) {
            logger.log("warn", "could not redrive the range; it will be retried", { ...info, error: String(error) });
            return false;
        }
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
