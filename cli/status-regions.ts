/**
 * `status --key` on a multi-region counter: each member region's status of the key, read from the local replica (the
 * region the command runs as), and their sums.
 *
 * Region R's row is what R counts: R's best-effort and eventual items (`<counterPrefix>@R#...`) and the lives R owns
 * (runtime/regions/ownership.ts: R's stamp; for the home region also items no member stamped). Every life has one
 * owner, so the rows' `live` sum to the key's live items, and once replication and every region's stream have drained
 * the rows' `eventual` sum to them too. `value` is what count() answers: the sum over regions of
 * max(best-effort_R, eventual_R). Another region's writes show here after the replication delay: the read is local.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { readKeyStatus, type KeyStatus } from "../runtime/ops/status";
import { asRegion } from "../runtime/regions/read";
import { homeRegion, memberRegions } from "../runtime/regions/ownership";
import type { CounterTableConfig, RegionsConfig } from "../runtime/shared/config";

/** One member region's status of a key. */
export interface RegionKeyStatus extends Omit<KeyStatus, "key"> {
    readonly region: string;
    /** The home region owns the items no member stamped. */
    readonly home: boolean;
}

/** A key's status summed over the regions (KeyStatus's fields), count()'s value, and each region's own. */
export interface RegionsKeyStatus extends Omit<KeyStatus, "shards"> {
    /** Sum over regions of max(bestEffort, eventual): what count() answers. */
    readonly value: number;
    /** Every member region, in sorted order. */
    readonly regions: readonly RegionKeyStatus[];
}

const SUMMED = ["bestEffort", "eventual", "live", "pendingCreates", "pendingDeletes", "malformed", "heldSlots", "drift"] as const;

/** Reads every member region's status of `key` (strongly consistent Queries of the key's partitions, region by region). */
export async function readRegionsKeyStatus(
    key: string,
    { config, dynamodb }: { readonly config: CounterTableConfig & { readonly regions: RegionsConfig }; readonly dynamodb: DynamoDBClient },
): Promise<RegionsKeyStatus> {
    const home = homeRegion(config.regions);
    const regions: RegionKeyStatus[] = [];
    for (const region of memberRegions(config.regions)) {
        const { key: _key, ...status } = await readKeyStatus(key, { config: asRegion(config, region), dynamodb });
        regions.push({ region, home: region === home, ...status });
    }
    const sums = Object.fromEntries(SUMMED.map((field) => [field, regions.reduce((sum, r) => sum + r[field], 0)])) as Record<
        (typeof SUMMED)[number],
        number
    >;
    return {
        key,
        ...sums,
        exact: regions.every((r) => r.exact),
        value: regions.reduce((sum, r) => sum + Math.max(r.bestEffort, r.eventual), 0),
        regions,
    };
}
