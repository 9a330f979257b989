/**
 * Follows one DynamoDB stream from its first record, shard by shard (a child shard only once its parent is read to
 * its end, so each item's records come in the order they were written), and hands back each page of records as the
 * Streams API returns them (binary values as bytes, ready to be written back).
 *
 * DynamoDB Local numbers stream records across all its tables, so an iterator taken on a still-empty shard is refused
 * once another table's stream moved on; a refused iterator is taken again after the last record read, losing nothing
 * (as the mapping emulator does, local/aws/mapping-emulator.ts).
 */
import {
    DescribeStreamCommand,
    GetRecordsCommand,
    GetShardIteratorCommand,
    type DynamoDBStreamsClient,
    type Shard,
    type _Record as StreamRecord,
} from "@aws-sdk/client-dynamodb-streams";

interface ShardState {
    iterator: string | undefined;
    lastSequence?: string;
    /** The shard answered with no next iterator: it is closed and read to its end. */
    ended: boolean;
}

export class StreamTail {
    private readonly shards = new Map<string, ShardState>();
    private shardList: Shard[] = [];
    private describedAt = -Infinity;
    /** Iterators taken again after the engine refused one. */
    iteratorsRenewed = 0;

    constructor(
        private readonly streams: DynamoDBStreamsClient,
        readonly streamArn: string,
    ) {}

    /** Reads one page from every shard that is open to reading; returns the records, in each shard's order. */
    async read(): Promise<StreamRecord[]> {
        if (Date.now() - this.describedAt > 1_000) {
            const description = await this.streams.send(new DescribeStreamCommand({ StreamArn: this.streamArn }));
            this.shardList = description.StreamDescription?.Shards ?? [];
            this.describedAt = Date.now();
        }
        const out: StreamRecord[] = [];
        for (const shard of this.shardList) {
            const shardId = shard.ShardId!;
            let state = this.shards.get(shardId);
            if (state === undefined) {
                const parent = shard.ParentShardId ? this.shards.get(shard.ParentShardId) : undefined;
                const parentKnown = shard.ParentShardId !== undefined && this.shardList.some((s) => s.ShardId === shard.ParentShardId);
                if ((parent !== undefined && !parent.ended) || (parent === undefined && parentKnown)) {
                    continue;
                }
                state = { iterator: await this.iterator(shardId, undefined), ended: false };
                this.shards.set(shardId, state);
            }
            if (state.ended || state.iterator === undefined) {
                continue;
            }
            let page;
            try {
                page = await this.streams.send(new GetRecordsCommand({ ShardIterator: state.iterator, Limit: 1000 }));
            } catch (error) {
                const name = (error as Error).name;
                if (name === "TrimmedDataAccessException" || name === "ExpiredIteratorException") {
                    this.iteratorsRenewed++;
                    state.iterator = await this.iterator(shardId, state.lastSequence);
                    continue;
                }
                throw error;
            }
            for (const record of page.Records ?? []) {
                state.lastSequence = record.dynamodb?.SequenceNumber ?? state.lastSequence;
                out.push(record);
            }
            state.iterator = page.NextShardIterator;
            if (state.iterator === undefined) {
                state.ended = true;
            }
        }
        return out;
    }

    private async iterator(shardId: string, after: string | undefined): Promise<string | undefined> {
        const answer = await this.streams.send(
            new GetShardIteratorCommand(
                after === undefined
                    ? { StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON" }
                    : { StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "AFTER_SEQUENCE_NUMBER", SequenceNumber: after },
            ),
        );
        return answer.ShardIterator;
    }
}
