/**
 * The regions of a multi-region history on one engine: each region's replica of the user's table (with its stream) and
 * of the counters table (with the heal index), and each region's parties (client, consumer, redrive, settler), rebuilt
 * with the region's configuration whenever its deployment takes a new member list.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { HybridCounterClient } from "../../../runtime/client/client";
import { createRedriveHandler } from "../../../runtime/stream/redrive";
import { createStreamHandler } from "../../../runtime/stream/consumer";
import type { FatalMessage } from "../../../runtime/stream/fatal";
import { DEFAULT_LAYOUT, clientConfigOf, countingGeneration, type HandlerConfig } from "../../../runtime/shared/config";
import { createCounterTable, createCountersTable } from "../../../local/engine/table";
import type { LocalEngine } from "../../../local/engine/engine";
import { StreamMapping, type Consumer } from "../mapping";
import type { Scheduler } from "../scheduler";
import { fuzzClient } from "../system";
import type { RegionsHistory } from "./history";

let tables = 0;

export interface RegionParties {
    readonly region: string;
    readonly tableName: string;
    readonly countersTableName: string;
    readonly streamArn: string;
    readonly api: DynamoDBClient;
    readonly pipeline: DynamoDBClient;
    readonly settler: DynamoDBClient;
    readonly mapping: StreamMapping;
    /** The member list this region's deployment runs with. */
    members: readonly string[];
    config: HandlerConfig;
    generation: string;
    client: HybridCounterClient | undefined;
    consumer: Consumer | undefined;
    redrive: Parameters<StreamMapping["redrive"]>[0] | undefined;
}

/** Whether the region's deployment runs: it is a member in its own member list. */
export function active(region: RegionParties): boolean {
    return region.members.includes(region.region);
}

export interface RegionsSystem {
    readonly regions: ReadonlyMap<string, RegionParties>;
    readonly home: string;
    readonly fatal: FatalMessage[];
}

/** Creates every region's replicas and parties. */
export async function createRegions(
    engine: LocalEngine,
    reader: DynamoDBClient,
    streams: DynamoDBStreamsClient,
    history: RegionsHistory,
    scheduler: Scheduler,
): Promise<RegionsSystem> {
    const base = `fuzzr-${process.pid}-${++tables}`;
    const fatal: FatalMessage[] = [];
    const regions = new Map<string, RegionParties>();
    const sleep = (ms: number) => scheduler.sleep(ms);
    for (const region of history.regions) {
        const tableName = `${base}-${region}`;
        const countersTableName = `${tableName}-counters`;
        const { streamArn } = await createCounterTable(reader, tableName, DEFAULT_LAYOUT, "NEW_AND_OLD_IMAGES", { healIndex: false });
        await createCountersTable(reader, countersTableName, DEFAULT_LAYOUT, { healIndex: true });
        const parties: RegionParties = {
            region,
            tableName,
            countersTableName,
            streamArn,
            api: fuzzClient(engine, sleep),
            pipeline: fuzzClient(engine, sleep),
            settler: fuzzClient(engine, sleep),
            mapping: new StreamMapping(streams, streamArn),
            members: history.members,
            config: undefined as unknown as HandlerConfig,
            generation: "",
            client: undefined,
            consumer: undefined,
            redrive: undefined,
        };
        regions.set(region, parties);
    }
    const system: RegionsSystem = { regions, home: history.regions[0]!, fatal };
    for (const parties of regions.values()) {
        deploy(system, parties, history, streams, history.members);
    }
    return system;
}

/** (Re)builds a region's configuration and parties for the member list `members`. */
export function deploy(
    system: RegionsSystem,
    parties: RegionParties,
    history: RegionsHistory,
    streams: DynamoDBStreamsClient,
    members: readonly string[],
): void {
    parties.members = members;
    const home = system.home;
    parties.config = {
        ...DEFAULT_LAYOUT,
        tableName: parties.tableName,
        countersTableName: parties.countersTableName,
        mode: history.mode,
        periodMs: 600_000,
        ...(history.counterShards === 1 ? {} : { counterShards: history.counterShards }),
        // A region not yet a member in its own deployment keeps a configuration for the record (nothing runs with it).
        regions: {
            current: members.includes(parties.region) ? parties.region : home,
            members: members.map((region) => ({ region, ...(region === home ? { role: "home" as const } : {}) })),
        },
        fatalQueueUrl: "https://sqs.local/000000000000/fatal",
        metricsNamespace: "FuzzRegions",
        thresholds: [0.5, 1],
        usageRetentionDays: 2,
    };
    parties.generation = countingGeneration(parties.config);
    if (!active(parties)) {
        parties.client = undefined;
        parties.consumer = undefined;
        parties.redrive = undefined;
        return;
    }
    const fatal = { park: async (message: FatalMessage) => (system.fatal.push(message), true) };
    const deps = {
        config: parties.config,
        dynamodb: parties.pipeline,
        streams,
        fatal,
        sendEvents: async () => true,
        sink: () => undefined,
    };
    parties.client = new HybridCounterClient({ ...clientConfigOf(parties.config), dynamodb: parties.api });
    parties.consumer = createStreamHandler(deps);
    parties.redrive = createRedriveHandler(deps);
}
