/**
 * A multi-region counter on one DynamoDB Local: each region's replica of the user's table (with its stream) and of the
 * counters table (with the heal index) are tables of their own, named after the region, and replication copies items
 * between them as global tables (version 2019.11.21) do, when the test says so.
 *
 * - Every write a region's parties make (its client, consumer, settler, backfill, other writers) is seen by a
 *   middleware on that region's DynamoDB clients once it succeeded; the item as it stands right after is queued for
 *   every other region with a version (writes are numbered in the order they are made).
 * - `replicate` applies queued writes, oldest first, last-writer-wins: a write reaches a region only if that region
 *   holds no later version of the item (its own later write, or a later one replicated). An applied write shows in the
 *   target's stream, as a replicated write does on AWS; the replicator's own writes are not queued again.
 * - `sweep` is one replica's TTL: it deletes the counters items whose `hc_expires` passed there, a write of that region.
 * - Each region runs its deployment's parties with its own configuration: the client from `clientConfigOf`, the consumer
 *   through the mapping emulator with the component's settings, the settler. `deploy` gives a region a new member list
 *   (its deployment taking it); a region not in its own list runs nothing.
 *
 * The counters table's name differs per region here (one engine), so each region's counted flag has a generation of its
 * own; on AWS the replicas share one name. Only the owner of a life ever flags or counts it, so nothing reads another
 * region's generation.
 *
 * The clock: `advance` moves `Date.now` for the whole process until `close`, as the counter fixture does, and the
 * records each consumer is given carry the moved clock's time (DynamoDB Local stamps them with the real one).
 */
import {
    DeleteItemCommand,
    GetItemCommand,
    PutItemCommand,
    QueryCommand,
    ScanCommand,
    type AttributeValue,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { untimedContext } from "../../local/aws/lambda-context";
import { MappingEmulator, type StreamInvokeEvent } from "../../local/aws/mapping-emulator";
import type { LocalEngine } from "../../local/engine/engine";
import { createCounterTable, createCountersTable } from "../../local/engine/table";
import { HybridCounterClient } from "../../runtime/client/client";
import { settle, type SettleReport } from "../../runtime/heal/settle";
import { DEFAULT_LAYOUT, clientConfigOf, type CounterMode, type HandlerConfig, type RegionsConfig } from "../../runtime/shared/config";
import { bestEffortKey, eventualKey } from "../../runtime/shared/keys";
import { createStreamHandler, type StreamEvent } from "../../runtime/stream/consumer";
import type { FatalMessage } from "../../runtime/stream/fatal";
import { COMPONENT_SETTINGS } from "./counter-fixture";

export type Item = Record<string, AttributeValue>;
type Kind = "user" | "counters";

let created = 0;

/** The regions setting of `current` among `members`; `home` owns what no member stamped. */
export function regionsSetting(current: string, members: readonly string[], home: string): RegionsConfig {
    return { current, members: members.map((region) => (region === home ? { region, role: "home" as const } : { region })) };
}

export interface ReplicasOptions {
    /** Every region that has replicas, the home first. */
    readonly regions: readonly string[];
    /** The member list every deployment starts with. @default every region */
    readonly members?: readonly string[];
    /** @default "utilization" */
    readonly mode?: CounterMode;
    /** @default 1 */
    readonly counterShards?: number;
    /** @default 90 */
    readonly usageRetentionDays?: number;
}

/** One region: its replicas, its DynamoDB clients (each write they make is replicated) and its deployment's parties. */
export interface Region {
    readonly name: string;
    readonly tableName: string;
    readonly countersTableName: string;
    /** The client the API uses. */
    readonly api: DynamoDBClient;
    /** The consumer's and the settler's, the backfill's and the reconcile's. */
    readonly ops: DynamoDBClient;
    /** Another writer's (items the client did not write). */
    readonly writer: DynamoDBClient;
    readonly emulator: MappingEmulator;
    /** The member list its deployment runs with. */
    members: readonly string[];
    config: HandlerConfig & { readonly regions: RegionsConfig };
    client: HybridCounterClient;
}

interface Entry {
    readonly source: string;
    readonly target: string;
    readonly kind: Kind;
    readonly key: Item;
    readonly image: Item | undefined;
    readonly version: number;
}

export class Replicas {
    readonly fatal: FatalMessage[] = [];
    readonly failedBatches: unknown[] = [];
    /** Per region, how many times its consumer asked for its stream from the start (it had no frontier). */
    readonly readsFromStart = new Map<string, number>();
    private readonly regions = new Map<string, Region>();
    private readonly handlers = new Map<string, (event: StreamEvent) => Promise<unknown>>();
    private readonly queue: Entry[] = [];
    private readonly versions = new Map<string, number>();
    private readonly tables = new Map<string, { region: string; kind: Kind }>();
    private readonly clients: DynamoDBClient[] = [];
    private readonly streamClients: DynamoDBStreamsClient[] = [];
    private sequence = 0;
    private offsetMs = 0;
    private readonly realNow = Date.now;
    /** Writes applied, and writes a later version made lose, over the replicas' lives. */
    applied = 0;
    lost = 0;

    private constructor(
        private readonly engine: LocalEngine,
        private readonly options: ReplicasOptions,
        /** The replicator's client: reads images and applies writes, which it does not queue. */
        readonly reader: DynamoDBClient,
    ) {}

    /** Creates every region's replicas and deploys each with the starting member list. */
    static async create(engine: LocalEngine, options: ReplicasOptions): Promise<Replicas> {
        const replicas = new Replicas(engine, options, engine.dynamodb());
        const base = `regions-${process.pid}-${++created}`;
        for (const name of options.regions) {
            const tableName = `${base}-${name}`;
            const countersTableName = `${tableName}-counters`;
            const { streamArn } = await createCounterTable(replicas.reader, tableName, DEFAULT_LAYOUT);
            await createCountersTable(replicas.reader, countersTableName, DEFAULT_LAYOUT, { healIndex: true });
            replicas.tables.set(tableName, { region: name, kind: "user" });
            replicas.tables.set(countersTableName, { region: name, kind: "counters" });
            const streams = engine.streams();
            replicas.streamClients.push(streams);
            const emulator = new MappingEmulator({
                streams,
                streamArn,
                settings: COMPONENT_SETTINGS,
                invoke: (event: StreamInvokeEvent) => replicas.invokeConsumer(name, event as unknown as StreamEvent),
                onFailure: (record) => void replicas.failedBatches.push(record),
            });
            const region: Region = {
                name,
                tableName,
                countersTableName,
                api: replicas.recorded(name),
                ops: replicas.recorded(name),
                writer: replicas.recorded(name),
                emulator,
                members: [],
                config: undefined as unknown as Region["config"],
                client: undefined as unknown as HybridCounterClient,
            };
            replicas.regions.set(name, region);
        }
        for (const name of options.regions) {
            replicas.deploy(name, options.members ?? options.regions);
        }
        return replicas;
    }

    get home(): string {
        return this.options.regions[0]!;
    }

    region(name: string): Region {
        const region = this.regions.get(name);
        assert.ok(region, `no region ${name}`);
        return region;
    }

    /** Region `name`'s deployment takes `members`: its configuration, client and consumer are built anew. */
    deploy(name: string, members: readonly string[]): void {
        const region = this.region(name);
        region.members = members;
        // A region that is not a member in its own list runs nothing; it keeps a configuration for the record.
        const current = members.includes(name) ? name : this.home;
        region.config = {
            ...DEFAULT_LAYOUT,
            tableName: region.tableName,
            countersTableName: region.countersTableName,
            mode: this.options.mode ?? "utilization",
            periodMs: 600_000,
            ...(this.options.counterShards === undefined || this.options.counterShards === 1
                ? {}
                : { counterShards: this.options.counterShards }),
            regions: regionsSetting(current, members, this.home),
            fatalQueueUrl: "https://sqs.local/000000000000/fatal",
            metricsNamespace: "RegionsTest",
            thresholds: [0.8, 1],
            usageRetentionDays: this.options.usageRetentionDays ?? 90,
        };
        region.client = new HybridCounterClient({ ...clientConfigOf(region.config), dynamodb: region.api, deadlineMs: 60_000 });
        const handler = createStreamHandler({
            config: region.config,
            dynamodb: region.ops,
            streams: this.consumerStreams(name),
            fatal: { park: async (message: FatalMessage) => (this.fatal.push(message), true) },
            sendEvents: async () => true,
            sink: () => undefined,
        });
        this.handlers.set(name, (event) => handler(event, untimedContext("consumer", 60_000)));
    }

    /** A Streams client for region `name`'s consumer that counts its reads from the stream's start. */
    private consumerStreams(name: string): DynamoDBStreamsClient {
        const streams = this.engine.streams();
        this.streamClients.push(streams);
        streams.middlewareStack.add(
            (next) => async (args) => {
                if ((args.input as { ShardIteratorType?: string }).ShardIteratorType === "TRIM_HORIZON") {
                    this.readsFromStart.set(name, (this.readsFromStart.get(name) ?? 0) + 1);
                }
                return next(args);
            },
            { step: "initialize", name: "countReadsFromStart" },
        );
        return streams;
    }

    /** Whether region `name`'s deployment runs (it is a member in its own list). */
    runs(name: string): boolean {
        return this.region(name).members.includes(name);
    }

    private async invokeConsumer(name: string, event: StreamEvent): Promise<unknown> {
        assert.ok(this.runs(name), `${name}'s consumer runs only while its deployment does`);
        // The stream stamps a record when it is written; DynamoDB Local stamps the real time, the clock here is moved.
        const records = (event.Records ?? []).map((record) => ({
            ...record,
            dynamodb: {
                ...record.dynamodb,
                ApproximateCreationDateTime: record.dynamodb!.ApproximateCreationDateTime! + this.offsetMs / 1000,
            },
        }));
        return this.handlers.get(name)!({ ...event, Records: records });
    }

    /** Delivers every record region `name`'s stream holds to its consumer. */
    async consume(name: string): Promise<void> {
        await this.region(name).emulator.drain();
    }

    /** One settler run of region `name`. */
    settle(name: string): Promise<SettleReport> {
        const region = this.region(name);
        return settle({ config: region.config, dynamodb: region.ops, keyBudget: 100, auditItems: 1_000 });
    }

    /** Applies the queued writes (those from `from` to `to` when given), oldest first; returns how many. */
    async replicate(lane: { readonly from?: string; readonly to?: string } = {}): Promise<number> {
        let applied = 0;
        for (let at = 0; at < this.queue.length;) {
            const entry = this.queue[at]!;
            if ((lane.from !== undefined && entry.source !== lane.from) || (lane.to !== undefined && entry.target !== lane.to)) {
                at++;
                continue;
            }
            this.queue.splice(at, 1);
            applied += (await this.applyOne(entry)) ? 1 : 0;
        }
        return applied;
    }

    /** Writes not yet replicated. */
    get pending(): number {
        return this.queue.length;
    }

    /** Replicates and delivers every stream, over and over, until nothing moves: every region running drains. */
    async quiesce(): Promise<void> {
        for (let round = 0; round < 10; round++) {
            await this.replicate();
            for (const name of this.options.regions.filter((r) => this.runs(r))) {
                await this.consume(name);
            }
            if (this.queue.length === 0) {
                return;
            }
        }
        assert.fail("replication and the streams did not quiesce");
    }

    /** Region `name`'s TTL: deletes its counters items whose `hc_expires` passed (a write of that region); returns them. */
    async sweep(name: string): Promise<Item[]> {
        const TableName = this.region(name).countersTableName;
        const expired: Item[] = [];
        let start: Item | undefined;
        do {
            const page = await this.reader.send(
                new ScanCommand({ TableName, ConsistentRead: true, ...(start === undefined ? {} : { ExclusiveStartKey: start }) }),
            );
            expired.push(
                ...(page.Items ?? []).filter(
                    (item) => item["hc_expires"]?.N !== undefined && Number(item["hc_expires"].N) * 1000 <= Date.now(),
                ),
            );
            start = page.LastEvaluatedKey;
        } while (start !== undefined);
        for (const item of expired) {
            const key = { pk: item["pk"]!, sk: item["sk"]! };
            await this.reader.send(new DeleteItemCommand({ TableName, Key: key }));
            await this.wrote(name, "counters", key);
        }
        return expired;
    }

    /** Region `name`'s replica of `key`'s items in the user's table. */
    async items(name: string, key: string): Promise<Item[]> {
        const page = await this.reader.send(
            new QueryCommand({
                TableName: this.region(name).tableName,
                KeyConditionExpression: "pk = :pk",
                ExpressionAttributeValues: { ":pk": { S: key } },
                ConsistentRead: true,
            }),
        );
        return page.Items ?? [];
    }

    /** Region `owner`'s counter items of `key` (best-effort summed over shards, and eventual) as `name`'s replica holds them. */
    async counters(
        name: string,
        key: string,
        owner: string,
    ): Promise<{ bestEffort: number; eventual: number; eventualItem?: Item; shard0?: Item }> {
        const region = this.region(name);
        const get = async (Key: Item) =>
            (await this.reader.send(new GetItemCommand({ TableName: region.countersTableName, Key, ConsistentRead: true }))).Item;
        let bestEffort = 0;
        let shard0: Item | undefined;
        for (let shard = 0; shard < (this.options.counterShards ?? 1); shard++) {
            const item = await get(bestEffortKey(region.config, key, shard, owner));
            bestEffort += Number(item?.["count"]?.N ?? "0");
            shard0 ??= shard === 0 ? item : undefined;
        }
        const eventualItem = await get(eventualKey(region.config, key, owner));
        return {
            bestEffort,
            eventual: Number(eventualItem?.["count"]?.N ?? "0"),
            ...(eventualItem === undefined ? {} : { eventualItem }),
            ...(shard0 === undefined ? {} : { shard0 }),
        };
    }

    /** Moves `Date.now` (see the top). */
    advance(ms: number): void {
        this.offsetMs += ms;
        const offset = this.offsetMs;
        Date.now = () => this.realNow() + offset;
    }

    close(): void {
        Date.now = this.realNow;
        for (const client of [this.reader, ...this.clients, ...this.streamClients]) {
            client.destroy();
        }
    }

    /** A DynamoDB client of region `name` whose successful writes are queued for replication. */
    private recorded(name: string): DynamoDBClient {
        const client = this.engine.dynamodb();
        this.clients.push(client);
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const result = await next(args);
            for (const [table, key] of writtenKeys(
                (context.commandName ?? "").replace(/Command$/, ""),
                args.input as Record<string, unknown>,
            )) {
                const where = this.tables.get(table);
                assert.ok(where?.region === name, `${name}'s client wrote ${table}, which is not ${name}'s`);
                await this.wrote(name, where.kind, key);
            }
            return result;
        };
        client.middlewareStack.add(middleware, { step: "initialize", name: "replicateWrites", priority: "high" });
        return client;
    }

    private id(region: string, kind: Kind, key: Item): string {
        return `${region}|${kind}|${key["pk"]?.S}|${key["sk"]?.S}`;
    }

    private tableOf(region: string, kind: Kind): string {
        const r = this.region(region);
        return kind === "user" ? r.tableName : r.countersTableName;
    }

    /** A write made in `region` to item `key`: queued, as the item stands now, for every other region. */
    private async wrote(region: string, kind: Kind, key: Item): Promise<void> {
        const itemKey = { pk: key["pk"]!, sk: key["sk"]! };
        const image = (
            await this.reader.send(new GetItemCommand({ TableName: this.tableOf(region, kind), Key: itemKey, ConsistentRead: true }))
        ).Item;
        const version = ++this.sequence;
        this.versions.set(this.id(region, kind, itemKey), version);
        for (const target of this.options.regions.filter((r) => r !== region)) {
            this.queue.push({ source: region, target, kind, key: itemKey, image, version });
        }
    }

    private async applyOne(entry: Entry): Promise<boolean> {
        const id = this.id(entry.target, entry.kind, entry.key);
        if ((this.versions.get(id) ?? 0) >= entry.version) {
            this.lost++;
            return false;
        }
        this.versions.set(id, entry.version);
        const TableName = this.tableOf(entry.target, entry.kind);
        if (entry.image === undefined) {
            await this.reader.send(new DeleteItemCommand({ TableName, Key: entry.key }));
        } else {
            await this.reader.send(new PutItemCommand({ TableName, Item: entry.image }));
        }
        this.applied++;
        return true;
    }
}

/** The (table, key) pairs a successful write request wrote. */
function writtenKeys(command: string, input: Record<string, unknown>): Array<[string, Item]> {
    const keyOf = (item: Item): Item => ({ pk: item["pk"]!, sk: item["sk"]! });
    switch (command) {
        case "PutItem":
            return [[input["TableName"] as string, keyOf(input["Item"] as Item)]];
        case "UpdateItem":
        case "DeleteItem":
            return [[input["TableName"] as string, keyOf(input["Key"] as Item)]];
        case "TransactWriteItems":
            return (input["TransactItems"] as Array<Record<string, { TableName: string; Key?: Item; Item?: Item }>>).flatMap((action) => {
                const write = action["Put"] ?? action["Update"] ?? action["Delete"];
                return write === undefined ? [] : [[write.TableName, keyOf(write.Key ?? write.Item!)] as [string, Item]];
            });
        case "BatchWriteItem":
            // It may leave items unprocessed, which are not written: the tests' writers use single-item writes.
            return assert.fail("BatchWriteItem is not replicated here: write items one at a time");
        default:
            return [];
    }
}
