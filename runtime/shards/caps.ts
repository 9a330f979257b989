/**
 * A strict limit over a sharded key's sum: caps stored with the shards.
 *
 * Invariant: every shard of a key carries the same tag (the limit its caps were set for) or none, and under tag L the
 * caps sum to at most L and each shard's count stays at or below its cap. So the key's sum stays at or below L.
 * - A reservation in a shard is conditional on the tag the call expects and on `count < cap` (runtime/client/units.ts).
 * - Only this module writes caps, in one transaction conditional on what it read:
 *   - moving room: a donor's cap goes down only to a value its count is at or below at commit (`count <= newCap`),
 *     and the receiver's goes up by as much, so the sum is unchanged;
 *   - arming for a new limit: every shard's cap is set from one serializable read of all of them, to its count plus
 *     a share of `limit - sum(counts)`, conditional on each count still at or below the count read; with no room
 *     left nothing is written and the call refuses.
 * - A reservation under no limit (none in force, or a plain `create`) is conditional on its shard carrying no tag:
 *   where caps are armed, `clearCaps` first takes every shard's cap and tag away in one transaction, so no shard keeps
 *   a cap the key's sum has outgrown, and the next reservation under a limit arms them afresh from the counts.
 * - A release lowers a count, which only makes room. A heal that raises a shard's count (items best-effort did not
 *   account for: another writer's, one from before the counter) may take that shard past its cap; the key's sum can
 *   then pass the limit by those items, which were not the client's to refuse (docs/limits.md).
 */
import {
    TransactGetItemsCommand,
    TransactWriteItemsCommand,
    type AttributeValue,
    type DynamoDBClient,
    type TransactWriteItem,
} from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { bestEffortKey, numberOf, stringOf } from "../shared/keys";
import { CAP, CAP_TAG } from "../client/units";

/** One shard as the serializable read saw it. */
export interface ShardCap {
    readonly count: number;
    /** The cap the shard carries (undefined: none), whichever tag it was set under. */
    readonly cap: number | undefined;
    /** The tag the shard carries (undefined: none). */
    readonly tag: string | undefined;
}

/** A cap write: the shard's new cap, and what must still hold at commit. */
export interface CapWrite {
    readonly shard: number;
    readonly cap: number;
    readonly expect: { readonly tag: string | undefined; readonly cap: number | undefined; readonly maxCount: number | undefined };
}

export type CapPlan =
    | { readonly kind: "retry" }
    | { readonly kind: "limit"; readonly count: number }
    | { readonly kind: "write"; readonly writes: readonly CapWrite[] };

/** The tag of caps set for `limit`. */
export function capTag(limit: number): string {
    return String(limit);
}

/** Plans the caps (tagged `tag`) that let shard `home` admit under `limit`, from one serializable read of every shard. */
export function planCaps(shards: readonly ShardCap[], limit: number, tag: string, home: number): CapPlan {
    const total = shards.reduce((sum, s) => sum + s.count, 0);
    if (shards.every((s) => s.tag === tag)) {
        return planMove(shards, home, total);
    }
    const room = limit - total;
    if (room <= 0) {
        return { kind: "limit", count: total };
    }
    const share = Math.floor(room / shards.length);
    return {
        kind: "write",
        writes: shards.map((s, shard) => ({
            shard,
            cap: s.count + share + (shard === home ? room - share * shards.length : 0),
            expect: { tag: s.tag, cap: s.cap, maxCount: s.count },
        })),
    };
}

/** Under the current tag: room from the shards with spare to `home`, half their spare (the home has none left). */
function planMove(shards: readonly ShardCap[], home: number, total: number): CapPlan {
    const own = shards[home]!;
    if (own.count < (own.cap ?? 0)) {
        return { kind: "retry" };
    }
    const donors = shards
        .map((s, shard) => ({ shard, spare: shard === home ? 0 : Math.max(0, (s.cap ?? 0) - s.count) }))
        .filter((d) => d.spare > 0)
        .sort((a, b) => b.spare - a.spare);
    const spare = donors.reduce((sum, d) => sum + d.spare, 0);
    if (spare === 0) {
        return { kind: "limit", count: total };
    }
    let wanted = Math.max(1, Math.ceil(spare / 2));
    const writes: CapWrite[] = [];
    let moved = 0;
    for (const donor of donors) {
        if (wanted === 0) {
            break;
        }
        const take = Math.min(donor.spare, wanted);
        const from = shards[donor.shard]!;
        writes.push({ shard: donor.shard, cap: from.cap! - take, expect: { tag: from.tag, cap: from.cap, maxCount: from.cap! - take } });
        wanted -= take;
        moved += take;
    }
    writes.push({ shard: home, cap: own.cap! + moved, expect: { tag: own.tag, cap: own.cap, maxCount: undefined } });
    return { kind: "write", writes };
}

/** Reads every shard of `key` in one serializable snapshot. */
export async function readCaps(dynamodb: DynamoDBClient, config: CounterConfig, key: string, shards: number): Promise<ShardCap[]> {
    const response = await dynamodb.send(
        new TransactGetItemsCommand({
            TransactItems: Array.from({ length: shards }, (_, shard) => ({
                Get: { TableName: config.countersTableName, Key: bestEffortKey(config, key, shard) },
            })),
        }),
    );
    return (response.Responses ?? []).map((r) => {
        const item = r.Item;
        const carried = stringOf(item, CAP_TAG);
        return {
            count: numberOf(item, config.countAttribute),
            cap: item?.[CAP] === undefined ? undefined : numberOf(item, CAP),
            tag: carried,
        };
    });
}

/** A multi-region key's own region cap and its configuration, which a cap write must still find (runtime/regions/caps.ts). */
export interface RegionGuard {
    readonly tag: string;
    readonly cap: number;
}

/**
 * Writes a plan's caps in one transaction (throws TransactionCanceledException when a condition no longer holds). With
 * `guard`, also conditional on the region's cap being unchanged on shard 0: no shard cap outlives the region cap it
 * was cut from.
 */
export async function writeCaps(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    key: string,
    tag: string,
    writes: readonly CapWrite[],
    guard?: RegionGuard,
): Promise<void> {
    const items: TransactWriteItem[] = writes.map((w) => {
        const names: Record<string, string> = { "#cap": CAP, "#tag": CAP_TAG };
        const values: Record<string, AttributeValue> = { ":cap": { N: String(w.cap) }, ":tag": { S: tag } };
        const conditions: string[] = [];
        if (w.expect.tag === undefined) {
            conditions.push("attribute_not_exists(#tag)");
        } else {
            values[":oldTag"] = { S: w.expect.tag };
            conditions.push("#tag = :oldTag");
        }
        if (w.expect.cap === undefined) {
            conditions.push("attribute_not_exists(#cap)");
        } else {
            values[":oldCap"] = { N: String(w.expect.cap) };
            conditions.push("#cap = :oldCap");
        }
        if (w.expect.maxCount !== undefined) {
            names["#c"] = config.countAttribute;
            values[":max"] = { N: String(w.expect.maxCount) };
            conditions.push("(attribute_not_exists(#c) OR #c <= :max)");
        }
        if (guard !== undefined && w.shard === 0) {
            Object.assign(names, GUARD_NAMES);
            Object.assign(values, guardValues(guard));
            conditions.push(GUARD_CONDITION);
        }
        return {
            Update: {
                TableName: config.countersTableName,
                Key: bestEffortKey(config, key, w.shard),
                UpdateExpression: "SET #cap = :cap, #tag = :tag",
                ConditionExpression: conditions.join(" AND "),
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: values,
            },
        };
    });
    if (guard !== undefined && !writes.some((w) => w.shard === 0)) {
        items.push({
            ConditionCheck: {
                TableName: config.countersTableName,
                Key: bestEffortKey(config, key, 0),
                ConditionExpression: GUARD_CONDITION,
                ExpressionAttributeNames: GUARD_NAMES,
                ExpressionAttributeValues: guardValues(guard),
            },
        });
    }
    await dynamodb.send(new TransactWriteItemsCommand({ TransactItems: items }));
}

const GUARD_NAMES = { "#rtag": "hc_rtag", "#rcap": "hc_rcap" };
const GUARD_CONDITION = "#rtag = :guardTag AND #rcap = :guardCap";

function guardValues(guard: RegionGuard): Record<string, AttributeValue> {
    return { ":guardTag": { S: guard.tag }, ":guardCap": { N: String(guard.cap) } };
}

/** Takes every shard's cap and tag away at once (before a reservation under no limit: see the top). */
export async function clearCaps(dynamodb: DynamoDBClient, config: CounterConfig, key: string, shards: number): Promise<void> {
    await dynamodb.send(
        new TransactWriteItemsCommand({
            TransactItems: Array.from({ length: shards }, (_, shard) => ({
                Update: {
                    TableName: config.countersTableName,
                    Key: bestEffortKey(config, key, shard),
                    UpdateExpression: "REMOVE #tag, #cap",
                    ExpressionAttributeNames: { "#tag": CAP_TAG, "#cap": CAP },
                },
            })),
        }),
    );
}
