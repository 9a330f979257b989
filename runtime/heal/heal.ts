/**
 * Healing a key's best-effort from its items: every shard brought to the units the table and the young ledger say it
 * should hold (plan.ts), while the API writes the key, with no quiet window and no transaction.
 *
 * Each attempt is one read of each shard (R) and one read of the key's items (T), in the mode's order, then per shard
 * one UpdateItem (W) that adds the difference and removes the stale entries (at most STALE_PER_WRITE; the key stays
 * listed for the rest), conditional on two numbers R read: the heal generation (`hc_g`, which W moves: no two heals
 * add the same difference, and no repeat of one W adds it twice) and the fenced releases (`hc_rel`, which only a
 * strict release of an old life moves). Client writes to young entries commute with W, and removing a stale entry
 * moves no count: a -1 that lands in one between the reads and W is kept by the ADD. What else could land between the
 * reads and W, and why the bound holds (runtime/heal/heal-window.ts gives the time bounds):
 *
 * - Utilization (best-effort <= live) reads R, then T. A delete of an old life sends -1 (to the count) after its claim and before its
 *   soft delete. If the -1 landed before R, the claim was there before T: the heal leaves a live item with a claim
 *   younger than a call's reach out (and the key listed), or the call is over and its item is live (the -1 was lost)
 *   or gone. If it lands after R, the heal counted the item without that -1 (claimed after T: the -1 then moves the
 *   count with the item), or left it out (claimed before T: the -1 is one too many, an undercount, and the key stays
 *   listed until the claim is old). Never an overcount.
 * - Strict (live <= best-effort) reads T, then R: a create reserves before its put, so every client life T sees has
 *   its slot in what R reads. A release of an old life is fenced: conditional on the generation its delete read
 *   before its soft delete, and counted in `hc_rel`. One that landed before R: T saw the item gone (exact) or, soft-
 *   deleted after T, live (a slot held, safe). One that lands between R and W moves `hc_rel`: W is refused, and the
 *   next attempt reads again. One sent after W with the generation of before is refused, its slot held (safe, the key
 *   listed). One with W's generation was read after W, so its soft delete came after T: the heal counted the item,
 *   and the release moves the count with it.
 * - A create's writes go to its period's entry, which stays young until they have all landed (the period's floor),
 *   and a young life is taken from the ledger, not the table.
 *
 * The heal also removes the tombstones the consumer left (runtime/stream/effects.ts) once no put attempt of their life
 * can land, and keeps the key listed while anything it left out is not settled yet.
 */
import {
    ConditionalCheckFailedException,
    QueryCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { deleteTokenAttribute, type CounterConfig } from "../shared/config";
import { bestEffortKey, eventualKey, numberOf, stringOf } from "../shared/keys";
import { isCounted, isLive, isSelected, isSoftDeleted, type ItemImage } from "../shared/selection";
import { tokenTime } from "../shared/tokens";
import { periodOf } from "../ledger/ledger";
import { homeShard, shardCount } from "../shards/layout";
import { GEN, RELEASES } from "../client/units";
import { tombstoneMayStillBlock, tombstoneSettlesAt } from "../stream/effects";
import { removeTombstone } from "../shared/item-writes";
import { HEAL_DUE, HEAL_PARTITION, healShard as indexShard } from "./index-marks";
import { planShardHeal, type LifeView } from "./plan";
import { MAX_CLIENT_DEADLINE_MS, settledAfterMs } from "./heal-window";

export interface HealOptions {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
    /** Heal attempts before giving up on a key whose reads keep meeting writes. @default 5 */
    readonly attempts?: number;
    /** Stops between two shards (Ctrl-C); a shard not healed leaves the key listed. */
    readonly signal?: AbortSignal;
}

export interface ShardHealResult {
    readonly shard: number;
    readonly before: number;
    readonly after: number;
}

export interface HealResult {
    readonly key: string;
    readonly shards: readonly ShardHealResult[];
    /** Units moved, over every shard (|correction| summed). */
    readonly drift: number;
    /** Tombstones removed. */
    readonly removed: number;
    /** When the key is due again (undefined: nothing left for a later heal). */
    readonly dueAgainAt?: number;
    /** False when every attempt met another write; the key stays listed. */
    readonly healed: boolean;
}

const DELETE_TOKEN = deleteTokenAttribute;

/** The most stale entries one write removes (the expression's 4 KB): the key is listed again for the rest. */
export const STALE_PER_WRITE = 100;

type Item = Record<string, AttributeValue>;

/**
 * Heals `key` (every shard), removes its settled tombstones, and lists it again if something is left for later.
 * `listing`: the heal index's mark the caller read for the key (undefined: not listed); read here when not given.
 */
export async function healKey(key: string, options: HealOptions, listing?: { readonly due?: AttributeValue }): Promise<HealResult> {
    const { config } = options;
    const began = Date.now();
    const due = listing === undefined ? await readDue(key, options) : listing.due;
    const pending = new Set(Array.from({ length: shardCount(config) }, (_, s) => s));
    const shards: ShardHealResult[] = [];
    let dueAgainAt: number | undefined;
    let removed = 0;
    for (let attempt = 0; attempt < (options.attempts ?? 5) && pending.size > 0 && !options.signal?.aborted; attempt++) {
        const read = await readKey(key, [...pending], options);
        if (attempt === 0) {
            removed = await removeTombstones(key, read.items, read.at, options);
            dueAgainAt = tombstonesDueAt(read.items, config, read.at);
        }
        for (const shard of [...pending]) {
            if (options.signal?.aborted) {
                break;
            }
            const homed = read.items.filter((i) => homeShard(stringOf(i, config.sortKey)!, shardCount(config)) === shard);
            const healed = await healShard(key, shard, read.shards.get(shard)!, homed, read.at, options);
            if (healed !== undefined) {
                pending.delete(shard);
                shards.push(healed.shard);
                dueAgainAt = earliest(dueAgainAt, healed.dueAgainAt);
            }
        }
    }
    const healed = pending.size === 0;
    if (!healed) {
        dueAgainAt = earliest(dueAgainAt, Date.now());
    }
    // A mark due after this heal began may be for something it did not see (runtime/heal/index-marks.ts): it stays.
    const listedAt = due?.N === undefined ? undefined : Number(due.N);
    if (listedAt !== undefined && listedAt > began) {
        dueAgainAt = earliest(dueAgainAt, listedAt);
    }
    if (dueAgainAt === undefined || dueAgainAt !== listedAt) {
        await relist(key, due, dueAgainAt, options);
    }
    return {
        key,
        shards: shards.sort((a, b) => a.shard - b.shard),
        drift: shards.reduce((s, r) => s + Math.abs(r.after - r.before), 0),
        removed,
        ...(dueAgainAt === undefined ? {} : { dueAgainAt }),
        healed,
    };
}

/** What R read of a shard: the item, and the two numbers W is conditional on. */
interface ShardRead {
    readonly item?: Item;
    readonly gen: number;
    readonly releases: number;
}

/**
 * One attempt's reads, in the mode's order (see the header): utilization reads the shards, then the items; strict the
 * items, then the shards. `at`: the clock just before the first read, by which the plan judges which lives are young,
 * never later: a life created after that read is young then, so its units come from its entry, however long the heal
 * stalls between its reads.
 */
async function readKey(
    key: string,
    shards: readonly number[],
    options: HealOptions,
): Promise<{ at: number; items: Item[]; shards: Map<number, ShardRead> }> {
    const at = Date.now();
    const readShards = async () => new Map(await Promise.all(shards.map(async (s) => [s, await readShard(key, s, options)] as const)));
    if (options.config.mode === "strict") {
        const items = await readItems(key, options);
        return { at, items, shards: await readShards() };
    }
    const read = await readShards();
    return { at, items: await readItems(key, options), shards: read };
}

/** Plans one shard from the attempt's reads and writes it; undefined when another heal wrote first. */
async function healShard(
    key: string,
    shard: number,
    read: ShardRead,
    items: readonly Item[],
    at: number,
    options: HealOptions,
): Promise<{ shard: ShardHealResult; dueAgainAt?: number } | undefined> {
    const { config } = options;
    const plan = planShardHeal(
        config.mode,
        config.countAttribute,
        read.item,
        items.map((item) => lifeOf(item, config, at)),
        periodOf(at, config.periodMs),
    );
    const stale = plan.stale.slice(0, STALE_PER_WRITE);
    const done = plan.correction === 0 && stale.length === 0 ? true : await writeShard(key, shard, read, plan.correction, stale, options);
    if (!done) {
        return undefined;
    }
    const before = numberOf(read.item, config.countAttribute);
    let again = dueAgain(plan.unsettled, plan.claimsInFlight, config, at);
    if (plan.stale.length > stale.length) {
        again = earliest(again, Date.now());
    }
    return { shard: { shard, before, after: before + plan.correction }, ...(again === undefined ? {} : { dueAgainAt: again }) };
}

/** When a key must be healed again: once its young periods that disagree are old, and its in-flight claims are over. */
function dueAgain(unsettled: readonly number[], claims: number, config: CounterConfig, now: number): number | undefined {
    let at: number | undefined;
    if (unsettled.length > 0) {
        // Period p is old once the clock is in p + 2.
        at = (unsettled.at(-1)! + 2) * config.periodMs;
    }
    if (claims > 0) {
        at = earliest(at, now + settledAfterMs(MAX_CLIENT_DEADLINE_MS));
    }
    return at;
}

/** How the heal sees one item of the key at `now` (runtime/ops/status.ts shows it the same way). */
export function lifeOf(item: Record<string, AttributeValue>, config: CounterConfig, now: number): LifeView {
    const image = item as ItemImage;
    const token = stringOf(item, config.tokenAttribute);
    const time = tokenTime(token);
    const claim = tokenTime(stringOf(item, DELETE_TOKEN(config)));
    return {
        live: isLive(image, config),
        counted: isCounted(image, config),
        period: time === undefined ? undefined : periodOf(time, config.periodMs),
        claimInFlight: claim !== undefined && now < claim + settledAfterMs(MAX_CLIENT_DEADLINE_MS),
    };
}

async function readShard(key: string, shard: number, options: HealOptions): Promise<ShardRead> {
    const { config, dynamodb } = options;
    const response = await dynamodb.send(
        new QueryCommand({
            TableName: config.countersTableName,
            KeyConditionExpression: "#pk = :pk AND #sk = :sk",
            ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey },
            ExpressionAttributeValues: {
                ":pk": bestEffortKey(config, key, shard)[config.partitionKey]!,
                ":sk": bestEffortKey(config, key, shard)[config.sortKey]!,
            },
            ConsistentRead: true,
        }),
    );
    const item = response.Items?.[0];
    return { ...(item === undefined ? {} : { item }), gen: numberOf(item, GEN), releases: numberOf(item, RELEASES) };
}

/** `#name = :value`, or (for 0, which the item may not hold yet) also its absence. */
function stillReads(name: string, value: number): string {
    return value === 0 ? `(attribute_not_exists(${name}) OR ${name} = :${name.slice(1)})` : `${name} = :${name.slice(1)}`;
}

/** W: adds the correction and removes `stale`, if no heal wrote and no fenced release landed since R (`read`). */
async function writeShard(
    key: string,
    shard: number,
    read: ShardRead,
    correction: number,
    stale: ReadonlyArray<{ readonly name: string }>,
    options: HealOptions,
): Promise<boolean> {
    const { config, dynamodb } = options;
    const names: Record<string, string> = { "#c": config.countAttribute, "#g": GEN, "#rel": RELEASES };
    stale.forEach((entry, i) => (names[`#s${i}`] = entry.name));
    // W moves the generation too: a repeat of a W whose answer was lost (a 500 after it committed, which the SDK
    // retries) then fails its condition instead of adding the correction twice.
    const remove = stale.length > 0 ? ` REMOVE ${stale.map((_, i) => `#s${i}`).join(", ")}` : "";
    try {
        await dynamodb.send(
            new UpdateItemCommand({
                TableName: config.countersTableName,
                Key: bestEffortKey(config, key, shard),
                UpdateExpression: `ADD #c :corr, #g :one${remove}`,
                ConditionExpression: `${stillReads("#g", read.gen)} AND ${stillReads("#rel", read.releases)}`,
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: {
                    ":corr": { N: String(correction) },
                    ":g": { N: String(read.gen) },
                    ":rel": { N: String(read.releases) },
                    ":one": { N: "1" },
                },
            }),
        );
        return true;
    } catch (error) {
        if (error instanceof ConditionalCheckFailedException) {
            return false;
        }
        throw error;
    }
}

/** Every item of `key` in the user's table, strongly consistent. */
export async function readItems(key: string, options: HealOptions): Promise<Array<Record<string, AttributeValue>>> {
    const { config, dynamodb } = options;
    const items: Array<Record<string, AttributeValue>> = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await dynamodb.send(
            new QueryCommand({
                TableName: config.tableName,
                KeyConditionExpression: "#pk = :pk",
                ExpressionAttributeNames: { "#pk": config.partitionKey },
                ExpressionAttributeValues: { ":pk": { S: key } },
                ConsistentRead: true,
                ...(start === undefined ? {} : { ExclusiveStartKey: start }),
            }),
        );
        items.push(...(page.Items ?? []).filter((item) => !(stringOf(item, config.sortKey) ?? "").startsWith(config.counterPrefix)));
        start = page.LastEvaluatedKey;
    } while (start !== undefined);
    return items;
}

/** Removes the tombstones of lives no put attempt can reach any more; returns how many went. */
async function removeTombstones(
    key: string,
    items: ReadonlyArray<Record<string, AttributeValue>>,
    now: number,
    options: HealOptions,
): Promise<number> {
    const { config, dynamodb } = options;
    let removed = 0;
    for (const item of items) {
        if (!isSelected(item as ItemImage, config) || !isSoftDeleted(item as ItemImage, config)) {
            continue;
        }
        const token = stringOf(item, config.tokenAttribute) ?? null;
        const deleteToken = stringOf(item, DELETE_TOKEN(config)) ?? null;
        if (tombstoneMayStillBlock(token, deleteToken, now)) {
            continue;
        }
        removed += (await removeTombstone(dynamodb, config, key, { id: stringOf(item, config.sortKey)!, token, deleteToken })) ? 1 : 0;
    }
    return removed;
}

/** When the youngest tombstone left can go. */
function tombstonesDueAt(items: ReadonlyArray<Record<string, AttributeValue>>, config: CounterConfig, now: number): number | undefined {
    let at: number | undefined;
    for (const item of items) {
        const token = stringOf(item, config.tokenAttribute) ?? null;
        const deleteToken = stringOf(item, DELETE_TOKEN(config)) ?? null;
        if (
            isSelected(item as ItemImage, config) &&
            isSoftDeleted(item as ItemImage, config) &&
            tombstoneMayStillBlock(token, deleteToken, now)
        ) {
            at = earliest(at, tombstoneSettlesAt(token, deleteToken));
        }
    }
    return at;
}

async function readDue(key: string, options: HealOptions): Promise<AttributeValue | undefined> {
    const { config, dynamodb } = options;
    const response = await dynamodb.send(
        new QueryCommand({
            TableName: config.countersTableName,
            KeyConditionExpression: "#pk = :pk AND #sk = :sk",
            ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey },
            ExpressionAttributeValues: {
                ":pk": eventualKey(config, key)[config.partitionKey]!,
                ":sk": eventualKey(config, key)[config.sortKey]!,
            },
            ConsistentRead: true,
        }),
    );
    return response.Items?.[0]?.[HEAL_DUE];
}

/** Takes the key off the heal index (if no mark came since `due` was read), or lists it again for `at`. */
async function relist(key: string, due: AttributeValue | undefined, at: number | undefined, options: HealOptions): Promise<void> {
    const { config, dynamodb } = options;
    if (due === undefined && at === undefined) {
        return;
    }
    const names = { "#hh": HEAL_PARTITION, "#hd": HEAL_DUE };
    const values: Record<string, AttributeValue> = due === undefined ? {} : { ":due": due };
    let update = "REMOVE #hh, #hd";
    if (at !== undefined) {
        update = "SET #hh = :shard, #hd = :at";
        values[":at"] = { N: String(Math.round(at)) };
        values[":shard"] = { S: indexShard(config, key) };
    }
    try {
        await dynamodb.send(
            new UpdateItemCommand({
                TableName: config.countersTableName,
                Key: eventualKey(config, key),
                UpdateExpression: update,
                ConditionExpression: due === undefined ? "attribute_not_exists(#hd)" : "#hd = :due",
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: values,
            }),
        );
    } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) {
            throw error;
        }
    }
}

function earliest(a: number | undefined, b: number | undefined): number | undefined {
    return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
