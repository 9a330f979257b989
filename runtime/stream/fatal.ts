/**
 * The fatal queue: where the pipeline parks what it can never count by itself, for operators.
 *
 * Lambda's on-failure destination carries only batch metadata, so records the consumer gives up on
 * (poison) are sent here in full by the handler itself. The redrive handler sends a plain message
 * here when the records a dead-lettered batch names have expired from the stream.
 */
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { AttributeValue as SdkAttributeValue } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import type { Logger } from "../shared/telemetry";

/** SQS's classic message size limit. Larger messages are trimmed to their keys, never dropped. */
export const MAX_MESSAGE_BYTES = 256 * 1024;

/** The reason of an item too large for any transaction beside its counter; its records are sent in full. */
export const ITEM_TOO_LARGE = "item-too-large";

export interface FatalMessage {
    /**
     * What kind of failure: "poison-record", "poison-item", "records-expired", "malformed-redrive-message",
     * or "item-too-large" (an item too large for any transaction beside its counter: its records in full).
     */
    readonly reason: string;
    /** A sentence an operator can act on, naming the field or range at fault. */
    readonly problem: string;
    readonly counterKey?: string;
    readonly id?: string;
    readonly item?: Record<string, SdkAttributeValue>;
    readonly records?: readonly DynamoDBRecord[];
    /** Anything else the operator needs (the on-failure metadata of an expired batch). */
    readonly detail?: unknown;
}

export interface FatalQueue {
    /** Sends the message; resolves false (never throws) when it could not be sent. */
    park(message: FatalMessage): Promise<boolean>;
}

/** The message body as sent: the message, with a timestamp, trimmed to the SQS size limit. */
export function fatalMessageBody(message: FatalMessage, now = new Date()): string {
    const full = JSON.stringify({ ...message, parkedAt: now.toISOString() });
    if (Buffer.byteLength(full, "utf8") <= MAX_MESSAGE_BYTES) {
        return full;
    }
    // Keep what identifies the records (keys, sequence numbers, event names) and say what was cut.
    const records = (message.records ?? []).map((r) => ({
        eventID: r?.eventID,
        eventName: r?.eventName,
        eventSourceARN: r?.eventSourceARN,
        dynamodb: { Keys: r?.dynamodb?.Keys, SequenceNumber: r?.dynamodb?.SequenceNumber, SizeBytes: r?.dynamodb?.SizeBytes },
    }));
    const trimmed = JSON.stringify({
        ...message,
        item: undefined,
        records,
        truncated: "images removed to fit the queue's message size limit; read the items from the table by key",
        parkedAt: now.toISOString(),
    });
    if (Buffer.byteLength(trimmed, "utf8") <= MAX_MESSAGE_BYTES) {
        return trimmed;
    }
    return JSON.stringify({
        reason: message.reason,
        problem: message.problem.slice(0, 4096),
        counterKey: message.counterKey?.slice(0, 2048),
        id: message.id?.slice(0, 1024),
        sequenceNumbers: records.map((r) => r.dynamodb.SequenceNumber),
        truncated: "record contents removed to fit the queue's message size limit",
        parkedAt: now.toISOString(),
    });
}

export function sqsFatalQueue(sqs: SQSClient, queueUrl: string, logger: Logger): FatalQueue {
    return {
        async park(message) {
            try {
                await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: fatalMessageBody(message) }));
                return true;
            } catch (error) {
                logger.log("error", "could not send to the fatal queue", {
                    reason: message.reason,
                    error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
                });
                return false;
            }
        },
    };
}
