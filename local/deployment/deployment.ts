/**
 * One configuration for every harness: the system a HybridCounterComponent deploys, set up on DynamoDB
 * Local from the component's own outputs under Pulumi mocks. The twin, the bench and the sweep build their
 * tables, their client and their handlers here, so that none of them measures a system nobody deploys; the
 * functions, the mapping, the queues and the threshold topic are built from a deployment in pipeline.ts.
 *
 * Invariant: the client's configuration is the component's `clientConfig` output and every function's is read
 * from its environment by the function the Lambda itself runs (`handlerConfigFromEnv`, `settlerConfigFromEnv`);
 * every table is created as the component declares it (keys, stream, global secondary indexes), and a harness
 * whose client, as its constructor resolves its options, and any function, as it reads its environment, disagree
 * on a table, the layout, the selection, the mode, the ledger period, the shards or the regions is refused
 * (`assertHarnessAgrees`), here and again where a harness builds its own pair.
 */
import {
    CreateTableCommand,
    DescribeTableCommand,
    type AttributeDefinition,
    type DynamoDBClient,
    type GlobalSecondaryIndex,
} from "@aws-sdk/client-dynamodb";
import type { HybridCounterComponentArgs } from "../../components/args";
import { HybridCounterComponent, type HybridCounterClientConfig } from "../../components/component";
import type { HybridCounterClientOptions } from "../../runtime/client/client";
import { resolveClientOptions } from "../../runtime/client/options";
import { counterConfigFromEnv, handlerConfigFromEnv, type CounterConfig, type HandlerConfig } from "../../runtime/shared/config";
import { regionsJson } from "../../runtime/regions/config";
import { outputValue, runProgramWithResult, type RecordedResource } from "./pulumi-mocks";
import { describeDeployedSystem, type DeployedSystem } from "./system";

export interface LocalDeployment {
    readonly resources: readonly RecordedResource[];
    readonly system: DeployedSystem;
    /** The component's `clientConfig` output: what an API builds its client from. */
    readonly clientConfig: HybridCounterClientConfig;
    /** The same, as the client's constructor resolves it: tables, layout, selection, mode, period, shards, regions. */
    readonly clientLayout: CounterConfig;
    /** The consumer's configuration, read from its environment as the deployed handler reads it. */
    readonly handlerConfig: HandlerConfig;
    /** The user's table's stream, on the engine. */
    readonly streamArn: string;
}

/** A harness whose client and one of its functions would count in different places, or differently. */
export class HarnessMismatchError extends Error {
    constructor(
        readonly fields: readonly string[],
        /** The function that disagrees with the client: consumer, redrive, settler. */
        readonly handler: string = "consumer",
    ) {
        super(`the client and the ${handler} disagree on ${fields.map((f) => `[${f}]`).join(", ")}`);
        this.name = "HarnessMismatchError";
    }
}

/** The fields compared as they are. */
const SAME_FIELDS = [
    "tableName",
    "countersTableName",
    "partitionKey",
    "sortKey",
    "deletedAttribute",
    "tokenAttribute",
    "counterPrefix",
    "countAttribute",
    "mode",
    "periodMs",
] as const satisfies ReadonlyArray<keyof CounterConfig>;

/** Throws HarnessMismatchError naming every field on which the client and a function (`handler`) differ. */
export function assertSameSystem(client: CounterConfig, other: CounterConfig, handler = "consumer"): void {
    const fields: string[] = SAME_FIELDS.filter((field) => client[field] !== other[field]);
    if (JSON.stringify(client.selection) !== JSON.stringify(other.selection)) {
        fields.push("selection");
    }
    // A client and a consumer on different shard counts would put units where the other never reads.
    if ((client.counterShards ?? 1) !== (other.counterShards ?? 1)) {
        fields.push("counterShards");
    }
    const regions = (c: CounterConfig) => (c.regions === undefined ? "" : regionsJson(c.regions));
    if (regions(client) !== regions(other)) {
        fields.push("regions");
    }
    if ((client.regionAttribute ?? "") !== (other.regionAttribute ?? "")) {
        fields.push("regionAttribute");
    }
    if (fields.length > 0) {
        throw new HarnessMismatchError(fields, handler);
    }
}

/**
 * The check every harness runs on the system it is about to start: `clientOptions` as `new HybridCounterClient`
 * resolves them (the flat selection of `clientConfig` included), against each function's environment as the deployed
 * function reads the counter's part of it (`counterConfigFromEnv`, which the consumer's, the redrive's and the
 * settler's readers build on). Returns the client's configuration; throws HarnessMismatchError naming the function
 * and every field.
 */
export function assertHarnessAgrees(
    clientOptions: HybridCounterClientOptions,
    handlerEnvironments: Readonly<Record<string, Readonly<Record<string, string>> | undefined>>,
): CounterConfig {
    const client = resolveClientOptions(clientOptions).config;
    for (const [handler, environment] of Object.entries(handlerEnvironments)) {
        if (environment !== undefined) {
            assertSameSystem(client, counterConfigFromEnv(environment), handler);
        }
    }
    return client;
}

/**
 * Runs the component under Pulumi mocks with `args` and creates its tables on the engine. `name` is the
 * component's name: each deployment gets tables of its own.
 */
export async function deployLocally(admin: DynamoDBClient, name: string, args: HybridCounterComponentArgs = {}): Promise<LocalDeployment> {
    const run = await runProgramWithResult(() => new HybridCounterComponent(name, args));
    const system = describeDeployedSystem(run.resources);
    const clientConfig = await outputValue(run.result.clientConfig);
    const clientLayout = assertHarnessAgrees(
        { ...clientConfig, dynamodb: admin },
        { consumer: system.consumer.environment, redrive: system.redrive.environment, settler: system.settler?.function.environment },
    );
    const handlerConfig = handlerConfigFromEnv(system.consumer.environment);
    let streamArn: string | undefined;
    for (const table of run.resources.filter((r) => r.type === "aws:dynamodb/table:Table")) {
        const arn = await createDeclaredTable(admin, table);
        if (String(table.state.name) === system.table.name) {
            streamArn = arn;
        }
    }
    if (streamArn === undefined) {
        throw new Error(`the component declared no table ${system.table.name} with a stream`);
    }
    return { resources: run.resources, system, clientConfig, clientLayout, handlerConfig, streamArn };
}

interface DeclaredIndex {
    readonly name: string;
    readonly hashKey: string;
    readonly rangeKey?: string;
    readonly projectionType?: string;
}

/**
 * Creates one table as the component declared it; resolves its stream's ARN (undefined without one). DynamoDB Local
 * ignores TTL: a run that needs it sweeps the table itself (local/regions/ttl-sweep.ts).
 */
export async function createDeclaredTable(admin: DynamoDBClient, table: RecordedResource): Promise<string | undefined> {
    const inputs = table.inputs as {
        hashKey: string;
        rangeKey?: string;
        attributes?: Array<{ name: string; type: string }>;
        globalSecondaryIndexes?: DeclaredIndex[];
        streamEnabled?: boolean;
        streamViewType?: string;
    };
    const attributes: AttributeDefinition[] = (inputs.attributes ?? []).map((a) => ({
        AttributeName: a.name,
        AttributeType: a.type as "S" | "N" | "B",
    }));
    const indexes: GlobalSecondaryIndex[] = (inputs.globalSecondaryIndexes ?? []).map((index) => ({
        IndexName: index.name,
        KeySchema: [
            { AttributeName: index.hashKey, KeyType: "HASH" },
            ...(index.rangeKey === undefined ? [] : [{ AttributeName: index.rangeKey, KeyType: "RANGE" as const }]),
        ],
        Projection: { ProjectionType: (index.projectionType ?? "ALL") as "ALL" | "KEYS_ONLY" | "INCLUDE" },
    }));
    const name = String(table.state.name);
    const created = await admin.send(
        new CreateTableCommand({
            TableName: name,
            BillingMode: "PAY_PER_REQUEST",
            AttributeDefinitions: attributes,
            KeySchema: [
                { AttributeName: inputs.hashKey, KeyType: "HASH" },
                ...(inputs.rangeKey === undefined ? [] : [{ AttributeName: inputs.rangeKey, KeyType: "RANGE" as const }]),
            ],
            ...(indexes.length > 0 ? { GlobalSecondaryIndexes: indexes } : {}),
            ...(inputs.streamEnabled
                ? { StreamSpecification: { StreamEnabled: true, StreamViewType: inputs.streamViewType as "NEW_AND_OLD_IMAGES" } }
                : {}),
        }),
    );
    if (!inputs.streamEnabled) {
        return undefined;
    }
    return (
        created.TableDescription?.LatestStreamArn ??
        (await admin.send(new DescribeTableCommand({ TableName: name }))).Table?.LatestStreamArn
    );
}
