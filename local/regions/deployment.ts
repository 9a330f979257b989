/**
 * A multi-region counter as a program deploys it (examples/multi-region's layout), under Pulumi mocks, and its tables
 * on one DynamoDB Local engine per region: the user's table created in the home region with a replica in every other
 * member, one HybridCounterComponent per region with that region's provider and `regions.current` set to it (the home's
 * component attached to the table and creating the counters table, each member's attached to its replica, read with
 * `Table.get`, and to the home's counters table by name). Each region's client configuration, handlers' environments and
 * stream mapping are read from its own component's outputs and resources, and every pair is checked to agree
 * (assertHarnessAgrees), as every single-region harness is (local/deployment/deployment.ts).
 */
import * as aws from "@pulumi/aws";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { HybridCounterComponentArgs } from "../../components/args";
import { HybridCounterComponent, type HybridCounterClientConfig } from "../../components/component";
import type { ClientConfig } from "../../runtime/client/validation";
import { assertHarnessAgrees, createDeclaredTable } from "../deployment/deployment";
import { MOCK_ACCOUNT_ID, outputValue, runProgramWithResult, type RecordedResource } from "../deployment/pulumi-mocks";
import { describeDeployedSystem, type DeployedSystem } from "../deployment/system";
import { twinSettlerSpec, type TwinSettlerSpec } from "../twin/settler";

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
    readonly system: DeployedSystem;
    /** The component's `clientConfig` output in this region. */
    readonly clientConfig: HybridCounterClientConfig;
    /** The settler on the component's schedule, compressed; undefined when it deploys none. */
    readonly settlerSpec: TwinSettlerSpec | undefined;
}

export interface RegionsDeployment {
    readonly home: string;
    readonly regions: readonly RegionDeployment[];
    /** The user's table and the counters table as the program declares them (created on every engine). */
    readonly tables: readonly RecordedResource[];
}

export type RegionArgs = Pick<HybridCounterComponentArgs, "counterMode" | "counterShards">;

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

/** Deploys the counter in `count` regions under mocks and reads what each region runs. */
export async function deployRegions(count: number, args: RegionArgs, compression: number): Promise<RegionsDeployment> {
    if (!Number.isInteger(count) || count < 2 || count > LOCAL_REGIONS.length) {
        throw new Error(`[regions] must be an integer from 2 to ${LOCAL_REGIONS.length} (got ${count})`);
    }
    const regions = LOCAL_REGIONS.slice(0, count);
    const home = regions[0]!;
    const members = regions.map((region) => ({ region, role: region === home ? ("home" as const) : ("member" as const) }));
    const name = (region: string) => `twin-${region}`;
    const run = await runProgramWithResult(
        () => {
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
                name(home),
                { ...args, table, regions: { current: home, members } },
                { provider: providers.get(home)! },
            );
            const configs: Record<string, unknown> = { [home]: homeCounter.clientConfig };
            for (const region of regions.slice(1)) {
                const provider = providers.get(region)!;
                const replica = aws.dynamodb.Table.get(`${USER_TABLE}-${region}`, table.name, {}, { provider });
                const counter = new HybridCounterComponent(
                    name(region),
                    { ...args, table: replica, regions: { current: region, members, countersTableName: homeCounter.countersTableName } },
                    { provider },
                );
                configs[region] = counter.clientConfig;
            }
            return configs;
        },
        { reads: { [TABLE]: replicaRead(regions) } },
    );
    const userTables = run.resources.filter((r) => r.type === TABLE && String(r.state.name) === USER_TABLE);
    const deployed: RegionDeployment[] = [];
    for (const region of regions) {
        const component = run.resources.find((r) => r.type === COMPONENT && r.name === name(region));
        if (component === undefined) {
            throw new Error(`the program registered no component ${name(region)}`);
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
        const settlerSpec = twinSettlerSpec(children, name(region), compression);
        deployed.push({
            region,
            name: name(region),
            system,
            clientConfig,
            settlerSpec,
        });
    }
    const homeTable = userTables.find((t) => t.name === USER_TABLE)!;
    const counters = descendants(run.resources, run.resources.find((r) => r.type === COMPONENT && r.name === name(home))!.urn).filter(
        (r) => r.type === TABLE,
    );
    if (counters.length !== 1) {
        throw new Error(`the home region's component declared ${counters.length} tables; one counters table expected`);
    }
    return { home, regions: deployed, tables: [homeTable, counters[0]!] };
}

/** Creates the user's table and the counters table on one region's engine, as declared (a global table's replica of each). */
export async function createRegionTables(admin: DynamoDBClient, deployment: RegionsDeployment): Promise<void> {
    for (const table of deployment.tables) {
        await createDeclaredTable(admin, table);
    }
}

/**
 * Checks that a region's client and its handlers count in the same place (assertHarnessAgrees) and for this region,
 * before anything runs; returns the client's tables and layout.
 */
export function assertRegionAgrees(
    region: RegionDeployment,
    clientOptions: Parameters<typeof assertHarnessAgrees>[0],
    environments: Parameters<typeof assertHarnessAgrees>[1],
): ClientConfig {
    const layout = assertHarnessAgrees(clientOptions, environments);
    for (const [handler, environment] of Object.entries(environments)) {
        const current = (JSON.parse(environment.HYBRID_COUNTER_REGIONS ?? "{}") as { current?: string }).current;
        if (current !== region.region) {
            throw new Error(`the ${handler} of ${region.region} counts for ${String(current)}`);
        }
    }
    if (layout.regions?.current !== region.region) {
        throw new Error(`the client of ${region.region} counts for ${String(layout.regions?.current)}`);
    }
    return layout;
}
