/**
 * Who owns an item's life, and so who counts it: the region whose client created it (its stamp), or the home region
 * for an item nobody stamped (another writer's, one from before the counter). Every image has exactly one owner,
 * computed from the image alone (and the home region): not from the member list, so that a change of the members
 * never moves a life from one region's count to another's. A region removed from the members keeps owning the lives
 * its clients stamped, and its consumer keeps counting them until they are gone; `count()` sums every region that has
 * counter items, member or not.
 */
import { DEFAULT_REGION_ATTRIBUTE, type RegionsConfig } from "./config";

/** An item image in DynamoDB's attribute-value form (the SDK's, or a stream record's). */
export type Image = Readonly<Record<string, unknown>>;

/**
 * The attribute a client writes with a soft delete of a life another region owns: the deleting region (S, at most 25
 * bytes). The owner's consumer reads it to tell that delete from its own client's (whose unit it already gave back),
 * and marks the key due for a heal. Remover: the owner's consumer's hard delete of the soft-deleted item, or any
 * removal of the item.
 */
export const FOREIGN_DELETE_ATTRIBUTE = "hc_deleted_in";

/** The home region: the one member whose role is "home" (the configuration is checked to have exactly one). */
export function homeRegion(regions: RegionsConfig): string {
    const home = regions.members.find((member) => member.role === "home");
    if (home === undefined) {
        throw new RangeError("a regions setting must name exactly one home region");
    }
    return home.region;
}

/** The member regions' names, sorted (the order quotas are split in). */
export function memberRegions(regions: RegionsConfig): string[] {
    return regions.members.map((member) => member.region).sort();
}

/** Whether `region` is a member. */
export function isMember(regions: RegionsConfig, region: string): boolean {
    return regions.members.some((member) => member.region === region);
}

/** The stamp an image carries (undefined: none, or not a string). */
export function stampOf(image: Image | undefined, regionAttribute = DEFAULT_REGION_ATTRIBUTE): string | undefined {
    const value = image?.[regionAttribute] as { readonly S?: unknown } | undefined;
    return value !== null && typeof value === "object" && typeof value.S === "string" ? value.S : undefined;
}

/** The region that owns an image's life: its stamp, else the home region. */
export function ownerOf(image: Image | undefined, regions: RegionsConfig, regionAttribute = DEFAULT_REGION_ATTRIBUTE): string {
    const stamp = stampOf(image, regionAttribute);
    return stamp !== undefined && stamp.length > 0 ? stamp : homeRegion(regions);
}

/** What ownership needs of a configuration. */
export interface OwnershipScope {
    readonly regions?: RegionsConfig;
    readonly regionAttribute?: string;
}

/**
 * Whether this process's region owns `image` (always, with no regions configured: one region owns everything). An
 * absent image is owned by no one.
 */
export function ownsImage(config: OwnershipScope, image: Image | undefined | null): boolean {
    if (image === undefined || image === null) {
        return false;
    }
    return config.regions === undefined || ownerOf(image, config.regions, config.regionAttribute) === config.regions.current;
}

/** The stamp attribute's name under a configuration. */
export function regionAttributeOf(config: OwnershipScope): string {
    return config.regionAttribute ?? DEFAULT_REGION_ATTRIBUTE;
}
