/**
 * Lambda's event source mapping on DynamoDB Local, driven by the checker's schedule: per stream shard, one checkpoint
 * and one batch at a time (parallelizationFactor 1), parents before children; events that name their shard (a
 * tumbling window); ReportBatchItemFailures checkpoints; bounded retries, after which the batch's metadata goes to the
 * first dead-letter queue and the checkpoint moves past it (records the consumer never applied, below the next
 * batch); redeliveries of records already applied, and one batch delivered to two invocations at once.
 */
import {
    DescribeStreamCommand,
    GetRecordsCommand,
    GetShardIteratorCommand,
    type DynamoDBStreamsClient,
} from "@aws-sdk/client-dynamodb-streams";
import type { DynamoDBRecord, SQSEvent } from "aws-lambda";
import { toLambdaRecord } from "../../runtime/stream/reader";
import type { StreamEvent, StreamResponse } from "../../runtime/stream/consumer";
import type { FuzzEvent } from "./history";

/** Retries before a batch goes to the first DLQ: few, so that it happens often. */
const MAX_RETRIES = 1;
/** Receives of a first-DLQ message before SQS moves it to the fatal queue. */
const MAX_RECEIVES = 5;

export interface ShardRecord {
    readonly record: DynamoDBRecord;
    readonly shardId: string;
}

interface Lane {
    readonly shardId: string;
    readonly parent?: string;
    readonly records: DynamoDBRecord[];
    iterator: string | undefined;
    closed: boolean;
    checkpoint: number;
    attempts: number;
}

export type Consumer = (event: StreamEvent) => Promise<StreamResponse>;

export class StreamMapping {
    private readonly lanes = new Map<string, Lane>();
    private reading: Promise<void> = Promise.resolve();
    private readonly firstDlq: Array<{ body: string; receives: number }> = [];
    /** Every record read, in the order read. */
    readonly all: ShardRecord[] = [];
    deadLettered = 0;
    /** First-DLQ messages SQS moved to the fatal queue (the redrive failed them every time). */
    readonly exhausted: string[] = [];

    constructor(
        private readonly streams: DynamoDBStreamsClient,
        private readonly streamArn: string,
    ) {}

    /** Starts every shard's checkpoint after the records it holds now, as a mapping created on a table in use does. */
    async startAfterExisting(): Promise<void> {
        await this.refresh();
        for (const lane of this.lanes.values()) {
            lane.checkpoint = lane.records.length;
        }
    }

    /** Reads every record not seen yet (one read at a time). */
    refresh(): Promise<void> {
        const read = this.reading.then(() => this.readNew());
        this.reading = read.catch(() => undefined);
        return read;
    }

    private async readNew(): Promise<void> {
        const description = await this.streams.send(new DescribeStreamCommand({ StreamArn: this.streamArn }));
        for (const shard of description.StreamDescription?.Shards ?? []) {
            const shardId = shard.ShardId!;
            let lane = this.lanes.get(shardId);
            if (lane === undefined) {
                const { ShardIterator } = await this.streams.send(
                    new GetShardIteratorCommand({ StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON" }),
                );
                lane = {
                    shardId,
                    ...(shard.ParentShardId === undefined ? {} : { parent: shard.ParentShardId }),
                    records: [],
                    iterator: ShardIterator,
                    closed: false,
                    checkpoint: 0,
                    attempts: 0,
                };
                this.lanes.set(shardId, lane);
            }
            await this.readLane(lane);
        }
    }

    private async readLane(lane: Lane): Promise<void> {
        while (lane.iterator !== undefined) {
            let page;
            try {
                page = await this.streams.send(new GetRecordsCommand({ ShardIterator: lane.iterator }));
            } catch (error) {
                if ((error as Error).name !== "TrimmedDataAccessException" && (error as Error).name !== "ExpiredIteratorException") {
                    throw error;
                }
                const last = lane.records.at(-1)?.dynamodb?.SequenceNumber;
                const { ShardIterator } = await this.streams.send(
                    new GetShardIteratorCommand(
                        last === undefined
                            ? { StreamArn: this.streamArn, ShardId: lane.shardId, ShardIteratorType: "TRIM_HORIZON" }
                            : {
                                  StreamArn: this.streamArn,
                                  ShardId: lane.shardId,
                                  ShardIteratorType: "AFTER_SEQUENCE_NUMBER",
                                  SequenceNumber: last,
                              },
                    ),
                );
                lane.iterator = ShardIterator;
                continue;
            }
            for (const record of page.Records ?? []) {
                const lambda = toLambdaRecord(record, this.streamArn);
                lane.records.push(lambda);
                this.all.push({ record: lambda, shardId: lane.shardId });
            }
            lane.closed = page.NextShardIterator === undefined;
            lane.iterator = page.NextShardIterator;
            if ((page.Records ?? []).length === 0) {
                break;
            }
        }
    }

    /** The lane a delivery goes to: the first with records pending whose parent is done. */
    private nextLane(): Lane | undefined {
        for (const lane of this.lanes.values()) {
            const parent = lane.parent === undefined ? undefined : this.lanes.get(lane.parent);
            const parentDone = parent === undefined || (parent.closed && parent.checkpoint >= parent.records.length);
            if (parentDone && lane.checkpoint < lane.records.length) {
                return lane;
            }
        }
        return undefined;
    }

    private invocations = 0;

    /** The highest sequence number read so far (padded to 40 digits), if any. */
    newest(): string | undefined {
        return this.all
            .map((r) => r.record.dynamodb!.SequenceNumber!.padStart(40, "0"))
            .sort()
            .at(-1);
    }

    /**
     * One delivery (see the top), to one of two consumer instances in turn (each remembers its own shards' frontiers);
     * `twice` delivers it to both at once.
     */
    async consume(event: Extract<FuzzEvent, { op: "consume" }>, consumers: readonly [Consumer, Consumer]): Promise<void> {
        await this.refresh();
        const lane = this.nextLane();
        if (lane === undefined) {
            return;
        }
        const from = lane.checkpoint;
        const start = Math.max(0, from - event.overlap);
        const end = Math.min(lane.records.length, from + event.max);
        const batch = lane.records.slice(start, end);
        const first = this.invocations++ % 2;
        const invoke = (instance: number) =>
            consumers[instance]!({
                Records: batch,
                shardId: lane.shardId,
                eventSourceARN: this.streamArn,
                state: {},
                isFinalInvokeForWindow: false,
            });
        let failedAt: number | undefined;
        if (event.crash === "before") {
            failedAt = from;
        } else {
            const responses = await Promise.all(event.twice === true ? [invoke(first), invoke(1 - first)] : [invoke(first)]);
            failedAt = event.crash === "after" ? from : lowestFailure(responses, batch, start);
        }
        if (lane.checkpoint !== from) {
            return;
        }
        if (failedAt === undefined || failedAt >= end) {
            lane.checkpoint = end;
            lane.attempts = 0;
            return;
        }
        lane.checkpoint = Math.max(from, failedAt);
        if (++lane.attempts > MAX_RETRIES) {
            this.deadLetter(lane, lane.checkpoint, end);
            lane.checkpoint = end;
            lane.attempts = 0;
        }
    }

    /**
     * Every record of every shard delivered once more, from the shard's first, in batches of `max` (as a mapping
     * re-created at TRIM_HORIZON would): each is a record already applied. Returns the batches' failures.
     */
    async deliverAgain(consumer: Consumer, max: number): Promise<number> {
        let failures = 0;
        for (const lane of this.lanes.values()) {
            for (let start = 0; start < lane.records.length; start += max) {
                const response = await consumer({
                    Records: lane.records.slice(start, start + max),
                    shardId: lane.shardId,
                    eventSourceARN: this.streamArn,
                    state: {},
                    isFinalInvokeForWindow: false,
                });
                failures += response.batchItemFailures?.length ?? 0;
            }
        }
        return failures;
    }

    private deadLetter(lane: Lane, from: number, end: number): void {
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
                    shardId: lane.shardId,
                    startSequenceNumber: lane.records[from]!.dynamodb!.SequenceNumber,
                    endSequenceNumber: lane.records[end - 1]!.dynamodb!.SequenceNumber,
                    approximateArrivalOfFirstRecord: new Date(0).toISOString(),
                    approximateArrivalOfLastRecord: new Date(0).toISOString(),
                    batchSize: end - from,
                    streamArn: this.streamArn,
                },
            }),
        });
    }

    /** One redrive invocation over every message in the first DLQ; a message failed MAX_RECEIVES times is moved away. */
    async redrive(handler: (event: SQSEvent) => Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }>): Promise<void> {
        const messages = this.firstDlq.splice(0);
        if (messages.length === 0) {
            return;
        }
        const response = await handler({
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
        });
        const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
        messages.forEach((m, i) => {
            if (!failed.has(`m${i}`)) {
                return;
            }
            if (m.receives >= MAX_RECEIVES) {
                this.exhausted.push(m.body);
            } else {
                this.firstDlq.push(m);
            }
        });
    }

    /** The operator's replay of the fatal queue (`hybrid-counter fatal replay`): its messages go back to the redrive. */
    replayExhausted(): void {
        for (const body of this.exhausted.splice(0)) {
            this.firstDlq.push({ body, receives: 0 });
        }
    }

    /** The stream shards read so far. */
    shardCount(): number {
        return this.lanes.size;
    }

    /** Whether every record is delivered and the first DLQ is empty. */
    async drained(): Promise<boolean> {
        await this.refresh();
        return [...this.lanes.values()].every((lane) => lane.checkpoint >= lane.records.length) && this.firstDlq.length === 0;
    }

    describe(): string {
        const lanes = [...this.lanes.values()].map((l) => `${l.checkpoint}/${l.records.length}`).join(", ");
        return `checkpoints ${lanes}; ${this.firstDlq.length} in the first DLQ`;
    }
}

function lowestFailure(responses: readonly StreamResponse[], batch: readonly DynamoDBRecord[], start: number): number | undefined {
    let failedAt: number | undefined;
    for (const response of responses) {
        for (const failure of response.batchItemFailures) {
            const index = batch.findIndex((r) => r.dynamodb?.SequenceNumber === failure.itemIdentifier);
            failedAt = Math.min(failedAt ?? Infinity, start + (index < 0 ? 0 : index));
        }
    }
    return failedAt;
}
