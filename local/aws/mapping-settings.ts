/**
 * An event source mapping's settings for a DynamoDB stream, as Lambda takes them (its defaults, and what it refuses),
 * the event it delivers and the record it sends an on-failure destination; and the figures the emulator
 * (mapping-emulator.ts) keeps while it runs them.
 */
import type { DynamoDBStreamEvent } from "aws-lambda";
import { parsePattern } from "./filter";

export interface MappingSettings {
    readonly batchSize: number;
    readonly maximumBatchingWindowInSeconds: number;
    readonly parallelizationFactor: number;
    /** -1: retry until the record expires. */
    readonly maximumRetryAttempts: number;
    /** -1: no age limit. */
    readonly maximumRecordAgeInSeconds: number;
    readonly bisectBatchOnFunctionError: boolean;
    readonly reportBatchItemFailures: boolean;
    /** Filter criteria patterns (JSON strings); empty: every record is delivered. */
    readonly filterPatterns: readonly string[];
    readonly startingPosition: "TRIM_HORIZON" | "LATEST";
    /**
     * A tumbling window (1..900 s; 0: none). With one, every event names its shard, window and state, the function must
     * answer with a `state`, and each window ends with a final invocation of its own.
     */
    readonly tumblingWindowInSeconds: number;
}

/** What Lambda does when a setting is left unset (FACTS: the documented defaults). */
export const LAMBDA_DEFAULTS: MappingSettings = Object.freeze({
    batchSize: 100,
    maximumBatchingWindowInSeconds: 0,
    parallelizationFactor: 1,
    maximumRetryAttempts: -1,
    maximumRecordAgeInSeconds: -1,
    bisectBatchOnFunctionError: false,
    reportBatchItemFailures: false,
    filterPatterns: [],
    startingPosition: "TRIM_HORIZON",
    tumblingWindowInSeconds: 0,
});

/** The record Lambda sends to an SQS on-failure destination: metadata only, never the records. */
export interface OnFailureRecord {
    readonly requestContext: {
        readonly requestId: string;
        readonly functionArn: string;
        readonly condition: "RetryAttemptsExhausted" | "RecordAgeExceeded";
        readonly approximateInvokeCount: number;
    };
    readonly responseContext: {
        readonly statusCode: number;
        readonly executedVersion: string;
        readonly functionError?: string;
    };
    readonly version: "1.0";
    readonly timestamp: string;
    readonly DDBStreamBatchInfo: {
        readonly shardId: string;
        readonly startSequenceNumber: string;
        readonly endSequenceNumber: string;
        readonly approximateArrivalOfFirstRecord: string;
        readonly approximateArrivalOfLastRecord: string;
        readonly batchSize: number;
        readonly streamArn: string;
    };
}

export function validateSettings(settings: MappingSettings): string[] {
    const problems: string[] = [];
    const range = (field: keyof MappingSettings, value: number, min: number, max: number, allowMinusOne = false) => {
        if (!Number.isInteger(value) || ((value < min || value > max) && !(allowMinusOne && value === -1))) {
            problems.push(`[${field}] must be an integer from ${min} to ${max}${allowMinusOne ? " or -1" : ""}`);
        }
    };
    range("batchSize", settings.batchSize, 1, 10_000);
    range("maximumBatchingWindowInSeconds", settings.maximumBatchingWindowInSeconds, 0, 300);
    range("parallelizationFactor", settings.parallelizationFactor, 1, 10);
    range("maximumRetryAttempts", settings.maximumRetryAttempts, 0, 10_000, true);
    range("maximumRecordAgeInSeconds", settings.maximumRecordAgeInSeconds, 60, 604_800, true);
    if (settings.tumblingWindowInSeconds !== 0) {
        range("tumblingWindowInSeconds", settings.tumblingWindowInSeconds, 1, 900);
    }
    for (const [i, p] of settings.filterPatterns.entries()) {
        try {
            parsePattern(p);
        } catch (error) {
            problems.push(`[filterPatterns[${i}]] ${(error as Error).message}`);
        }
    }
    return problems;
}

/** The event a mapping delivers: the records, and under a tumbling window the shard, window and state. */
export type StreamInvokeEvent = DynamoDBStreamEvent & {
    readonly shardId?: string;
    readonly eventSourceARN?: string;
    readonly window?: { readonly start: string; readonly end: string };
    readonly state?: Record<string, string>;
    readonly isFinalInvokeForWindow?: boolean;
    readonly isWindowTerminatedEarly?: boolean;
};

export interface MappingStats {
    invocations: number;
    functionErrors: number;
    partialFailures: number;
    recordsRead: number;
    recordsFiltered: number;
    recordsDelivered: number;
    bisections: number;
    batchesToOnFailure: number;
    recordsToOnFailure: number;
    /** Wall time spent reading the stream and inside the function, in milliseconds. */
    pollMs: number;
    invokeMs: number;
    /** GetRecords calls and the engine's time answering them: the stream's own part of the lag. */
    getRecordsCalls: number;
    getRecordsMs: number;
    getRecordsMaxMs: number;
    /** Shards seen in the stream's description (more than one: the stream rolled over to a child shard). */
    shardsSeen: number;
    /**
     * Iterators taken again after the engine refused one (TrimmedDataAccessException, ExpiredIteratorException):
     * DynamoDB Local numbers stream records across all its tables, so an iterator taken on a still-empty shard is
     * refused once another table's stream moved on. The read resumes after the last record read, losing nothing.
     */
    iteratorsRenewed: number;
    /** GetRecords calls that failed with any other error; the shard is read again at the next poll. */
    readErrors: number;
    /** The last such error, as `Name: message`; undefined while none. */
    lastReadError?: string;
}
