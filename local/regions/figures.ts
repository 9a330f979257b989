/**
 * What a multi-region run measures once replication and every stream have drained: whether the replicas converged,
 * and per region the figures of counting per region (docs/design/global-tables.md): region R's eventual counter of key
 * k must equal the live items of k that R owns, and those must all carry the counted flag (each life is counted by its
 * owner alone: runtime/regions/ownership.ts).
 */
import { QueryCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { memberRegions, ownerOf, regionAttributeOf } from "../../runtime/regions/ownership";
import { readKeyCounters } from "../../runtime/client/read";
import { isCounted, isLive, isSelected, isSoftDeleted } from "../../runtime/shared/selection";
import type { RegionalConfig } from "./deployment";
import { canonical } from "./versions";

export interface RegionFigures {
    /** Σ over keys of the region's eventual counter. */
    eventual: number;
    /** Σ over keys of the region's best-effort counter. */
    bestEffort: number;
    /** Live items the region owns that carry the counted flag. */
    counted: number;
    /** Live, selected items the region owns (its eventual's truth). */
    owned: number;
    /** eventual == owned == counted for every key. */
    exact: boolean;
}

export interface ConvergedFigures {
    /** Every engine holds the same items in the user's table and in the counters table. */
    converged: boolean;
    /** Live, selected items of the keys, in the converged table. */
    live: number;
    liveByKey: Record<string, number>;
    /** Selected items soft-deleted and not yet removed (tombstones the settlers remove once they are old enough). */
    softDeleted: number;
    perRegion: Record<string, RegionFigures>;
}

/** `config` as `region`'s functions see it. */
export function asRegion(config: RegionalConfig, region: string): RegionalConfig {
    return { ...config, regions: { ...config.regions, current: region } };
}

export async function scanAll(client: DynamoDBClient, table: string): Promise<Array<Record<string, AttributeValue>>> {
    const items: Array<Record<string, AttributeValue>> = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await client.send(
            new ScanCommand({ TableName: table, ConsistentRead: true, ...(start === undefined ? {} : { ExclusiveStartKey: start }) }),
        );
        items.push(...(page.Items ?? []));
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return items;
}

export const sameItems = (a: Array<Record<string, AttributeValue>>, b: Array<Record<string, AttributeValue>>) =>
    JSON.stringify(a.map((i) => canonical(i)).sort()) === JSON.stringify(b.map((i) => canonical(i)).sort());

/** Whether every engine holds the same items in every table as the first. */
async function convergedTables(clients: readonly DynamoDBClient[], tables: readonly string[]): Promise<boolean> {
    for (const table of tables) {
        const reference = await scanAll(clients[0]!, table);
        for (const client of clients.slice(1)) {
            if (!sameItems(reference, await scanAll(client, table))) {
                return false;
            }
        }
    }
    return true;
}

/** Reads the figures from the engines (each region's client); `config` is any region's client configuration. */
export async function convergedFigures(
    clients: ReadonlyMap<string, DynamoDBClient>,
    config: RegionalConfig,
    keys: readonly string[],
): Promise<ConvergedFigures> {
    const regions = memberRegions(config.regions);
    const reader = clients.get(regions[0]!)!;
    const converged = await convergedTables([...clients.values()], [config.tableName, config.countersTableName]);
    const perRegion: Record<string, RegionFigures> = Object.fromEntries(
        regions.map((r) => [r, { eventual: 0, bestEffort: 0, counted: 0, owned: 0, exact: true }]),
    );
    const liveByKey: Record<string, number> = Object.fromEntries(keys.map((k) => [k, 0]));
    const owned = new Map<string, { live: number; counted: number }>();
    let softDeleted = 0;
    for (const item of await scanAll(reader, config.tableName)) {
        // Ownership is part of the selection: an item is selected as its owner's configuration selects it.
        const owner = ownerOf(item, config.regions, regionAttributeOf(config));
        const scoped = asRegion(config, owner);
        softDeleted += isSelected(item, scoped) && isSoftDeleted(item, scoped) ? 1 : 0;
        if (!isLive(item, scoped)) {
            continue;
        }
        const key = item[config.partitionKey]?.S ?? "";
        liveByKey[key] = (liveByKey[key] ?? 0) + 1;
        const tally = owned.get(`${owner}\u0000${key}`) ?? { live: 0, counted: 0 };
        tally.live++;
        tally.counted += isCounted(item, scoped) ? 1 : 0;
        owned.set(`${owner}\u0000${key}`, tally);
    }
    for (const key of keys) {
        const read = await readKeyCounters(reader, config, key);
        for (const r of read.regions ?? []) {
            const figures = perRegion[r.region]!;
            const tally = owned.get(`${r.region}\u0000${key}`) ?? { live: 0, counted: 0 };
            figures.eventual += r.eventual;
            figures.bestEffort += r.bestEffort;
            figures.owned += tally.live;
            figures.counted += tally.counted;
            figures.exact &&= r.eventual === tally.live && tally.counted === tally.live;
        }
    }
    return { converged, live: Object.values(liveByKey).reduce((a, b) => a + b, 0), liveByKey, softDeleted, perRegion };
}

/**
 * The live, selected items of `key` that `region` owns, in `region`'s own replica (strongly consistent): a region's
 * own creates and deletes are in its replica at once, so the sum over regions is the key's live count as the regions'
 * clients have made it, whatever replication has delivered yet.
 */
export async function ownedLive(client: DynamoDBClient, config: RegionalConfig, region: string, key: string): Promise<number> {
    const scoped = asRegion(config, region);
    let n = 0;
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await client.send(
            new QueryCommand({
                TableName: config.tableName,
                KeyConditionExpression: "#pk = :k",
                ExpressionAttributeNames: { "#pk": config.partitionKey },
                ExpressionAttributeValues: { ":k": { S: key } },
                ConsistentRead: true,
                ...(start === undefined ? {} : { ExclusiveStartKey: start }),
            }),
        );
        n += (page.Items ?? []).filter((item) => isLive(item, scoped)).length;
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return n;
}
