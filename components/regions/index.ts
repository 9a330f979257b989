/**
 * Counting per region on a global table (docs/design/global-tables.md): the `regions` arg's checks, the setting the
 * functions and the client receive, and each region's stream filter. The component (component.ts) wires them; this
 * folder creates no resource.
 */
export {
    DEFAULT_REGION_ATTRIBUTE,
    REGIONS_ENV,
    homeRegion,
    isHome,
    otherRegions,
    regionOfArn,
    regionsSetting,
    tableArnIn,
    type RegionMember,
    type RegionsSetting,
} from "./settings";
export { GLOBAL_TABLES_DESIGN, regionsProblems, regionsShapeProblems, replicatedTableProblems, tableRegionProblems } from "./validation";
