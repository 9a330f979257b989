/** Policies on DynamoDB tables. */

import { ExemptionConfig, resourcePolicy, stackPolicy } from "./config";
import { streamMappings, TYPES } from "./graph";
import { isUnknown, read, show } from "./unknowns";

/** Stream view types, and the images each one carries. */
export const STREAM_VIEW_TYPES = ["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"] as const;
export type StreamViewType = (typeof STREAM_VIEW_TYPES)[number];

const CARRIES: Record<StreamViewType, readonly StreamViewType[]> = {
    KEYS_ONLY: ["KEYS_ONLY"],
    NEW_IMAGE: ["KEYS_ONLY", "NEW_IMAGE"],
    OLD_IMAGE: ["KEYS_ONLY", "OLD_IMAGE"],
    NEW_AND_OLD_IMAGES: STREAM_VIEW_TYPES,
};

/** Does a stream of view type `actual` carry everything a stream of view type `required` carries? */
export function viewTypeCarries(actual: string, required: StreamViewType): boolean {
    return (CARRIES as Record<string, readonly string[] | undefined>)[actual]?.includes(required) ?? false;
}

export interface StreamViewTypeConfig extends ExemptionConfig {
    /** The images the consumer needs. A view type that carries more also passes. @default "NEW_AND_OLD_IMAGES" */
    readonly requiredViewType: StreamViewType;
}

export const dynamodbStreamViewType = stackPolicy<StreamViewTypeConfig>({
    name: "dynamodb-stream-view-type",
    description:
        "A DynamoDB table that feeds a Lambda event source mapping has its stream enabled with a view type that carries the images the consumer needs. " +
        "Without the stream there is nothing to consume; without the images the consumer cannot tell a creation from a soft deletion and miscounts.",
    remediationSteps: 'Set streamEnabled: true and streamViewType: "NEW_AND_OLD_IMAGES" (or the configured requiredViewType) on the table.',
    enforcementLevel: "mandatory",
    config: {
        requiredViewType: {
            type: "string",
            enum: [...STREAM_VIEW_TYPES],
            default: "NEW_AND_OLD_IMAGES",
            description: "Images the stream must carry.",
        },
    },
    check: (args, config, reportViolation) => {
        const fed = new Map<string, { table: (typeof args.resources)[number]; mapping: string }>();
        for (const { mapping, tables } of streamMappings(args.resources)) {
            for (const table of tables) {
                if (!fed.has(table.urn)) {
                    fed.set(table.urn, { table, mapping: mapping.name });
                }
            }
        }
        if (fed.size === 0) {
            args.notApplicable("no table in this stack feeds an event source mapping");
        }
        for (const { table, mapping } of fed.values()) {
            const enabled = read(() => table.props.streamEnabled as unknown);
            const viewType = read(() => table.props.streamViewType as unknown);
            if (!isUnknown(enabled) && enabled !== true) {
                reportViolation(
                    `table '${table.name}' feeds event source mapping '${mapping}' but [streamEnabled] is ${show(enabled)}; it must be true`,
                    table.urn,
                );
            }
            if (!isUnknown(viewType) && !(typeof viewType === "string" && viewTypeCarries(viewType, config.requiredViewType))) {
                reportViolation(
                    `table '${table.name}' feeds event source mapping '${mapping}' but [streamViewType] is ${show(viewType)}; ` +
                        `the consumer needs a view type that carries ${config.requiredViewType}`,
                    table.urn,
                );
            }
        }
    },
});

export interface PointInTimeRecoveryConfig extends ExemptionConfig {
    /** Shortest recovery window allowed, in days (AWS uses 35 when unset). @default 35 */
    readonly minimumRecoveryPeriodInDays: number;
}

/** Recovery period AWS applies when `recoveryPeriodInDays` is not set. */
export const DEFAULT_RECOVERY_PERIOD_IN_DAYS = 35;

export const dynamodbTablePointInTimeRecovery = resourcePolicy<PointInTimeRecoveryConfig>({
    name: "dynamodb-table-point-in-time-recovery",
    description:
        "DynamoDB tables have point-in-time recovery enabled. Without it, a bad deployment or a runaway consumer that corrupts the counters " +
        "or the resource items cannot be rolled back.",
    remediationSteps: "Set pointInTimeRecovery: { enabled: true } on the table.",
    enforcementLevel: "advisory",
    resourceType: TYPES.table,
    config: {
        minimumRecoveryPeriodInDays: {
            type: "integer",
            minimum: 1,
            maximum: 35,
            default: DEFAULT_RECOVERY_PERIOD_IN_DAYS,
            description: "Shortest recovery window allowed, in days.",
        },
    },
    check: (args, config, reportViolation) => {
        const enabled = read(() => args.props.pointInTimeRecovery?.enabled as unknown);
        if (!isUnknown(enabled) && enabled !== true) {
            reportViolation(`table '${args.name}' has [pointInTimeRecovery.enabled] ${show(enabled)}; it must be true`);
            return;
        }
        const period = read(() => args.props.pointInTimeRecovery?.recoveryPeriodInDays as unknown);
        const days = period === undefined ? DEFAULT_RECOVERY_PERIOD_IN_DAYS : period;
        if (typeof days === "number" && days < config.minimumRecoveryPeriodInDays) {
            reportViolation(
                `table '${args.name}' has [pointInTimeRecovery.recoveryPeriodInDays] ${days}; it must be at least ${config.minimumRecoveryPeriodInDays}`,
            );
        }
    },
});

export interface TableEncryptionConfig extends ExemptionConfig {
    /** Require a customer managed KMS key (`serverSideEncryption.kmsKeyArn`). @default false */
    readonly requireCustomerManagedKey: boolean;
}

export const dynamodbTableEncryption = resourcePolicy<TableEncryptionConfig>({
    name: "dynamodb-table-encryption",
    description:
        "DynamoDB tables use KMS server-side encryption (serverSideEncryption.enabled). Without it the table falls back to an AWS owned key " +
        "that the account cannot audit, restrict through key policies or revoke.",
    remediationSteps: "Set serverSideEncryption: { enabled: true } on the table, with kmsKeyArn for a customer managed key.",
    enforcementLevel: "advisory",
    resourceType: TYPES.table,
    config: {
        requireCustomerManagedKey: { type: "boolean", default: false, description: "Also require serverSideEncryption.kmsKeyArn." },
    },
    check: (args, config, reportViolation) => {
        const enabled = read(() => args.props.serverSideEncryption?.enabled as unknown);
        if (!isUnknown(enabled) && enabled !== true) {
            reportViolation(`table '${args.name}' has [serverSideEncryption.enabled] ${show(enabled)}; it must be true`);
            return;
        }
        if (config.requireCustomerManagedKey) {
            const key = read(() => args.props.serverSideEncryption?.kmsKeyArn as unknown);
            if (key === undefined || key === "") {
                reportViolation(`table '${args.name}' has no [serverSideEncryption.kmsKeyArn]; a customer managed key is required`);
            }
        }
    },
});
