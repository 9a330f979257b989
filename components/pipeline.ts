/**
 * The stream path of the component: the two queues, the threshold topic, the consumer and the redrive with their
 * log groups and roles, and the two event source mappings. Each part is created as a child of the component.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { handlerEnvironment, type CounterConfig, type CounterTableLayout } from "../runtime/shared/config";
import type { HybridCounterComponentArgs } from "./args";
import type { BundlePaths } from "./bundles";
import { FIXED, HYBRID_COUNTER_DEFAULTS as D, firstDlqVisibilityTimeout } from "./defaults";
import { createFunctionLogsAndRole, createFunctionRolePolicy } from "./function-role";
import { consumerPolicy, denyInsecureTransportPolicy, redrivePolicy } from "./iam";
import type { ResolvedArgs } from "./resolved";

/** What every part of the component is created with. */
export interface Context {
    readonly name: string;
    readonly args: HybridCounterComponentArgs;
    readonly resolved: ResolvedArgs;
    readonly parent: pulumi.Resource;
    /** The Lambda bundles the functions deploy. */
    readonly bundles: BundlePaths;
}

/** A table as the functions' roles and environments name it. */
export interface TableRef {
    readonly name: pulumi.Output<string>;
    readonly arn: pulumi.Output<string>;
}

export interface Queues {
    readonly firstDlq: aws.sqs.Queue;
    readonly fatalDlq: aws.sqs.Queue;
    /** The customer managed key of both queues, when the args give one. */
    readonly kmsKeyArn: pulumi.Output<string | undefined>;
}

/** The first DLQ (the stream mapping's on-failure destination), the fatal DLQ behind it, and their TLS-only policies. */
export function createQueues(ctx: Context): Queues {
    const { name, args, parent } = ctx;
    const tags = ctx.resolved.tags;
    const encryption = args.queueKmsKeyArn !== undefined ? { kmsMasterKeyId: args.queueKmsKeyArn } : { sqsManagedSseEnabled: true };
    const fatalDlq = new aws.sqs.Queue(
        `${name}-fatal-dlq`,
        { messageRetentionSeconds: FIXED.queueMessageRetentionSeconds, ...encryption, tags },
        { parent },
    );
    const firstDlq = new aws.sqs.Queue(
        `${name}-first-dlq`,
        {
            messageRetentionSeconds: FIXED.queueMessageRetentionSeconds,
            visibilityTimeoutSeconds: firstDlqVisibilityTimeout(ctx.resolved.redriveTimeout),
            redrivePolicy: fatalDlq.arn.apply((deadLetterTargetArn) =>
                JSON.stringify({ deadLetterTargetArn, maxReceiveCount: args.redriveMaxReceiveCount ?? D.redriveMaxReceiveCount }),
            ),
            ...encryption,
            tags,
        },
        { parent },
    );
    for (const [role, queue] of [
        ["first-dlq", firstDlq],
        ["fatal-dlq", fatalDlq],
    ] as const) {
        new aws.sqs.QueuePolicy(
            `${name}-${role}-policy`,
            { queueUrl: queue.url, policy: queue.arn.apply((arn) => JSON.stringify(denyInsecureTransportPolicy(arn))) },
            { parent },
        );
    }
    const kmsKeyArn = args.queueKmsKeyArn === undefined ? pulumi.output(undefined) : pulumi.output(args.queueKmsKeyArn);
    return { firstDlq, fatalDlq, kmsKeyArn };
}

/**
 * The topic threshold events go to: the one the args name, one the component creates (`${name}-thresholds`, encrypted
 * with the AWS managed SNS key), or none.
 */
export function thresholdTopicOf(ctx: Context): pulumi.Output<string | undefined> {
    if (ctx.args.thresholdTopicArn !== undefined) {
        return pulumi.output(ctx.args.thresholdTopicArn);
    }
    if (ctx.args.createThresholdTopic ?? D.createThresholdTopic) {
        const topic = new aws.sns.Topic(
            `${ctx.name}-thresholds`,
            { kmsMasterKeyId: "alias/aws/sns", tags: ctx.resolved.tags },
            { parent: ctx.parent },
        );
        return topic.arn;
    }
    return pulumi.output(undefined);
}

export interface StreamFunctionsInputs {
    readonly table: TableRef & { readonly streamArn: pulumi.Output<string> };
    readonly countersTable: TableRef;
    readonly queues: Queues;
    readonly thresholdTopicArn: pulumi.Output<string | undefined>;
    /** The counter's configuration, as every function reads it from its environment. */
    readonly config: pulumi.Output<CounterConfig>;
}

export interface StreamFunctions {
    readonly consumer: aws.lambda.Function;
    readonly redrive: aws.lambda.Function;
    readonly consumerRolePolicy: aws.iam.RolePolicy;
    readonly redriveRolePolicy: aws.iam.RolePolicy;
}

/** The consumer and the redrive, each after its log group and its role's policy; both read one environment. */
export function createStreamFunctions(ctx: Context, i: StreamFunctionsInputs): StreamFunctions {
    const { name, args, parent, resolved: r } = ctx;
    const variables = pulumi
        .all([i.config, i.queues.fatalDlq.url, i.thresholdTopicArn])
        .apply(([config, fatalQueueUrl, thresholdTopicArn]) =>
            handlerEnvironment({
                ...config,
                fatalQueueUrl,
                metricsNamespace: r.metricsNamespace,
                thresholds: r.thresholds,
                usageRetentionDays: r.usageRetentionDays,
                ...(thresholdTopicArn === undefined ? {} : { thresholdTopicArn }),
            }),
        );
    const make = (fn: "consumer" | "redrive", bundle: string, sizing: Partial<aws.lambda.FunctionArgs>) => {
        const { logs, role } = createFunctionLogsAndRole({ name, fn, parent, logRetentionInDays: r.logRetentionInDays, tags: r.tags });
        const document = pulumi
            .all([
                i.table.arn,
                i.countersTable.arn,
                i.table.streamArn,
                i.queues.firstDlq.arn,
                i.queues.fatalDlq.arn,
                logs.arn,
                i.queues.kmsKeyArn,
                i.thresholdTopicArn,
            ])
            .apply(([tableArn, countersTableArn, streamArn, firstDlqArn, fatalDlqArn, logGroupArn, queueKmsKeyArn, thresholdTopicArn]) =>
                (fn === "consumer" ? consumerPolicy : redrivePolicy)({
                    tableArn,
                    countersTableArn,
                    streamArn,
                    firstDlqArn,
                    fatalDlqArn,
                    logGroupArn,
                    thresholdTopicArn,
                    queueKmsKeyArn,
                    tracing: r.tracing,
                }),
            );
        const rolePolicy = createFunctionRolePolicy({ name, fn, parent }, role, document);
        const lambda = new aws.lambda.Function(
            `${name}-${fn}`,
            {
                code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.FileAsset(bundle) }),
                handler: FIXED.handler,
                runtime: r.lambdaRuntime,
                architectures: [r.architecture],
                environment: { variables },
                loggingConfig: { logFormat: FIXED.logFormat, logGroup: logs.name },
                tracingConfig: { mode: r.tracing ? "Active" : "PassThrough" },
                tags: r.tags,
                role: role.arn,
                ...sizing,
            },
            { parent, dependsOn: [logs, rolePolicy] },
        );
        return { lambda, rolePolicy };
    };
    const consumer = make("consumer", ctx.bundles.streamConsumer, {
        memorySize: args.consumerMemorySize ?? D.consumerMemorySize,
        timeout: args.consumerTimeout ?? D.consumerTimeout,
        reservedConcurrentExecutions: args.consumerReservedConcurrency,
    });
    const redrive = make("redrive", ctx.bundles.redrive, {
        memorySize: args.redriveMemorySize ?? D.redriveMemorySize,
        timeout: r.redriveTimeout,
        reservedConcurrentExecutions: args.redriveReservedConcurrency,
    });
    return {
        consumer: consumer.lambda,
        redrive: redrive.lambda,
        consumerRolePolicy: consumer.rolePolicy,
        redriveRolePolicy: redrive.rolePolicy,
    };
}

export interface MappingsInputs {
    readonly streamArn: pulumi.Output<string>;
    readonly functions: StreamFunctions;
    readonly firstDlq: aws.sqs.Queue;
    readonly layout: pulumi.Output<CounterTableLayout>;
    /** For an attached table: whether its settings passed (the stream mapping is disabled otherwise). */
    readonly enabled?: pulumi.Output<boolean>;
}

/** The stream mapping (consumer) and the first DLQ's mapping (redrive), each after its function's role policy. */
export function createMappings(ctx: Context, i: MappingsInputs): void {
    const { name, args, parent, resolved: r } = ctx;
    // No filter: the consumer's frontier needs every record of a shard in its batches (runtime/stream/progress.ts),
    // and the records it counts nothing for cost it no write.
    new aws.lambda.EventSourceMapping(
        `${name}-stream-mapping`,
        {
            functionName: i.functions.consumer.arn,
            eventSourceArn: i.streamArn,
            ...(i.enabled === undefined ? {} : { enabled: i.enabled }),
            startingPosition: FIXED.startingPosition,
            batchSize: args.batchSize ?? D.batchSize,
            maximumBatchingWindowInSeconds: args.maximumBatchingWindowInSeconds ?? D.maximumBatchingWindowInSeconds,
            parallelizationFactor: D.parallelizationFactor,
            tumblingWindowInSeconds: FIXED.tumblingWindowInSeconds,
            bisectBatchOnFunctionError: FIXED.bisectBatchOnFunctionError,
            maximumRetryAttempts: args.maximumRetryAttempts ?? D.maximumRetryAttempts,
            maximumRecordAgeInSeconds: args.maximumRecordAgeInSeconds ?? D.maximumRecordAgeInSeconds,
            functionResponseTypes: [...FIXED.functionResponseTypes],
            destinationConfig: { onFailure: { destinationArn: i.firstDlq.arn } },
            tags: r.tags,
        },
        // The mapping checks at creation that the role can read the stream and send to the destination.
        { parent, dependsOn: [i.functions.consumerRolePolicy] },
    );
    new aws.lambda.EventSourceMapping(
        `${name}-redrive-mapping`,
        {
            functionName: i.functions.redrive.arn,
            eventSourceArn: i.firstDlq.arn,
            batchSize: FIXED.redriveBatchSize,
            functionResponseTypes: [...FIXED.functionResponseTypes],
            tags: r.tags,
        },
        { parent, dependsOn: [i.functions.redriveRolePolicy] },
    );
}
