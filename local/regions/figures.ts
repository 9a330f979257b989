/**
 * What a multi-region run measures once replication and every stream have drained: whether the replicas converged,
 * and per region the figures of counting per region (docs/design/global-tables.md, "The counting invariant, per
 * region"): region R's eventual counter of key k must equal the live, selected items of k that R owns, and no item may
 * be counted by more than one region's markers (`doubleCounted`).
 */
import { QueryCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { asRegion, readRegionsCounters } from "../../runtime/regions/read";
import { memberRegions, ownerOf, regionAttributeOf } from "../../runtime/regions/ownership";
import type { RegionsConfig } from "../../runtime/regions/config";
import { COUNTER_ATTRIBUTES, MARKER_STATE, countersTable, markerId, type CounterTableConfig } from "../../runtime/shared/config";
import { isLive, isSelected, isSoftDeleted } from "../../runtime/shared/selection";
import { canonical } from "./versions";

export interface RegionFigures {
    /** Σ over keys of the region's eventual counter. */
    eventual: number;
    /** Σ over keys of the region's best-effort counter. */
    bestEffort: number;
    /** Items the region's markers say are counted. */
    counted: number;
    /** Live, selected items the region owns (its eventual's truth). */
    owned: number;
    /** eventual == owned for every key. */
    exact: boolean;
}

export interface ConvergedFigures {
    /** Every engine holds the same items in the user's table and in the counters table. */
    converged: boolean;
    /** Live, selected items of the keys, in the converged table. */
    live: number;
    liveByKey: Record<string, number>;
    /** Selected items soft-deleted and not yet removed (the consumers remove them). */
    softDeleted: number;
    /** Items whose markers are "counted" in more than one region. */
    doubleCounted: number;
    perRegion: Record<string, RegionFigures>;
}

async function scanAll(client: DynamoDBClient, table: string): Promise<Array<Record<string, AttributeValue>>> {
    const items: Array<Record<string, AttributeValue>> = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await client.send(new ScanCommand({ TableName: table, ConsistentRead: true, ExclusiveStartKey: start }));
        items.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return items;
}

const sameItems = (a: Array<Record<string, AttributeValue>>, b: Array<Record<string, AttributeValue>>) =>
    JSON.stringify(a.map((i) => canonical(i)).sort()) === JSON.stringify(b.map((i) => canonical(i)).sort());

/**
 * Reads the figures from the engines (each region's client); `layout` is any region's client configuration (its
 * `regions` names every member).
 */
export async function convergedFigures(
    clients: ReadonlyMap<string, DynamoDBClient>,
    layout: CounterTableConfig & { readonly regions: RegionsConfig },
    keys: readonly string[],
): Promise<ConvergedFigures> {
    const regions = memberRegions(layout.regions);
    const reader = clients.get(regions[0]!)!;
    const items = await scanAll(reader, layout.tableName);
    const counters = await scanAll(reader, countersTable(layout));
    let converged = true;
    for (const client of clients.values()) {
        if (client === reader) {
            continue;
        }
        converged &&= sameItems(items, await scanAll(client, layout.tableName));
        converged &&= sameItems(counters, await scanAll(client, countersTable(layout)));
    }
    const ownedByKey = new Map<string, number>();
    const liveByKey: Record<string, number> = Object.fromEntries(keys.map((k) => [k, 0]));
    let softDeleted = 0;
    for (const item of items) {
        // Ownership is part of the selection: an item is selected as its owner's configuration selects it.
        const owner = ownerOf(item, layout.regions, regionAttributeOf(layout));
        const scoped = asRegion(layout, owner);
        if (!isSelected(item, scoped)) {
            continue;
        }
        if (isSoftDeleted(item, scoped)) {
            softDeleted++;
        }
        if (!isLive(item, scoped)) {
            continue;
        }
        const key = item[layout.partitionKey]?.S ?? "";
        liveByKey[key] = (liveByKey[key] ?? 0) + 1;
        ownedByKey.set(`${owner}\u0000${key}`, (ownedByKey.get(`${owner}\u0000${key}`) ?? 0) + 1);
    }
    // Each region's counted markers, by item id.
    const countedIn = new Map<string, Set<string>>();
    const counted: Record<string, number> = Object.fromEntries(regions.map((r) => [r, 0]));
    for (const marker of counters) {
        if (marker[COUNTER_ATTRIBUTES.state]?.S !== MARKER_STATE.counted) {
            continue;
        }
        const sortKey = marker[layout.sortKey]?.S ?? "";
        for (const region of regions) {
            const id = markerId(asRegion(layout, region), sortKey);
            if (id !== undefined) {
                counted[region]!++;
                const set = countedIn.get(id) ?? new Set<string>();
                set.add(region);
                countedIn.set(id, set);
            }
        }
    }
    const perRegion: Record<string, RegionFigures> = Object.fromEntries(
        regions.map((r) => [r, { eventual: 0, bestEffort: 0, counted: counted[r]!, owned: 0, exact: true }]),
    );
    for (const key of keys) {
        const read = await readRegionsCounters(reader, layout, key);
        for (const r of read.regions) {
            const figures = perRegion[r.region]!;
            const owned = ownedByKey.get(`${r.region}\u0000${key}`) ?? 0;
            figures.eventual += r.eventual;
            figures.bestEffort += r.bestEffort;
            figures.owned += owned;
            figures.exact &&= r.eventual === owned;
        }
    }
    return {
        converged,
        live: Object.values(liveByKey).reduce((a, b) => a + b, 0),
        liveByKey,
        softDeleted,
        doubleCounted: [...countedIn.values()].filter((s) => s.size > 1).length,
        perRegion,
    };
}

/**
 * The live, selected items of `key` that `region` owns, in `region`'s own replica (strongly consistent): a region's
 * own creates and deletes are in its replica at once, so the sum over regions is the key's live count as the regions'
 * clients have made it, whatever replication has delivered yet.
 */
export async function ownedLive(
    client: DynamoDBClient,
    layout: CounterTableConfig & { readonly regions: RegionsConfig },
    region: string,
    key: string,
): Promise<number> {
    let n = 0;
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await client.send(
            new QueryCommand({
                TableName: layout.tableName,
                KeyConditionExpression: "#pk = :k",
                ExpressionAttributeNames: { "#pk": layout.partitionKey },
                ExpressionAttributeValues: { ":k": { S: key } },
                ConsistentRead: true,
                ExclusiveStartKey: start,
            }),
        );
        for (const item of page.Items ?? []) {
            if (ownerOf(item, layout.regions, regionAttributeOf(layout)) === region && isLive(item, asRegion(layout, region))) {
                n++;
            }
        }
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return n;
}
