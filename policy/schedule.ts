/**
 * Stack policy: a function that runs on a schedule (the hybrid counter's settler) is watched and runs
 * often enough. A scheduled job that fails silently, or that runs once a week, leaves its work (healing a
 * held slot, settling what the stream can no longer count) undone for that long.
 */

import type { PolicyResource } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { dependenciesOf, TYPES } from "./graph";
import { isUnknown, read } from "./unknowns";

export const SCHEDULE_TYPES = {
    eventRule: "aws:cloudwatch/eventRule:EventRule",
    eventTarget: "aws:cloudwatch/eventTarget:EventTarget",
} as const;

/** Minutes between runs of `rate(<n> <unit>)`; undefined for cron and anything else. */
export function rateMinutes(expression: string): number | undefined {
    const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
    if (!match) {
        return undefined;
    }
    const unit = match[2]!.replace(/s$/, "");
    return Number(match[1]) * (unit === "minute" ? 1 : unit === "hour" ? 60 : 1_440);
}

export interface ScheduledFunctionConfig extends ExemptionConfig {
    /** Longest period allowed between two runs, in minutes. @default 1440 (a day) */
    readonly maximumScheduleMinutes: number;
}

export const scheduledFunctionGuarded = stackPolicy<ScheduledFunctionConfig>({
    name: "scheduled-function-guarded",
    description:
        "Every Lambda function an EventBridge schedule invokes has a CloudWatch alarm on its Errors and a rate() schedule no longer than the maximum. " +
        "Without them a settler that fails or rarely runs leaves held slots and drift in place unnoticed.",
    remediationSteps:
        "Create a MetricAlarm with [metricName] Errors whose [dimensions] reference the function's name output, and give the rule a " +
        "[scheduleExpression] rate(<n> <unit>) no longer than the maximum.",
    enforcementLevel: "advisory",
    config: {
        maximumScheduleMinutes: {
            type: "integer",
            minimum: 1,
            maximum: 525_600,
            default: 1_440,
            description: "Longest period allowed between two runs, in minutes.",
        },
    },
    check: (args, config, reportViolation) => {
        const targets = args.resources.filter((r) => r.type === SCHEDULE_TYPES.eventTarget);
        const scheduled: Array<{ target: PolicyResource; rule: PolicyResource; fn: PolicyResource }> = [];
        for (const target of targets) {
            const rules = dependenciesOf(target, "rule", SCHEDULE_TYPES.eventRule);
            const functions = dependenciesOf(target, "arn", TYPES.function);
            for (const rule of rules) {
                const expression = read(() => rule.props.scheduleExpression as unknown);
                if (expression === undefined) {
                    continue; // an event pattern rule, not a schedule
                }
                for (const fn of functions) {
                    scheduled.push({ target, rule, fn });
                }
            }
        }
        if (scheduled.length === 0) {
            args.notApplicable("no EventBridge schedule in this stack invokes a Lambda function");
        }
        const alarms = args.resources.filter((r) => r.type === TYPES.metricAlarm);
        for (const { rule, fn } of scheduled) {
            const errorsAlarm = alarms.some((alarm) => {
                if (!dependenciesOf(alarm, "dimensions").includes(fn)) {
                    return false;
                }
                const metric = read(() => alarm.props.metricName as unknown);
                return isUnknown(metric) || metric === "Errors";
            });
            if (!errorsAlarm) {
                reportViolation(
                    `schedule '${rule.name}' invokes function '${fn.name}', but no alarm with [metricName] Errors has [dimensions] that reference that function`,
                    fn.urn,
                );
            }
            const expression = read(() => rule.props.scheduleExpression as unknown);
            if (isUnknown(expression)) {
                continue;
            }
            const minutes = typeof expression === "string" ? rateMinutes(expression) : undefined;
            if (minutes === undefined || minutes > config.maximumScheduleMinutes) {
                reportViolation(
                    `schedule '${rule.name}' has [scheduleExpression] ${JSON.stringify(expression)}; it must be rate(<n> <unit>) of at most ${config.maximumScheduleMinutes} minutes`,
                    rule.urn,
                );
            }
        }
    },
});
