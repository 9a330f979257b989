/** Stack policy: every stream consumer is watched. */

import type { PolicyResource } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { dependenciesOf, streamMappings, TYPES } from "./graph";
import { isUnknown, read } from "./unknowns";

/** Metric names an alarm reads, from `metricName` or from `metricQueries[].metric.metricName`. */
function metricNames(alarm: PolicyResource): string[] | "unknown" {
    const single = read(() => alarm.props.metricName as unknown);
    const queries = read(() => {
        const list = alarm.props.metricQueries as unknown;
        return Array.isArray(list) ? list.map((q: { metric?: { metricName?: unknown } }) => q.metric?.metricName) : [];
    });
    if (isUnknown(single) || isUnknown(queries)) {
        return "unknown";
    }
    return [single, ...queries].filter((n): n is string => typeof n === "string");
}

/** Alarms whose metric dimensions were computed from `target` (its name, ARN or URL). */
function alarmsOn(target: PolicyResource, alarms: readonly PolicyResource[]): PolicyResource[] {
    return alarms.filter(
        (alarm) => dependenciesOf(alarm, "dimensions").includes(target) || dependenciesOf(alarm, "metricQueries").includes(target),
    );
}

function readsMetric(alarm: PolicyResource, accepted: readonly string[]): boolean {
    const names = metricNames(alarm);
    return names === "unknown" || names.some((n) => accepted.includes(n));
}

export interface StreamConsumerAlarmsConfig extends ExemptionConfig {
    /** Highest IteratorAge alarm threshold allowed, in milliseconds. @default 43200000 (12 h, half the stream retention) */
    readonly maximumIteratorAgeThresholdMs: number;
    /** Queue metrics that count as an alarm on the on-failure queue. */
    readonly queueAlarmMetricNames: readonly string[];
}

export const streamConsumerAlarms = stackPolicy<StreamConsumerAlarmsConfig>({
    name: "stream-consumer-alarms",
    description:
        "Every event source mapping on a DynamoDB stream has a CloudWatch alarm on its on-failure queue and an IteratorAge alarm on its function. " +
        "Without them a consumer that falls behind or starts failing batches goes unnoticed until its records expire from the stream after 24 hours.",
    remediationSteps:
        "Create a MetricAlarm on the on-failure queue (e.g. ApproximateNumberOfMessagesVisible > 0) and an IteratorAge alarm on the function, " +
        "with dimensions that reference the queue's name and the function's name outputs.",
    enforcementLevel: "advisory",
    config: {
        maximumIteratorAgeThresholdMs: {
            type: "integer",
            minimum: 1,
            maximum: 86_400_000,
            default: 43_200_000,
            description: "Highest IteratorAge alarm threshold allowed, in milliseconds.",
        },
        queueAlarmMetricNames: {
            type: "array",
            items: { type: "string" },
            default: ["ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "NumberOfMessagesSent"],
            description: "Queue metrics that count as an alarm on the on-failure queue.",
        },
    },
    check: (args, config, reportViolation) => {
        const mappings = streamMappings(args.resources);
        if (mappings.length === 0) {
            args.notApplicable("no event source mapping in this stack reads a DynamoDB stream");
        }
        const alarms = args.resources.filter((r) => r.type === TYPES.metricAlarm);
        for (const { mapping, functions, failureDestinations } of mappings) {
            for (const queue of failureDestinations.filter((d) => d.type === TYPES.queue)) {
                if (!alarmsOn(queue, alarms).some((alarm) => readsMetric(alarm, config.queueAlarmMetricNames))) {
                    reportViolation(
                        `event source mapping '${mapping.name}' sends failed batches to queue '${queue.name}', but no alarm's [dimensions] reference that queue ` +
                            `with one of the metrics ${config.queueAlarmMetricNames.join(", ")}`,
                        mapping.urn,
                    );
                }
            }
            for (const fn of functions) {
                const iteratorAge = alarmsOn(fn, alarms).filter((alarm) => readsMetric(alarm, ["IteratorAge"]));
                if (iteratorAge.length === 0) {
                    reportViolation(
                        `event source mapping '${mapping.name}' invokes function '${fn.name}', but no alarm with [metricName] IteratorAge has [dimensions] that reference that function`,
                        mapping.urn,
                    );
                    continue;
                }
                const thresholds = iteratorAge.map((alarm) => ({ alarm, threshold: read(() => alarm.props.threshold as unknown) }));
                const inBounds = thresholds.some(
                    ({ threshold }) =>
                        isUnknown(threshold) || (typeof threshold === "number" && threshold <= config.maximumIteratorAgeThresholdMs),
                );
                if (!inBounds) {
                    const { alarm, threshold } = thresholds[0];
                    reportViolation(
                        `IteratorAge alarm '${alarm.name}' on function '${fn.name}' has [threshold] ${String(threshold)} ms, above the maximum ${config.maximumIteratorAgeThresholdMs} ms`,
                        alarm.urn,
                    );
                }
            }
        }
    },
});
