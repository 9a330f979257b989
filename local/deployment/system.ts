/**
 * Reads the system a HybridCounterComponent deploys from the resources it registered under Pulumi
 * mocks, so the local twin runs exactly what `pulumi up` would create and nothing is defined twice:
 * the table's keys and stream, every function's environment and timeout, every stream mapping setting
 * (the tumbling window included), the queues and the redrive path, the settler and its schedule, and the
 * topic threshold events go to.
 */
import { ENV } from "../../runtime/shared/config";
import type { MappingSettings } from "../aws/mapping-emulator";
import type { RecordedResource } from "./pulumi-mocks";

export interface TableSpec {
    readonly name: string;
    readonly hashKey: string;
    readonly rangeKey: string;
    readonly streamEnabled: boolean;
    readonly streamViewType: string;
}

export interface FunctionSpec {
    readonly name: string;
    readonly environment: Record<string, string>;
    readonly timeoutSeconds: number;
    readonly handler: string;
}

/** The settler function and the schedule that invokes it. */
export interface SettlerSpec {
    readonly function: FunctionSpec;
    /** The schedule's expression, as declared (`rate(5 minutes)`). */
    readonly scheduleExpression: string;
}

export interface DeployedSystem {
    /** The user's table: the one with the stream the mapping reads. */
    readonly table: TableSpec;
    /** The table the counter items live in: its name, or the user's table's in the same-table placement. */
    readonly countersTableName: string;
    readonly consumer: FunctionSpec;
    readonly redrive: FunctionSpec;
    /** The scheduled settler; undefined when the component deploys none. */
    readonly settler?: SettlerSpec;
    readonly streamMapping: MappingSettings;
    readonly firstDlqUrl: string;
    readonly fatalDlqUrl: string;
    /** Receives after which SQS moves a first-DLQ message to the fatal queue. */
    readonly maxReceiveCount: number;
    readonly redriveBatchSize: number;
    /** The topic the consumer publishes threshold events to; undefined when its environment names none. */
    readonly thresholdTopicArn?: string;
}

const TABLE = "aws:dynamodb/table:Table";
const FUNCTION = "aws:lambda/function:Function";
const MAPPING = "aws:lambda/eventSourceMapping:EventSourceMapping";
const QUEUE = "aws:sqs/queue:Queue";
const RULE = "aws:cloudwatch/eventRule:EventRule";
const TARGET = "aws:cloudwatch/eventTarget:EventTarget";

function only(resources: readonly RecordedResource[], what: string, match: (r: RecordedResource) => boolean): RecordedResource {
    const found = resources.filter(match);
    if (found.length !== 1) {
        throw new Error(`expected exactly one ${what} among the component's resources, found ${found.length}`);
    }
    return found[0]!;
}

export function functionSpec(resource: RecordedResource): FunctionSpec {
    const variables = resource.inputs.environment?.variables;
    if (variables === undefined || typeof variables !== "object") {
        throw new Error(`function ${resource.name} has no environment`);
    }
    return {
        name: String(resource.state.name ?? resource.name),
        environment: Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, String(v)])),
        timeoutSeconds: Number(resource.inputs.timeout ?? 3),
        handler: String(resource.inputs.handler),
    };
}

/** The stream mapping's settings as declared, Lambda's defaults where the component leaves one unset. */
export function mappingSettings(mapping: RecordedResource): MappingSettings {
    const m = mapping.inputs;
    return {
        batchSize: m.batchSize ?? 100,
        maximumBatchingWindowInSeconds: m.maximumBatchingWindowInSeconds ?? 0,
        parallelizationFactor: m.parallelizationFactor ?? 1,
        maximumRetryAttempts: m.maximumRetryAttempts ?? -1,
        maximumRecordAgeInSeconds: m.maximumRecordAgeInSeconds ?? -1,
        bisectBatchOnFunctionError: m.bisectBatchOnFunctionError ?? false,
        reportBatchItemFailures: (m.functionResponseTypes ?? []).includes("ReportBatchItemFailures"),
        filterPatterns: (m.filterCriteria?.filters ?? []).map((f: { pattern: string }) => f.pattern),
        startingPosition: m.startingPosition,
        tumblingWindowInSeconds: m.tumblingWindowInSeconds ?? 0,
    };
}

/** The function an EventBridge schedule invokes, with the schedule; undefined when there is none. */
function settlerOf(resources: readonly RecordedResource[]): SettlerSpec | undefined {
    const targets = resources.filter((r) => r.type === TARGET);
    if (targets.length === 0) {
        return undefined;
    }
    const target = only(resources, "schedule target", (r) => r.type === TARGET);
    const fn = only(resources, "scheduled function", (r) => r.type === FUNCTION && r.state.arn === target.inputs.arn);
    const rule = only(resources, "schedule", (r) => r.type === RULE && r.state.name === target.inputs.rule);
    return { function: functionSpec(fn), scheduleExpression: String(rule.inputs.scheduleExpression) };
}

function tableSpec(tableResource: RecordedResource): TableSpec {
    const attributes = new Map<string, string>(
        (tableResource.inputs.attributes ?? []).map((a: { name: string; type: string }) => [a.name, a.type]),
    );
    const table: TableSpec = {
        name: String(tableResource.state.name),
        hashKey: String(tableResource.inputs.hashKey),
        rangeKey: String(tableResource.inputs.rangeKey),
        streamEnabled: tableResource.inputs.streamEnabled === true,
        streamViewType: String(tableResource.inputs.streamViewType),
    };
    for (const key of [table.hashKey, table.rangeKey]) {
        if (attributes.get(key) !== "S") {
            throw new Error(`table key ${key} must be a string attribute`);
        }
    }
    return table;
}

export function describeDeployedSystem(resources: readonly RecordedResource[]): DeployedSystem {
    const tableResource = only(resources, "table with a stream", (r) => r.type === TABLE && r.inputs.streamEnabled === true);
    const streamArn = String(tableResource.state.streamArn ?? "");
    const streamMapping = only(resources, "stream mapping", (r) => r.type === MAPPING && r.inputs.eventSourceArn === streamArn);
    const consumerResource = only(
        resources,
        "consumer function",
        (r) => r.type === FUNCTION && r.state.arn === streamMapping.inputs.functionName,
    );
    const firstDlqArn = streamMapping.inputs.destinationConfig?.onFailure?.destinationArn;
    const firstDlq = only(resources, "first DLQ", (r) => r.type === QUEUE && r.state.arn === firstDlqArn);
    const redrivePolicy = JSON.parse(String(firstDlq.inputs.redrivePolicy ?? "{}")) as {
        deadLetterTargetArn?: string;
        maxReceiveCount?: number;
    };
    const fatalDlq = only(resources, "fatal DLQ", (r) => r.type === QUEUE && r.state.arn === redrivePolicy.deadLetterTargetArn);
    const redriveMapping = only(resources, "redrive mapping", (r) => r.type === MAPPING && r.inputs.eventSourceArn === firstDlqArn);
    const redriveResource = only(
        resources,
        "redrive function",
        (r) => r.type === FUNCTION && r.state.arn === redriveMapping.inputs.functionName,
    );
    const consumer = functionSpec(consumerResource);
    const settler = settlerOf(resources);
    const topic = consumer.environment[ENV.thresholdTopicArn];
    return {
        table: tableSpec(tableResource),
        countersTableName: consumer.environment[ENV.countersTableName] || String(tableResource.state.name),
        consumer,
        redrive: functionSpec(redriveResource),
        ...(settler === undefined ? {} : { settler }),
        streamMapping: mappingSettings(streamMapping),
        firstDlqUrl: String(firstDlq.state.url),
        fatalDlqUrl: String(fatalDlq.state.url),
        maxReceiveCount: Number(redrivePolicy.maxReceiveCount),
        redriveBatchSize: Number(redriveMapping.inputs.batchSize ?? 10),
        ...(topic === undefined || topic === "" ? {} : { thresholdTopicArn: topic }),
    };
}
