/**
 * The settler: a function the schedule invokes to heal the keys listed in the heal index, audit a page of keys nobody
 * listed, remove the tombstones no put can reach any more and send the threshold events the consumer could not send
 * (runtime/heal/settle.ts), with its own least-privilege role, log group, errors alarm and dashboard widgets. Created
 * by HybridCounterComponent unless `settlerEnabled` is false.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HEAL_INDEX_NAME } from "../runtime/heal/index-marks";
import { SETTLER_DEFAULTS } from "../runtime/heal/settle";
import { settlerEnvironment } from "../runtime/heal/settler-config";
import type { CounterConfig } from "../runtime/shared/config";
import { FIXED, HYBRID_COUNTER_DEFAULTS as D } from "./defaults";
import { createFunctionLogsAndRole, createFunctionRolePolicy } from "./function-role";
import { logStatement, publishStatements, tracingStatement, type PolicyDocument, type PolicyStatement } from "./iam";
import type { Context, TableRef } from "./pipeline";

export interface SettlerPolicyInputs {
    /** The table the resource items live in. */
    readonly tableArn: string;
    /** The table the counter items live in (with the heal index). */
    readonly countersTableArn: string;
    readonly logGroupArn: string;
    /** The threshold topic, when there is one: the settler sends the events the consumer could not. */
    readonly thresholdTopicArn?: string;
    readonly tracing: boolean;
}

/**
 * Inline policy of the settler's role, each action a call of runtime/heal/: it queries the heal index for the keys
 * listed; on the counters table it reads a key's counter items and its cursor (Query), walks a page for the audit
 * (Scan), heals best-effort, lists and unlists keys, moves its cursor and clears sent threshold events (UpdateItem),
 * and drops stale stream progress (DeleteItem); on the user's table it reads a key's items (Query) and removes the
 * tombstones no put can reach any more (DeleteItem).
 */
export function settlerPolicy(p: SettlerPolicyInputs): PolicyDocument {
    const statements: PolicyStatement[] = [
        { Sid: "QueryHealIndex", Effect: "Allow", Action: ["dynamodb:Query"], Resource: `${p.countersTableArn}/index/${HEAL_INDEX_NAME}` },
        {
            Sid: "HealAndAudit",
            Effect: "Allow",
            Action: ["dynamodb:Query", "dynamodb:Scan", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            Resource: p.countersTableArn,
        },
        { Sid: "ReadItemsAndRemoveTombstones", Effect: "Allow", Action: ["dynamodb:Query", "dynamodb:DeleteItem"], Resource: p.tableArn },
        ...publishStatements(p.thresholdTopicArn),
        logStatement(p.logGroupArn),
    ];
    if (p.tracing) {
        statements.push(tracingStatement());
    }
    return { Version: "2012-10-17", Statement: statements };
}

export interface SettlerInputs {
    readonly table: TableRef;
    /** Where the counter items live; the table itself in the same-table placement. */
    readonly countersTable: TableRef;
    /** The counter's configuration, as every function reads it from its environment. */
    readonly config: pulumi.Output<CounterConfig>;
    readonly thresholdTopicArn: pulumi.Output<string | undefined>;
    readonly alarmActions: pulumi.Output<string[]>;
}

export interface Settler {
    readonly function: aws.lambda.Function;
    readonly rule: aws.cloudwatch.EventRule;
    readonly errorsAlarm: aws.cloudwatch.MetricAlarm;
}

/** Creates the settler's children, each named `${name}-settler-*` and parented to the component. */
export function createSettler(ctx: Context, s: SettlerInputs): Settler {
    const { name, args, resolved: r } = ctx;
    const fnRole = { name, fn: "settler", parent: ctx.parent };
    const { logs, role } = createFunctionLogsAndRole({ ...fnRole, logRetentionInDays: r.logRetentionInDays, tags: r.tags });
    const rolePolicy = createFunctionRolePolicy(
        fnRole,
        role,
        pulumi
            .all([s.table.arn, s.countersTable.arn, logs.arn, s.thresholdTopicArn])
            .apply(([tableArn, countersTableArn, logGroupArn, thresholdTopicArn]) =>
                settlerPolicy({ tableArn, countersTableArn, logGroupArn, thresholdTopicArn, tracing: r.tracing }),
            ),
    );
    const variables = pulumi.all([s.config, s.thresholdTopicArn]).apply(([config, thresholdTopicArn]) =>
        settlerEnvironment({
            ...config,
            keyBudget: args.settlerKeyBudget ?? D.settlerKeyBudget,
            auditItems: SETTLER_DEFAULTS.auditItems,
            metricsNamespace: r.metricsNamespace,
            ...(thresholdTopicArn === undefined ? {} : { thresholdTopicArn }),
        }),
    );
    const fn = new aws.lambda.Function(
        `${name}-settler`,
        {
            code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.FileAsset(ctx.bundles.settler) }),
            handler: FIXED.handler,
            runtime: r.lambdaRuntime,
            architectures: [r.architecture],
            role: role.arn,
            memorySize: D.settlerMemorySize,
            timeout: args.settlerTimeout ?? D.settlerTimeout,
            environment: { variables },
            loggingConfig: { logFormat: FIXED.logFormat, logGroup: logs.name },
            tracingConfig: { mode: r.tracing ? "Active" : "PassThrough" },
            tags: r.tags,
        },
        { parent: ctx.parent, dependsOn: [logs, rolePolicy] },
    );
    const rule = scheduleSettler(ctx, fn);
    return { function: fn, rule, errorsAlarm: settlerErrorsAlarm(ctx, fn, s.alarmActions) };
}

/** The schedule's rule, its target, and the permission for that rule only. */
function scheduleSettler(ctx: Context, fn: aws.lambda.Function): aws.cloudwatch.EventRule {
    const { name } = ctx;
    const parent = { parent: ctx.parent };
    const rule = new aws.cloudwatch.EventRule(
        `${name}-settler-schedule`,
        {
            description: "Runs the hybrid counter's settler: heals the keys listed for a heal, audits a page of the others.",
            scheduleExpression: ctx.args.settlerSchedule ?? D.settlerSchedule,
            tags: ctx.resolved.tags,
        },
        parent,
    );
    const permission = new aws.lambda.Permission(
        `${name}-settler-invoke`,
        { action: "lambda:InvokeFunction", function: fn.name, principal: "events.amazonaws.com", sourceArn: rule.arn },
        parent,
    );
    new aws.cloudwatch.EventTarget(
        `${name}-settler-target`,
        { rule: rule.name, arn: fn.arn },
        { parent: ctx.parent, dependsOn: [permission] },
    );
    return rule;
}

function settlerErrorsAlarm(ctx: Context, fn: aws.lambda.Function, actions: pulumi.Output<string[]>): aws.cloudwatch.MetricAlarm {
    return new aws.cloudwatch.MetricAlarm(
        `${ctx.name}-settler-errors`,
        {
            alarmDescription:
                "The settler failed a run: listed keys are not being healed. Read the settler's log group; " +
                "a run that keeps failing on one key names it in failedKeys.",
            namespace: "AWS/Lambda",
            metricName: "Errors",
            dimensions: { FunctionName: fn.name },
            statistic: "Sum",
            period: FIXED.alarmPeriodSeconds,
            evaluationPeriods: FIXED.alarmEvaluationPeriods,
            comparisonOperator: "GreaterThanOrEqualToThreshold",
            threshold: D.settlerErrorsAlarmThreshold,
            treatMissingData: "notBreaching",
            alarmActions: actions,
            okActions: actions,
            tags: ctx.resolved.tags,
        },
        { parent: ctx.parent },
    );
}

/** Dashboard widgets of the settler (a row under the pipeline's), for dashboardBody: its runs and its metrics (settlerMetrics). */
export function settlerWidgets(region: string, functionName: string, metricsNamespace: string): object[] {
    const widget = (title: string, x: number, metrics: unknown[][], stat: string) => ({
        type: "metric",
        x,
        y: 26,
        width: 8,
        height: 6,
        properties: { title, region, view: "timeSeries", stacked: false, period: 300, stat, metrics },
    });
    const own = (metric: string, label: string) => [metricsNamespace, metric, "service", "hybrid-counter-settler", { label }];
    return [
        widget(
            "Settler runs",
            0,
            [
                ["AWS/Lambda", "Invocations", "FunctionName", functionName, { label: "runs" }],
                ["AWS/Lambda", "Errors", "FunctionName", functionName, { label: "errors" }],
                own("HealFailures", "keys that failed"),
            ],
            "Sum",
        ),
        widget(
            "Heals",
            8,
            [
                own("KeysHealed", "keys healed"),
                own("KeysCorrected", "keys corrected"),
                own("HealDrift", "drift closed"),
                own("HealsRaced", "heals raced"),
            ],
            "Sum",
        ),
        widget(
            "Audit and tombstones",
            16,
            [
                own("KeysAudited", "keys audited"),
                own("KeysAuditHealed", "keys healed by the audit"),
                own("TombstonesRemoved", "tombstones removed"),
            ],
            "Sum",
        ),
    ];
}
