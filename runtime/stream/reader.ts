/**
 * Reads DynamoDB stream records through the Streams API and turns them into the records a Lambda stream event carries.
 * Used to re-read the records Lambda gave up on (the consumer's span after the frontier, the redrive's) and by the local
 * mapping emulator.
 */
import {
    GetRecordsCommand,
    GetShardIteratorCommand,
    type AttributeValue as StreamAttributeValue,
    type DynamoDBStreamsClient,
    type _Record as StreamsRecord,
} from "@aws-sdk/client-dynamodb-streams";
import type { AttributeValue, DynamoDBRecord } from "aws-lambda";
import { compareSequences } from "./records";

/** Converts an SDK attribute value (binary as bytes) to the JSON form Lambda delivers (binary as base64). */
export function toLambdaAttribute(value: StreamAttributeValue): AttributeValue {
    if (value.B !== undefined) {
        return { B: Buffer.from(value.B).toString("base64") };
    }
    if (value.BS !== undefined) {
        return { BS: value.BS.map((b) => Buffer.from(b).toString("base64")) };
    }
    if (value.L !== undefined) {
        return { L: value.L.map(toLambdaAttribute) };
    }
    if (value.M !== undefined) {
        return { M: toLambdaImage(value.M) ?? {} };
    }
    return value as AttributeValue;
}

function toLambdaImage(image: Record<string, StreamAttributeValue> | undefined): Record<string, AttributeValue> | undefined {
    if (image === undefined) {
        return undefined;
    }
    return Object.fromEntries(Object.entries(image).map(([k, v]) => [k, toLambdaAttribute(v)]));
}

/** The record as Lambda's event source mapping would deliver it. */
export function toLambdaRecord(record: StreamsRecord, streamArn: string): DynamoDBRecord {
    const d = record.dynamodb ?? {};
    return {
        eventID: record.eventID,
        eventName: record.eventName,
        eventVersion: record.eventVersion,
        eventSource: "aws:dynamodb",
        awsRegion: record.awsRegion,
        eventSourceARN: streamArn,
        dynamodb: {
            ApproximateCreationDateTime:
                d.ApproximateCreationDateTime instanceof Date ? Math.floor(d.ApproximateCreationDateTime.getTime() / 1000) : undefined,
            Keys: toLambdaImage(d.Keys),
            NewImage: toLambdaImage(d.NewImage),
            OldImage: toLambdaImage(d.OldImage),
            SequenceNumber: d.SequenceNumber,
            SizeBytes: d.SizeBytes,
            StreamViewType: d.StreamViewType,
        },
    };
}

/** Empty GetRecords answers tolerated on an open shard before a read is declared incomplete. */
const MAX_EMPTY_READS = 20;

/** What to read of a shard: the records after `after` (undefined: from the oldest it holds), up to `until`. */
export interface Span {
    readonly after?: string;
    readonly until: string;
    /** Whether `until` itself is read (the redrive: a message's last record), or the read stops before it (the consumer: its batch's first). */
    readonly inclusive: boolean;
    /** The most records to read. @default no limit */
    readonly max?: number;
}

/** The records of a span, and whether `after` was gone from the stream (older than 24 hours) so the read began at the oldest record kept. */
export interface SpanRead {
    readonly records: DynamoDBRecord[];
    readonly trimmed: boolean;
    /** False when the read stopped at `max` records before reaching `until`. */
    readonly complete: boolean;
}

/**
 * Reads the records of shard `shardId` in `span`. The first page asks for one record: when the span is empty (a batch
 * that follows the frontier directly), that is the whole read. Stops at `until`, or at the shard's end. Throws the
 * Streams API's own error when the stream is gone (ResourceNotFoundException), and IncompleteReadError when an open
 * shard did not reach `until`.
 */
export async function readSpan(streams: DynamoDBStreamsClient, streamArn: string, shardId: string, span: Span): Promise<SpanRead> {
    let trimmed = false;
    let next: string | undefined;
    try {
        next = await iteratorAfter(streams, streamArn, shardId, span.after);
    } catch (error) {
        if ((error as Error).name !== "TrimmedDataAccessException" || span.after === undefined) {
            throw error;
        }
        trimmed = true;
        next = await iteratorAfter(streams, streamArn, shardId, undefined);
    }
    const out: DynamoDBRecord[] = [];
    let empty = 0;
    let limit = 1;
    while (next) {
        const page = await streams.send(new GetRecordsCommand({ ShardIterator: next, Limit: limit }));
        limit = 1000;
        const records = page.Records ?? [];
        for (const record of records) {
            const sequenceNumber = record.dynamodb?.SequenceNumber;
            if (sequenceNumber === undefined) {
                continue;
            }
            const order = compareSequences(sequenceNumber, span.until);
            if (order > 0 || (order === 0 && !span.inclusive)) {
                return { records: out, trimmed, complete: true };
            }
            if (out.length >= (span.max ?? Infinity)) {
                return { records: out, trimmed, complete: false };
            }
            out.push(toLambdaRecord(record, streamArn));
            if (order === 0) {
                return { records: out, trimmed, complete: true };
            }
        }
        if (records.length === 0 && ++empty >= MAX_EMPTY_READS) {
            throw new IncompleteReadError(shardId, span, out.length);
        }
        next = page.NextShardIterator;
    }
    // The shard ended (it was split or rolled over): every record it held is read.
    return { records: out, trimmed, complete: true };
}

async function iteratorAfter(
    streams: DynamoDBStreamsClient,
    streamArn: string,
    shardId: string,
    after: string | undefined,
): Promise<string | undefined> {
    const response = await streams.send(
        new GetShardIteratorCommand(
            after === undefined
                ? { StreamArn: streamArn, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON" }
                : { StreamArn: streamArn, ShardId: shardId, ShardIteratorType: "AFTER_SEQUENCE_NUMBER", SequenceNumber: after },
        ),
    );
    return response.ShardIterator;
}

/** An open shard did not yield records up to the span's end. */
export class IncompleteReadError extends Error {
    constructor(
        readonly shardId: string,
        readonly span: Span,
        readonly read: number,
    ) {
        super(`read ${read} records of shard ${shardId} without reaching sequence number ${span.until}`);
        this.name = "IncompleteReadError";
    }
}
