/**
 * Another writer rewriting the client token of a live client item (history.ts `otherRetoken`): an UpdateItem of the
 * token attribute only, as a service that copies or migrates items might send. The item stays live and selected and
 * keeps looking like a client life, but its home shard (runtime/shards/layout.ts: its token's) moves by the event's
 * `shift`, so its unit is now in the old home while the item is counted in the new one.
 *
 * What the model allows for it (run.ts): the old life ended (others.ts `EndedLives`: in utilization the old home keeps
 * a unit no item accounts for, until a heal); in strict mode the new home holds one client item more than its
 * best-effort (a shard's bound is over the items homed there), so that shard's check allows one item per rewrite, for
 * good (only looser). The key's sums move by nothing, so the sums' checks (and the admission check, limits.ts) allow
 * nothing for it: a heal that raises the new home must disarm the key's quotas, or the quotas admit past the limit.
 */
import { GetItemCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { isLive } from "../../runtime/shared/selection";
import { lifeShard, tokenHomedIn } from "../../runtime/shards/layout";
import { shardsOf, type FuzzSystem } from "./adapter";
import type { FuzzEvent } from "./history";
import { OTHER_WRITER_ATTEMPTS } from "./others";
import type { Released } from "./scheduler";

/** The value name of the new token in a rewrite's UpdateItem (how `retokened` knows it). */
const NEW_TOKEN = ":retoken";

/**
 * Rewrites the token of the event's item, if it is a live client item, until served or out of attempts. Resolves
 * whether the last answer was served (a rewrite whose condition failed: the item changed meanwhile; nothing to do).
 */
export async function retokenWrite(
    dynamodb: DynamoDBClient,
    system: FuzzSystem,
    event: Extract<FuzzEvent, { op: "otherRetoken" }>,
): Promise<boolean> {
    const { tableName, partitionKey, sortKey, tokenAttribute } = system.config;
    const key = { [partitionKey]: { S: event.key }, [sortKey]: { S: event.id } };
    const shards = shardsOf(system);
    for (let attempt = 1; attempt <= OTHER_WRITER_ATTEMPTS; attempt++) {
        try {
            const read = await dynamodb.send(new GetItemCommand({ TableName: tableName, Key: key, ConsistentRead: true }));
            const token = read.Item?.[tokenAttribute]?.S;
            if (read.Item === undefined || token === undefined || !isLive(read.Item, system.config)) {
                return true;
            }
            // The home moves by one to N - 1 shards (never onto itself), whatever shift the event drew.
            const to = shards === 1 ? 0 : (lifeShard(token, shards) + 1 + ((event.shift - 1) % (shards - 1))) % shards;
            await dynamodb.send(
                new UpdateItemCommand({
                    TableName: tableName,
                    Key: key,
                    UpdateExpression: "SET #token = :retoken",
                    ConditionExpression: "#token = :was",
                    ExpressionAttributeNames: { "#token": tokenAttribute },
                    ExpressionAttributeValues: { [NEW_TOKEN]: { S: tokenHomedIn(to, shards) }, ":was": { S: token } },
                }),
            );
            return true;
        } catch (error) {
            if ((error as Error).name === "ConditionalCheckFailedException") {
                return true;
            }
        }
    }
    return false;
}

/**
 * A served token rewrite: its key, the new home shard of the item, and the token it replaced (`was`) with the new one
 * (`token`); undefined for any other request.
 */
export function retokened(
    system: FuzzSystem,
    request: Released,
): { key: string; to: number; was: string | undefined; token: string } | undefined {
    const input = request.input as {
        TableName?: string;
        Key?: Record<string, AttributeValue>;
        ExpressionAttributeValues?: Record<string, AttributeValue>;
    };
    const token = input.ExpressionAttributeValues?.[NEW_TOKEN]?.S;
    const key = input.Key?.[system.config.partitionKey]?.S;
    if (request.command !== "UpdateItemCommand" || !request.served || token === undefined || key === undefined) {
        return undefined;
    }
    return { key, to: lifeShard(token, shardsOf(system)), was: input.ExpressionAttributeValues?.[":was"]?.S, token };
}
