/**
 * The resource graph the stack policies walk.
 *
 * ARNs are unknown during preview, so resources are matched through the engine's dependency
 * information (`propertyDependencies`, falling back to `dependencies`), never by comparing ARNs.
 * A property dependency says "this input was computed from that resource's outputs", which is exactly
 * the relation "this mapping reads that table's stream" or "this alarm watches that queue".
 */

import type { PolicyResource } from "@pulumi/policy";
import { isUnknown, read } from "./unknowns";

/** AWS resource type tokens (@pulumi/aws 7). */
export const TYPES = {
    table: "aws:dynamodb/table:Table",
    tableReplica: "aws:dynamodb/tableReplica:TableReplica",
    eventSourceMapping: "aws:lambda/eventSourceMapping:EventSourceMapping",
    function: "aws:lambda/function:Function",
    functionEventInvokeConfig: "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig",
    queue: "aws:sqs/queue:Queue",
    redrivePolicy: "aws:sqs/redrivePolicy:RedrivePolicy",
    topic: "aws:sns/topic:Topic",
    bucket: "aws:s3/bucket:Bucket",
    bucketV2: "aws:s3/bucketV2:BucketV2",
    metricAlarm: "aws:cloudwatch/metricAlarm:MetricAlarm",
    role: "aws:iam/role:Role",
    rolePolicy: "aws:iam/rolePolicy:RolePolicy",
    policy: "aws:iam/policy:Policy",
    rolePolicyAttachment: "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    policyAttachment: "aws:iam/policyAttachment:PolicyAttachment",
} as const;

/**
 * The resources `resource.<property>` was computed from, optionally only those of `type`.
 * When the engine sent no property dependencies at all for the resource, its plain dependencies are
 * used instead (filtered by type, which keeps the match meaningful).
 */
export function dependenciesOf(resource: PolicyResource, property: string, type?: string): PolicyResource[] {
    const byProperty = resource.propertyDependencies[property];
    let found: PolicyResource[];
    if (byProperty !== undefined) {
        found = byProperty;
    } else if (Object.keys(resource.propertyDependencies).length === 0) {
        found = resource.dependencies;
    } else {
        found = [];
    }
    return unique(type === undefined ? found : found.filter((r) => r.type === type));
}

function unique(resources: PolicyResource[]): PolicyResource[] {
    return [...new Set(resources)];
}

/** `arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>` */
export function isDynamoDbStreamArn(arn: string): boolean {
    return arn.includes(":dynamodb:") && arn.includes("/stream/");
}

/** A Lambda event source mapping that reads a DynamoDB stream, with the resources around it. */
export interface StreamMapping {
    readonly mapping: PolicyResource;
    /** Tables in this stack whose stream the mapping reads (empty for a table managed elsewhere). */
    readonly tables: readonly PolicyResource[];
    /** Functions in this stack the mapping invokes. */
    readonly functions: readonly PolicyResource[];
    /** Resources in this stack the mapping's on-failure destination points at. */
    readonly failureDestinations: readonly PolicyResource[];
}

/**
 * Is this event source mapping on a DynamoDB stream? When `eventSourceArn` is known, its shape
 * decides. When it is unknown (preview), the mapping reads a stream if the ARN was computed from a
 * DynamoDB table in this stack.
 */
export function readsDynamoDbStream(mapping: PolicyResource): boolean {
    const arn = read(() => mapping.props.eventSourceArn as unknown);
    if (typeof arn === "string") {
        return isDynamoDbStreamArn(arn);
    }
    return isUnknown(arn) && dependenciesOf(mapping, "eventSourceArn", TYPES.table).length > 0;
}

/** Every event source mapping in the stack that reads a DynamoDB stream. */
export function streamMappings(resources: readonly PolicyResource[]): StreamMapping[] {
    return resources
        .filter((r) => r.type === TYPES.eventSourceMapping && readsDynamoDbStream(r))
        .map((mapping) => ({
            mapping,
            tables: dependenciesOf(mapping, "eventSourceArn", TYPES.table),
            functions: dependenciesOf(mapping, "functionName", TYPES.function),
            failureDestinations: dependenciesOf(mapping, "destinationConfig"),
        }));
}

/** Why a queue counts as a failure queue. */
export interface FailureQueue {
    readonly queue: PolicyResource;
    /** Human-readable reasons, e.g. "on-failure destination of event source mapping 'x'". */
    readonly roles: readonly string[];
}

/**
 * Queues that receive what failed elsewhere: on-failure destinations of event source mappings,
 * dead-letter targets of other queues' redrive policies (inline or `aws.sqs.RedrivePolicy`), and
 * dead-letter or on-failure targets of Lambda functions.
 */
export function failureQueues(resources: readonly PolicyResource[]): FailureQueue[] {
    const roles = new Map<PolicyResource, string[]>();
    const add = (queues: PolicyResource[], role: string): void => {
        for (const queue of queues) {
            roles.set(queue, [...(roles.get(queue) ?? []), role]);
        }
    };
    for (const r of resources) {
        switch (r.type) {
            case TYPES.eventSourceMapping:
                add(dependenciesOf(r, "destinationConfig", TYPES.queue), `on-failure destination of event source mapping '${r.name}'`);
                break;
            case TYPES.queue:
                add(
                    dependenciesOf(r, "redrivePolicy", TYPES.queue).filter((q) => q !== r),
                    `dead-letter target of queue '${r.name}'`,
                );
                break;
            case TYPES.redrivePolicy: {
                const sources = dependenciesOf(r, "queueUrl", TYPES.queue);
                add(
                    dependenciesOf(r, "redrivePolicy", TYPES.queue).filter((q) => !sources.includes(q)),
                    `dead-letter target of redrive policy '${r.name}'`,
                );
                break;
            }
            case TYPES.function:
                add(dependenciesOf(r, "deadLetterConfig", TYPES.queue), `dead-letter target of function '${r.name}'`);
                break;
            case TYPES.functionEventInvokeConfig:
                add(dependenciesOf(r, "destinationConfig", TYPES.queue), `on-failure destination of '${r.name}'`);
                break;
            default:
                break;
        }
    }
    return [...roles.entries()].map(([queue, why]) => ({ queue, roles: why }));
}

/**
 * Functions that consume stream records or failed batches: the targets of stream mappings and of
 * mappings that read a failure queue (the redrive).
 */
export function consumerFunctions(resources: readonly PolicyResource[]): Map<PolicyResource, string> {
    const failure = new Set(failureQueues(resources).map((f) => f.queue));
    const consumers = new Map<PolicyResource, string>();
    for (const r of resources) {
        if (r.type !== TYPES.eventSourceMapping) {
            continue;
        }
        const why = readsDynamoDbStream(r)
            ? `reads a DynamoDB stream through '${r.name}'`
            : dependenciesOf(r, "eventSourceArn", TYPES.queue).some((q) => failure.has(q))
              ? `reads a failure queue through '${r.name}'`
              : undefined;
        if (why !== undefined) {
            for (const fn of dependenciesOf(r, "functionName", TYPES.function)) {
                if (!consumers.has(fn)) {
                    consumers.set(fn, why);
                }
            }
        }
    }
    return consumers;
}
