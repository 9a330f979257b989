/**
 * Reads DynamoDB stream records through the Streams API and turns them into the records a Lambda
 * stream event carries. Used by the redrive handler (re-reading a dead-lettered batch) and by the
 * local mapping emulator.
 */
import {
    GetRecordsCommand,
    GetShardIteratorCommand,
    type AttributeValue as StreamAttributeValue,
    type DynamoDBStreamsClient,
    type _Record as StreamsRecord,
} from "@aws-sdk/client-dynamodb-streams";
import type { AttributeValue, DynamoDBRecord } from "aws-lambda";
import { compareSequenceNumbers } from "./records";

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

export interface SequenceRange {
    readonly streamArn: string;
    readonly shardId: string;
    readonly startSequenceNumber: string;
    readonly endSequenceNumber: string;
}

/** Empty GetRecords answers tolerated on an open shard before the range is declared unreachable. */
const MAX_EMPTY_READS = 20;

/**
 * Reads every record of a shard from `startSequenceNumber` to `endSequenceNumber` inclusive.
 * Throws the Streams API's own error when the records are gone (TrimmedDataAccessException after the
 * 24-hour retention, ResourceNotFoundException when the stream was deleted), and IncompleteRangeError
 * when the end of the range was not reached.
 */
export async function readRange(streams: DynamoDBStreamsClient, range: SequenceRange): Promise<DynamoDBRecord[]> {
    const iterator = await streams.send(
        new GetShardIteratorCommand({
            StreamArn: range.streamArn,
            ShardId: range.shardId,
            ShardIteratorType: "AT_SEQUENCE_NUMBER",
            SequenceNumber: range.startSequenceNumber,
        }),
    );
    const out: DynamoDBRecord[] = [];
    let next = iterator.ShardIterator;
    let empty = 0;
    while (next) {
        const page = await streams.send(new GetRecordsCommand({ ShardIterator: next, Limit: 1000 }));
        const records = page.Records ?? [];
        for (const record of records) {
            const sequenceNumber = record.dynamodb?.SequenceNumber;
            if (sequenceNumber === undefined) {
                continue;
            }
            if (compareSequenceNumbers(sequenceNumber, range.endSequenceNumber) > 0) {
                return out;
            }
            out.push(toLambdaRecord(record, range.streamArn));
            if (compareSequenceNumbers(sequenceNumber, range.endSequenceNumber) === 0) {
                return out;
            }
        }
        if (records.length === 0 && ++empty >= MAX_EMPTY_READS) {
            break;
        }
        next = page.NextShardIterator;
    }
    // A range read short would be counted short: fail, so the caller retries the whole range later.
    throw new IncompleteRangeError(range, out.length);
}

/** The stream did not yield the range up to its end sequence number (empty pages, or the shard ended first). */
export class IncompleteRangeError extends Error {
    constructor(
        readonly range: SequenceRange,
        readonly read: number,
    ) {
        super(`read ${read} records of shard ${range.shardId} without reaching sequence number ${range.endSequenceNumber}`);
        this.name = "IncompleteRangeError";
    }
}
