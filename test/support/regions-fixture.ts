/**
 * Several regions counting on one DynamoDB Local engine, with no replication: every region's client writes the same
 * user table and counters table, and every region's consumer reads the same stream, as if each region's replica held
 * every write at once. What this proves is ownership: each region counts only the lives it owns, into counter items
 * only it writes, and the regions' counters sum to the table's truth.
 */
import { GetItemCommand, PutItemCommand, ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { lambdaContext } from "../../local/aws/lambda-context";
import { LocalQueues } from "../../local/aws/sqs";
import type { LocalEngine } from "../../local/engine/engine";
import { injectFaults, seededRandom, type FaultStats } from "../../local/engine/faults";
import { createCounterTable, createCountersTable } from "../../local/engine/table";
import { HybridCounterClient, type CounterMode } from "../../runtime/client/client";
import { bestEffortSortKey, DEFAULT_LAYOUT, eventualSortKey, type HandlerConfig, type RegionsConfig } from "../../runtime/shared/config";
import { ownerOf } from "../../runtime/regions/ownership";
import { newToken } from "../../runtime/shared/tokens";
import { createStreamHandler } from "../../runtime/stream/consumer";
import { readStream } from "./stream-records";

export const FATAL_QUEUE_URL = "https://sqs.local/000000000000/fatal";

let tables = 0;

/** The regions setting of `current` among `members` (the first is the home). */
export function regionsOf(current: string, members: readonly string[]): RegionsConfig {
    return { current, members: members.map((region, i) => (i === 0 ? { region, role: "home" as const } : { region })) };
}

export interface RegionSide {
    readonly region: string;
    readonly config: HandlerConfig & { readonly regions: RegionsConfig };
    readonly client: HybridCounterClient;
    readonly dynamodb: DynamoDBClient;
    /** The client's EMF lines. */
    readonly metricLines: string[];
    readonly faults?: FaultStats;
}

export interface RegionsFixture {
    readonly tableName: string;
    readonly countersTableName: string;
    readonly reader: DynamoDBClient;
    readonly sides: ReadonlyMap<string, RegionSide>;
    readonly members: readonly string[];
    side(region: string): RegionSide;
    /** Feeds every record of the stream not yet seen to every region's consumer, until none is new. */
    drain(): Promise<void>;
    /** The user's items of `key`, as the table holds them now. */
    items(key: string): Promise<Array<Record<string, AttributeValue>>>;
    /** The live items of `key` (not soft-deleted), by owning region. */
    liveByOwner(key: string): Promise<Map<string, number>>;
    /** Region `region`'s two counter items of `key` (count 0 when absent). */
    counters(
        key: string,
        region: string,
    ): Promise<{ bestEffort: number; eventual: number; bestEffortItem?: Record<string, AttributeValue> }>;
}

export async function regionsFixture(
    engine: LocalEngine,
    members: readonly string[],
    options: {
        readonly mode?: CounterMode;
        readonly clientFaults?: { readonly rate: number; readonly seed: number };
        /** Shards of every key's counting in every region (runtime/shards/layout.ts). @default 1 */
        readonly counterShards?: number;
    } = {},
): Promise<RegionsFixture> {
    const tableName = `regions-test-${++tables}-${process.pid}`;
    const countersTableName = `${tableName}-counters`;
    const reader = engine.dynamodb();
    const { streamArn } = await createCounterTable(reader, tableName, DEFAULT_LAYOUT);
    await createCountersTable(reader, countersTableName, DEFAULT_LAYOUT, { healIndex: true });
    const queues = new LocalQueues();
    const sides = new Map<string, RegionSide>();
    const consumers = new Map<string, ReturnType<typeof createStreamHandler>>();
    for (const [i, region] of members.entries()) {
        const regions = regionsOf(region, members);
        const shards = options.counterShards === undefined || options.counterShards === 1 ? {} : { counterShards: options.counterShards };
        const config = {
            ...DEFAULT_LAYOUT,
            tableName,
            countersTableName,
            ...shards,
            regions,
            fatalQueueUrl: FATAL_QUEUE_URL,
            metricsNamespace: "RegionsTest",
        };
        const dynamodb = engine.dynamodb();
        const faults = options.clientFaults
            ? injectFaults(dynamodb, { rate: options.clientFaults.rate, random: seededRandom(options.clientFaults.seed + i) })
            : undefined;
        const metricLines: string[] = [];
        const client = new HybridCounterClient({
            ...DEFAULT_LAYOUT,
            tableName,
            countersTableName,
            ...shards,
            regions,
            dynamodb,
            mode: options.mode,
            deadlineMs: 60_000,
            metrics: { namespace: "RegionsTest", sink: (line) => metricLines.push(line) },
        });
        sides.set(region, { region, config, client, dynamodb, metricLines, ...(faults === undefined ? {} : { faults }) });
        consumers.set(region, createStreamHandler({ config, dynamodb: engine.dynamodb(), sqs: queues.client(), sink: () => undefined }));
    }
    const seen = new Map<string, Set<string>>(members.map((region) => [region, new Set<string>()]));
    const fixture: RegionsFixture = {
        tableName,
        countersTableName,
        reader,
        sides,
        members,
        side(region) {
            const side = sides.get(region);
            assert.ok(side, `no region ${region}`);
            return side;
        },
        async drain() {
            for (let round = 0; ; round++) {
                assert.ok(round < 20, "the stream keeps growing");
                const records = await readStream(engine.streams(), streamArn);
                let fed = 0;
                for (const region of members) {
                    const done = seen.get(region)!;
                    const fresh: DynamoDBRecord[] = records.filter((r) => !done.has(r.dynamodb!.SequenceNumber!));
                    for (let at = 0; at < fresh.length; at += 100) {
                        const batch = fresh.slice(at, at + 100);
                        const response = await consumers.get(region)!({ Records: batch }, lambdaContext("consumer", 60_000));
                        assert.deepEqual(response.batchItemFailures, [], `${region}'s consumer failed a batch`);
                        batch.forEach((r) => done.add(r.dynamodb!.SequenceNumber!));
                    }
                    fed += fresh.length;
                }
                if (fed === 0) {
                    return;
                }
            }
        },
        async items(key) {
            const out: Array<Record<string, AttributeValue>> = [];
            let start: Record<string, AttributeValue> | undefined;
            do {
                const page = await reader.send(
                    new ScanCommand({
                        TableName: tableName,
                        ConsistentRead: true,
                        FilterExpression: "pk = :k",
                        ExpressionAttributeValues: { ":k": { S: key } },
                        ExclusiveStartKey: start,
                    }),
                );
                out.push(...(page.Items ?? []));
                start = page.LastEvaluatedKey;
            } while (start !== undefined);
            return out;
        },
        async liveByOwner(key) {
            const regions = regionsOf(members[0]!, members);
            const byOwner = new Map<string, number>(members.map((region) => [region, 0]));
            for (const item of await fixture.items(key)) {
                if (item[DEFAULT_LAYOUT.deletedAttribute]?.BOOL !== true && item[DEFAULT_LAYOUT.tokenAttribute]?.S !== undefined) {
                    const owner = ownerOf(item, regions);
                    byOwner.set(owner, byOwner.get(owner)! + 1);
                }
            }
            return byOwner;
        },
        async counters(key, region) {
            const config = fixture.side(region).config;
            const get = (sk: string) =>
                reader.send(
                    new GetItemCommand({ TableName: countersTableName, Key: { pk: { S: key }, sk: { S: sk } }, ConsistentRead: true }),
                );
            const [be, ev] = await Promise.all([get(bestEffortSortKey(config)), get(eventualSortKey(config))]);
            return {
                bestEffort: Number(be.Item?.count?.N ?? "0"),
                eventual: Number(ev.Item?.count?.N ?? "0"),
                ...(be.Item === undefined ? {} : { bestEffortItem: be.Item }),
            };
        },
    };
    return fixture;
}

/** An item as another writer leaves it in the fixture's table: a token, and `hc_region` when `stamp` is given. */
export async function putItem(fixture: RegionsFixture, key: string, id: string, stamp?: string): Promise<void> {
    await fixture.reader.send(
        new PutItemCommand({
            TableName: fixture.tableName,
            Item: {
                pk: { S: key },
                sk: { S: id },
                [DEFAULT_LAYOUT.tokenAttribute]: { S: newToken() },
                ...(stamp === undefined ? {} : { hc_region: { S: stamp } }),
            },
        }),
    );
}

/**
 * Items of `key` that ownership tells apart: 3 no region stamped (the home's), 2 stamped by `home`, 2 by `member`,
 * and one by each of `strangers` (regions not members: the home's too).
 */
export async function putOwnedItems(
    fixture: RegionsFixture,
    key: string,
    home: string,
    member: string,
    strangers: readonly string[] = [],
): Promise<void> {
    await Promise.all([
        putItem(fixture, key, "x0"),
        putItem(fixture, key, "x1"),
        putItem(fixture, key, "x2"),
        putItem(fixture, key, "h0", home),
        putItem(fixture, key, "h1", home),
        putItem(fixture, key, "m0", member),
        putItem(fixture, key, "m1", member),
        ...strangers.map((stranger, i) => putItem(fixture, key, `g${i}`, stranger)),
    ]);
}
