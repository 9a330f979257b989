/**
 * Counting per region on a global table (docs/design/global-tables.md): each life is counted once, by the region that
 * owns it (its stamp, or the home region for an unstamped item), into counter items that region alone writes; a
 * strict limit is kept over the regions' sum by caps each region raises only when it sees every other within its share.
 */
export {
    DEFAULT_REGION_ATTRIBUTE,
    REGIONS_MAX,
    REGION_NAME_MAX_BYTES,
    normalizedRegions,
    parseRegions,
    regionCounterPrefix,
    regionNameProblem,
    regionalCounterPrefix,
    regionsJson,
    regionsProblems,
    type RegionMember,
    type RegionsConfig,
    type RegionsContext,
} from "./config";
export {
    FOREIGN_DELETE_ATTRIBUTE,
    homeRegion,
    isMember,
    memberRegions,
    ownerOf,
    ownsImage,
    regionAttributeOf,
    stampOf,
    type Image,
    type OwnershipScope,
} from "./ownership";
export { REGION_CAP, REGION_TAG, capFor, regionShare, regionTag } from "./caps";
