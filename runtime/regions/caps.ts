/**
 * A strict limit over the regions of a global table: each region admits under a cap of its own, and a region raises
 * its cap only when it sees every other region within its share.
 *
 * Invariant: sum over regions R of max(count_R, cap_R) <= L, for the limit L of the key and the member list the
 * regions share, once each region's counter items have replicated to the others. So the live lives the clients
 * admitted stay within L, through every change of the limit or of the members.
 * - Each region's share of L is fixed by L and the sorted member list (the first L mod M regions take one more); a
 *   region that is not a member has a share of 0.
 * - Region R keeps its cap and the configuration it is for (`hc_rcap`, `hc_rtag` on its shard-0 best-effort item).
 *   Its clients admit only under that cap (as a sharded key's shards admit under their caps: runtime/shards/caps.ts,
 *   with the region's cap as the limit), so count_R stays at or below max(the count it had, cap_R).
 * - R lowers its cap on its own at any time. R raises it to its share only when every other region Q with counter
 *   items shows max(count_Q, cap_Q) <= share_Q: then, however Q's own cap moves later, it moves within share_Q, and the
 *   shares sum to L. A region with no counter items for the key has admitted nothing under any configuration.
 * - On a new configuration R writes its cap at once: its share if every other region is within its own, else 0 (R
 *   refuses, and waits for the others to come down: a lowered limit or an added member refuses until deletes bring
 *   every region within its new share). Two regions raising at once each raise to their own share: still within L.
 *
 * What it cannot do: see a region's admissions before they replicate. A region whose latest counter items have not
 * reached R's replica is judged by the older ones, so until a lowered limit and the admissions made before it have
 * replicated, the sum stays within the limit before it. A member removed from the list keeps the units its region
 * admitted (no command lowers them), so the other regions refuse on that key until their own are within their shares
 * (docs/limits.md, changing the members).
 */
import { TransactWriteItemsCommand, type AttributeValue, type DynamoDBClient, type TransactWriteItem } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { fnv1a } from "../shared/config";
import { bestEffortKey, numberOf, stringOf } from "../shared/keys";
import { readKeyCounters } from "../client/read";
import { CAP, CAP_TAG } from "../client/units";
import { shardCount } from "../shards/layout";
import { memberRegions } from "./ownership";
import type { RegionsConfig } from "./config";

/** A region's cap and the configuration it is for, on its shard-0 best-effort item. */
export const REGION_CAP = "hc_rcap";
export const REGION_TAG = "hc_rtag";

/** Region `region`'s share of `limit`: floor(L / M), plus one for the first L mod M members in sorted order; 0 for a non-member. */
export function regionShare(limit: number, regions: RegionsConfig, region: string = regions.current): number {
    const members = memberRegions(regions);
    const at = members.indexOf(region);
    return at < 0 ? 0 : Math.floor(limit / members.length) + (at < limit % members.length ? 1 : 0);
}

/** The configuration a cap is for: the limit and the member list. */
export function regionTag(limit: number, regions: RegionsConfig): string {
    return `${limit}|${fnv1a(memberRegions(regions).join(",")).toString(36)}`;
}

/** What a strict call in this region may do now. */
export type RegionAdmission =
    | { readonly kind: "reserve"; readonly regionTag: string; readonly cap: number }
    | { readonly kind: "refuse"; readonly count: number }
    | { readonly kind: "wait" };

/** One region as this region's replica shows it. */
export interface RegionView {
    readonly count: number;
    readonly cap: number;
}

/** The cap region `current` may take under `limit`: its share when every other region is within its own, else 0. */
export function capFor(limit: number, regions: RegionsConfig, others: ReadonlyMap<string, RegionView>): number {
    for (const [region, view] of others) {
        if (Math.max(view.count, view.cap) > regionShare(limit, regions, region)) {
            return 0;
        }
    }
    return regionShare(limit, regions);
}

/** Decides, and writes when its own cap must move, what a strict call in this region may do under `limit`. */
export async function regionAdmission(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    key: string,
    limit: number,
): Promise<RegionAdmission> {
    const regions = config.regions!;
    const read = await readKeyCounters(dynamodb, config, key);
    const all = read.allRegions ?? new Map();
    const own = all.get(regions.current)?.shard0;
    const tag = regionTag(limit, regions);
    const ownTag = stringOf(own, REGION_TAG);
    const ownCap = numberOf(own, REGION_CAP);
    const others = new Map<string, RegionView>();
    for (const [region, view] of all) {
        if (region !== regions.current) {
            others.set(region, { count: view.bestEffort, cap: numberOf(view.shard0, REGION_CAP) });
        }
    }
    const cap = capFor(limit, regions, others);
    // A cap stands only while every other region is within its share: one past it (reservations made while no limit
    // was in force, a heal's count of other writers' items) takes this region's cap to 0 until it is back within.
    if (ownTag === tag && ownCap > 0 && cap > 0) {
        return { kind: "reserve", regionTag: tag, cap: ownCap };
    }
    if (ownTag !== tag || ownCap !== cap) {
        const written = await writeRegionCap(
            dynamodb,
            config,
            key,
            { tag: ownTag, cap: own?.[REGION_CAP] === undefined ? undefined : ownCap },
            { tag, cap },
        );
        if (!written) {
            return { kind: "wait" };
        }
    }
    // A refusal answers with this region's best-effort, as every strict refusal in a region does.
    return cap > 0 ? { kind: "reserve", regionTag: tag, cap } : { kind: "refuse", count: all.get(regions.current)?.bestEffort ?? 0 };
}

/** The tag of a region's shard caps under region cap `cap` of configuration `tag`. */
export function shardTag(tag: string, cap: number): string {
    return `${tag}/${cap}`;
}

/**
 * Moves this region's cap from `from` to `to`, clearing every shard's cap and its tag in the same transaction, so that
 * no reservation under the old cap lands after it and the shards are armed afresh for the new one. False when another call moved it first.
 */
export async function writeRegionCap(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    key: string,
    from: { readonly tag: string | undefined; readonly cap: number | undefined },
    to: { readonly tag: string; readonly cap: number },
): Promise<boolean> {
    const values: Record<string, AttributeValue> = { ":tag": { S: to.tag }, ":cap": { N: String(to.cap) } };
    const conditions = [
        from.tag === undefined ? "attribute_not_exists(#rtag)" : "#rtag = :oldTag",
        from.cap === undefined ? "attribute_not_exists(#rcap)" : "#rcap = :oldCap",
    ];
    if (from.tag !== undefined) {
        values[":oldTag"] = { S: from.tag };
    }
    if (from.cap !== undefined) {
        values[":oldCap"] = { N: String(from.cap) };
    }
    const items: TransactWriteItem[] = [
        {
            Update: {
                TableName: config.countersTableName,
                Key: bestEffortKey(config, key, 0),
                UpdateExpression: "SET #rtag = :tag, #rcap = :cap REMOVE #ctag, #cap",
                ConditionExpression: conditions.join(" AND "),
                ExpressionAttributeNames: { "#rtag": REGION_TAG, "#rcap": REGION_CAP, "#ctag": CAP_TAG, "#cap": CAP },
                ExpressionAttributeValues: values,
            },
        },
        ...Array.from({ length: shardCount(config) - 1 }, (_, i) => ({
            Update: {
                TableName: config.countersTableName,
                Key: bestEffortKey(config, key, i + 1),
                UpdateExpression: "REMOVE #ctag, #cap",
                ExpressionAttributeNames: { "#ctag": CAP_TAG, "#cap": CAP },
            },
        })),
    ];
    try {
        await dynamodb.send(new TransactWriteItemsCommand({ TransactItems: items }));
        return true;
    } catch (error) {
        if ((error as Error).name === "TransactionCanceledException") {
            return false;
        }
        throw error;
    }
}
