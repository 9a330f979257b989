/**
 * What the runtime tests read off a fixture's stream and its consumer: the stream's records as Lambda would deliver
 * them, the transactions the consumer sends (none, on the stream path), and the totals of its metrics.
 */
import type { ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import {
    DescribeStreamCommand,
    GetRecordsCommand,
    GetShardIteratorCommand,
    type DynamoDBStreamsClient,
} from "@aws-sdk/client-dynamodb-streams";
import type { InitializeMiddleware } from "@smithy/types";
import type { DynamoDBRecord } from "aws-lambda";
import { toLambdaRecord } from "../../runtime/stream/reader";
import type { CounterFixture } from "./counter-fixture";

/** Every record on the table's stream so far, from every shard's start, as Lambda would deliver them. */
export async function readStream(streams: DynamoDBStreamsClient, streamArn: string): Promise<DynamoDBRecord[]> {
    const description = await streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
    const out: DynamoDBRecord[] = [];
    for (const shard of description.StreamDescription?.Shards ?? []) {
        let iterator = (
            await streams.send(
                new GetShardIteratorCommand({ StreamArn: streamArn, ShardId: shard.ShardId, ShardIteratorType: "TRIM_HORIZON" }),
            )
        ).ShardIterator;
        while (iterator) {
            // 1,000 records a page, the most GetRecords returns.
            const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
            out.push(...(page.Records ?? []).map((r) => toLambdaRecord(r, streamArn)));
            if ((page.Records ?? []).length === 0) {
                break;
            }
            iterator = page.NextShardIterator;
        }
    }
    return out;
}

let counters = 0;

/** Counts, from now on, the TransactWriteItems calls the fixture's consumer makes and the actions they hold. */
export function countTransactions(fixture: Pick<CounterFixture, "consumerDynamo">): { calls: number; actions: number } {
    const seen = { calls: 0, actions: 0 };
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === "TransactWriteItemsCommand") {
            seen.calls++;
            seen.actions += (args.input as { TransactItems?: unknown[] }).TransactItems?.length ?? 0;
        }
        return next(args);
    };
    // A name of its own: a test may count twice on one fixture.
    fixture.consumerDynamo.middlewareStack.add(middleware, { step: "initialize", name: `countTransactions${++counters}` });
    return seen;
}

/** The totals of every numeric field of the EMF lines among `logs` (the handlers' metrics, summed). */
export function emfTotals(logs: readonly string[]): Record<string, number> {
    const totals: Record<string, number> = {};
    for (const line of logs) {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed._aws) {
            for (const [k, v] of Object.entries(parsed)) {
                if (typeof v === "number") {
                    totals[k] = (totals[k] ?? 0) + v;
                }
            }
        }
    }
    return totals;
}
