/**
 * A stream shard's frontier: the record up to which every record of the shard is applied.
 *
 * Invariant: every record of stream shard S at or below its frontier (`hc_applied` on S's progress item) is applied.
 * So whoever applies records of S applies, with them, every record between the frontier and them, and no key's mark
 * ever passes a record of that key that is not applied (runtime/stream/marks.ts). Why each party keeps it:
 * - the consumer reads the frontier F, re-reads from the stream the records after F and before its batch (records
 *   Lambda gave up on: a batch that exhausted its retries, whether or not any attempt of it wrote anything), applies
 *   them with its batch, then moves F to the last record before the first one that failed (consumer.ts);
 * - the redrive does the same up to the end of a first-DLQ message's range, for a shard no later batch comes to
 *   (redrive.ts);
 * - F moves only forward, by a write conditional on that, and only past records applied: a stale or concurrent writer
 *   never moves it back, and a frontier read stale is lower, which only makes its reader re-read records it then finds
 *   applied (the marks skip them).
 *
 * This needs each batch to be a run of consecutive records of its shard, delivered after the one before it: Lambda's
 * mapping does so with `parallelizationFactor` 1, which the component and the policy pack keep.
 *
 * Cost: a write once a minute or every 1,000 records (and when a record was parked), and a read of the stream from F
 * when a batch does not follow the frontier this process holds.
 */
import { ConditionalCheckFailedException, GetItemCommand, UpdateItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { streamShardKey } from "../shared/keys";
import { EXPIRES_ATTRIBUTE } from "../limits/usage";
import { paddedSequence } from "./records";

/**
 * The frontier's attribute: the last record up to which all are applied, as `<padded>|<sequence number>`: the padded
 * form orders the values as numbers (the condition compares strings), the second is the exact string the stream gave,
 * which the Streams API takes back.
 */
export const FRONTIER_ATTRIBUTE = "hc_applied";

/** How long a progress item outlives its last write: twice the stream's 24 hours (the settler deletes it then). */
const PROGRESS_TTL_SECONDS = 48 * 3600;

/** The frontier of stream shard `shardId` (undefined: no batch of it has been applied), read strongly consistent. */
export async function readFrontier(config: CounterConfig, dynamodb: DynamoDBClient, shardId: string): Promise<string | undefined> {
    const response = await dynamodb.send(
        new GetItemCommand({
            TableName: config.countersTableName,
            Key: streamShardKey(config, shardId),
            ConsistentRead: true,
            ProjectionExpression: "#f",
            ExpressionAttributeNames: { "#f": FRONTIER_ATTRIBUTE },
        }),
    );
    const value = response.Item?.[FRONTIER_ATTRIBUTE]?.S;
    return value === undefined ? undefined : value.slice(value.indexOf("|") + 1);
}

/**
 * Moves the frontier of `shardId` to `to`, every record up to it being applied; a frontier already at or past it stays
 * (a write conditional on that, so it never moves back).
 */
export async function advanceFrontier(config: CounterConfig, dynamodb: DynamoDBClient, shardId: string, to: string): Promise<void> {
    try {
        await dynamodb.send(
            new UpdateItemCommand({
                TableName: config.countersTableName,
                Key: streamShardKey(config, shardId),
                UpdateExpression: "SET #f = :to, #exp = :exp",
                ConditionExpression: "attribute_not_exists(#f) OR #f < :to",
                ExpressionAttributeNames: { "#f": FRONTIER_ATTRIBUTE, "#exp": EXPIRES_ATTRIBUTE },
                ExpressionAttributeValues: {
                    ":to": { S: `${paddedSequence(to)}|${to}` },
                    ":exp": { N: String(Math.floor(Date.now() / 1000) + PROGRESS_TTL_SECONDS) },
                },
            }),
        );
    } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) {
            throw error;
        }
    }
}
