import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { COUNTER_ATTRIBUTES, HEAL_INDEX_NAME, handlerEnvironment, type CounterTableLayout } from "../runtime/config";
import { ALARM_SPECS, type AlarmSubject } from "./alarms";
import type { HybridCounterAlarmArns, HybridCounterComponentArgs } from "./args";
import { assertBundlesExist, bundlePathsUnder, findPackageRoot, type BundlePaths } from "./bundles";
import { dashboardBody } from "./dashboard";
import {
    COMPONENT_TYPE,
    FIXED,
    HYBRID_COUNTER_DEFAULTS as D,
    firstDlqVisibilityTimeout,
    streamFilterPatterns,
    type HybridCounterAlarmName,
} from "./defaults";
import { consumerPolicy, denyInsecureTransportPolicy, lambdaAssumeRolePolicy, redrivePolicy } from "./iam";
import { createSettler, settlerWidgets } from "./settler";
import { HybridCounterArgsError, attachedTableProblems, layoutFromArgs, validateHybridCounterArgs } from "./validation";

/** What an API program needs to build a `HybridCounterClient`: `{ tableName, ...layout }`. */
export interface HybridCounterClientConfig extends CounterTableLayout {
    /** Name of the counter's table. */
    readonly tableName: string;
}

/**
 * A DynamoDB counter that is immediate (best-effort, written by the API) and eventually exact (counted by
 * a stream consumer in transactions), with a retry path for failed batches and alarms on every stage.
 *
 * Creates (or attaches to) the table, the stream consumer with its event source mapping, the first DLQ with
 * its redrive function, the fatal DLQ, both functions' log groups and roles, six alarms (optionally with an
 * SNS topic) and a dashboard. See docs/component.md.
 */
export class HybridCounterComponent extends pulumi.ComponentResource {
    /** Absolute paths of the Lambda bundles this package deploys (plain values, for tools and local twins). */
    static readonly bundlePaths: BundlePaths = bundlePathsUnder(findPackageRoot());

    /** Name of the counter's table (the one created, or the one attached with `table`). */
    public readonly tableName: pulumi.Output<string>;
    /** ARN of the counter's table. */
    public readonly tableArn: pulumi.Output<string>;
    /** ARN of the table's stream, which the consumer reads. */
    public readonly tableStreamArn: pulumi.Output<string>;
    /** Name of the stream consumer function. */
    public readonly consumerFunctionName: pulumi.Output<string>;
    /** ARN of the stream consumer function. */
    public readonly consumerFunctionArn: pulumi.Output<string>;
    /** Name of the redrive function, which re-reads failed batches from the stream. */
    public readonly redriveFunctionName: pulumi.Output<string>;
    /** ARN of the redrive function. */
    public readonly redriveFunctionArn: pulumi.Output<string>;
    /** URL of the first DLQ (the stream mapping's on-failure destination, read by the redrive). */
    public readonly firstDlqUrl: pulumi.Output<string>;
    /** ARN of the first DLQ. */
    public readonly firstDlqArn: pulumi.Output<string>;
    /** URL of the fatal DLQ: records and batches that need an operator. */
    public readonly fatalDlqUrl: pulumi.Output<string>;
    /** ARN of the fatal DLQ. */
    public readonly fatalDlqArn: pulumi.Output<string>;
    /** ARN of each alarm created, by alarm name (disabled alarms are absent). */
    public readonly alarmArns: pulumi.Output<HybridCounterAlarmArns>;
    /** The topic alarms notify, if any (the one passed or the one created). */
    public readonly alarmTopicArn: pulumi.Output<string | undefined>;
    /** Name of the CloudWatch dashboard. */
    public readonly dashboardName: pulumi.Output<string>;
    /** Everything `HybridCounterClient` needs: `{ tableName, ...layout }`. */
    public readonly clientConfig: pulumi.Output<HybridCounterClientConfig>;

    constructor(name: string, args: HybridCounterComponentArgs = {}, opts: pulumi.ComponentResourceOptions = {}) {
        // Everything is checked before the component itself registers, so bad args create nothing.
        validateHybridCounterArgs(args);
        assertBundlesExist(HybridCounterComponent.bundlePaths);
        super(COMPONENT_TYPE, name, {}, opts);

        const parent = { parent: this };
        const layout = layoutFromArgs(args);
        const tags = args.tags;
        const tracing = args.tracing ?? D.tracing;
        const lambdaRuntime = args.lambdaRuntime ?? D.lambdaRuntime;
        const architecture = args.architecture ?? D.architecture;
        const metricsNamespace = args.metricsNamespace ?? D.metricsNamespace;
        const logRetentionInDays = args.logRetentionInDays ?? D.logRetentionInDays;
        const redriveTimeout = args.redriveTimeout ?? D.redriveTimeout;

        // ------------------------------------------------------------ table
        const table = args.table ?? this.createTable(name, args, layout);
        const streamArn = table.streamArn;
        // The mapping reads the stream through this ARN. For an attached table it resolves only once the table's
        // settings pass attachedTableProblems(); otherwise registering the mapping fails with an error naming
        // [table]. The settings are checked apart from the ARN so that the check also runs during preview, when
        // a same-program table's settings are known but its stream ARN is not.
        let mappingSourceArn: pulumi.Output<string> = streamArn;
        if (args.table !== undefined) {
            const checked = pulumi
                .all([table.streamEnabled, table.streamViewType, table.hashKey, table.rangeKey])
                .apply(([streamEnabled, streamViewType, hashKey, rangeKey]) => {
                    const problems = attachedTableProblems({ streamEnabled, streamViewType, hashKey, rangeKey }, layout);
                    if (problems.length > 0) {
                        throw new HybridCounterArgsError(problems);
                    }
                    return true;
                });
            mappingSourceArn = pulumi.all([checked, streamArn]).apply(([, arn]) => arn);
        }

        // ------------------------------------------------------------ queues
        const queueEncryption =
            args.queueKmsKeyArn !== undefined ? { kmsMasterKeyId: args.queueKmsKeyArn } : { sqsManagedSseEnabled: true };
        const fatalDlq = new aws.sqs.Queue(
            `${name}-fatal-dlq`,
            { messageRetentionSeconds: FIXED.queueMessageRetentionSeconds, ...queueEncryption, tags },
            parent,
        );
        const firstDlq = new aws.sqs.Queue(
            `${name}-first-dlq`,
            {
                messageRetentionSeconds: FIXED.queueMessageRetentionSeconds,
                visibilityTimeoutSeconds: firstDlqVisibilityTimeout(redriveTimeout),
                redrivePolicy: fatalDlq.arn.apply((deadLetterTargetArn) =>
                    JSON.stringify({ deadLetterTargetArn, maxReceiveCount: args.redriveMaxReceiveCount ?? D.redriveMaxReceiveCount }),
                ),
                ...queueEncryption,
                tags,
            },
            parent,
        );
        for (const [role, queue] of [
            ["first-dlq", firstDlq],
            ["fatal-dlq", fatalDlq],
        ] as const) {
            new aws.sqs.QueuePolicy(
                `${name}-${role}-policy`,
                { queueUrl: queue.url, policy: queue.arn.apply((arn) => JSON.stringify(denyInsecureTransportPolicy(arn))) },
                parent,
            );
        }

        // ------------------------------------------------------------ log groups
        const consumerLogs = new aws.cloudwatch.LogGroup(`${name}-consumer-logs`, { retentionInDays: logRetentionInDays, tags }, parent);
        const redriveLogs = new aws.cloudwatch.LogGroup(`${name}-redrive-logs`, { retentionInDays: logRetentionInDays, tags }, parent);

        // ------------------------------------------------------------ roles
        const assumeRolePolicy = JSON.stringify(lambdaAssumeRolePolicy());
        const consumerRole = new aws.iam.Role(`${name}-consumer-role`, { assumeRolePolicy, tags }, parent);
        const redriveRole = new aws.iam.Role(`${name}-redrive-role`, { assumeRolePolicy, tags }, parent);
        const queueKmsKeyArn = args.queueKmsKeyArn === undefined ? pulumi.output(undefined) : pulumi.output(args.queueKmsKeyArn);
        // Both roles' documents take the same ARNs; each names only what its function touches.
        const rolePolicy = (role: "consumer" | "redrive", executionRole: aws.iam.Role, logs: aws.cloudwatch.LogGroup) =>
            new aws.iam.RolePolicy(
                `${name}-${role}-policy`,
                {
                    role: executionRole.id,
                    policy: pulumi
                        .all([table.arn, streamArn, firstDlq.arn, fatalDlq.arn, logs.arn, queueKmsKeyArn])
                        .apply(([tableArn, stream, firstDlqArn, fatalDlqArn, logGroupArn, kmsKey]) =>
                            JSON.stringify(
                                (role === "consumer" ? consumerPolicy : redrivePolicy)({
                                    tableArn,
                                    streamArn: stream,
                                    firstDlqArn,
                                    fatalDlqArn,
                                    logGroupArn,
                                    queueKmsKeyArn: kmsKey,
                                    tracing,
                                }),
                            ),
                        ),
                },
                parent,
            );
        const consumerRolePolicy = rolePolicy("consumer", consumerRole, consumerLogs);
        const redriveRolePolicy = rolePolicy("redrive", redriveRole, redriveLogs);

        // ------------------------------------------------------------ functions
        const environment = {
            variables: pulumi
                .all([table.name, fatalDlq.url])
                .apply(([tableName, fatalQueueUrl]) => handlerEnvironment({ ...layout, tableName, fatalQueueUrl, metricsNamespace })),
        };
        const functionArgs = (bundle: string, logGroup: aws.cloudwatch.LogGroup) => ({
            code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.FileAsset(bundle) }),
            handler: FIXED.handler,
            runtime: lambdaRuntime,
            architectures: [architecture],
            environment,
            loggingConfig: { logFormat: FIXED.logFormat, logGroup: logGroup.name },
            tracingConfig: { mode: tracing ? "Active" : "PassThrough" },
            tags,
        });
        const consumer = new aws.lambda.Function(
            `${name}-consumer`,
            {
                ...functionArgs(HybridCounterComponent.bundlePaths.streamConsumer, consumerLogs),
                role: consumerRole.arn,
                memorySize: args.consumerMemorySize ?? D.consumerMemorySize,
                timeout: args.consumerTimeout ?? D.consumerTimeout,
                reservedConcurrentExecutions: args.consumerReservedConcurrency,
            },
            { parent: this, dependsOn: [consumerLogs, consumerRolePolicy] },
        );
        const redrive = new aws.lambda.Function(
            `${name}-redrive`,
            {
                ...functionArgs(HybridCounterComponent.bundlePaths.redrive, redriveLogs),
                role: redriveRole.arn,
                memorySize: args.redriveMemorySize ?? D.redriveMemorySize,
                timeout: redriveTimeout,
                reservedConcurrentExecutions: args.redriveReservedConcurrency,
            },
            { parent: this, dependsOn: [redriveLogs, redriveRolePolicy] },
        );

        // ------------------------------------------------------------ event source mappings
        new aws.lambda.EventSourceMapping(
            `${name}-stream-mapping`,
            {
                functionName: consumer.arn,
                eventSourceArn: mappingSourceArn,
                startingPosition: FIXED.startingPosition,
                batchSize: args.batchSize ?? D.batchSize,
                maximumBatchingWindowInSeconds: args.maximumBatchingWindowInSeconds ?? D.maximumBatchingWindowInSeconds,
                parallelizationFactor: args.parallelizationFactor ?? D.parallelizationFactor,
                bisectBatchOnFunctionError: FIXED.bisectBatchOnFunctionError,
                maximumRetryAttempts: args.maximumRetryAttempts ?? D.maximumRetryAttempts,
                maximumRecordAgeInSeconds: args.maximumRecordAgeInSeconds ?? D.maximumRecordAgeInSeconds,
                functionResponseTypes: [...FIXED.functionResponseTypes],
                filterCriteria: { filters: streamFilterPatterns(layout).map((pattern) => ({ pattern })) },
                destinationConfig: { onFailure: { destinationArn: firstDlq.arn } },
                tags,
            },
            // The mapping checks at creation that the role can read the stream and send to the destination.
            { parent: this, dependsOn: [consumerRolePolicy] },
        );
        new aws.lambda.EventSourceMapping(
            `${name}-redrive-mapping`,
            {
                functionName: redrive.arn,
                eventSourceArn: firstDlq.arn,
                batchSize: FIXED.redriveBatchSize,
                functionResponseTypes: [...FIXED.functionResponseTypes],
                tags,
            },
            { parent: this, dependsOn: [redriveRolePolicy] },
        );

        // ------------------------------------------------------------ alarms
        let alarmTopicArn: pulumi.Output<string | undefined> = pulumi.output(undefined);
        if (args.alarmTopicArn !== undefined) {
            alarmTopicArn = pulumi.output(args.alarmTopicArn);
        } else if (args.createAlarmTopic ?? D.createAlarmTopic) {
            const topic = new aws.sns.Topic(`${name}-alarm-topic`, { kmsMasterKeyId: "alias/aws/sns", tags }, parent);
            alarmTopicArn = topic.arn;
        }
        const actions = alarmTopicArn.apply((arn) => (arn === undefined ? [] : [arn]));
        const dimensions: Record<AlarmSubject, pulumi.Input<Record<string, pulumi.Input<string>>>> = {
            consumer: { FunctionName: consumer.name },
            redrive: { FunctionName: redrive.name },
            firstDlq: { QueueName: firstDlq.name },
            fatalDlq: { QueueName: fatalDlq.name },
        };
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
        const alarmArns: { -readonly [K in keyof HybridCounterAlarmArns]: pulumi.Output<string> } = {};
        for (const spec of ALARM_SPECS) {
            if (disabled.has(spec.key)) {
                continue;
            }
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
                parent,
            );
            alarmArns[spec.key] = alarm.arn;
        }

        // ------------------------------------------------------------ settler
        const settler =
            (args.settlerEnabled ?? D.settlerEnabled)
                ? createSettler({
                      name,
                      parent: this,
                      args,
                      layout,
                      bundle: HybridCounterComponent.bundlePaths.settler,
                      table,
                      countersTable: table,
                      fatalDlq,
                      queueKmsKeyArn,
                      metricsNamespace,
                      alarmActions: actions,
                  })
                : undefined;
        const settlerName = settler === undefined ? pulumi.output(undefined) : settler.function.name;

        // ------------------------------------------------------------ dashboard
        const dashboard = new aws.cloudwatch.Dashboard(
            `${name}-dashboard`,
            {
                dashboardName: args.dashboardName ?? defaultDashboardName(name),
                dashboardBody: pulumi
                    .all([table.arn, table.name, consumer.name, redrive.name, firstDlq.name, fatalDlq.name, settlerName])
                    .apply(
                        ([
                            tableArn,
                            tableName,
                            consumerFunctionName,
                            redriveFunctionName,
                            firstDlqName,
                            fatalDlqName,
                            settlerFunctionName,
                        ]) =>
                            dashboardBody({
                                // The table's ARN names its region, which also works with explicit providers.
                                region: tableArn.split(":")[3],
                                tableName,
                                consumerFunctionName,
                                redriveFunctionName,
                                firstDlqName,
                                fatalDlqName,
                                metricsNamespace,
                                extraWidgets:
                                    settlerFunctionName === undefined
                                        ? []
                                        : settlerWidgets(tableArn.split(":")[3]!, settlerFunctionName, metricsNamespace),
                            }),
                    ),
            },
            parent,
        );

        // ------------------------------------------------------------ outputs
        this.tableName = table.name;
        this.tableArn = table.arn;
        this.tableStreamArn = streamArn;
        this.consumerFunctionName = consumer.name;
        this.consumerFunctionArn = consumer.arn;
        this.redriveFunctionName = redrive.name;
        this.redriveFunctionArn = redrive.arn;
        this.firstDlqUrl = firstDlq.url;
        this.firstDlqArn = firstDlq.arn;
        this.fatalDlqUrl = fatalDlq.url;
        this.fatalDlqArn = fatalDlq.arn;
        this.alarmArns = pulumi.output(alarmArns);
        this.alarmTopicArn = alarmTopicArn;
        this.dashboardName = dashboard.dashboardName;
        this.clientConfig = table.name.apply((tableName) => ({ tableName, ...layout }));
        this.registerOutputs({
            tableName: this.tableName,
            tableArn: this.tableArn,
            tableStreamArn: this.tableStreamArn,
            consumerFunctionName: this.consumerFunctionName,
            consumerFunctionArn: this.consumerFunctionArn,
            redriveFunctionName: this.redriveFunctionName,
            redriveFunctionArn: this.redriveFunctionArn,
            firstDlqUrl: this.firstDlqUrl,
            firstDlqArn: this.firstDlqArn,
            fatalDlqUrl: this.fatalDlqUrl,
            fatalDlqArn: this.fatalDlqArn,
            alarmArns: this.alarmArns,
            alarmTopicArn: this.alarmTopicArn,
            dashboardName: this.dashboardName,
            clientConfig: this.clientConfig,
        });
    }

    private createTable(name: string, args: HybridCounterComponentArgs, layout: CounterTableLayout): aws.dynamodb.Table {
        const billingMode = args.billingMode ?? D.billingMode;
        return new aws.dynamodb.Table(
            `${name}-table`,
            {
                name: args.tableName,
                attributes: [
                    { name: layout.partitionKey, type: "S" },
                    { name: layout.sortKey, type: "S" },
                    { name: COUNTER_ATTRIBUTES.healShard, type: "S" },
                    { name: COUNTER_ATTRIBUTES.writtenAt, type: "N" },
                ],
                hashKey: layout.partitionKey,
                rangeKey: layout.sortKey,
                // The sparse index of best-effort items due a heal (only they carry hc_heal); the settler reads it.
                globalSecondaryIndexes: [
                    {
                        name: HEAL_INDEX_NAME,
                        hashKey: COUNTER_ATTRIBUTES.healShard,
                        rangeKey: COUNTER_ATTRIBUTES.writtenAt,
                        projectionType: "KEYS_ONLY",
                        ...(billingMode === "PROVISIONED" ? { readCapacity: args.readCapacity, writeCapacity: args.writeCapacity } : {}),
                    },
                ],
                billingMode,
                ...(billingMode === "PROVISIONED" ? { readCapacity: args.readCapacity, writeCapacity: args.writeCapacity } : {}),
                streamEnabled: true,
                streamViewType: D.streamViewType,
                pointInTimeRecovery: { enabled: true },
                serverSideEncryption: { enabled: true, ...(args.tableKmsKeyArn !== undefined ? { kmsKeyArn: args.tableKmsKeyArn } : {}) },
                deletionProtectionEnabled: args.deletionProtection ?? D.deletionProtection,
                tags: args.tags,
            },
            { parent: this },
        );
    }
}

/** `hybrid-counter-<project>-<stack>-<name>`, with characters a dashboard name cannot hold replaced by `-`. */
export function defaultDashboardName(name: string): string {
    return `hybrid-counter-${pulumi.getProject()}-${pulumi.getStack()}-${name}`.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 255);
}
