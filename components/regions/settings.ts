/**
 * The multi-region setting as every function and the API's client receive it (docs/design/global-tables.md): the
 * component puts it in the counter's configuration, whose environment (runtime/shared/config.ts `counterEnvironment`)
 * holds it in two variables:
 *
 * - `HYBRID_COUNTER_REGIONS`: JSON of `{ current, members: [{ region, role }] }`, every member's role spelled out
 *   ("home" or "member"), in the order the component's `regions.members` lists them. The runtime reads it
 *   (`CounterConfig.regions`) and refuses a `current` that is not a member.
 * - `HYBRID_COUNTER_REGION_ATTRIBUTE`: the attribute that stamps an item with the region whose client created it
 *   (`regionAttribute`, default `hc_region`).
 *
 * Neither variable is set for a counter without `regions`.
 */
import { RegionRole, type CounterRegionsArgs } from "../args";

/** The environment variables of the multi-region setting (read by runtime/shared/config.ts under the same names). */
export const REGIONS_ENV = Object.freeze({
    regions: "HYBRID_COUNTER_REGIONS",
    regionAttribute: "HYBRID_COUNTER_REGION_ATTRIBUTE",
});

/** The stamp's attribute when `regionAttribute` is not given. */
export const DEFAULT_REGION_ATTRIBUTE = "hc_region";

/** One member region as the functions receive it: its role always spelled out. */
export interface RegionMember {
    readonly region: string;
    readonly role: RegionRole;
}

/** The multi-region setting as the functions and the client receive it (`HYBRID_COUNTER_REGIONS`). */
export interface RegionsSetting {
    /** The region this deployment counts for. */
    readonly current: string;
    /** Every member region, in the order `regions.members` lists them. */
    readonly members: RegionMember[];
}

/** The setting of a valid `regions` arg (see regionsProblems): roles default to "member". */
export function regionsSetting(regions: CounterRegionsArgs): RegionsSetting {
    return {
        current: regions.current,
        members: regions.members.map((m) => ({ region: m.region, role: m.role ?? RegionRole.Member })),
    };
}

/** The home region of a setting: the one member whose role is "home". */
export function homeRegion(setting: RegionsSetting): string {
    return setting.members.find((m) => m.role === RegionRole.Home)!.region;
}

/** Is this deployment the home region's? */
export function isHome(setting: RegionsSetting): boolean {
    return homeRegion(setting) === setting.current;
}

/** Every member but the current region, in the members' order. */
export function otherRegions(setting: RegionsSetting): string[] {
    return setting.members.map((m) => m.region).filter((r) => r !== setting.current);
}

/** The region an ARN names (its fourth field): `arn:aws:dynamodb:eu-west-1:...` is in eu-west-1. */
export function regionOfArn(arn: string): string | undefined {
    const region = arn.split(":")[3];
    return region === undefined || region === "" ? undefined : region;
}

/**
 * The ARN of a table in `region`, in the partition and account of `sameAccountArn` (any DynamoDB ARN of the
 * account): a global table's replica has the same name in every region, so its replica in a region is this ARN.
 */
export function tableArnIn(sameAccountArn: string, region: string, tableName: string): string {
    const [arn, partition, service, , account] = sameAccountArn.split(":");
    return [arn, partition, service, region, account, `table/${tableName}`].join(":");
}
