/**
 * The settler: a function the schedule invokes to heal best-effort counters and settle what the stream can
 * no longer count (runtime/heal/settle.ts), with its own least-privilege role, log group, errors alarm and
 * dashboard widgets. Created by HybridCounterComponent unless `settlerEnabled` is false.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HEAL_INDEX_NAME, handlerEnvironment, type CounterTableLayout } from "../runtime/shared/config";
import { settlerEnvironment } from "../runtime/heal/settler-config";
import type { HybridCounterComponentArgs } from "./args";
import { FIXED, HYBRID_COUNTER_DEFAULTS as D, shardsFromArgs } from "./defaults";
import { createFunctionLogsAndRole, createFunctionRolePolicy } from "./function-role";
import { logStatement, tracingStatement, type PolicyDocument, type PolicyStatement } from "./iam";

export interface SettlerPolicyInputs {
    /** The table the resource items live in. */
    readonly tableArn: string;
    /** The table the counter items live in (with the heal index). */
    readonly countersTableArn: string;
    readonly fatalDlqArn: string;
    readonly logGroupArn: string;
    readonly queueKmsKeyArn?: string;
    readonly tracing: boolean;
}

/**
 * Inline policy of the settler's role. It reads the heal index (Query), reads and writes counter items
 * (GetItem, Query, PutItem for its cursor, UpdateItem for heals and counts, DeleteItem, Scan for the audit), reads
 * the user table (Query per key, Scan for the audit) and settles items with reconcile's transactions (UpdateItem,
 * DeleteItem, and ConditionCheckItem for the check that an item is still as read; DynamoDB has no
 * TransactWriteItems action, see iam.ts), and parks what it cannot count.
 */
export function settlerPolicy(p: SettlerPolicyInputs): PolicyDocument {
    const counterActions = ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"];
    const statements: PolicyStatement[] = [
        { Sid: "QueryHealIndex", Effect: "Allow", Action: ["dynamodb:Query"], Resource: `${p.countersTableArn}/index/${HEAL_INDEX_NAME}` },
        {
            Sid: "HealAndSettle",
            Effect: "Allow",
            // Scan: the audit walks the counters table too, for keys whose counters outlived their items.
            Action:
                p.tableArn === p.countersTableArn
                    ? [...counterActions, "dynamodb:Scan", "dynamodb:ConditionCheckItem"]
                    : [...counterActions, "dynamodb:Scan"],
            Resource: p.countersTableArn,
        },
        ...(p.tableArn === p.countersTableArn
            ? []
            : [
                  {
                      Sid: "ReadAndSettleItems",
                      Effect: "Allow" as const,
                      Action: [
                          "dynamodb:GetItem",
                          "dynamodb:Query",
                          "dynamodb:Scan",
                          "dynamodb:UpdateItem",
                          "dynamodb:DeleteItem",
                          "dynamodb:ConditionCheckItem",
                      ],
                      Resource: p.tableArn,
                  },
              ]),
        { Sid: "SendUncountableItemsToFatalDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: p.fatalDlqArn },
        logStatement(p.logGroupArn),
    ];
    if (p.queueKmsKeyArn !== undefined) {
        statements.push({
            Sid: "UseQueueKey",
            Effect: "Allow",
            Action: ["kms:GenerateDataKey", "kms:Decrypt"],
            Resource: p.queueKmsKeyArn,
        });
    }
    if (p.tracing) {
        statements.push(tracingStatement());
    }
    return { Version: "2012-10-17", Statement: statements };
}

export interface SettlerInputs {
    readonly name: string;
    readonly parent: pulumi.Resource;
    readonly args: HybridCounterComponentArgs;
    readonly layout: pulumi.Input<CounterTableLayout>;
    readonly bundle: string;
    readonly table: { readonly name: pulumi.Output<string>; readonly arn: pulumi.Output<string> };
    /** Where the counter items live; the table itself in the same-table placement. */
    readonly countersTable: { readonly name: pulumi.Output<string>; readonly arn: pulumi.Output<string> };
    readonly fatalDlq: { readonly url: pulumi.Output<string>; readonly arn: pulumi.Output<string> };
    readonly queueKmsKeyArn: pulumi.Output<string | undefined>;
    readonly metricsNamespace: string;
    readonly alarmActions: pulumi.Output<
        string[]
    >; /** The multi-region setting's variables (components/regions/settings.ts); none for one region. @default {} */
    readonly regionEnvironment?: Readonly<Record<string, string>>;
}

export interface Settler {
    readonly function: aws.lambda.Function;
    readonly rule: aws.cloudwatch.EventRule;
    readonly errorsAlarm: aws.cloudwatch.MetricAlarm;
}

/** Creates the settler's children, each named `${name}-settler-*` and parented to the component. */
export function createSettler(s: SettlerInputs): Settler {
    const { name, args } = s;
    const parent = { parent: s.parent };
    const tags = args.tags;
    const tracing = args.tracing ?? D.tracing;
    const fnRole = { name, fn: "settler", parent: s.parent };
    const { logs, role } = createFunctionLogsAndRole({
        ...fnRole,
        logRetentionInDays: args.logRetentionInDays ?? D.logRetentionInDays,
        tags,
    });
    const rolePolicy = createFunctionRolePolicy(
        fnRole,
        role,
        pulumi
            .all([s.table.arn, s.countersTable.arn, s.fatalDlq.arn, logs.arn, s.queueKmsKeyArn])
            .apply(([tableArn, countersTableArn, fatalDlqArn, logGroupArn, queueKmsKeyArn]) =>
                settlerPolicy({ tableArn, countersTableArn, fatalDlqArn, logGroupArn, queueKmsKeyArn, tracing }),
            ),
    );
    const fn = new aws.lambda.Function(
        `${name}-settler`,
        {
            code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.FileAsset(s.bundle) }),
            handler: FIXED.handler,
            runtime: args.lambdaRuntime ?? D.lambdaRuntime,
            architectures: [args.architecture ?? D.architecture],
            role: role.arn,
            memorySize: D.settlerMemorySize,
            timeout: args.settlerTimeout ?? D.settlerTimeout,
            environment: {
                variables: pulumi
                    .all([s.layout, s.table.name, s.countersTable.name, s.fatalDlq.url])
                    .apply(([layout, tableName, countersTableName, fatalQueueUrl]) => ({
                        ...handlerEnvironment({
                            ...(layout as CounterTableLayout),
                            ...shardsFromArgs(args),
                            tableName,
                            countersTableName,
                            fatalQueueUrl,
                            metricsNamespace: s.metricsNamespace,
                        }),
                        ...settlerEnvironment({
                            countersTableName: countersTableName === tableName ? undefined : countersTableName,
                            mode: args.counterMode ?? D.counterMode,
                            quietWindowMs: (args.healQuietWindowSeconds ?? D.healQuietWindowSeconds) * 1000,
                            keyBudget: args.settlerKeyBudget ?? D.settlerKeyBudget,
                            clientDeadlineMs: args.clientDeadlineMs ?? D.clientDeadlineMs,
                        }),
                        ...(s.regionEnvironment ?? {}),
                    })),
            },
            loggingConfig: { logFormat: FIXED.logFormat, logGroup: logs.name },
            tracingConfig: { mode: tracing ? "Active" : "PassThrough" },
            tags,
        },
        { parent: s.parent, dependsOn: [logs, rolePolicy] },
    );
    const rule = new aws.cloudwatch.EventRule(
        `${name}-settler-schedule`,
        {
            description: "Runs the hybrid counter's settler: heals best-effort counters and settles stranded items.",
            scheduleExpression: args.settlerSchedule ?? D.settlerSchedule,
            tags,
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
        { parent: s.parent, dependsOn: [permission] },
    );
    const errorsAlarm = new aws.cloudwatch.MetricAlarm(
        `${name}-settler-errors`,
        {
            alarmDescription:
                "The settler failed a run: best-effort counters are not being healed and stranded items not settled. " +
                "Read the settler's log group; a run that keeps failing on one key names it in failedKeys.",
            namespace: "AWS/Lambda",
            metricName: "Errors",
            dimensions: { FunctionName: fn.name },
            statistic: "Sum",
            period: FIXED.alarmPeriodSeconds,
            evaluationPeriods: FIXED.alarmEvaluationPeriods,
            comparisonOperator: "GreaterThanOrEqualToThreshold",
            threshold: D.settlerErrorsAlarmThreshold,
            treatMissingData: "notBreaching",
            alarmActions: s.alarmActions,
            okActions: s.alarmActions,
            tags,
        },
        parent,
    );
    return { function: fn, rule, errorsAlarm };
}

/** Dashboard widgets of the settler (a row under the pipeline's), for dashboardBody. */
export function settlerWidgets(region: string, functionName: string, metricsNamespace: string): object[] {
    const widget = (title: string, x: number, metrics: unknown[][], stat: string) => ({
        type: "metric",
        x,
        y: 14,
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
            ],
            "Sum",
        ),
        widget(
            "Heals",
            8,
            [own("KeysHealed", "keys healed"), own("KeysCorrected", "keys corrected"), own("HealDrift", "drift closed")],
            "Sum",
        ),
        widget("Settler cost", 16, [own("SettlerReadUnits", "RCU"), own("SettlerWriteUnits", "WCU")], "Sum"),
    ];
}
