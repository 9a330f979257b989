export {
    AlarmName,
    Architecture,
    BillingMode,
    RegionRole,
    type BackfillArgs,
    type CounterRegionArgs,
    type CounterRegionsArgs,
    type HybridCounterAlarmArns,
    type HybridCounterComponentArgs,
} from "./args";
export { ALARM_SPECS, type AlarmSpec, type AlarmSubject } from "./alarms";
export { assertBundlesExist, bundlePathsUnder, findPackageRoot, type BundlePaths } from "./bundles";
export { HybridCounterComponent, defaultDashboardName, type HybridCounterClientConfig } from "./component";
export { dashboardBody, type DashboardInputs } from "./dashboard";
export {
    ALARM_NAMES,
    COMPONENT_TYPE,
    DEFAULT_LAYOUT,
    DEFAULT_METRICS_NAMESPACE,
    FIXED,
    HYBRID_COUNTER_DEFAULTS,
    LIMITS,
    LOG_RETENTION_DAYS,
    firstDlqVisibilityTimeout,
    type HybridCounterAlarmName,
} from "./defaults";
export {
    consumerPolicy,
    denyInsecureTransportPolicy,
    lambdaAssumeRolePolicy,
    redrivePolicy,
    type PolicyDocument,
    type PolicyStatement,
} from "./iam";
export {
    HybridCounterArgsError,
    attachedTableProblems,
    hybridCounterArgsProblems,
    layoutFromArgs,
    validateHybridCounterArgs,
    type AttachedTableSettings,
} from "./validation";
export { REGIONS_ENV, type RegionMember, type RegionsSetting } from "./regions";
export { backfillArgsProblems, backfillPolicy, type BackfillPolicyInputs } from "./backfill";
