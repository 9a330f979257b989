/**
 * The component's alarms, as pure specifications. Each description tells the operator what the alarm
 * means and what to do (docs/component.md says the same at more length).
 */
import type { HybridCounterAlarmName } from "./defaults";

/** Which child's metrics an alarm watches. */
export type AlarmSubject = "consumer" | "redrive" | "firstDlq" | "fatalDlq";

export interface AlarmSpec {
    readonly key: HybridCounterAlarmName;
    /** Logical-name suffix: the alarm is `${name}-${role}`. */
    readonly role: string;
    readonly subject: AlarmSubject;
    readonly namespace: "AWS/Lambda" | "AWS/SQS";
    readonly metricName: string;
    readonly statistic: "Maximum" | "Sum";
    readonly comparisonOperator: "GreaterThanThreshold" | "GreaterThanOrEqualToThreshold";
    readonly description: string;
}

export const ALARM_SPECS: readonly AlarmSpec[] = Object.freeze([
    {
        key: "consumerIteratorAge",
        role: "consumer-iterator-age",
        subject: "consumer",
        namespace: "AWS/Lambda",
        metricName: "IteratorAge",
        statistic: "Maximum",
        comparisonOperator: "GreaterThanThreshold",
        description:
            "The stream consumer is falling behind: the eventual counter lags the table. Check the consumer's " +
            "Errors, Throttles and Duration; raise parallelizationFactor or memory if it is simply too slow.",
    },
    {
        key: "consumerErrors",
        role: "consumer-errors",
        subject: "consumer",
        namespace: "AWS/Lambda",
        metricName: "Errors",
        statistic: "Sum",
        comparisonOperator: "GreaterThanOrEqualToThreshold",
        description:
            "Stream consumer invocations failed as a whole (not single records). Read the consumer's log group; " +
            "failing batches are retried, then bisected, then sent to the first DLQ.",
    },
    {
        key: "consumerThrottles",
        role: "consumer-throttles",
        subject: "consumer",
        namespace: "AWS/Lambda",
        metricName: "Throttles",
        statistic: "Sum",
        comparisonOperator: "GreaterThanOrEqualToThreshold",
        description:
            "The stream consumer was throttled, so counting is delayed. Check the account's concurrency and " +
            "the consumer's reserved concurrency.",
    },
    {
        key: "firstDlqDepth",
        role: "first-dlq-depth",
        subject: "firstDlq",
        namespace: "AWS/SQS",
        metricName: "ApproximateNumberOfMessagesVisible",
        statistic: "Maximum",
        comparisonOperator: "GreaterThanThreshold",
        description:
            "Stream batches exhausted their retries and wait for the redrive function. Check the redrive's " +
            "Errors alarm and logs; the stream keeps the records for 24 hours only.",
    },
    {
        key: "firstDlqAge",
        role: "first-dlq-age",
        subject: "firstDlq",
        namespace: "AWS/SQS",
        metricName: "ApproximateAgeOfOldestMessage",
        statistic: "Maximum",
        comparisonOperator: "GreaterThanThreshold",
        description:
            "A dead-lettered batch has waited too long in the first DLQ: the stream drops its records 24 hours after " +
            "they were written, and then the redrive can no longer count them. Check the redrive's Errors and logs; " +
            "`npx hybrid-counter status` shows the keys that lag, `fatal replay` counts a batch now.",
    },
    {
        key: "fatalDlqDepth",
        role: "fatal-dlq-depth",
        subject: "fatalDlq",
        namespace: "AWS/SQS",
        metricName: "ApproximateNumberOfMessagesVisible",
        statistic: "Maximum",
        comparisonOperator: "GreaterThanThreshold",
        description:
            "Records could not be counted automatically and need an operator: the eventual counter may be " +
            "wrong until they are handled. Read the messages in the fatal DLQ; each says what failed.",
    },
    {
        key: "redriveErrors",
        role: "redrive-errors",
        subject: "redrive",
        namespace: "AWS/Lambda",
        metricName: "Errors",
        statistic: "Sum",
        comparisonOperator: "GreaterThanOrEqualToThreshold",
        description:
            "The redrive function failed; its messages return to the first DLQ and move to the fatal DLQ after " +
            "the maximum receive count. Read the redrive's log group.",
    },
] satisfies AlarmSpec[]);
