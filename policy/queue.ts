/** Policies on the SQS queues that hold failed batches. */

import type { StackValidationArgs } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { FailureQueue, failureQueues } from "./graph";
import { isUnknown, read, show } from "./unknowns";

function eachFailureQueue(args: StackValidationArgs, check: (failure: FailureQueue) => void): void {
    const queues = failureQueues(args.resources);
    if (queues.length === 0) {
        args.notApplicable("no queue in this stack is an on-failure destination or a dead-letter target");
    }
    queues.forEach(check);
}

function describe({ queue, roles }: FailureQueue): string {
    return `queue '${queue.name}' (${roles.join("; ")})`;
}

export type FailureQueueEncryptionConfig = ExemptionConfig;

export const failureQueueEncryption = stackPolicy<FailureQueueEncryptionConfig>({
    name: "failure-queue-encryption",
    description:
        "Queues used as on-failure destinations or dead-letter targets have server-side encryption (sqsManagedSseEnabled or kmsMasterKeyId). " +
        "Without it, the failed work they hold for days (and the whole records a fatal queue holds) sits at rest outside the table's protection.",
    remediationSteps: "Set sqsManagedSseEnabled: true, or kmsMasterKeyId, on the queue.",
    enforcementLevel: "mandatory",
    config: {},
    check: (args, _config, reportViolation) =>
        eachFailureQueue(args, (failure) => {
            const managed = read(() => failure.queue.props.sqsManagedSseEnabled as unknown);
            const kms = read(() => failure.queue.props.kmsMasterKeyId as unknown);
            if (isUnknown(managed) || isUnknown(kms)) {
                return;
            }
            if (managed !== true && (typeof kms !== "string" || kms === "")) {
                reportViolation(
                    `${describe(failure)} has [sqsManagedSseEnabled] ${show(managed)} and no [kmsMasterKeyId]; enable server-side encryption`,
                    failure.queue.urn,
                );
            }
        }),
});

/** SQS's longest retention: 14 days. */
export const SQS_MAX_RETENTION_SECONDS = 1_209_600;
/** SQS's retention when `messageRetentionSeconds` is not set: 4 days. */
export const SQS_DEFAULT_RETENTION_SECONDS = 345_600;

export interface FailureQueueRetentionConfig extends ExemptionConfig {
    /** Shortest messageRetentionSeconds allowed. @default 1209600 (14 days) */
    readonly minimumRetentionSeconds: number;
}

export const failureQueueRetention = stackPolicy<FailureQueueRetentionConfig>({
    name: "failure-queue-retention",
    description:
        "Queues used as on-failure destinations or dead-letter targets keep messages at least the configured time (messageRetentionSeconds). " +
        "Without it, a failed batch that expires from its queue before an operator or the redrive handles it is lost, and the counter stays wrong.",
    remediationSteps: "Set messageRetentionSeconds to at least the configured minimum (1209600 = 14 days, the SQS maximum) on the queue.",
    enforcementLevel: "mandatory",
    config: {
        minimumRetentionSeconds: {
            type: "integer",
            minimum: 60,
            maximum: SQS_MAX_RETENTION_SECONDS,
            default: SQS_MAX_RETENTION_SECONDS,
            description: "Shortest messageRetentionSeconds allowed.",
        },
    },
    check: (args, config, reportViolation) =>
        eachFailureQueue(args, (failure) => {
            const value = read(() => failure.queue.props.messageRetentionSeconds as unknown);
            if (isUnknown(value)) {
                return;
            }
            const seconds = value === undefined ? SQS_DEFAULT_RETENTION_SECONDS : value;
            if (typeof seconds !== "number" || seconds < config.minimumRetentionSeconds) {
                reportViolation(
                    `${describe(failure)} has [messageRetentionSeconds] ${show(value)}${value === undefined ? ` (SQS keeps ${SQS_DEFAULT_RETENTION_SECONDS})` : ""}; ` +
                        `it must be at least ${config.minimumRetentionSeconds}`,
                    failure.queue.urn,
                );
            }
        }),
});
