/**
 * A multi-region counter as a program deploys it (examples/multi-region's layout), under Pulumi mocks, and its tables
 * on one DynamoDB Local engine per region: the user's table created in the home region with a replica in every other
 * member, one HybridCounterComponent per region with that region's provider and `regions.current` set to it (the home's
 * component attached to the table and creating the counters table, each member's attached to its replica, read with
 * `Table.get`, and to the home's counters table by name). Each region's client configuration, functions' environments
 * and stream mapping are read from its own component's outputs and resources, and every pair is checked to agree
 * (assertHarnessAgrees), as every single-region harness is (local/deployment/deployment.ts).
 */
import * as aws from "@pulumi/aws";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { HybridCounterComponentArgs } from "../../components/args";
import { HybridCounterComponent, type HybridCounterClientConfig } from "../../components/component";
import { handlerConfigFromEnv, type CounterConfig } from "../../runtime/shared/config";
import type { RegionsConfig } from "../../runtime/regions/config";
import { assertHarnessAgrees, createDeclaredTable, type LocalDeployment } from "../deployment/deployment";
import { MOCK_ACCOUNT_ID, outputValue, runProgramWithResult, type RecordedResource } from "../deployment/pulumi-mocks";
import { describeDeployedSystem, type DeployedSystem } from "../deployment/system";

/** The regions a local run plays, in order; the first is the home. */
export const LOCAL_REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2", "us-west-2", "eu-central-1", "ap-northeast-1"] as const;

const TABLE = "aws:dynamodb/table:Table";
const COMPONENT = "hybrid-counter:index:HybridCounterComponent";
/** The user's table: one name in every region, as a global table's replicas have. */
export const USER_TABLE = "twin-items";

export interface RegionDeployment {
    readonly region: string;
    /** The component's name in this region: its functions and schedule are named after it. */
    readonly name: string;
    /** The resources of the region's component (its children). */
    readonly resources: readonly RecordedResource[];
    readonly system: DeployedSystem;
    /** The component's `clientConfig` output in this region. */
    readonly clientConfig: HybridCounterClientConfig;
}

export interface RegionsDeployment {
    readonly home: string;
    readonly regions: readonly RegionDeployment[];
    /** The user's table and the counters table as the program declares them (created on every engine). */
    readonly tables: readonly RecordedResource[];
}

export type RegionArgs = Pick<HybridCounterComponentArgs, "counterMode" | "counterShards">;

/** A counter configuration with regions. */
export type RegionalConfig = CounterConfig & { readonly regions: RegionsConfig };

/** What `Table.get` reads of the user's table's replica in `region`: its ARN, stream and the other replicas. */
function replicaRead(regions: readonly string[]): (id: string, region: string) => Record<string, unknown> {
    return (id, region) => ({
        name: id,
        arn: `arn:aws:dynamodb:${region}:${MOCK_ACCOUNT_ID}:table/${id}`,
        hashKey: "pk",
        rangeKey: "sk",
        attributes: [
            { name: "pk", type: "S" },
            { name: "sk", type: "S" },
        ],
        streamEnabled: true,
        streamViewType: "NEW_AND_OLD_IMAGES",
        streamArn: `arn:aws:dynamodb:${region}:${MOCK_ACCOUNT_ID}:table/${id}/stream/2026-01-01T00:00:00.000-${region}`,
        replicas: regions.filter((r) => r !== region).map((regionName) => ({ regionName })),
    });
}

/** Every resource under `root` (its children, theirs, ...). */
function descendants(resources: readonly RecordedResource[], root: string): RecordedResource[] {
    const inside = new Set([root]);
    const out: RecordedResource[] = [];
    for (const r of resources) {
        if (r.parent !== undefined && inside.has(r.parent)) {
            inside.add(r.urn);
            out.push(r);
        }
    }
    return out;
}

const componentName = (region: string) => `twin-${region}`;

/** The program: the user's table with its replicas, and one component per region. Returns each region's clientConfig. */
function regionsProgram(regions: readonly string[], args: RegionArgs): Record<string, unknown> {
    const home = regions[0]!;
    const members = regions.map((region) => ({ region, role: region === home ? ("home" as const) : ("member" as const) }));
    const providers = new Map(regions.map((region) => [region, new aws.Provider(region, { region })]));
    const table = new aws.dynamodb.Table(
        USER_TABLE,
        {
            name: USER_TABLE,
            attributes: [
                { name: "pk", type: "S" },
                { name: "sk", type: "S" },
            ],
            hashKey: "pk",
            rangeKey: "sk",
            billingMode: "PAY_PER_REQUEST",
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
            replicas: regions.slice(1).map((regionName) => ({ regionName })),
        },
        { provider: providers.get(home)! },
    );
    const homeCounter = new HybridCounterComponent(
        componentName(home),
        { ...args, table, regions: { current: home, members } },
        { provider: providers.get(home)! },
    );
    const configs: Record<string, unknown> = { [home]: homeCounter.clientConfig };
    for (const region of regions.slice(1)) {
        const provider = providers.get(region)!;
        const replica = aws.dynamodb.Table.get(`${USER_TABLE}-${region}`, table.name, {}, { provider });
        const counter = new HybridCounterComponent(
            componentName(region),
            { ...args, table: replica, regions: { current: region, members, countersTableName: homeCounter.countersTableName } },
            { provider },
        );
        configs[region] = counter.clientConfig;
    }
    return configs;
}

/** Deploys the counter in `count` regions under mocks and reads what each region runs. */
export async function deployRegions(count: number, args: RegionArgs): Promise<RegionsDeployment> {
    if (!Number.isInteger(count) || count < 2 || count > LOCAL_REGIONS.length) {
        throw new Error(`[regions] must be an integer from 2 to ${LOCAL_REGIONS.length} (got ${count})`);
    }
    const regions = LOCAL_REGIONS.slice(0, count);
    const home = regions[0]!;
    const run = await runProgramWithResult(() => regionsProgram(regions, args), { reads: { [TABLE]: replicaRead(regions) } });
    const userTables = run.resources.filter((r) => r.type === TABLE && String(r.state.name) === USER_TABLE);
    const componentOf = (region: string) => run.resources.find((r) => r.type === COMPONENT && r.name === componentName(region));
    const deployed: RegionDeployment[] = [];
    for (const region of regions) {
        const component = componentOf(region);
        if (component === undefined) {
            throw new Error(`the program registered no component ${componentName(region)}`);
        }
        const children = descendants(run.resources, component.urn);
        const replica = userTables.find((t) => (region === home ? t.name === USER_TABLE : t.name === `${USER_TABLE}-${region}`));
        if (replica === undefined) {
            throw new Error(`no replica of ${USER_TABLE} in ${region} among the program's resources`);
        }
        // The region's system: its replica of the user's table and its component's functions, mapping and queues.
        // A replica read with Table.get has its description as state and no inputs: the system is read from either.
        const system = describeDeployedSystem([
            { ...replica, inputs: { ...replica.state, ...replica.inputs } },
            ...children.filter((r) => r.type !== TABLE),
        ]);
        const clientConfig = await outputValue(run.result[region] as HybridCounterClientConfig);
        deployed.push({ region, name: componentName(region), resources: children, system, clientConfig });
    }
    const counters = descendants(run.resources, componentOf(home)!.urn).filter((r) => r.type === TABLE);
    if (counters.length !== 1) {
        throw new Error(`the home region's component declared ${counters.length} tables; one counters table expected`);
    }
    return { home, regions: deployed, tables: [userTables.find((t) => t.name === USER_TABLE)!, counters[0]!] };
}

/**
 * Creates the user's table and the counters table on one region's engine, as declared (a global table's replica of
 * each); resolves the user's table's stream ARN there.
 */
export async function createRegionTables(admin: DynamoDBClient, deployment: RegionsDeployment): Promise<string> {
    let streamArn: string | undefined;
    for (const table of deployment.tables) {
        const arn = await createDeclaredTable(admin, table);
        streamArn = String(table.state.name) === USER_TABLE ? arn : streamArn;
    }
    if (streamArn === undefined) {
        throw new Error(`${USER_TABLE} has no stream`);
    }
    return streamArn;
}

/**
 * One region as a deployment a pipeline runs (local/deployment/pipeline.ts), on the engine whose user's table has
 * `streamArn`: its client and its functions checked to count in the same place, and for this region.
 */
export function regionAsDeployment(
    region: RegionDeployment,
    streamArn: string,
    admin: DynamoDBClient,
): LocalDeployment & { readonly clientLayout: RegionalConfig } {
    const { system } = region;
    const environments = {
        consumer: system.consumer.environment,
        redrive: system.redrive.environment,
        settler: system.settler?.function.environment,
    };
    const clientLayout = assertHarnessAgrees({ ...region.clientConfig, dynamodb: admin }, environments);
    if (clientLayout.regions?.current !== region.region) {
        throw new Error(`the client of ${region.region} counts for ${String(clientLayout.regions?.current)}`);
    }
    return {
        resources: region.resources,
        system,
        clientConfig: region.clientConfig,
        clientLayout: clientLayout as RegionalConfig,
        handlerConfig: handlerConfigFromEnv(system.consumer.environment),
        streamArn,
    };
}
