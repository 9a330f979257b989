/**
 * hybrid-counter's CrossGuard policies: stream and retry safety for DynamoDB stream consumers, and what a hybrid
 * counter's own consumer needs of its mapping, its table's regions and its threshold topic.
 *
 * This module only defines and exports the policies; it never constructs a `PolicyPack` (which
 * starts a gRPC server and exits the process on misuse). The pack itself lives in `pack.ts`.
 *
 * Build your own pack with different levels or thresholds:
 *
 * ```typescript
 * import { PolicyPack } from "@pulumi/policy";
 * import { hybridCounterPolicies } from "hybrid-counter/policy";
 *
 * new PolicyPack("counter-guard", {
 *     policies: hybridCounterPolicies({
 *         all: "mandatory",
 *         "stream-consumer-alarms": "advisory",
 *         "stream-mapping-bounded-retries": { maximumRetryAttempts: 3 },
 *     }),
 * });
 * ```
 */

import type { EnforcementLevel, Policies, ResourceValidationPolicy, StackValidationPolicy } from "@pulumi/policy";
import { consumerIamNoWildcardActions } from "./iam";
import { streamConsumerAlarms } from "./alarms";
import {
    streamMappingBisectOnError,
    streamMappingBoundedRecordAge,
    streamMappingBoundedRetries,
    streamMappingOnFailureDestination,
    streamMappingReportBatchItemFailures,
    streamMappingTrimHorizon,
} from "./mapping";
import { failureQueueEncryption, failureQueueRetention } from "./queue";
import { dynamodbStreamViewType, dynamodbTableEncryption, dynamodbTablePointInTimeRecovery } from "./table";
import { PolicyConfigError, PolicySetting } from "./config";
import { scheduledFunctionGuarded } from "./schedule";
import { streamMappingCounterParallelization, streamMappingCounterTumblingWindow } from "./parallelization";
import { counterTableReplicas } from "./regions";
import { counterThresholdTopic } from "./thresholds";

export { ENFORCEMENT_LEVELS, PolicyConfigError, resourceClassOf } from "./config";
export type { ExemptionConfig, PolicyFactory, PolicySetting } from "./config";
export { TYPES, dependenciesOf, isDynamoDbStreamArn, readsDynamoDbStream, streamMappings, failureQueues, consumerFunctions } from "./graph";
export type { StreamMapping, FailureQueue } from "./graph";
export { UNKNOWN, read, isUnknown } from "./unknowns";
export type { Maybe, Unknown } from "./unknowns";
export type { StreamViewTypeConfig, PointInTimeRecoveryConfig, TableEncryptionConfig, StreamViewType } from "./table";
export { STREAM_VIEW_TYPES, DEFAULT_RECOVERY_PERIOD_IN_DAYS, viewTypeCarries } from "./table";
export type {
    BoundedRetriesConfig,
    BoundedRecordAgeConfig,
    BisectConfig,
    ReportBatchItemFailuresConfig,
    OnFailureDestinationConfig,
    StartingPositionConfig,
} from "./mapping";
export { LAMBDA_MAX_RETRY_ATTEMPTS, LAMBDA_MAX_RECORD_AGE_SECONDS, STREAM_RETENTION_SECONDS } from "./mapping";
export type { FailureQueueEncryptionConfig, FailureQueueRetentionConfig } from "./queue";
export { SQS_DEFAULT_RETENTION_SECONDS, SQS_MAX_RETENTION_SECONDS } from "./queue";
export type { StreamConsumerAlarmsConfig } from "./alarms";
export type { ConsumerIamConfig } from "./iam";
export { wildcardGrants } from "./iam";
export type { ScheduledFunctionConfig } from "./schedule";
export { SCHEDULE_TYPES, rateMinutes } from "./schedule";
export type { CounterParallelizationConfig, CounterTumblingWindowConfig } from "./parallelization";
export {
    COUNTER_CONSUMER_VARIABLE,
    COUNTER_SHARDS_MAX,
    COUNTER_SHARDS_VARIABLE,
    counterShardsOf,
    isCounterConsumer,
} from "./parallelization";
export type { ConsumerShards } from "./parallelization";
export type { CounterTableReplicasConfig } from "./regions";
export { COUNTER_REGIONS_VARIABLE, isRegionsSetting } from "./regions";
export type { CounterThresholdTopicConfig } from "./thresholds";

/** Every policy factory, by policy name, in the order the pack lists them. */
export const policyFactories = {
    "dynamodb-stream-view-type": dynamodbStreamViewType,
    "dynamodb-table-point-in-time-recovery": dynamodbTablePointInTimeRecovery,
    "dynamodb-table-encryption": dynamodbTableEncryption,
    "stream-mapping-bounded-retries": streamMappingBoundedRetries,
    "stream-mapping-bounded-record-age": streamMappingBoundedRecordAge,
    "stream-mapping-bisect-on-error": streamMappingBisectOnError,
    "stream-mapping-report-batch-item-failures": streamMappingReportBatchItemFailures,
    "stream-mapping-on-failure-destination": streamMappingOnFailureDestination,
    "stream-mapping-trim-horizon": streamMappingTrimHorizon,
    "stream-mapping-counter-parallelization": streamMappingCounterParallelization,
    "stream-mapping-counter-tumbling-window": streamMappingCounterTumblingWindow,
    "counter-table-replicas": counterTableReplicas,
    "counter-threshold-topic": counterThresholdTopic,
    "failure-queue-encryption": failureQueueEncryption,
    "failure-queue-retention": failureQueueRetention,
    "stream-consumer-alarms": streamConsumerAlarms,
    "consumer-iam-no-wildcard-actions": consumerIamNoWildcardActions,
    "scheduled-function-guarded": scheduledFunctionGuarded,
} as const;

export type PolicyName = keyof typeof policyFactories;
export const POLICY_NAMES = Object.keys(policyFactories) as PolicyName[];

type SettingOf<F> = F extends (setting?: infer S) => unknown ? S : never;

/**
 * Levels and config for the pack's policies, awsguard-style and in the shape of Pulumi's policy
 * pack config: `all` sets the level of every policy without its own; each policy takes a level, or
 * config values with an optional `enforcementLevel`.
 */
export type HybridCounterPolicyArgs = { readonly all?: EnforcementLevel } & {
    readonly [N in PolicyName]?: SettingOf<(typeof policyFactories)[N]>;
};

/**
 * Builds the pack's policies. A disabled policy stays in the list with level "disabled", so that
 * the engine's pack config can still turn it on.
 */
export function hybridCounterPolicies(args: HybridCounterPolicyArgs = {}): Policies {
    const problems: string[] = [];
    const unknownKeys = Object.keys(args).filter((k) => k !== "all" && !(POLICY_NAMES as string[]).includes(k));
    problems.push(...unknownKeys.map((k) => `[${k}] is not a policy of this pack; policies are ${POLICY_NAMES.join(", ")}`));
    const policies: (ResourceValidationPolicy | StackValidationPolicy)[] = [];
    for (const name of POLICY_NAMES) {
        const own = args[name] as PolicySetting<object> | undefined;
        let setting: PolicySetting<object> | undefined = own;
        if (args.all !== undefined && (own === undefined || (typeof own === "object" && own.enforcementLevel === undefined))) {
            setting = { ...(typeof own === "object" ? own : {}), enforcementLevel: args.all };
        }
        try {
            policies.push(
                (policyFactories[name] as (s?: PolicySetting<object>) => ResourceValidationPolicy | StackValidationPolicy)(setting),
            );
        } catch (e) {
            if (e instanceof PolicyConfigError) {
                problems.push(...e.problems);
            } else {
                throw e;
            }
        }
    }
    if (problems.length > 0) {
        throw new PolicyConfigError(problems);
    }
    return policies;
}

export {
    consumerIamNoWildcardActions,
    counterTableReplicas,
    counterThresholdTopic,
    dynamodbStreamViewType,
    dynamodbTableEncryption,
    dynamodbTablePointInTimeRecovery,
    failureQueueEncryption,
    failureQueueRetention,
    streamConsumerAlarms,
    streamMappingBisectOnError,
    streamMappingBoundedRecordAge,
    streamMappingBoundedRetries,
    streamMappingCounterParallelization,
    streamMappingCounterTumblingWindow,
    streamMappingOnFailureDestination,
    streamMappingReportBatchItemFailures,
    streamMappingTrimHorizon,
    scheduledFunctionGuarded,
};

/** The pack's name. */
export const POLICY_PACK_NAME = "hybrid-counter";
