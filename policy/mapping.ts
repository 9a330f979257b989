/**
 * Policies on Lambda event source mappings that read a DynamoDB stream.
 *
 * These are stack policies: during preview a mapping's `eventSourceArn` is usually the unknown stream
 * ARN of a table created in the same program, and only the stack view carries the dependency that
 * tells a stream mapping from a queue mapping (see `readsDynamoDbStream`).
 */

import type { PolicyResource, ReportViolation, StackValidationArgs } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { dependenciesOf, StreamMapping, streamMappings, TYPES } from "./graph";
import { isUnknown, Maybe, read, show } from "./unknowns";

/** Runs `check` on every stream mapping, or marks the policy not applicable when there is none. */
function eachStreamMapping(args: StackValidationArgs, check: (stream: StreamMapping) => void): void {
    const mappings = streamMappings(args.resources);
    if (mappings.length === 0) {
        args.notApplicable("no event source mapping in this stack reads a DynamoDB stream");
    }
    mappings.forEach(check);
}

function prop(mapping: PolicyResource, get: (props: Record<string, any>) => unknown): Maybe<unknown> {
    return read(() => get(mapping.props));
}

function describe(mapping: PolicyResource): string {
    return `event source mapping '${mapping.name}' (DynamoDB stream)`;
}

/** Lambda's limit for maximumRetryAttempts. */
export const LAMBDA_MAX_RETRY_ATTEMPTS = 10_000;
/** Lambda's limit for maximumRecordAgeInSeconds (besides -1). */
export const LAMBDA_MAX_RECORD_AGE_SECONDS = 604_800;
/** DynamoDB stream records are readable for 24 hours. */
export const STREAM_RETENTION_SECONDS = 86_400;

export interface BoundedRetriesConfig extends ExemptionConfig {
    /** Highest maximumRetryAttempts allowed. @default 10 */
    readonly maximumRetryAttempts: number;
}

export const streamMappingBoundedRetries = stackPolicy<BoundedRetriesConfig>({
    name: "stream-mapping-bounded-retries",
    description:
        "An event source mapping on a DynamoDB stream sets maximumRetryAttempts to a bounded value at or below the configured maximum. " +
        "Without a bound, Lambda's default (-1) retries a failing batch until its records expire, blocking the shard for up to 24 hours.",
    remediationSteps: "Set maximumRetryAttempts between 0 and the configured maximum on the event source mapping.",
    enforcementLevel: "mandatory",
    config: {
        maximumRetryAttempts: {
            type: "integer",
            minimum: 0,
            maximum: LAMBDA_MAX_RETRY_ATTEMPTS,
            default: 10,
            description: "Highest maximumRetryAttempts allowed.",
        },
    },
    check: (args, config, reportViolation) =>
        eachStreamMapping(args, ({ mapping }) => {
            const value = prop(mapping, (p) => p.maximumRetryAttempts);
            if (isUnknown(value)) {
                return;
            }
            if (typeof value !== "number" || value < 0) {
                reportViolation(
                    `${describe(mapping)} has [maximumRetryAttempts] ${show(value)}, which retries forever; set it between 0 and ${config.maximumRetryAttempts}`,
                    mapping.urn,
                );
            } else if (value > config.maximumRetryAttempts) {
                reportViolation(
                    `${describe(mapping)} has [maximumRetryAttempts] ${value}, above the maximum ${config.maximumRetryAttempts}`,
                    mapping.urn,
                );
            }
        }),
});

export interface BoundedRecordAgeConfig extends ExemptionConfig {
    /** Highest maximumRecordAgeInSeconds allowed. @default 43200 (half the 24 h stream retention) */
    readonly maximumRecordAgeInSeconds: number;
}

export const streamMappingBoundedRecordAge = stackPolicy<BoundedRecordAgeConfig>({
    name: "stream-mapping-bounded-record-age",
    description:
        "An event source mapping on a DynamoDB stream sets maximumRecordAgeInSeconds to a bounded value at or below the configured maximum. " +
        "Without a bound, Lambda's default (-1) keeps retrying records until the stream drops them after 24 hours, so they never reach the on-failure destination, " +
        "and a batch sent there late leaves the redrive no time to re-read it from the stream.",
    remediationSteps: "Set maximumRecordAgeInSeconds between 60 and the configured maximum on the event source mapping.",
    enforcementLevel: "mandatory",
    config: {
        maximumRecordAgeInSeconds: {
            type: "integer",
            minimum: 60,
            maximum: LAMBDA_MAX_RECORD_AGE_SECONDS,
            default: STREAM_RETENTION_SECONDS / 2,
            description: "Highest maximumRecordAgeInSeconds allowed.",
        },
    },
    check: (args, config, reportViolation) =>
        eachStreamMapping(args, ({ mapping }) => {
            const value = prop(mapping, (p) => p.maximumRecordAgeInSeconds);
            if (isUnknown(value)) {
                return;
            }
            if (typeof value !== "number" || value < 0) {
                reportViolation(
                    `${describe(mapping)} has [maximumRecordAgeInSeconds] ${show(value)}, which never gives up on a record; set it between 60 and ${config.maximumRecordAgeInSeconds}`,
                    mapping.urn,
                );
            } else if (value > config.maximumRecordAgeInSeconds) {
                reportViolation(
                    `${describe(mapping)} has [maximumRecordAgeInSeconds] ${value}, above the maximum ${config.maximumRecordAgeInSeconds}`,
                    mapping.urn,
                );
            }
        }),
});

export type BisectConfig = ExemptionConfig;

export const streamMappingBisectOnError = stackPolicy<BisectConfig>({
    name: "stream-mapping-bisect-on-error",
    description:
        "An event source mapping on a DynamoDB stream sets bisectBatchOnFunctionError. Without it one poison record fails its whole batch " +
        "on every retry, and the healthy records around it reach the on-failure destination with it.",
    remediationSteps: "Set bisectBatchOnFunctionError: true on the event source mapping.",
    enforcementLevel: "advisory",
    config: {},
    check: (args, _config, reportViolation) =>
        eachStreamMapping(args, ({ mapping }) => {
            const value = prop(mapping, (p) => p.bisectBatchOnFunctionError);
            if (!isUnknown(value) && value !== true) {
                reportViolation(`${describe(mapping)} has [bisectBatchOnFunctionError] ${show(value)}; it must be true`, mapping.urn);
            }
        }),
});

export type ReportBatchItemFailuresConfig = ExemptionConfig;

export const streamMappingReportBatchItemFailures = stackPolicy<ReportBatchItemFailuresConfig>({
    name: "stream-mapping-report-batch-item-failures",
    description:
        "An event source mapping on a DynamoDB stream lists ReportBatchItemFailures in functionResponseTypes. Without it Lambda ignores the " +
        "consumer's batchItemFailures: a partial failure retries the whole batch, or a reported failure is taken as success and its records are skipped.",
    remediationSteps: 'Set functionResponseTypes: ["ReportBatchItemFailures"] on the event source mapping.',
    enforcementLevel: "mandatory",
    config: {},
    check: (args, _config, reportViolation) =>
        eachStreamMapping(args, ({ mapping }) => {
            const value = prop(mapping, (p) =>
                p.functionResponseTypes === undefined ? undefined : [...(p.functionResponseTypes as unknown[])],
            );
            if (!isUnknown(value) && !(Array.isArray(value) && value.includes("ReportBatchItemFailures"))) {
                reportViolation(
                    `${describe(mapping)} has [functionResponseTypes] ${show(value)}; it must include "ReportBatchItemFailures"`,
                    mapping.urn,
                );
            }
        }),
});

/** Services an on-failure destination can be, by ARN service and by resource type. */
const DESTINATION_SERVICES: Record<string, readonly string[]> = {
    sqs: [TYPES.queue],
    sns: [TYPES.topic],
    s3: [TYPES.bucket, TYPES.bucketV2],
};

export interface OnFailureDestinationConfig extends ExemptionConfig {
    /** Services allowed as on-failure destination. @default ["sqs", "sns", "s3"] */
    readonly allowedDestinationServices: readonly string[];
}

function destinationService(arn: unknown, destinations: readonly PolicyResource[]): string | undefined {
    if (typeof arn === "string" && arn.startsWith("arn:")) {
        return arn.split(":")[2];
    }
    for (const [service, types] of Object.entries(DESTINATION_SERVICES)) {
        if (destinations.some((d) => types.includes(d.type))) {
            return service;
        }
    }
    return undefined;
}

export const streamMappingOnFailureDestination = stackPolicy<OnFailureDestinationConfig>({
    name: "stream-mapping-on-failure-destination",
    description:
        "An event source mapping on a DynamoDB stream has an on-failure destination (destinationConfig.onFailure.destinationArn). Without it a batch " +
        "that exhausts its retries or its record age is dropped silently, and the counter never learns of those records.",
    remediationSteps: "Set destinationConfig: { onFailure: { destinationArn: <queue ARN> } } on the event source mapping.",
    enforcementLevel: "mandatory",
    config: {
        allowedDestinationServices: {
            type: "array",
            items: { type: "string", enum: Object.keys(DESTINATION_SERVICES) },
            default: Object.keys(DESTINATION_SERVICES),
            description: "Services allowed as on-failure destination.",
        },
    },
    check: (args, config, reportViolation) =>
        eachStreamMapping(args, ({ mapping }) => {
            const arn = prop(mapping, (p) => p.destinationConfig?.onFailure?.destinationArn);
            if (isUnknown(arn) && dependenciesOf(mapping, "destinationConfig").length === 0) {
                return;
            }
            if (arn === undefined || arn === "") {
                reportViolation(
                    `${describe(mapping)} has no [destinationConfig.onFailure.destinationArn]; failed batches would be dropped`,
                    mapping.urn,
                );
                return;
            }
            const service = destinationService(arn, dependenciesOf(mapping, "destinationConfig"));
            if (service !== undefined && !config.allowedDestinationServices.includes(service)) {
                reportViolation(
                    `${describe(mapping)} has [destinationConfig.onFailure.destinationArn] on ${service}; allowed services are ${config.allowedDestinationServices.join(", ")}`,
                    mapping.urn,
                );
            }
        }),
});

export interface StartingPositionConfig extends ExemptionConfig {
    /** Starting positions allowed. @default ["TRIM_HORIZON"] */
    readonly allowedStartingPositions: readonly string[];
}

export const streamMappingTrimHorizon = stackPolicy<StartingPositionConfig>({
    name: "stream-mapping-trim-horizon",
    description:
        "An event source mapping on a DynamoDB stream starts at TRIM_HORIZON. Without it (LATEST), records written while the mapping is being created " +
        "(or re-created) are never delivered, and the counter silently misses them.",
    remediationSteps: 'Set startingPosition: "TRIM_HORIZON" on the event source mapping.',
    enforcementLevel: "mandatory",
    config: {
        allowedStartingPositions: {
            type: "array",
            items: { type: "string", enum: ["TRIM_HORIZON", "LATEST"] },
            default: ["TRIM_HORIZON"],
            description: "Starting positions allowed.",
        },
    },
    check: (args, config, reportViolation: ReportViolation) =>
        eachStreamMapping(args, ({ mapping }) => {
            const value = prop(mapping, (p) => p.startingPosition);
            if (!isUnknown(value) && !(typeof value === "string" && config.allowedStartingPositions.includes(value))) {
                reportViolation(
                    `${describe(mapping)} has [startingPosition] ${show(value)}; it must be one of ${config.allowedStartingPositions.join(", ")}`,
                    mapping.urn,
                );
            }
        }),
});
