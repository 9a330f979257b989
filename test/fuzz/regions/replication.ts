/**
 * Replication between the regions' replicas on one engine, as global tables (version 2019.11.21) replicate, driven by
 * the schedule: every write made in a region is queued for every other region, and a `replicate` event applies queued
 * writes, in order per (source, target) lane, last-writer-wins by the order the writes were made (a write's version).
 * An applied write shows in the target's stream, as a replicated write does on AWS; the replicator's own writes are not
 * sent on. A replica's TTL deletes what has expired there, and its deletes replicate like any other write.
 */
import {
    DeleteItemCommand,
    GetItemCommand,
    PutItemCommand,
    ScanCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";

type Item = Record<string, AttributeValue>;

export type TableKind = "user" | "counters";

interface Entry {
    readonly source: string;
    readonly target: string;
    readonly kind: TableKind;
    readonly key: Item;
    /** The item as the source held it right after the write (undefined: deleted). */
    readonly image: Item | undefined;
    readonly version: number;
}

export interface ReplicaTables {
    (region: string, kind: TableKind): string;
}

/** What a replicated write replaced in a target replica: the item before and after. */
export type OnReplace = (target: string, kind: TableKind, before: Item | undefined, after: Item | undefined) => Promise<void>;

export class Replication {
    private readonly queue: Entry[] = [];
    private readonly versions = new Map<string, number>();
    private seq = 0;
    applied = 0;
    lost = 0;
    ttlDeleted = 0;

    constructor(
        private readonly reader: DynamoDBClient,
        private readonly regions: readonly string[],
        private readonly table: ReplicaTables,
        private readonly keyNames: { readonly partitionKey: string; readonly sortKey: string },
    ) {}

    /** The next write's version: writes are numbered in the order they are made. */
    nextVersion(): number {
        return ++this.seq;
    }

    private id(region: string, kind: TableKind, key: Item): string {
        return `${region}|${kind}|${key[this.keyNames.partitionKey]?.S}|${key[this.keyNames.sortKey]?.S}`;
    }

    /** A write made in `region` to the item `key` of its `kind` table: queued for every other region. */
    async wrote(region: string, kind: TableKind, item: Item): Promise<void> {
        const key = {
            [this.keyNames.partitionKey]: item[this.keyNames.partitionKey]!,
            [this.keyNames.sortKey]: item[this.keyNames.sortKey]!,
        };
        const version = this.nextVersion();
        this.versions.set(this.id(region, kind, key), version);
        const image = (await this.reader.send(new GetItemCommand({ TableName: this.table(region, kind), Key: key, ConsistentRead: true })))
            .Item;
        for (const target of this.regions.filter((r) => r !== region)) {
            this.queue.push({ source: region, target, kind, key, image, version });
        }
    }

    get pending(): number {
        return this.queue.length;
    }

    /** Applies up to `writes` queued writes: each from a lane `random` picks, its oldest first. */
    async apply(writes: number, random: () => number, onReplace: OnReplace): Promise<void> {
        for (let i = 0; i < writes && this.queue.length > 0; i++) {
            const lanes = [...new Set(this.queue.map((e) => `${e.source}>${e.target}`))];
            const lane = lanes[Math.floor(random() * lanes.length)]!;
            const at = this.queue.findIndex((e) => `${e.source}>${e.target}` === lane);
            await this.applyOne(this.queue.splice(at, 1)[0]!, onReplace);
        }
    }

    /** Applies every queued write. */
    async applyAll(onReplace: OnReplace): Promise<void> {
        while (this.queue.length > 0) {
            await this.applyOne(this.queue.shift()!, onReplace);
        }
    }

    private async applyOne(entry: Entry, onReplace: OnReplace): Promise<void> {
        const id = this.id(entry.target, entry.kind, entry.key);
        if ((this.versions.get(id) ?? 0) >= entry.version) {
            this.lost++;
            return;
        }
        this.versions.set(id, entry.version);
        const TableName = this.table(entry.target, entry.kind);
        const before = (await this.reader.send(new GetItemCommand({ TableName, Key: entry.key, ConsistentRead: true }))).Item;
        if (entry.image === undefined) {
            await this.reader.send(new DeleteItemCommand({ TableName, Key: entry.key }));
        } else {
            await this.reader.send(new PutItemCommand({ TableName, Item: entry.image }));
        }
        this.applied++;
        await onReplace(entry.target, entry.kind, before, entry.image);
    }

    /**
     * The TTL of `region`'s replica of the counters table: deletes every item whose `hc_expires` (epoch seconds) has
     * passed, each a write made in that region (it replicates).
     */
    async sweep(region: string, nowSeconds: number): Promise<Item[]> {
        const TableName = this.table(region, "counters");
        const expired: Item[] = [];
        let start: Item | undefined;
        do {
            const page = await this.reader.send(
                new ScanCommand({ TableName, ...(start === undefined ? {} : { ExclusiveStartKey: start }) }),
            );
            expired.push(
                ...(page.Items ?? []).filter((item) => item["hc_expires"]?.N !== undefined && Number(item["hc_expires"].N) <= nowSeconds),
            );
            start = page.LastEvaluatedKey;
        } while (start !== undefined);
        for (const item of expired) {
            const key = {
                [this.keyNames.partitionKey]: item[this.keyNames.partitionKey]!,
                [this.keyNames.sortKey]: item[this.keyNames.sortKey]!,
            };
            await this.reader.send(new DeleteItemCommand({ TableName, Key: key }));
            this.ttlDeleted++;
            await this.wrote(region, "counters", key);
        }
        return expired;
    }
}
