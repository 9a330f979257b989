/**
 * Strict mode's base quotas across regions: the limit L split over the sorted member list as evenly as integers allow,
 * the first `L mod M` regions taking one more. Each region computes its own from L and the configuration alone, so
 * arming needs no other region. The argument that the quotas keep the key's bound is in index.ts.
 */
import type { RegionsConfig } from "./config";
import { memberRegions } from "./ownership";

/** Region `region`'s base quota of `limit`: floor(L / M), plus one for the first L mod M regions in sorted order. */
export function baseQuota(limit: number, regions: RegionsConfig, region: string = regions.current): number {
    const members = memberRegions(regions);
    const at = members.indexOf(region);
    if (at < 0) {
        throw new RangeError(`"${region}" is not a member region`);
    }
    return Math.floor(limit / members.length) + (at < limit % members.length ? 1 : 0);
}

/** Every member's base quota of `limit`, by region (they sum to exactly `limit`). */
export function baseQuotas(limit: number, regions: RegionsConfig): Map<string, number> {
    return new Map(memberRegions(regions).map((region) => [region, baseQuota(limit, regions, region)]));
}
