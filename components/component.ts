import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { clientEnvironment, type CounterConfig } from "../runtime/shared/config";
import { createAlarms } from "./alarms";
import type { HybridCounterAlarmArns, HybridCounterComponentArgs } from "./args";
import { createBackfillResources } from "./backfill";
import { assertBundlesExist, bundlePathsUnder, findPackageRoot, type BundlePaths } from "./bundles";
import { hybridCounterClientConfig, type HybridCounterClientConfig } from "./client-config";
import { createCountersTable } from "./counters-table";
import { dashboardBody } from "./dashboard";
import { COMPONENT_TYPE, HYBRID_COUNTER_DEFAULTS as D } from "./defaults";
import { apiPolicy } from "./iam";
import { createMappings, createQueues, createStreamFunctions, thresholdTopicOf, type Context, type TableRef } from "./pipeline";
import { otherRegions, tableArnIn } from "./regions";
import { counterConfigOf, resolveArgs } from "./resolved";
import { createSettler, settlerWidgets } from "./settler";
import { setUpUserTable, type UserTable } from "./user-table";
import { validateHybridCounterArgs } from "./validation";

export { hybridCounterClientConfig, type HybridCounterClientConfig } from "./client-config";

/**
 * Each component's check of its attached table (see ready()), kept off the class: the schema inference
 * of other languages reads every property of the component as an output.
 */
const TABLE_CHECKS = new WeakMap<object, Promise<void>>();

/**
 * A DynamoDB counter that is immediate (best-effort, written by the API) and eventually exact (counted by a stream
 * consumer, one conditional write per key per batch), with a path for the batches Lambda gives up on, a settler that
 * heals best-effort, and alarms on every stage.
 *
 * Creates (or attaches to) the table, the counters table, the stream consumer with its event source mapping, the
 * first DLQ with its redrive function, the fatal DLQ, the settler, every function's log group and role, seven alarms
 * (optionally with an SNS topic), optionally a topic for threshold events, and a dashboard. See docs/component.md.
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
    /** Name of the redrive function, which applies the stream ranges Lambda gave up on. */
    public readonly redriveFunctionName: pulumi.Output<string>;
    /** ARN of the redrive function. */
    public readonly redriveFunctionArn: pulumi.Output<string>;
    /** URL of the first DLQ (the stream mapping's on-failure destination, read by the redrive). */
    public readonly firstDlqUrl: pulumi.Output<string>;
    /** ARN of the first DLQ. */
    public readonly firstDlqArn: pulumi.Output<string>;
    /** URL of the fatal DLQ: records and ranges that need an operator. */
    public readonly fatalDlqUrl: pulumi.Output<string>;
    /** ARN of the fatal DLQ. */
    public readonly fatalDlqArn: pulumi.Output<string>;
    /** ARN of each alarm created, by alarm name (disabled alarms are absent). */
    public readonly alarmArns: pulumi.Output<HybridCounterAlarmArns>;
    /** The topic alarms notify, if any (the one passed or the one created). */
    public readonly alarmTopicArn: pulumi.Output<string | undefined>;
    /** The topic threshold events go to, if any (the one passed or the one created). */
    public readonly thresholdTopicArn: pulumi.Output<string | undefined>;
    /** Name of the CloudWatch dashboard. */
    public readonly dashboardName: pulumi.Output<string>;
    /**
     * The fractions of a key's limit whose crossings the functions announce (the `thresholds` arg, or its default):
     * `npx hybrid-counter fatal replay` applies records with them, as the functions do.
     */
    public readonly thresholds: pulumi.Output<number[]>;
    /** The days of usage history the functions keep (the `usageRetentionDays` arg, or its default); read by `fatal replay` too. */
    public readonly usageRetentionDays: pulumi.Output<number>;
    /** Everything `HybridCounterClient` needs: `new HybridCounterClient({ ...clientConfig, dynamodb })`. */
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
        const resolved = resolveArgs(args);
        const built = buildCounter({ name, args, resolved, parent: this, bundles: HybridCounterComponent.bundlePaths });
        if (built.check !== undefined) {
            TABLE_CHECKS.set(this, built.check);
        }
        this.tableName = built.table.name;
        this.tableArn = built.table.arn;
        this.tableStreamArn = built.table.streamArn;
        this.countersTableName = built.countersTable.name;
        this.countersTableArn = built.countersTable.arn;
        this.consumerFunctionName = built.consumer.name;
        this.consumerFunctionArn = built.consumer.arn;
        this.redriveFunctionName = built.redrive.name;
        this.redriveFunctionArn = built.redrive.arn;
        this.firstDlqUrl = built.firstDlq.url;
        this.firstDlqArn = built.firstDlq.arn;
        this.fatalDlqUrl = built.fatalDlq.url;
        this.fatalDlqArn = built.fatalDlq.arn;
        this.alarmArns = built.alarmArns;
        this.alarmTopicArn = built.alarmTopicArn;
        this.thresholdTopicArn = built.thresholdTopicArn;
        this.dashboardName = built.dashboardName;
        this.clientConfig = built.clientConfig;
        this.apiEnvironment = built.apiEnvironment;
        this.apiPolicyDocument = built.apiPolicyDocument;
        this.thresholds = pulumi.output(resolved.thresholds);
        this.usageRetentionDays = pulumi.output(resolved.usageRetentionDays);
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
            thresholdTopicArn: this.thresholdTopicArn,
            dashboardName: this.dashboardName,
            clientConfig: this.clientConfig,
            apiEnvironment: this.apiEnvironment,
            apiPolicyDocument: this.apiPolicyDocument,
            thresholds: this.thresholds,
            usageRetentionDays: this.usageRetentionDays,
        });
    }

    /**
     * Resolves once an attached table's stream, keys, replicas and (same-table placement) heal index are checked, and
     * rejects with a HybridCounterArgsError naming [table] when they are wrong (a created table always passes). A
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
}

/** What buildCounter made: the component's outputs, and the check of an attached table. */
interface BuiltCounter {
    readonly table: UserTable;
    readonly countersTable: TableRef;
    readonly consumer: aws.lambda.Function;
    readonly redrive: aws.lambda.Function;
    readonly firstDlq: aws.sqs.Queue;
    readonly fatalDlq: aws.sqs.Queue;
    readonly alarmArns: pulumi.Output<HybridCounterAlarmArns>;
    readonly alarmTopicArn: pulumi.Output<string | undefined>;
    readonly thresholdTopicArn: pulumi.Output<string | undefined>;
    readonly dashboardName: pulumi.Output<string>;
    readonly clientConfig: pulumi.Output<HybridCounterClientConfig>;
    readonly apiEnvironment: pulumi.Output<Record<string, string>>;
    readonly apiPolicyDocument: pulumi.Output<string>;
    readonly check?: Promise<void>;
}

/**
 * Creates every child of the component, in the order each needs the others: the tables, the queues and the
 * threshold topic, the stream functions and their mappings, the backfill, the alarms, the settler, the dashboard.
 */
function buildCounter(ctx: Context): BuiltCounter {
    const { name, args, resolved: r } = ctx;
    const { table, layout, usable, check } = setUpUserTable(name, args, r, ctx.parent);
    const countersTable = countersTableOf(ctx, table, layout);
    // One configuration for every function and the API's client (runtime/shared/config.ts).
    const config: pulumi.Output<CounterConfig> = pulumi
        .all([layout, table.name, countersTable.name])
        .apply(([l, tableName, countersTableName]) => counterConfigOf(r, l, tableName, countersTableName));
    const queues = createQueues(ctx);
    const thresholdTopicArn = thresholdTopicOf(ctx);
    const functions = createStreamFunctions(ctx, { table, countersTable, queues, thresholdTopicArn, config });
    createMappings(ctx, { streamArn: table.streamArn, functions, firstDlq: queues.firstDlq, layout, enabled: usable });
    // At attach time no item carries a region's stamp, so every item belongs to the home region: only its
    // component backfills on deploy (docs/design/global-tables.md, "Backfill, reconcile and the CLI, per region").
    if (r.home) {
        createBackfillResources(name, ctx.parent, {
            args,
            config,
            table,
            countersTable,
            bundle: ctx.bundles.backfill,
            tableUsable: usable,
            lambdaRuntime: r.lambdaRuntime,
            architecture: r.architecture,
            tracing: r.tracing,
            logRetentionInDays: r.logRetentionInDays,
            tags: r.tags,
        });
    }
    const { firstDlq, fatalDlq } = queues;
    const { consumer, redrive } = functions;
    const alarms = createAlarms(name, args, ctx.parent, {
        consumer: { FunctionName: consumer.name },
        redrive: { FunctionName: redrive.name },
        firstDlq: { QueueName: firstDlq.name },
        fatalDlq: { QueueName: fatalDlq.name },
    });
    const settler = r.settlerEnabled
        ? createSettler(ctx, { table, countersTable, config, thresholdTopicArn, alarmActions: alarms.actions })
        : undefined;
    const dashboard = createDashboard(ctx, {
        table,
        countersTable,
        functions: [consumer, redrive],
        queues: [firstDlq, fatalDlq],
        settler: settler?.function,
    });
    return {
        table,
        countersTable,
        consumer,
        redrive,
        firstDlq,
        fatalDlq,
        alarmArns: alarms.arns,
        alarmTopicArn: alarms.topicArn,
        thresholdTopicArn,
        dashboardName: dashboard.dashboardName,
        clientConfig: config.apply((c) => hybridCounterClientConfig(c, r.regions)),
        apiEnvironment: config.apply((c) => clientEnvironment(c)),
        apiPolicyDocument: pulumi
            .all([table.arn, countersTable.arn])
            .apply(([tableArn, countersTableArn]) => JSON.stringify(apiPolicy({ tableArn, countersTableArn }))),
        ...(check === undefined ? {} : { check }),
    };
}

/**
 * The table the counter items live in: the one this component creates (`${name}-counters`, placement "separate",
 * in the home region), the home region's replica (a member region: same name, this region, the user's table's
 * account), or the user's table itself (placement "same-table").
 */
function countersTableOf(ctx: Context, table: UserTable, layout: pulumi.Output<{ partitionKey: string; sortKey: string }>): TableRef {
    const { name, args, resolved: r } = ctx;
    if (r.sameTable) {
        return { name: table.name, arn: table.arn };
    }
    if (r.home) {
        const created = createCountersTable(
            name,
            {
                partitionKey: layout.partitionKey,
                sortKey: layout.sortKey,
                kmsKeyArn: args.tableKmsKeyArn,
                deletionProtection: args.deletionProtection ?? D.deletionProtection,
                tags: r.tags,
                replicaRegions: r.regions === undefined ? [] : otherRegions(r.regions),
            },
            ctx.parent,
        );
        return { name: created.name, arn: created.arn };
    }
    const setting = r.regions!;
    const member = pulumi
        .all([pulumi.output(args.regions!.countersTableName!), table.arn])
        .apply(([countersName, tableArn]) => ({ name: countersName, arn: tableArnIn(tableArn, setting.current, countersName) }));
    return { name: member.apply((t) => t.name), arn: member.apply((t) => t.arn) };
}

interface DashboardParts {
    readonly table: TableRef;
    readonly countersTable: TableRef;
    readonly functions: readonly [aws.lambda.Function, aws.lambda.Function];
    readonly queues: readonly [aws.sqs.Queue, aws.sqs.Queue];
    readonly settler?: aws.lambda.Function;
}

/** The dashboard of the pipeline (and of the settler, when there is one), in the table's region. */
function createDashboard(ctx: Context, d: DashboardParts): aws.cloudwatch.Dashboard {
    const [consumer, redrive] = d.functions;
    const [firstDlq, fatalDlq] = d.queues;
    const settlerName = d.settler === undefined ? pulumi.output(undefined) : d.settler.name;
    const metricsNamespace = ctx.resolved.metricsNamespace;
    const body = pulumi
        .all([d.table.arn, d.table.name, d.countersTable.name, consumer.name, redrive.name, firstDlq.name, fatalDlq.name, settlerName])
        .apply(
            ([tableArn, tableName, countersTableName, consumerFunctionName, redriveFunctionName, firstDlqName, fatalDlqName, settler]) => {
                // The table's ARN names its region, which also works with explicit providers.
                const region = tableArn.split(":")[3]!;
                return dashboardBody({
                    region,
                    tableName,
                    countersTableName,
                    consumerFunctionName,
                    redriveFunctionName,
                    firstDlqName,
                    fatalDlqName,
                    metricsNamespace,
                    extraWidgets: settler === undefined ? [] : settlerWidgets(region, settler, metricsNamespace),
                });
            },
        );
    return new aws.cloudwatch.Dashboard(
        `${ctx.name}-dashboard`,
        { dashboardName: ctx.args.dashboardName ?? defaultDashboardName(ctx.name), dashboardBody: body },
        { parent: ctx.parent },
    );
}

/** `hybrid-counter-<project>-<stack>-<name>`, with characters a dashboard name cannot hold replaced by `-`. */
export function defaultDashboardName(name: string): string {
    return `hybrid-counter-${pulumi.getProject()}-${pulumi.getStack()}-${name}`.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 255);
}
