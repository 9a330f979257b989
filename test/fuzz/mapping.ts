/**
 * Lambda's event source mapping on DynamoDB Local, driven by the checker's schedule (see StreamMapping).
 *
 * A split invocation (history.ts, `split`) stands for two stream shards carrying one key's items at once (a hot
 * partition split for heat, items spread by sort key): the batch's records are split into two groups by item id,
 * each id's records in one group and in their order, and the consumer is invoked on both at once. Their answers are
 * checkpointed as one batch's: the lowest failed sequence number is where the retry starts, and the records after it
 * that one group applied are delivered again and found applied by their markers.
 */
import {
    DescribeStreamCommand,
    GetRecordsCommand,
    GetShardIteratorCommand,
    type DynamoDBStreamsClient,
} from "@aws-sdk/client-dynamodb-streams";
import type { DynamoDBBatchResponse, DynamoDBRecord, SQSEvent } from "aws-lambda";
import type { FatalMessage } from "../../runtime/stream/fatal";
import { toLambdaRecord } from "../../runtime/stream/stream-reader";
import { lambdaContext } from "../../local/aws/lambda-context";
import { fnv1a } from "../../runtime/shared/config";
import type { FuzzEvent } from "./history";

/** The mapping's retries before a batch goes to the first dead-letter queue (kept small to exercise it). */
const MAX_RETRIES = 1;
/** Receives of a first-DLQ message before SQS moves it to the fatal queue (the component's redriveMaxReceiveCount). */
const MAX_RECEIVES = 5;

/**
 * Lambda's event source mapping, reduced to what the checker needs and driven by the schedule: one
 * checkpoint per stream, bounded retries with ReportBatchItemFailures, then the batch's metadata to
 * the first dead-letter queue; redeliveries and overlapping deliveries on demand.
 */
export class StreamMapping {
    private readonly records: Array<{ record: DynamoDBRecord; shardId: string }> = [];
    private readonly iterators = new Map<string, string | undefined>();
    private checkpoint = 0;
    private attempts = 0;
    /** The refresh in progress (refresh). */
    private reading: Promise<void> = Promise.resolve();
    private readonly firstDlq: Array<{ body: string; receives: number }> = [];
    /** Each record's place in the stream, by its sequence number's value. */
    private readonly ordinals = new Map<bigint, number>();
    deadLettered = 0;

    constructor(
        private readonly streams: DynamoDBStreamsClient,
        private readonly streamArn: string,
        /** The table's sort key: a split invocation groups records by it (the item's id). */
        private readonly sortKey: string,
    ) {}

    /**
     * The place in the stream (0 for its first record) of the record whose sequence number has the value of `digits`
     * (written with or without leading zeros); undefined for a number no record read so far has. DynamoDB Local
     * numbers the records of all its tables from one sequence, so a record's number depends on what ran before in
     * the engine, and its place does not.
     */
    ordinal(digits: string): number | undefined {
        return this.ordinals.get(BigInt(digits));
    }

    /** The place in the stream of the first INSERT of an item whose `tokenAttribute` is `token`, of the records read. */
    firstInsertOf(tokenAttribute: string, token: string): number | undefined {
        const index = this.records.findIndex(
            ({ record }) => record.eventName === "INSERT" && record.dynamodb?.NewImage?.[tokenAttribute]?.S === token,
        );
        return index < 0 ? undefined : index;
    }

    /**
     * Starts the checkpoint after every record the stream holds now, as a mapping created on a table in
     * use starts (Lambda cannot start a DynamoDB stream mapping at a timestamp): those records are never
     * delivered, and only a backfill counts their items.
     */
    async startAfterExisting(): Promise<void> {
        await this.refresh();
        this.checkpoint = this.records.length;
    }

    /**
     * Reads every record the stream holds that this mapping has not seen (DynamoDB Local shows them at once).
     * One read at a time: two consumes refreshing at once would read the same page from the same iterator and
     * list its records twice, a delivery no mapping makes.
     */
    refresh(): Promise<void> {
        const read = this.reading.then(() => this.readNew());
        this.reading = read.catch(() => undefined);
        return read;
    }

    private async readNew(): Promise<void> {
        const description = await this.streams.send(new DescribeStreamCommand({ StreamArn: this.streamArn }));
        const shards = [...(description.StreamDescription?.Shards ?? [])].sort((a, b) =>
            compareSequence(a.SequenceNumberRange?.StartingSequenceNumber ?? "0", b.SequenceNumberRange?.StartingSequenceNumber ?? "0"),
        );
        for (const shard of shards) {
            const shardId = shard.ShardId!;
            if (!this.iterators.has(shardId)) {
                const { ShardIterator } = await this.streams.send(
                    new GetShardIteratorCommand({ StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON" }),
                );
                this.iterators.set(shardId, ShardIterator);
            }
            for (let iterator = this.iterators.get(shardId); iterator;) {
                let page;
                try {
                    page = await this.streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
                } catch (error) {
                    // DynamoDB Local can refuse an idle iterator: take a new one after the last record read.
                    if ((error as Error).name !== "TrimmedDataAccessException" && (error as Error).name !== "ExpiredIteratorException") {
                        throw error;
                    }
                    iterator = await this.iteratorAfterLast(shardId);
                    continue;
                }
                for (const record of page.Records ?? []) {
                    this.ordinals.set(BigInt(record.dynamodb?.SequenceNumber ?? "0"), this.records.length);
                    this.records.push({ record: toLambdaRecord(record, this.streamArn), shardId });
                }
                this.iterators.set(shardId, page.NextShardIterator);
                if ((page.Records ?? []).length === 0) {
                    break;
                }
                iterator = page.NextShardIterator;
            }
        }
    }

    private async iteratorAfterLast(shardId: string): Promise<string | undefined> {
        const last = [...this.records].reverse().find((r) => r.shardId === shardId)?.record.dynamodb?.SequenceNumber;
        const { ShardIterator } = await this.streams.send(
            new GetShardIteratorCommand(
                last === undefined
                    ? { StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON" }
                    : { StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "AFTER_SEQUENCE_NUMBER", SequenceNumber: last },
            ),
        );
        this.iterators.set(shardId, ShardIterator);
        return ShardIterator;
    }

    async consume(
        event: Extract<FuzzEvent, { op: "consume" }>,
        consumer: (e: { Records: DynamoDBRecord[] }, c: ReturnType<typeof lambdaContext>) => Promise<DynamoDBBatchResponse>,
    ): Promise<void> {
        await this.refresh();
        const from = this.checkpoint;
        const start = Math.max(0, from - event.overlap);
        if (start >= this.records.length) {
            return;
        }
        const shardId = this.records[start]!.shardId;
        let end = start;
        while (end < this.records.length && end < from + event.max && this.records[end]!.shardId === shardId) {
            end++;
        }
        const batch = this.records.slice(start, end).map((r) => r.record);
        let failedAt: number | undefined;
        if (event.crash === "before") {
            failedAt = from;
        } else {
            const groups = event.split === true ? this.splitById(batch) : [batch];
            const responses = await Promise.all(
                groups.map((records) => consumer({ Records: records }, lambdaContext("consumer", 600_000))),
            );
            if (event.crash === "after") {
                failedAt = from;
            } else {
                // Each group reports its first failed record: the batch is retried from the lowest of them.
                for (const response of responses) {
                    if (response.batchItemFailures.length > 0) {
                        const sequence = response.batchItemFailures[0]!.itemIdentifier;
                        const index = this.records.findIndex((r) => r.record.dynamodb?.SequenceNumber === sequence);
                        failedAt = Math.min(failedAt ?? Infinity, Math.max(from, index < 0 ? from : index));
                    }
                }
            }
        }
        if (this.checkpoint !== from) {
            return; // another invocation moved the checkpoint meanwhile
        }
        if (failedAt === undefined) {
            this.checkpoint = Math.max(this.checkpoint, end);
            this.attempts = 0;
            return;
        }
        if (failedAt >= end) {
            this.checkpoint = end;
            this.attempts = 0;
            return;
        }
        this.checkpoint = failedAt;
        if (++this.attempts > MAX_RETRIES) {
            this.deadLetter(failedAt, end);
            this.checkpoint = end;
            this.attempts = 0;
        }
    }

    /** A batch in two groups by item id (see the top of this module); one group when every id falls in one. */
    private splitById(batch: DynamoDBRecord[]): DynamoDBRecord[][] {
        const groups: DynamoDBRecord[][] = [[], []];
        for (const record of batch) {
            const id = (record.dynamodb?.Keys?.[this.sortKey] as { S?: string } | undefined)?.S ?? "";
            groups[fnv1a(id) % 2]!.push(record);
        }
        return groups.filter((group) => group.length > 0);
    }

    private deadLetter(from: number, end: number): void {
        const first = this.records[from]!;
        const last = this.records[end - 1]!;
        this.deadLettered++;
        this.firstDlq.push({
            receives: 0,
            body: JSON.stringify({
                requestContext: {
                    requestId: `fuzz-${this.deadLettered}`,
                    functionArn: "arn:aws:lambda:us-east-1:000000000000:function:consumer",
                    condition: "RetryAttemptsExhausted",
                    approximateInvokeCount: MAX_RETRIES + 1,
                },
                responseContext: { statusCode: 200, executedVersion: "$LATEST" },
                version: "1.0",
                timestamp: new Date(0).toISOString(),
                DDBStreamBatchInfo: {
                    shardId: first.shardId,
                    startSequenceNumber: first.record.dynamodb!.SequenceNumber,
                    endSequenceNumber: last.record.dynamodb!.SequenceNumber,
                    approximateArrivalOfFirstRecord: new Date(0).toISOString(),
                    approximateArrivalOfLastRecord: new Date(0).toISOString(),
                    batchSize: end - from,
                    streamArn: this.streamArn,
                },
            }),
        });
    }

    async redrive(
        handler: (
            event: SQSEvent,
            context: ReturnType<typeof lambdaContext>,
        ) => Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }>,
        fatal: FatalMessage[],
    ): Promise<void> {
        const messages = this.firstDlq.splice(0);
        if (messages.length === 0) {
            return;
        }
        const event: SQSEvent = {
            Records: messages.map((m, i) => ({
                messageId: `m${i}`,
                receiptHandle: `r${i}`,
                body: m.body,
                attributes: {
                    ApproximateReceiveCount: String(++m.receives),
                    SentTimestamp: "0",
                    SenderId: "fuzz",
                    ApproximateFirstReceiveTimestamp: "0",
                },
                messageAttributes: {},
                md5OfBody: "",
                eventSource: "aws:sqs",
                eventSourceARN: "arn:aws:sqs:us-east-1:000000000000:first-dlq",
                awsRegion: "us-east-1",
            })),
        };
        const response = await handler(event, lambdaContext("redrive", 600_000));
        const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
        messages.forEach((m, i) => {
            if (!failed.has(`m${i}`)) {
                return;
            }
            if (m.receives >= MAX_RECEIVES) {
                fatal.push({ reason: "redrive-exhausted", problem: "moved by maxReceiveCount", detail: m.body });
            } else {
                this.firstDlq.push(m);
            }
        });
    }

    async drained(): Promise<boolean> {
        await this.refresh();
        return this.checkpoint >= this.records.length && this.firstDlq.length === 0;
    }

    describe(): string {
        return `checkpoint ${this.checkpoint} of ${this.records.length} records, ${this.firstDlq.length} in the first DLQ`;
    }
}

function compareSequence(a: string, b: string): number {
    return a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0;
}
