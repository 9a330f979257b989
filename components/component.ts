import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import {
    COUNTER_ATTRIBUTES,
    ENV,
    clientEnvironment,
    flatSelection,
    handlerEnvironment,
    type CounterTableLayout,
} from "../runtime/shared/config";
import { ALARM_SPECS, type AlarmSubject } from "./alarms";
import type { CountedItems, HybridCounterAlarmArns, HybridCounterComponentArgs } from "./args";
import { createBackfillResources } from "./backfill";
import { assertBundlesExist, bundlePathsUnder, findPackageRoot, type BundlePaths } from "./bundles";
import { CounterPlacement, createCountersTable, healIndex } from "./counters-table";
import { dashboardBody } from "./dashboard";
import {
    COMPONENT_TYPE,
    FIXED,
    HYBRID_COUNTER_DEFAULTS as D,
    firstDlqVisibilityTimeout,
    shardsFromArgs,
    streamFilterPatterns,
    type HybridCounterAlarmName,
} from "./defaults";
import { createFunctionLogsAndRole, createFunctionRolePolicy } from "./function-role";
import { apiPolicy, consumerPolicy, denyInsecureTransportPolicy, redrivePolicy } from "./iam";
import {
    DEFAULT_REGION_ATTRIBUTE,
    isHome,
    otherRegions,
    regionalFilterPatterns,
    regionsEnvironment,
    regionsSetting,
    tableArnIn,
    tableRegionProblems,
    type RegionsSetting,
} from "./regions";
import { createSettler, settlerWidgets } from "./settler";
import { HybridCounterArgsError, attachedTableProblems, layoutFromArgs, validateHybridCounterArgs } from "./validation";

/**
 * Each component's check of its attached table (see ready()), kept off the class: the schema inference
 * of other languages reads every property of the component as an output.
 */
const TABLE_CHECKS = new WeakMap<object, Promise<void>>();

/**
 * What an API program needs to build a `HybridCounterClient`: `{ tableName, countersTableName, ...layout }`,
 * with the selection flat (`countedItems` and its parameters) so that every language can read it.
 */
export interface HybridCounterClientConfig {
    /** Name of the user's table: the resource items. */
    readonly tableName: string;
    /** Name of the table the counter items live in (the user's table in the same-table placement). */
    readonly countersTableName: string;
    /** Partition key attribute: the counter key. */
    readonly partitionKey: string;
    /** Sort key attribute: a resource's id. */
    readonly sortKey: string;
    /** Soft-delete flag. */
    readonly deletedAttribute: string;
    /** The client's write token attribute. */
    readonly tokenAttribute: string;
    /** Sort-key prefix of the counter items. */
    readonly counterPrefix: string;
    /** Attribute holding a counter's value. */
    readonly countAttribute: string;
    /** Which items count. */
    readonly countedItems: CountedItems;
    /** With `countedItems: "sortKeyPrefix"`: the prefix. */
    readonly countedSortKeyPrefix?: string;
    /** With `countedItems: "attribute"`: the attribute's name. */
    readonly countedAttributeName?: string;
    /** With `countedItems: "attribute"`: the attribute's value. */
    readonly countedAttributeValue?: string;
    /** The partitions of the counters table each key's counting spreads over, when above 1 (the `counterShards` arg). */
    readonly counterShards?: number;
    /**
     * The settler's quiet window (s), when it is deployed: the client refuses a `deadlineMs` it does not cover
     * (deadline + 300 s request lifetime + 60 s clock skew must stay below it; runtime/heal/heal-window.ts).
     */
    readonly healQuietWindowSeconds?: number;
    /**
     * With the `regions` arg: the region this deployment counts for and every member with its role (the client stamps
     * the items it creates with `current`, and `count()` sums every member's counters).
     */
    readonly regions?: RegionsSetting;
    /** With the `regions` arg: the attribute that stamps an item with its creating region. */
    readonly regionAttribute?: string;
}

/** The client configuration of a layout and its tables (and the settler's quiet window, when one heals). */
export function clientConfigOf(
    layout: CounterTableLayout,
    tableName: string,
    countersTableName: string,
    healQuietWindowSeconds?: number,
    counterShards = 1,
    regions?: { readonly setting: RegionsSetting; readonly regionAttribute: string },
): HybridCounterClientConfig {
    return {
        tableName,
        countersTableName,
        partitionKey: layout.partitionKey,
        sortKey: layout.sortKey,
        deletedAttribute: layout.deletedAttribute,
        tokenAttribute: layout.tokenAttribute,
        counterPrefix: layout.counterPrefix,
        countAttribute: layout.countAttribute,
        ...(flatSelection(layout.selection) as { countedItems: CountedItems }),
        ...(counterShards === 1 ? {} : { counterShards }),
        ...(healQuietWindowSeconds === undefined ? {} : { healQuietWindowSeconds }),
        ...(regions === undefined ? {} : { regions: regions.setting, regionAttribute: regions.regionAttribute }),
    };
}

/** The settings of the user's table the component works with, whether it created it or attaches to it. */
interface UserTable {
    readonly name: pulumi.Output<string>;
    readonly arn: pulumi.Output<string>;
    readonly streamArn: pulumi.Output<string>;
    readonly streamEnabled: pulumi.Output<boolean | undefined>;
    readonly streamViewType: pulumi.Output<string | undefined>;
    readonly hashKey: pulumi.Output<string | undefined>;
    readonly rangeKey: pulumi.Output<string | undefined>;
    readonly attributes: pulumi.Output<Array<{ name: string; type: string }> | undefined>;
    /** The regions of the table's replicas: empty for a table the component creates or one without replicas. */
    readonly replicaRegions: pulumi.Output<string[]>;
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
    /** The table the counter items live in: `${name}-counters`, or the user's table in the same-table placement. */
    public readonly countersTableName: pulumi.Output<string>;
    /** ARN of the table the counter items live in. */
    public readonly countersTableArn: pulumi.Output<string>;
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
    /** Everything `HybridCounterClient` needs: `{ tableName, countersTableName, ...layout }`. */
    public readonly clientConfig: pulumi.Output<HybridCounterClientConfig>;
    /**
     * The API's environment variables: set them on the API's function and build the client with
     * `new HybridCounterClient({ ...clientConfigFromEnv(process.env), dynamodb })`.
     */
    public readonly apiEnvironment: pulumi.Output<Record<string, string>>;
    /** IAM policy document (JSON) with exactly the actions `HybridCounterClient` calls, on both tables. */
    public readonly apiPolicyDocument: pulumi.Output<string>;

    constructor(name: string, args: HybridCounterComponentArgs = {}, opts: pulumi.ComponentResourceOptions = {}) {
        // Everything is checked before the component itself registers, so bad args create nothing.
        validateHybridCounterArgs(args);
        assertBundlesExist(HybridCounterComponent.bundlePaths);
        super(COMPONENT_TYPE, name, {}, opts);

        const parent = { parent: this };
        const tags = args.tags;
        const tracing = args.tracing ?? D.tracing;
        const lambdaRuntime = args.lambdaRuntime ?? D.lambdaRuntime;
        const architecture = args.architecture ?? D.architecture;
        const metricsNamespace = args.metricsNamespace ?? D.metricsNamespace;
        const logRetentionInDays = args.logRetentionInDays ?? D.logRetentionInDays;
        const redriveTimeout = args.redriveTimeout ?? D.redriveTimeout;
        // Every function and the API's client read a key's counters with the same shard count.
        const shards = shardsFromArgs(args);
        // A multi-region counter (components/regions/): every function and the API's client get the setting, the
        // stream filter keeps the records this region counts, and only the home region creates the counters table
        // and runs the backfill on deploy. Without `regions` nothing below changes.
        const setting = args.regions === undefined ? undefined : regionsSetting(args.regions);
        const regionAttribute = args.regionAttribute ?? DEFAULT_REGION_ATTRIBUTE;
        const regional = setting === undefined ? undefined : { setting, regionAttribute };
        const regionEnvironment = setting === undefined ? {} : regionsEnvironment(setting, regionAttribute);
        const home = setting === undefined || isHome(setting);

        // ------------------------------------------------------------ tables
        const attaching = args.table !== undefined || args.tableArn !== undefined;
        const table: UserTable = attaching ? this.attachedTable(args) : this.createdTable(name, args);
        const streamArn = table.streamArn;
        // The layout: for an attached table, its keys are the table's own unless the args give them. The stream
        // mapping reads the stream through an ARN that resolves only once the table's settings pass
        // attachedTableProblems(); otherwise registering the mapping fails with an error naming [table], so a
        // wrong table is never read. The settings are checked apart from the ARN, so that the check also runs
        // during preview, when a same-program table's settings are known but its stream ARN is not.
        let layout: pulumi.Output<CounterTableLayout> = pulumi.output(layoutFromArgs(args));
        let mappingEnabled: pulumi.Output<boolean> | undefined;
        if (attaching) {
            layout = pulumi
                .all([table.hashKey, table.rangeKey])
                .apply(([hashKey, rangeKey]) => layoutFromArgs(args, { hashKey, rangeKey }));
            const settingsProblems = pulumi
                .all([table.streamEnabled, table.streamViewType, table.hashKey, table.rangeKey, table.attributes, table.replicaRegions])
                .apply(([streamEnabled, streamViewType, hashKey, rangeKey, attributes, replicaRegions]) =>
                    attachedTableProblems(
                        { streamEnabled, streamViewType, hashKey, rangeKey, attributes, replicaRegions },
                        { partitionKey: args.partitionKey, sortKey: args.sortKey },
                        setting,
                    ),
                );
            // In a multi-region counter the table read must also be the replica in `current` (its ARN's region): known
            // only once the ARN resolves, so the mapping's `enabled` then waits for the update. The replicas were checked
            // as seen from `current`; read in another region they say nothing of the members, so only the region is named.
            const problems =
                setting === undefined
                    ? settingsProblems
                    : pulumi.all([settingsProblems, table.arn]).apply(([list, arn]) => {
                          const wrongRegion = tableRegionProblems(arn, setting);
                          return wrongRegion.length === 0
                              ? list
                              : [...list.filter((p) => !p.startsWith("[regions.members]")), ...wrongRegion];
                      });
            // No resource input and no output ever rejects (a rejected Output is a burst of unhandled rejections
            // under mocks): the stream mapping is registered disabled, so a wrong table is never read, and the one
            // rejection is ready()'s, which fails `pulumi up` with the problems (see ready()).
            mappingEnabled = problems.apply((list) => list.length === 0);
            TABLE_CHECKS.set(
                this,
                new Promise<void>((resolve, reject) => {
                    problems.apply((list) => (list.length > 0 ? reject(new HybridCounterArgsError(list)) : resolve()));
                }),
            );
        }
        const placement = args.counterPlacement ?? D.counterPlacement;
        const countersTable =
            placement === CounterPlacement.Separate && home
                ? createCountersTable(
                      name,
                      {
                          partitionKey: layout.partitionKey,
                          sortKey: layout.sortKey,
                          kmsKeyArn: args.tableKmsKeyArn,
                          deletionProtection: args.deletionProtection ?? D.deletionProtection,
                          tags,
                          replicaRegions: setting === undefined ? [] : otherRegions(setting),
                      },
                      this,
                  )
                : undefined;
        // A member region attaches to the home region's counters table: its replica here has the same name, in this
        // region, in the account of the user's table (whose replica here the component reads).
        const memberCounters =
            setting !== undefined && !home
                ? pulumi.all([pulumi.output(args.regions!.countersTableName!), table.arn]).apply(([countersName, tableArn]) => ({
                      name: countersName,
                      arn: tableArnIn(tableArn, setting.current, countersName),
                  }))
                : undefined;
        const countersTableName = countersTable?.name ?? memberCounters?.apply((t) => t.name) ?? table.name;
        const countersTableArn = countersTable?.arn ?? memberCounters?.apply((t) => t.arn) ?? table.arn;

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

        // ------------------------------------------------------------ log groups and roles
        const logsAndRole = (fn: "consumer" | "redrive") => createFunctionLogsAndRole({ name, fn, parent: this, logRetentionInDays, tags });
        const { logs: consumerLogs, role: consumerRole } = logsAndRole("consumer");
        const { logs: redriveLogs, role: redriveRole } = logsAndRole("redrive");
        const queueKmsKeyArn = args.queueKmsKeyArn === undefined ? pulumi.output(undefined) : pulumi.output(args.queueKmsKeyArn);
        // Both roles' documents take the same ARNs; each names only what its function touches.
        const rolePolicy = (role: "consumer" | "redrive", executionRole: aws.iam.Role, logs: aws.cloudwatch.LogGroup) =>
            createFunctionRolePolicy(
                { name, fn: role, parent: this },
                executionRole,
                pulumi
                    .all([table.arn, countersTableArn, streamArn, firstDlq.arn, fatalDlq.arn, logs.arn, queueKmsKeyArn])
                    .apply(([tableArn, countersArn, stream, firstDlqArn, fatalDlqArn, logGroupArn, kmsKey]) =>
                        (role === "consumer" ? consumerPolicy : redrivePolicy)({
                            tableArn,
                            countersTableArn: countersArn,
                            streamArn: stream,
                            firstDlqArn,
                            fatalDlqArn,
                            logGroupArn,
                            queueKmsKeyArn: kmsKey,
                            tracing,
                        }),
                    ),
            );
        const consumerRolePolicy = rolePolicy("consumer", consumerRole, consumerLogs);
        const redriveRolePolicy = rolePolicy("redrive", redriveRole, redriveLogs);

        // ------------------------------------------------------------ functions
        const environment = {
            variables: pulumi
                .all([layout, table.name, countersTableName, fatalDlq.url])
                .apply(([l, tableName, counters, fatalQueueUrl]) => ({
                    ...handlerEnvironment({ ...l, ...shards, tableName, countersTableName: counters, fatalQueueUrl, metricsNamespace }),
                    ...regionEnvironment,
                })),
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
                eventSourceArn: streamArn,
                ...(mappingEnabled === undefined ? {} : { enabled: mappingEnabled }),
                startingPosition: FIXED.startingPosition,
                batchSize: args.batchSize ?? D.batchSize,
                maximumBatchingWindowInSeconds: args.maximumBatchingWindowInSeconds ?? D.maximumBatchingWindowInSeconds,
                parallelizationFactor: args.parallelizationFactor ?? D.parallelizationFactor,
                bisectBatchOnFunctionError: FIXED.bisectBatchOnFunctionError,
                maximumRetryAttempts: args.maximumRetryAttempts ?? D.maximumRetryAttempts,
                maximumRecordAgeInSeconds: args.maximumRecordAgeInSeconds ?? D.maximumRecordAgeInSeconds,
                functionResponseTypes: [...FIXED.functionResponseTypes],
                filterCriteria: {
                    filters: layout.apply((l) =>
                        (regional === undefined
                            ? streamFilterPatterns(l)
                            : regionalFilterPatterns(l, regional.setting, regionAttribute)
                        ).map((pattern) => ({ pattern })),
                    ),
                },
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

        // ------------------------------------------------------------ backfill (optional, see backfill.ts)
        // At attach time no item carries a region's stamp, so every item belongs to the home region: only its
        // component backfills on deploy (docs/design/global-tables.md, "Backfill, reconcile and the CLI, per region").
        if (home) {
            createBackfillResources(name, this, {
                args,
                layout,
                counterShards: shards.counterShards,
                table: { name: table.name, arn: table.arn },
                countersTable: { name: countersTableName, arn: countersTableArn },
                bundle: HybridCounterComponent.bundlePaths.backfill,
                tableUsable: mappingEnabled,
                lambdaRuntime,
                architecture,
                tracing,
                logRetentionInDays,
                tags,
                regionEnvironment,
            });
        }

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
                      countersTable: { name: countersTableName, arn: countersTableArn },
                      fatalDlq,
                      queueKmsKeyArn,
                      metricsNamespace,
                      alarmActions: actions,
                      regionEnvironment,
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
        this.countersTableName = countersTableName;
        this.countersTableArn = countersTableArn;
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
        // Clients check their deadline against the window the settler heals with (runtime/heal/heal-window.ts).
        const quietWindow =
            (args.settlerEnabled ?? D.settlerEnabled) ? (args.healQuietWindowSeconds ?? D.healQuietWindowSeconds) : undefined;
        this.clientConfig = pulumi
            .all([layout, table.name, countersTableName])
            .apply(([l, tableName, counters]) =>
                clientConfigOf(l as CounterTableLayout, tableName, counters, quietWindow, shards.counterShards, regional),
            );
        this.apiEnvironment = pulumi
            .all([layout, table.name, countersTableName])
            .apply(([l, tableName, counters]): Record<string, string> => ({
                ...clientEnvironment({ ...(l as CounterTableLayout), ...shards, tableName, countersTableName: counters }),
                ...(quietWindow === undefined ? {} : { [ENV.healQuietWindowSeconds]: String(quietWindow) }),
                ...regionEnvironment,
            }));
        this.apiPolicyDocument = pulumi
            .all([table.arn, countersTableArn])
            .apply(([tableArn, countersArn]) => JSON.stringify(apiPolicy({ tableArn, countersTableArn: countersArn })));
        this.registerOutputs({
            tableName: this.tableName,
            tableArn: this.tableArn,
            tableStreamArn: this.tableStreamArn,
            countersTableName: this.countersTableName,
            countersTableArn: this.countersTableArn,
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
            apiEnvironment: this.apiEnvironment,
            apiPolicyDocument: this.apiPolicyDocument,
        });
    }

    /**
     * Resolves once an attached table's stream and keys are checked, and rejects with a
     * HybridCounterArgsError naming [table] when they are wrong (a created table always passes). A
     * table's settings are Outputs, known only after the constructor returns, so this is where a wrong
     * table surfaces: unawaited, the rejection fails `pulumi up` with the problems and no stack trace
     * (the error is a RunError); in a unit test under mocks, `await component.ready()` fails cleanly.
     * Either way the stream mapping is registered disabled and no backfill starts, so the table is never read.
     */
    ready(): Promise<void> {
        return TABLE_CHECKS.get(this) ?? Promise.resolve();
    }

    /**
     * Grants an API's role exactly what HybridCounterClient calls, on both tables: an inline policy named
     * `name` (a child of this component) on `role` (an aws.iam.Role, or a role's name), holding
     * `apiPolicyDocument`.
     */
    grantApiAccess(name: string, role: aws.iam.Role | pulumi.Input<string>): aws.iam.RolePolicy {
        const roleName = role instanceof aws.iam.Role ? role.name : role;
        return new aws.iam.RolePolicy(name, { role: roleName, policy: this.apiPolicyDocument }, { parent: this });
    }

    /** The user's table attached by resource or by ARN (read with getTableOutput). */
    private attachedTable(args: HybridCounterComponentArgs): UserTable {
        const source =
            args.table ??
            aws.dynamodb.getTableOutput({ name: pulumi.output(args.tableArn!).apply((arn) => arn.split(":table/")[1]!) }, { parent: this });
        const attributes = (source.attributes as pulumi.Output<Array<{ name: string; type: string }> | undefined>).apply((list) =>
            list?.map((a) => ({ name: a.name, type: a.type })),
        );
        // A Table's `replicas` are its own (or, read with Table.get, its description's); getTable reads them from the
        // description. TableReplica resources are not visible here: the policy pack reports those (policy/regions.ts).
        const replicaRegions = (source.replicas as pulumi.Output<Array<{ regionName?: string }> | undefined>).apply((list) =>
            (list ?? []).map((replica) => replica.regionName ?? "(unnamed region)"),
        );
        return {
            name: source.name,
            arn: source.arn,
            streamArn: source.streamArn,
            streamEnabled: source.streamEnabled as pulumi.Output<boolean | undefined>,
            streamViewType: source.streamViewType as pulumi.Output<string | undefined>,
            hashKey: source.hashKey as pulumi.Output<string | undefined>,
            rangeKey: source.rangeKey as pulumi.Output<string | undefined>,
            attributes,
            replicaRegions,
        };
    }

    private createdTable(name: string, args: HybridCounterComponentArgs): UserTable {
        const table = this.createTable(name, args, layoutFromArgs(args));
        return {
            name: table.name,
            arn: table.arn,
            streamArn: table.streamArn,
            streamEnabled: table.streamEnabled,
            streamViewType: table.streamViewType,
            hashKey: table.hashKey,
            rangeKey: table.rangeKey as pulumi.Output<string | undefined>,
            attributes: table.attributes.apply((list) => list.map((a) => ({ name: a.name, type: a.type }))),
            // The component creates a table in one region only.
            replicaRegions: pulumi.output([]),
        };
    }

    private createTable(name: string, args: HybridCounterComponentArgs, layout: CounterTableLayout): aws.dynamodb.Table {
        const billingMode = args.billingMode ?? D.billingMode;
        const sameTable = (args.counterPlacement ?? D.counterPlacement) === CounterPlacement.SameTable;
        return new aws.dynamodb.Table(
            `${name}-table`,
            {
                name: args.tableName,
                attributes: [
                    { name: layout.partitionKey, type: "S" },
                    { name: layout.sortKey, type: "S" },
                    // In the same-table placement the counter items, and so the heal index, live here.
                    ...(sameTable
                        ? [
                              { name: COUNTER_ATTRIBUTES.healShard, type: "S" },
                              { name: COUNTER_ATTRIBUTES.dueAt, type: "N" },
                          ]
                        : []),
                ],
                hashKey: layout.partitionKey,
                rangeKey: layout.sortKey,
                ...(sameTable
                    ? {
                          globalSecondaryIndexes: [
                              {
                                  ...healIndex(),
                                  ...(billingMode === "PROVISIONED"
                                      ? { readCapacity: args.readCapacity, writeCapacity: args.writeCapacity }
                                      : {}),
                              },
                          ],
                      }
                    : {}),
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
