/**
 * The component's alarms: pure specifications, and the function that creates them with their topic. Each
 * description tells the operator what the alarm means and what to do (docs/component.md says the same at more
 * length).
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { HybridCounterAlarmArns, HybridCounterComponentArgs } from "./args";
import { FIXED, HYBRID_COUNTER_DEFAULTS as D, type HybridCounterAlarmName } from "./defaults";

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
            "Errors, Throttles and Duration; raise its memory or batchSize if it is simply too slow " +
            "(parallelizationFactor stays 1: the consumer applies the batches of one stream shard one at a time).",
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
            "failing batches are retried, then bisected, then sent to the first DLQ, whose ranges the redrive applies.",
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

/** Which child each subject's dimensions name. */
export type AlarmDimensions = Record<AlarmSubject, pulumi.Input<Record<string, pulumi.Input<string>>>>;

export interface Alarms {
    /** ARN of each alarm created, by name. */
    readonly arns: pulumi.Output<HybridCounterAlarmArns>;
    /** The topic alarms notify, if any: the one passed or the one created. */
    readonly topicArn: pulumi.Output<string | undefined>;
    /** The alarms' actions: the topic, or none. */
    readonly actions: pulumi.Output<string[]>;
}

/** The alarm topic (when asked for) and every alarm not disabled, each `${name}-${role}`, parented to `parent`. */
export function createAlarms(name: string, args: HybridCounterComponentArgs, parent: pulumi.Resource, dimensions: AlarmDimensions): Alarms {
    const tags = args.tags;
    let topicArn: pulumi.Output<string | undefined> = pulumi.output(undefined);
    if (args.alarmTopicArn !== undefined) {
        topicArn = pulumi.output(args.alarmTopicArn);
    } else if (args.createAlarmTopic ?? D.createAlarmTopic) {
        topicArn = new aws.sns.Topic(`${name}-alarm-topic`, { kmsMasterKeyId: "alias/aws/sns", tags }, { parent }).arn;
    }
    const actions = topicArn.apply((arn) => (arn === undefined ? [] : [arn]));
    const thresholds: Record<HybridCounterAlarmName, number> = {
        consumerIteratorAge: args.iteratorAgeAlarmThresholdMs ?? D.iteratorAgeAlarmThresholdMs,
        consumerErrors: args.consumerErrorsAlarmThreshold ?? D.consumerErrorsAlarmThreshold,
        consumerThrottles: args.consumerThrottlesAlarmThreshold ?? D.consumerThrottlesAlarmThreshold,
        firstDlqDepth: args.firstDlqAlarmThreshold ?? D.firstDlqAlarmThreshold,
        firstDlqAge: args.firstDlqAgeAlarmThresholdSeconds ?? D.firstDlqAgeAlarmThresholdSeconds,
        fatalDlqDepth: args.fatalDlqAlarmThreshold ?? D.fatalDlqAlarmThreshold,
        redriveErrors: args.redriveErrorsAlarmThreshold ?? D.redriveErrorsAlarmThreshold,
    };
    const disabled = new Set(args.disabledAlarms ?? []);
    // Keyed by the interface's own fields, so an alarm the interface does not name fails to compile.
    const arns: { -readonly [K in keyof HybridCounterAlarmArns]: pulumi.Output<string> } = {};
    for (const spec of ALARM_SPECS.filter((s) => !disabled.has(s.key))) {
        const alarm = new aws.cloudwatch.MetricAlarm(
            `${name}-${spec.role}`,
            {
                alarmDescription: spec.description,
                namespace: spec.namespace,
                metricName: spec.metricName,
                dimensions: dimensions[spec.subject],
                statistic: spec.statistic,
                period: FIXED.alarmPeriodSeconds,
                evaluationPeriods: FIXED.alarmEvaluationPeriods,
                comparisonOperator: spec.comparisonOperator,
                threshold: thresholds[spec.key],
                treatMissingData: "notBreaching",
                alarmActions: actions,
                okActions: actions,
                tags,
            },
            { parent },
        );
        arns[spec.key] = alarm.arn;
    }
    return { arns: pulumi.output(arns), topicArn, actions };
}
