/**
 * Reads DynamoDB stream records through the Streams API and turns them into the records a Lambda stream event carries.
 * Used to re-read a range Lambda gave up on (the consumer's skipped ranges, the redrive) and by the local mapping
 * emulator.
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
import type { Range } from "./progress";

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

/** Empty GetRecords answers tolerated on an open shard before a range is declared unreachable. */
const MAX_EMPTY_READS = 20;

/**
 * Reads every record of shard `shardId` in `range`. Stops at the first record past its end, or at the shard's end.
 * Throws the Streams API's own error when the records are gone (TrimmedDataAccessException after the 24-hour
 * retention, ResourceNotFoundException when the stream was deleted), and IncompleteRangeError when an open shard did
 * not reach the range's end.
 */
export async function readRange(streams: DynamoDBStreamsClient, streamArn: string, shardId: string, range: Range): Promise<DynamoDBRecord[]> {
    const iterator = await streams.send(
        new GetShardIteratorCommand({
            StreamArn: streamArn,
            ShardId: shardId,
            ShardIteratorType: range.after ? "AFTER_SEQUENCE_NUMBER" : "AT_SEQUENCE_NUMBER",
            SequenceNumber: range.anchor,
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
            if (sequenceNumber === undefined || compareSequences(sequenceNumber, range.from) < 0) {
                continue;
            }
            if (compareSequences(sequenceNumber, range.to) > 0) {
                return out;
            }
            out.push(toLambdaRecord(record, streamArn));
        }
        if (records.length === 0 && ++empty >= MAX_EMPTY_READS) {
            throw new IncompleteRangeError(shardId, range, out.length);
        }
        next = page.NextShardIterator;
    }
    // The shard ended (it was split or rolled over): every record it held is read.
    return out;
}

/** An open shard did not yield records up to the range's end. */
export class IncompleteRangeError extends Error {
    constructor(
        readonly shardId: string,
        readonly range: Range,
        readonly read: number,
    ) {
        super(`read ${read} records of shard ${shardId} without reaching sequence number ${range.to}`);
        this.name = "IncompleteRangeError";
    }
}
