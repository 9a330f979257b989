/**
 * Replication between DynamoDB Local engines, one per region, as global tables version 2019.11.21 replicate: each
 * engine's streams (one per replicated table) are read, and every write made in a region is applied to every other
 * region after a delay, last-writer-wins.
 *
 * What it keeps, and why it holds:
 * - Convergence. Every write made in region E gets a version (time, E) (local/regions/versions.ts) and is sent to
 *   every other region. Per engine, table and item the replicator keeps the version the engine holds, and applies a
 *   version only when it is later. The order on versions is total, so once every version has reached every engine,
 *   each holds the greatest: the same one everywhere.
 * - A write made in E wins over what E held. Its time is after the version E held before it (localWriteTime), so
 *   no engine keeps the version E's write replaced.
 * - A write E made that the replicator had not yet read when it applied a later version over it (the write is in
 *   E's stream before the applied version's record) was replaced in E: it is given no version and sent nowhere, as
 *   a write whose time was before the applied one would lose everywhere. This is the one place where the order of
 *   two writes is decided by when the replicator saw them, as a region's clock decides it on AWS.
 * - No echo. An applied write shows in the target's stream, as a replicated write does on AWS (no marker attribute).
 *   Before each write the replicator marks the item busy in the target; after it, it remembers the (old image, new
 *   image) pair the write produced (from ReturnValues ALL_OLD; a write that changed nothing produces no record). The
 *   target's records of a busy item wait until the write has returned, so every record of the item is compared with
 *   what the replicator wrote: the remembered pair is its own write, not sent on.
 * - Per-item order. Each (source, target) pair has lanes, an item always in the same lane, each lane applied in
 *   order: an item's writes reach a target in the order its source made them. Across items no order is kept (AWS
 *   keeps none).
 * - A paused region is cut off: nothing it writes leaves it and nothing reaches it, while its own stream is still
 *   read (its writes keep their versions and are sent when it is resumed).
 */
import {
    DeleteItemCommand,
    DescribeTableCommand,
    PutItemCommand,
    UpdateTableCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient, _Record as StreamRecord } from "@aws-sdk/client-dynamodb-streams";
import { StreamTail } from "../aws/stream-tail";
import { canonical, itemKey, later, localWriteTime, type Version } from "./versions";

export interface ReplicaEngine {
    /** The region this engine plays; distinct across engines. */
    readonly region: string;
    /** A client for the engine itself (the replicator's writes are not the user's traffic: no parity layer, no faults). */
    readonly dynamodb: DynamoDBClient;
    readonly streams: DynamoDBStreamsClient;
}

export interface ReplicatorOptions {
    readonly engines: readonly ReplicaEngine[];
    /** The replicated tables: each exists on every engine, with the same name and key schema. */
    readonly tables: readonly string[];
    /** How long after the replicator read a write it applies the write to the other regions. @default 0 */
    readonly delayMs?: number;
    /** The replicator's clock, in milliseconds: versions' times and delays are on it. @default Date.now */
    readonly now?: () => number;
    /** Lanes per (source, target) pair. @default 8 */
    readonly lanes?: number;
    /** How long a round that read nothing waits before the next. @default 20 */
    readonly pollIntervalMs?: number;
}

export interface RegionReplicationStats {
    /** Records read from this region's streams and handled (sent, or recognised as the replicator's own). */
    read: number;
    /** Writes made in this region, sent to the others. */
    sent: number;
    /** Records of the replicator's own writes into this region, recognised and not sent on. */
    echoes: number;
    /** Writes made in this region that a replicated write had already replaced (sent nowhere). */
    superseded: number;
    /** Replicated writes applied to this region. */
    applied: number;
    /** Replicated writes that found the same item already there (no stream record). */
    unchanged: number;
    /** Replicated writes not applied: the region held a later version (last-writer-wins). */
    lost: number;
    /** Writes to this region that failed and were retried. */
    retries: number;
}

interface Entry {
    readonly table: string;
    readonly key: string;
    readonly keys: Record<string, AttributeValue>;
    /** Undefined: the item was deleted. */
    readonly image: Record<string, AttributeValue> | undefined;
    readonly version: Version;
    readonly due: number;
}

interface Lane {
    /** Which of its pair's lanes this is. */
    readonly index: number;
    readonly source: string;
    readonly target: string;
    readonly queue: Entry[];
    running: boolean;
}

interface Echo {
    readonly old: string;
    readonly new: string;
}

/** The version held, or the echoes expected, of one item in one engine. */
const id = (region: string, table: string, key: string) => `${region}\u0000${table}\u0000${key}`;

function laneOf(table: string, key: string, lanes: number): number {
    // FNV-1a: cheap and stable, so an item always takes the same lane.
    let h = 0x811c9dc5;
    for (const c of `${table}\u0000${key}`) {
        h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
    }
    return h % lanes;
}

export function validateReplicatorOptions(options: ReplicatorOptions): string[] {
    const problems: string[] = [];
    const regions = options.engines.map((e) => e.region);
    if (regions.length < 2) {
        problems.push(`[engines] must name at least 2 regions (got ${regions.length})`);
    }
    if (new Set(regions).size !== regions.length) {
        problems.push(`[engines] regions must be distinct (got ${regions.join(", ")})`);
    }
    if (regions.some((r) => r.trim() === "")) {
        problems.push("[engines] a region must be a non-empty name");
    }
    if (options.tables.length === 0) {
        problems.push("[tables] must name at least one table");
    }
    if (options.delayMs !== undefined && !(Number.isFinite(options.delayMs) && options.delayMs >= 0)) {
        problems.push(`[delayMs] must be a number of milliseconds, 0 or more (got ${options.delayMs})`);
    }
    if (options.lanes !== undefined && !(Number.isInteger(options.lanes) && options.lanes >= 1 && options.lanes <= 64)) {
        problems.push(`[lanes] must be an integer from 1 to 64 (got ${options.lanes})`);
    }
    return problems;
}

export class Replicator {
    private readonly engines = new Map<string, ReplicaEngine>();
    private readonly tails: Array<{ region: string; table: string; tail: StreamTail }> = [];
    private readonly keyNames = new Map<string, string[]>();
    private readonly held = new Map<string, Version>();
    private readonly expected = new Map<string, Echo[]>();
    private readonly busy = new Set<string>();
    private readonly buffers = new Map<string, Array<{ table: string; record: StreamRecord }>>();
    private readonly lanes: Lane[] = [];
    private readonly pausedRegions = new Set<string>();
    private readonly stats = new Map<string, RegionReplicationStats>();
    private readonly now: () => number;
    private readonly delayMs: number;
    private readonly laneCount: number;
    private readonly pollIntervalMs: number;
    private stopped = false;
    private loop: Promise<void> | undefined;
    private idleRounds = 0;
    private failure: unknown;
    private readonly roundListeners: Array<() => void> = [];

    private constructor(options: ReplicatorOptions) {
        this.now = options.now ?? Date.now;
        this.delayMs = options.delayMs ?? 0;
        this.laneCount = options.lanes ?? 8;
        this.pollIntervalMs = options.pollIntervalMs ?? 20;
        for (const engine of options.engines) {
            this.engines.set(engine.region, engine);
            this.buffers.set(engine.region, []);
            this.stats.set(engine.region, { read: 0, sent: 0, echoes: 0, superseded: 0, applied: 0, unchanged: 0, lost: 0, retries: 0 });
        }
        for (const source of options.engines) {
            for (const target of options.engines) {
                if (source !== target) {
                    for (let i = 0; i < this.laneCount; i++) {
                        this.lanes.push({ index: i, source: source.region, target: target.region, queue: [], running: false });
                    }
                }
            }
        }
    }

    /**
     * Checks the options, finds each table's key schema and stream on every engine (turning on a stream with both
     * images where a table has none, as global tables do), and starts replicating from each stream's first record.
     */
    static async start(options: ReplicatorOptions): Promise<Replicator> {
        const problems = validateReplicatorOptions(options);
        if (problems.length > 0) {
            throw new Error(`invalid replicator options: ${problems.join("; ")}`);
        }
        const replicator = new Replicator(options);
        for (const table of options.tables) {
            for (const engine of options.engines) {
                const { keys, streamArn } = await replicatedStream(engine, table);
                const known = replicator.keyNames.get(table);
                if (known !== undefined && known.join() !== keys.join()) {
                    throw new Error(`table ${table} has key ${keys.join(", ")} in ${engine.region} but ${known.join(", ")} elsewhere`);
                }
                replicator.keyNames.set(table, keys);
                replicator.tails.push({ region: engine.region, table, tail: new StreamTail(engine.streams, streamArn) });
            }
        }
        replicator.loop = replicator.run();
        return replicator;
    }

    /** Cuts a region off: nothing it writes is sent, nothing is applied to it, until resume(). */
    pause(region: string): void {
        this.region(region);
        this.pausedRegions.add(region);
    }

    resume(region: string): void {
        this.region(region);
        this.pausedRegions.delete(region);
    }

    paused(region: string): boolean {
        return this.pausedRegions.has(region);
    }

    /** What the replicator did, per region. */
    regionStats(region: string): Readonly<RegionReplicationStats> {
        return { ...this.region(region) };
    }

    /** Writes read and waiting to be applied, over every pair of regions (paused ones included). */
    get backlog(): number {
        return this.lanes.reduce((n, l) => n + l.queue.length, 0);
    }

    /**
     * Waits until every stream has been read to its end, every write read has been applied to (or lost to a later
     * version in) every region not paused, and every applied write has come back in its target's stream; two rounds in
     * a row. Writes from or to a paused region wait for its resume. Throws after `timeoutMs`.
     */
    async drain({ timeoutMs = 300_000 } = {}): Promise<void> {
        const deadline = Date.now() + timeoutMs;
        this.idleRounds = 0;
        while (this.idleRounds < 2) {
            this.throwIfFailed();
            if (this.stopped) {
                throw new Error("the replicator is stopped");
            }
            if (Date.now() > deadline) {
                const queued = this.lanes
                    .filter((l) => l.queue.length > 0)
                    .map((l) => `${l.source}->${l.target}: ${l.queue.length} (first due at ${l.queue[0]!.due}, now ${this.now()})`);
                throw new Error(
                    `replication did not drain within ${timeoutMs} ms: ${this.backlog} writes queued [${queued.join("; ")}], ` +
                        `${[...this.expected.values()].reduce((n, q) => n + q.length, 0)} applied writes not yet back in their streams`,
                );
            }
            await new Promise<void>((resolve) => this.roundListeners.push(resolve));
        }
        this.throwIfFailed();
    }

    async stop(): Promise<void> {
        this.stopped = true;
        await this.loop;
        while (this.lanes.some((l) => l.running)) {
            await new Promise((r) => setTimeout(r, 5));
        }
    }

    private region(region: string): RegionReplicationStats {
        const stats = this.stats.get(region);
        if (stats === undefined) {
            throw new Error(`no region ${region} (regions: ${[...this.engines.keys()].join(", ")})`);
        }
        return stats;
    }

    private throwIfFailed(): void {
        if (this.failure !== undefined) {
            throw this.failure;
        }
    }

    private async run(): Promise<void> {
        while (!this.stopped) {
            let read = 0;
            try {
                for (const { region, table, tail } of this.tails) {
                    const records = await tail.read();
                    read += records.length;
                    this.buffers.get(region)!.push(...records.map((record) => ({ table, record })));
                }
                for (const region of this.engines.keys()) {
                    this.process(region);
                }
            } catch (error) {
                // A stream read the engine refused: stop here, and let drain() say why.
                this.failure ??= error;
                this.stopped = true;
            }
            this.pump();
            const idle = read === 0 && this.quiet();
            this.idleRounds = idle ? this.idleRounds + 1 : 0;
            for (const listener of this.roundListeners.splice(0)) {
                listener();
            }
            if (read === 0) {
                await new Promise((r) => setTimeout(r, this.pollIntervalMs));
            }
        }
        for (const listener of this.roundListeners.splice(0)) {
            listener();
        }
    }

    /** Nothing buffered, nothing applying, nothing due between regions not paused, no applied write still to come back. */
    private quiet(): boolean {
        if ([...this.buffers.values()].some((b) => b.length > 0) || this.busy.size > 0 || this.expected.size > 0) {
            return false;
        }
        return this.lanes.every((l) => !l.running && (l.queue.length === 0 || this.cutOff(l)));
    }

    private cutOff(lane: Lane): boolean {
        return this.pausedRegions.has(lane.source) || this.pausedRegions.has(lane.target);
    }

    /** Handles a region's records in order, up to the first one of an item a replicated write is being made to. */
    private process(region: string): void {
        const buffer = this.buffers.get(region)!;
        let done = 0;
        for (const { table, record } of buffer) {
            const keys = record.dynamodb?.Keys as Record<string, AttributeValue> | undefined;
            const key = itemKey(keys);
            const item = id(region, table, key);
            if (this.busy.has(item)) {
                break;
            }
            done++;
            const stats = this.region(region);
            stats.read++;
            const oldImage = canonical(record.dynamodb?.OldImage as Record<string, AttributeValue> | undefined);
            const newImage = record.dynamodb?.NewImage as Record<string, AttributeValue> | undefined;
            const echoes = this.expected.get(item);
            if (echoes !== undefined) {
                const head = echoes[0]!;
                if (head.old === oldImage && head.new === canonical(newImage)) {
                    echoes.shift();
                    stats.echoes++;
                } else {
                    // Made in this region before the replicated write the replicator applied over it.
                    stats.superseded++;
                }
                if (echoes.length === 0) {
                    this.expected.delete(item);
                }
                continue;
            }
            const version: Version = { time: localWriteTime(this.now(), this.held.get(item)), origin: region };
            this.held.set(item, version);
            stats.sent++;
            const due = this.now() + this.delayMs;
            const lane = laneOf(table, key, this.laneCount);
            const entry: Entry = { table, key, keys: keys ?? {}, image: newImage, version, due };
            for (const l of this.lanes) {
                if (l.source === region && l.index === lane) {
                    l.queue.push(entry);
                }
            }
        }
        buffer.splice(0, done);
    }

    /** Starts every lane whose first write is due and whose regions are not cut off. */
    private pump(): void {
        for (const lane of this.lanes) {
            if (!lane.running && lane.queue.length > 0 && !this.cutOff(lane) && lane.queue[0]!.due <= this.now()) {
                lane.running = true;
                this.runLane(lane).then(
                    () => (lane.running = false),
                    (error: unknown) => {
                        lane.running = false;
                        this.failure ??= error;
                    },
                );
            }
        }
    }

    private async runLane(lane: Lane): Promise<void> {
        while (!this.stopped && lane.queue.length > 0 && !this.cutOff(lane) && lane.queue[0]!.due <= this.now()) {
            await this.apply(lane.target, lane.queue[0]!);
            lane.queue.shift();
        }
    }

    /** Applies one write to one region, if its version is later than the one the region holds. */
    private async apply(target: string, entry: Entry): Promise<void> {
        const stats = this.region(target);
        const item = id(target, entry.table, entry.key);
        // Another source's lane may be writing this item to this region: versions are compared one write at a time.
        while (this.busy.has(item)) {
            await new Promise((r) => setTimeout(r, 1));
        }
        if (!later(entry.version, this.held.get(item))) {
            stats.lost++;
            return;
        }
        const client = this.engines.get(target)!.dynamodb;
        this.busy.add(item);
        try {
            for (let attempt = 1; ; attempt++) {
                try {
                    const answer =
                        entry.image === undefined
                            ? await client.send(new DeleteItemCommand({ TableName: entry.table, Key: entry.keys, ReturnValues: "ALL_OLD" }))
                            : await client.send(new PutItemCommand({ TableName: entry.table, Item: entry.image, ReturnValues: "ALL_OLD" }));
                    const old = canonical(answer.Attributes);
                    const written = canonical(entry.image);
                    this.held.set(item, entry.version);
                    if (old === written) {
                        stats.unchanged++;
                    } else {
                        stats.applied++;
                        const echoes = this.expected.get(item) ?? [];
                        echoes.push({ old, new: written });
                        this.expected.set(item, echoes);
                    }
                    return;
                } catch (error) {
                    if (this.stopped || attempt >= 20) {
                        throw error;
                    }
                    stats.retries++;
                    await new Promise((r) => setTimeout(r, 10 * attempt));
                }
            }
        } finally {
            this.busy.delete(item);
        }
    }
}

/** The table's key attribute names and its stream's ARN, with a stream of both images turned on when it has none. */
async function replicatedStream(engine: ReplicaEngine, table: string): Promise<{ keys: string[]; streamArn: string }> {
    let description = (await engine.dynamodb.send(new DescribeTableCommand({ TableName: table }))).Table;
    const keys = (description?.KeySchema ?? []).map((k) => k.AttributeName!);
    const spec = description?.StreamSpecification;
    if (!spec?.StreamEnabled) {
        await engine.dynamodb.send(
            new UpdateTableCommand({
                TableName: table,
                StreamSpecification: { StreamEnabled: true, StreamViewType: "NEW_AND_OLD_IMAGES" },
            }),
        );
        description = (await engine.dynamodb.send(new DescribeTableCommand({ TableName: table }))).Table;
    } else if (spec.StreamViewType !== "NEW_AND_OLD_IMAGES") {
        throw new Error(
            `table ${table} in ${engine.region} has a ${spec.StreamViewType} stream; replication needs NEW_AND_OLD_IMAGES (global tables require it)`,
        );
    }
    const streamArn = description?.LatestStreamArn;
    if (streamArn === undefined) {
        throw new Error(`table ${table} in ${engine.region} has no stream`);
    }
    return { keys, streamArn };
}
