/**
 * The eventual counter's markers: the pure planner the consumer, the redrive and reconciliation share.
 *
 * Invariant kept by every transaction built here:
 *
 *     eventual(key) == number of markers of key whose hc_state is "counted"
 *
 * and each marker's state is the membership implied by the last stream record applied to its item,
 * with hc_seq (the record's zero-padded sequence number) ordering them. Every marker write is
 * conditional on hc_seq being older than the record and on the state the delta was computed from, and
 * commits in one transaction with the delta, so a redelivered, overlapping or out-of-order record can
 * neither count twice nor undo a later one. A removal that finds no marker leaves an "uncounted"
 * tombstone that expires after 48 hours (the stream keeps records 24), so an older record of the same
 * item, redelivered later, cannot count it again.
 *
 * A removed life stays removed (issue 19, item 10a). A client life is named by its creating call's token
 * (hc_life on the marker, `counter_token` on the item), and the client puts that life only with
 * `attribute_not_exists`: the id must be free. So the one legitimate INSERT of a life is its first. An
 * INSERT of life L whose marker holds hc_life = L written by an earlier stream record (hc_life_seq, the
 * sequence number of the record that showed L, below the INSERT's; a backfill writes hc_life without it,
 * and so proves nothing), or whose batch already showed L, comes after L was in the table: a put attempt
 * that DynamoDB applied after the SDK gave up on it (a timeout; a signed request lives five minutes),
 * after the call's repeat created L and a delete, the table's TTL or another writer removed it. The
 * client never repeats a put over a marker that names its life (runtime/client/resource-writes.ts), so
 * no call is waiting for that item. The consumer therefore removes it (a Delete conditional on the item
 * still holding L) in the transaction that writes the marker "uncounted", instead of counting it. Each
 * party:
 * - client: its best-effort write for L was made once for the life that was removed (an increment, or a
 *   strict reservation that the delete released); the late item is no life of it, and nothing moves it;
 * - consumer and redrive: this planner. A counted intent that carries its INSERT is also conditional on
 *   the marker not naming L from before that INSERT, so planning from the records (markers unreadable)
 *   cannot count it either; when the removal's condition fails, the item was replaced or is gone: a
 *   replacement counts as the INSERT said (its later records move it), a gone item stays uncounted;
 * - reconcile (runtime/heal/reconcile.ts): a live item whose marker is "uncounted" with hc_life equal to
 *   its token is removed the same way, never counted;
 * - other writers: an item without the client's token has no life, so their puts count as they always
 *   did; a client item they move back into a selection is a MODIFY, not an INSERT, and counts.
 * A late attempt of L that another writer moves out of the selection in the same batch (an attribute selection) is
 *   removed too, on the same condition: left in the table, a later move back in would be a MODIFY that counts it.
 * What it does not see: a late attempt of L that lands after another life of the same id was also
 *   created and removed (the marker then names that later life), one moved out and back in within one batch (the
 *   batch's last image counts it), and a late item is live from its landing to the consumer's removal of it
 *   (docs/limits.md).
 *
 * Sharded counting (runtime/shards/layout.ts). Under `counterShards` N, an id's marker lives in shard
 * `markerShard(id, N)` of its key, under the counters-table partition key `shardPartitionKey(key, shard)`, and the
 * eventual counter is the sum of N partials, one per shard. A batch is still grouped by key: a group's transaction
 * writes each intent's marker in its own shard and the chunk's net delta to ONE partial, the one the consumer
 * picked for that attempt (at random: `partialShard`). What every transaction keeps is then
 *
 *     sum over s of partial(key, s) == number of markers of key, in every shard, whose hc_state is "counted"
 *
 * (a partial alone means nothing and may be negative). Every record of an id finds its marker in the same shard
 * whatever its batch, so the markers' conditions order an id's records exactly as before. A key's batch costs one
 * partial write per chunk, not one per shard it touches, and two batch groups of one key at once (a
 * parallelization factor above 1, split-for-heat) conflict only when they pick the same partial (1 in N) or hold
 * one id. N = 1 puts every marker and the one partial in shard 0, whose partition key is the key itself: today's
 * items, action for action.
 */
import type { AttributeValue, TransactWriteItem } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import {
    COUNTER_ATTRIBUTES as A,
    MARKER_STATE,
    TOMBSTONE_TTL_SECONDS,
    countersTable,
    eventualSortKey,
    markerSortKey,
    paddedSequence,
    type CounterTableConfig,
} from "../shared/config";
import { markerShard, shardCount, shardPartitionKey } from "../shards/layout";
import { MARKER_MAX_BYTES, droppableLedger, legacyMarks, prunableLegacyNames } from "../shared/strict-ledger";
import { COUNTER_CHUNK_LIMITS, itemSize, withMargin, type ChunkLimits } from "./chunking";
import { classifyRecord } from "./records";

/** DynamoDB's limit on actions in one TransactWriteItems. */
export const MAX_TRANSACTION_ACTIONS = COUNTER_CHUNK_LIMITS.maxActions;

/**
 * The state a marker is expected to hold: read ("counted", "uncounted", "absent") or guessed from a
 * record's OldImage ("notCounted": uncounted or absent).
 */
export type ExpectedState = "counted" | "uncounted" | "absent" | "notCounted";

/** What must become true of one item's marker, decided from the batch's records of it. */
export interface ItemIntent {
    readonly id: string;
    readonly target: "counted" | "uncounted";
    readonly expected: ExpectedState;
    /** The last record's sequence number, zero-padded (hc_seq). */
    readonly seq: string;
    /** Every change record of this item in the batch, in stream order (what a failure reports). */
    readonly sequenceNumbers: readonly string[];
    /** Hard-delete the soft-deleted item too, if it still holds this token. */
    readonly softDelete?: { readonly token: AttributeValue | undefined };
    /** hc_life to write. */
    readonly life?: string;
    /**
     * The INSERT that put the life the intent counts (every later change of the batch kept that life): its
     * token and padded sequence number. A marker naming that life from before it makes the INSERT a late put.
     */
    readonly inserted?: { readonly life: string; readonly seq: string };
    /** A late put of this removed life: remove the item if it still holds it, and leave the marker "uncounted". */
    readonly resurrected?: string;
    /**
     * An INSERT of the batch whose life a later change of the batch ended (a soft delete) or took out of the selection
     * (another writer's move): when the marker showed that life before it, it was a late put another party moved
     * best-effort for (runtime/stream/heal-due.ts). Set only on such an intent, which is how `unresurrect` knows to
     * keep the batch's target for it.
     */
    readonly insertedBefore?: { readonly life: string; readonly seq: string };
    /** The item the intent ends on was put within the batch (an INSERT of it, whoever wrote it): a life of its own. */
    readonly putInBatch?: true;
    /** A late put of the item was seen, whatever the intent's target: its key is due for a heal (heal-due.ts). */
    readonly lateSeen?: true;
    /** Epoch ms of the last record (its approximate creation time, whole seconds), when the record has one. */
    readonly observedAt?: number;
    /** The marker's size as read (undefined: not read, or no marker: taken at its bound). Transactions are sized from it. */
    readonly markerBytes?: number;
    /** Marks of earlier versions the marker write removes (runtime/shared/strict-ledger.ts, `prunableLegacyMarks`). */
    readonly prune?: readonly string[];
    /** Ledger values the marker write removes, on the condition that they still hold them (strict-ledger.ts). */
    readonly dropLedger?: { readonly released?: string; readonly pending?: string };
}

/** All the work a batch holds for one counter key. */
export interface GroupPlan {
    /** The user's key (the partition key of its items in the user's table). */
    readonly counterKey: string;
    readonly items: readonly ItemIntent[];
}

/** The partial a transaction of a sharded key adds its delta to: any shard keeps the sum; a random one spreads them. */
export function partialShard(shards: number, random: () => number): number {
    return shards <= 1 ? 0 : Math.min(shards - 1, Math.floor(random() * shards));
}

export interface PoisonRecord {
    readonly record: DynamoDBRecord;
    readonly field: string;
    readonly problem: string;
    readonly sequenceNumber?: string;
}

export interface BatchPlan {
    readonly groups: readonly GroupPlan[];
    readonly ignored: number;
    readonly poison: readonly PoisonRecord[];
}

/**
 * Groups a batch's membership changes by counter key and collapses each item's changes to one intent:
 * the last change decides the target (and whether the item must be hard-deleted), the first change's
 * OldImage is the guess of the marker's state. The guess only sets the delta; the marker's condition
 * checks it.
 */
export function planBatch(records: readonly DynamoDBRecord[], config: CounterTableConfig): BatchPlan {
    /** Per key, in the order the batch first shows them: the intents by id. */
    const groups = new Map<string, { counterKey: string; items: Map<string, ItemIntent & { again?: boolean }> }>();
    /** Per item, the lives the batch's earlier changes of it showed. */
    const lives = new Map<string, Set<string>>();
    const poison: PoisonRecord[] = [];
    let ignored = 0;
    /** Sequence numbers planned: a record is one change, however many times a delivery holds it. */
    const planned = new Set<string>();
    for (const record of records) {
        const sequenceNumber = record?.dynamodb?.SequenceNumber;
        if (typeof sequenceNumber === "string") {
            // A second copy of a record is no second change: taken for one, the copy of an INSERT would
            // look like a life shown before its INSERT (a late put), and the live item would be removed.
            if (planned.has(sequenceNumber)) {
                ignored++;
                continue;
            }
            planned.add(sequenceNumber);
        }
        const classified = classifyRecord(record, config);
        if (classified.type === "ignored") {
            ignored++;
            continue;
        }
        if (classified.type === "poison") {
            poison.push({ record, field: classified.field, problem: classified.problem, sequenceNumber: classified.sequenceNumber });
            continue;
        }
        const change = classified.change;
        let group = groups.get(change.counterKey);
        if (!group) {
            group = { counterKey: change.counterKey, items: new Map() };
            groups.set(change.counterKey, group);
        }
        const items = group.items;
        const earlier = items.get(change.id);
        const seq = paddedSequence(change.sequenceNumber);
        let seenLives = lives.get(`${change.counterKey}\u0000${change.id}`);
        if (seenLives === undefined) {
            seenLives = new Set();
            lives.set(`${change.counterKey}\u0000${change.id}`, seenLives);
        }
        // The INSERT of the life the item holds now, while every later change keeps that life.
        let inserted: ItemIntent["inserted"];
        let again = false;
        if (change.insert && change.life !== undefined) {
            inserted = { life: change.life, seq };
            again = seenLives.has(change.life);
        } else if (earlier?.inserted !== undefined && change.life === earlier.inserted.life && change.after) {
            inserted = earlier.inserted;
            again = earlier.again === true;
        }
        if (change.life !== undefined) {
            seenLives.add(change.life);
        }
        // Every change after an INSERT keeps that item, or removes it (and a later INSERT puts another).
        const putInBatch = change.insert === true || earlier?.putInBatch === true;
        // An INSERT of a life the batch showed before is a late put, whatever the item's later changes do with it.
        const lateSeen = earlier?.lateSeen === true || (change.insert === true && again);
        // The INSERT a later change ended: kept to ask the marker whether it was late (refineIntent).
        const insertedBefore = inserted === undefined ? (earlier?.inserted ?? earlier?.insertedBefore) : undefined;
        // Keep the item at its first position: its earliest record is what a failure must report.
        const intent: ItemIntent & { again?: boolean } = {
            id: change.id,
            target: change.after ? "counted" : "uncounted",
            expected: earlier?.expected ?? (change.before ? "counted" : "notCounted"),
            seq,
            sequenceNumbers: [...(earlier?.sequenceNumbers ?? []), change.sequenceNumber],
            ...(change.softDelete ? { softDelete: change.softDelete } : {}),
            ...(change.life !== undefined ? { life: change.life } : {}),
            ...(inserted !== undefined ? { inserted, again } : {}),
            ...(insertedBefore !== undefined ? { insertedBefore } : {}),
            ...(lateSeen ? { lateSeen: true as const } : {}),
            ...(putInBatch ? { putInBatch: true as const } : {}),
            ...(change.approximateCreationTime !== undefined ? { observedAt: change.approximateCreationTime * 1000 } : {}),
        };
        items.set(change.id, intent);
    }
    return {
        ignored,
        poison,
        groups: [...groups.values()].map(({ counterKey, items }) => ({
            counterKey,
            // The batch itself showed the life before its INSERT (a REMOVE of it, say): a late put.
            items: [...items.values()].map(({ again, ...intent }) => (again && intent.target === "counted" ? resurrect(intent) : intent)),
        })),
    };
}

/** The intent of a late put of a removed life: remove the item if it still holds the life; count nothing. */
export function resurrect(intent: ItemIntent): ItemIntent {
    const { inserted, softDelete: _none, ...rest } = intent;
    return { ...rest, target: "uncounted", resurrected: inserted!.life, life: inserted!.life };
}

/**
 * The intent again after the removal of a late put found the item no longer holding the life: gone (removed
 * since; its records, if any, find it uncounted) stays uncounted; replaced by another item counts as the
 * INSERT said, since later records move the replacement.
 */
export function unresurrect(intent: ItemIntent, itemPresent: boolean): ItemIntent {
    const { resurrected: _late, ...rest } = intent;
    // A late put the batch took out of the selection (refineIntent) keeps the batch's target: its later records move it.
    return itemPresent && rest.insertedBefore === undefined ? { ...rest, target: "counted" } : rest;
}

/** A marker as read (the attributes the planner needs). */
export interface MarkerRead {
    readonly state?: string;
    readonly seq?: string;
    readonly life?: string;
    /** hc_life_seq: the record that wrote hc_life (absent: a backfill wrote it, or no life). */
    readonly lifeSeq?: string;
    /** The marker's size (what a transaction that writes it carries), when the whole item was read. */
    readonly bytes?: number;
    /** The names of its marks of earlier versions (`hc_repeated_<token>`), when the whole item was read. */
    readonly legacy?: readonly string[];
    /** hc_released and hc_pending (runtime/shared/strict-ledger.ts), when the whole item was read. */
    readonly released?: string;
    readonly pending?: string;
}

/** Reads a marker's state and hc_seq from a stored counter item (undefined: no marker). */
export function markerRead(item: Record<string, AttributeValue> | undefined): MarkerRead | undefined {
    if (item === undefined) {
        return undefined;
    }
    return {
        state: item[A.state]?.S,
        seq: item[A.seq]?.S,
        life: item[A.life]?.S,
        lifeSeq: item[A.lifeSeq]?.S,
        bytes: itemSize(item),
        legacy: legacyMarks(item),
        released: item[A.released]?.S,
        pending: item[A.pending]?.S,
    };
}

/**
 * The intent with what its marker weighs and the marks of earlier versions its write removes: those of lives other
 * than the one its last record shows, sealed at that record's time (runtime/shared/strict-ledger.ts).
 */
function withMarker(intent: ItemIntent, marker: MarkerRead | undefined): ItemIntent {
    const at = intent.observedAt;
    const prune = at === undefined || marker?.legacy === undefined ? [] : prunableLegacyNames(marker.legacy, intent.life, at);
    const drop = at === undefined || marker === undefined ? {} : droppableLedger(marker, intent.life, at);
    const { prune: _stale, markerBytes: _read, dropLedger: _dropped, ...rest } = intent;
    return {
        ...rest,
        ...(marker?.bytes !== undefined ? { markerBytes: marker.bytes } : {}),
        ...(prune.length > 0 ? { prune } : {}),
        ...(Object.keys(drop).length > 0 ? { dropLedger: drop } : {}),
    };
}

/** What to do with an intent once its marker is known. */
export type Refinement =
    | { readonly action: "done"; readonly why: string }
    | { readonly action: "apply"; readonly intent: ItemIntent }
    | { readonly action: "poison"; readonly field: string; readonly problem: string };

/**
 * Decides from a marker's current state (undefined: none) what an intent still has to do: nothing when
 * a record as new or newer was applied already; otherwise the same target from the marker's real state.
 * This is both the cheap skip before a transaction and the resolution after a failed condition.
 */
export function refineIntent(intent: ItemIntent, marker: MarkerRead | undefined): Refinement {
    if (marker === undefined || (marker.state === undefined && marker.seq === undefined)) {
        return { action: "apply", intent: withMarker({ ...intent, expected: "absent" }, marker) };
    }
    if (marker.seq !== undefined && marker.seq >= intent.seq) {
        return { action: "done", why: "a record as new or newer was applied" };
    }
    if (marker.state === MARKER_STATE.counted || marker.state === MARKER_STATE.uncounted) {
        const inserted = intent.inserted;
        // A record before the INSERT showed the inserted life: that life was in the table before (header).
        const late =
            intent.target === "counted" &&
            inserted !== undefined &&
            marker.life === inserted.life &&
            marker.lifeSeq !== undefined &&
            marker.lifeSeq < inserted.seq;
        // A late put that a later change of the batch took out of the selection: its key is due for a heal. A soft
        // delete ended it (the item is removed as any soft-deleted one); a move out of the selection by another writer
        // left it in the table, holding the life: it is removed as a late put is, so that a move back in cannot count it.
        const before = intent.insertedBefore;
        const endedLate =
            before !== undefined && marker.life === before.life && marker.lifeSeq !== undefined && marker.lifeSeq < before.seq;
        const movedOut = endedLate && intent.target === "uncounted" && intent.softDelete === undefined && intent.life === before.life;
        const applied = {
            ...(late ? resurrect(intent) : movedOut ? { ...intent, resurrected: before.life } : intent),
            expected: marker.state,
        };
        return { action: "apply", intent: withMarker(endedLate ? { ...applied, lateSeen: true } : applied, marker) };
    }
    return {
        action: "poison",
        field: A.state,
        problem: `must be "counted" or "uncounted" on the marker (found ${JSON.stringify(marker.state ?? null)})`,
    };
}

/** The net change to the eventual counter if the intent commits as planned. */
export function intentDelta(intent: ItemIntent): number {
    const wasCounted = intent.expected === "counted";
    if (intent.target === "counted") {
        return wasCounted ? 0 : 1;
    }
    return wasCounted ? -1 : 0;
}

/** Actions an intent takes in a transaction: its marker, and the hard delete of a soft-deleted item. */
export function actionsPerIntent(intent: ItemIntent): number {
    return removesItem(intent) ? 2 : 1;
}

/** The intent also deletes the user's item: a soft-deleted one, or a late put of a removed life. */
export function removesItem(intent: ItemIntent): boolean {
    return intent.softDelete !== undefined || intent.resurrected !== undefined;
}

/**
 * Upper bound of a marker item's size when it was not read (runtime/shared/strict-ledger.ts states and argues it):
 * the largest keys DynamoDB allows (2 KB partition key, 1 KB sort key under the prefix) and the marker's fixed
 * attributes. A sharded key's partition key carries its shard's suffix, and stays within the same 2 KB: a key whose
 * suffix would pass it is refused (`shardedKeyProblem`, records.ts), so the bound holds for every shard, and so does
 * the counter item's in COUNTER_CHUNK_LIMITS.
 */
export { MARKER_MAX_BYTES };

/** The most a marker write adds to a marker (hc_state, hc_seq, hc_life_seq, hc_expires_at), hc_life's value aside. */
export const MARKER_WRITE_MAX_BYTES = 256;

/**
 * What a marker weighs in a transaction that writes it: DynamoDB counts the larger of the item before and after the
 * write, at most its size as read plus what the write adds; a marker not read is taken at its bound.
 */
export function markerTransactionBytes(intent: ItemIntent): number {
    const life = intent.life === undefined ? 0 : Buffer.byteLength(intent.life, "utf8");
    return (intent.markerBytes ?? MARKER_MAX_BYTES) + MARKER_WRITE_MAX_BYTES + life;
}

/**
 * Splits a group's intents into transactions DynamoDB accepts (the only chunking decision of the
 * consumer): at most 100 actions with the counter's (a hard delete costs a second action), and items
 * within 4 MB by runtime/stream/chunking.ts's estimate: each marker as read (`markerTransactionBytes`), and
 * `sizeOf` giving the hard-deleted item's size.
 */
export function chunkIntents(
    items: readonly ItemIntent[],
    sizeOf: (item: ItemIntent) => number = () => 0,
    limits: ChunkLimits = COUNTER_CHUNK_LIMITS,
): ItemIntent[][] {
    const budget = limits.maxBytes - limits.reservedBytes;
    const chunks: ItemIntent[][] = [];
    let current: ItemIntent[] = [];
    let actions = limits.reservedActions;
    let bytes = 0;
    for (const item of items) {
        const cost = actionsPerIntent(item);
        const size = withMargin(markerTransactionBytes(item) + (removesItem(item) ? sizeOf(item) : 0), limits);
        if (current.length > 0 && (actions + cost > limits.maxActions || bytes + size > budget)) {
            chunks.push(current);
            current = [];
            actions = limits.reservedActions;
            bytes = 0;
        }
        current.push(item);
        actions += cost;
        bytes += size;
    }
    if (current.length > 0) {
        chunks.push(current);
    }
    return chunks;
}

/** Where each intent's actions sit in a transaction (to read its cancellation reasons). */
export interface ActionIndex {
    readonly marker: number;
    /** The delete of the user's item (a soft-deleted item, or a late put's). */
    readonly softDelete?: number;
}

/**
 * Builds the TransactWriteItems actions of one chunk: the counter's delta first (when not zero), then
 * per intent its marker and, for a soft delete, the hard delete of the user's item.
 *
 * The delta goes to the eventual partial of shard `partial` (0 when unsharded) and each marker to its own shard's
 * partition of the counters table (`markerShard`); the user's items are deleted under `counterKey` itself.
 */
export function transactionActions(
    config: CounterTableConfig,
    counterKey: string,
    items: readonly ItemIntent[],
    nowMs: number,
    partial = 0,
): { actions: TransactWriteItem[]; index: ActionIndex[] } {
    const counters = countersTable(config);
    const shards = shardCount(config);
    if (!Number.isInteger(partial) || partial < 0 || partial >= shards) {
        throw new RangeError(`a chunk of key ${JSON.stringify(counterKey)} adds to partial ${partial} of ${shards}`);
    }
    /** A counter item of shard `shard` of the key. */
    const counterItem = (shard: number, sk: string): Record<string, AttributeValue> => ({
        [config.partitionKey]: { S: shardPartitionKey(counterKey, shard) },
        [config.sortKey]: { S: sk },
    });
    /** A user's item: under the user's own key. */
    const userItem = (sk: string): Record<string, AttributeValue> => ({
        [config.partitionKey]: { S: counterKey },
        [config.sortKey]: { S: sk },
    });
    const delta = items.reduce((sum, item) => sum + intentDelta(item), 0);
    const actions: TransactWriteItem[] = [];
    if (delta !== 0) {
        actions.push({
            Update: {
                TableName: counters,
                Key: counterItem(partial, eventualSortKey(config)),
                UpdateExpression: "ADD #count :delta",
                ExpressionAttributeNames: { "#count": config.countAttribute },
                ExpressionAttributeValues: { ":delta": { N: String(delta) } },
            },
        });
    }
    const index: ActionIndex[] = [];
    for (const item of items) {
        const marker = actions.length;
        actions.push({
            Update: markerUpdate(counters, counterItem(markerShard(item.id, shards), markerSortKey(config, item.id)), item, nowMs),
        });
        let softDelete: number | undefined;
        if (item.resurrected !== undefined) {
            softDelete = actions.length;
            actions.push({
                Delete: {
                    TableName: config.tableName,
                    Key: userItem(item.id),
                    ConditionExpression: "#token = :token",
                    ExpressionAttributeNames: { "#token": config.tokenAttribute },
                    ExpressionAttributeValues: { ":token": { S: item.resurrected } },
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                },
            });
        } else if (item.softDelete) {
            softDelete = actions.length;
            const token = item.softDelete.token;
            actions.push({
                Delete: {
                    TableName: config.tableName,
                    Key: userItem(item.id),
                    ConditionExpression:
                        token === undefined ? "#deleted = :true AND attribute_not_exists(#token)" : "#deleted = :true AND #token = :token",
                    ExpressionAttributeNames: { "#deleted": config.deletedAttribute, "#token": config.tokenAttribute },
                    ExpressionAttributeValues: { ":true": { BOOL: true }, ...(token === undefined ? {} : { ":token": token }) },
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                },
            });
        }
        index.push(softDelete === undefined ? { marker } : { marker, softDelete });
    }
    return { actions, index };
}

function markerUpdate(
    counters: string,
    key: Record<string, AttributeValue>,
    item: ItemIntent,
    nowMs: number,
): NonNullable<TransactWriteItem["Update"]> {
    const names: Record<string, string> = { "#state": A.state, "#seq": A.seq, "#exp": A.expiresAt };
    const values: Record<string, AttributeValue> = { ":target": { S: item.target }, ":seq": { S: item.seq } };
    const set = ["#state = :target", "#seq = :seq"];
    const removed: string[] = [];
    if (item.target === "uncounted") {
        set.push("#exp = :exp");
        values[":exp"] = { N: String(Math.floor(nowMs / 1000) + TOMBSTONE_TTL_SECONDS) };
    } else {
        // A counted marker must never expire.
        removed.push("#exp");
        if (item.expected !== "counted" || item.putInBatch === true) {
            // A life the marker did not count before (counted from uncounted, or from a state the records guessed when
            // the markers could not be read), or an item put within the batch (its removal and the put in one batch leave
            // the marker counted): a strict backfill's flag is about an earlier life. Its unit was given back by that
            // life's delete, or is held until a heal. Left on, the flag would tell the next backfill that best-effort
            // holds a unit for this life, and it would give none: best-effort below the items, with no mark. Dropped,
            // the worst case is a backfill that ran ahead of the id's records and flagged this very item: its unit stays
            // without a flag, best-effort one above on the safe side, and that backfill put the key on the heal index.
            names["#be"] = A.beCounted;
            names["#beLife"] = A.beLife;
            removed.push("#be", "#beLife");
        }
    }
    // Marks of earlier versions no attempt of their lives can need any more (runtime/shared/strict-ledger.ts).
    (item.prune ?? []).forEach((name, i) => {
        names[`#prune${i}`] = name;
        removed.push(`#prune${i}`);
    });
    // Ledger values whose lives are sealed, on the condition that no client moved them since the read (strict-ledger.ts).
    let ledger = "";
    for (const [which, value] of Object.entries(item.dropLedger ?? {})) {
        names[`#${which}`] = which === "released" ? A.released : A.pending;
        values[`:${which}`] = { S: value };
        removed.push(`#${which}`);
        ledger += ` AND #${which} = :${which}`;
    }
    const remove = removed.length > 0 ? ` REMOVE ${removed.join(", ")}` : "";
    if (item.life !== undefined) {
        set.push("#life = :life", "#lifeSeq = :seq");
        names["#life"] = A.life;
        names["#lifeSeq"] = A.lifeSeq;
        values[":life"] = { S: item.life };
    }
    // Counting an INSERT: only if the marker does not name its life from an earlier record (a late put; header).
    let notLate = "";
    if (item.target === "counted" && item.inserted !== undefined) {
        names["#life"] = A.life;
        names["#lifeSeq"] = A.lifeSeq;
        values[":insertedLife"] = { S: item.inserted.life };
        values[":insertedSeq"] = { S: item.inserted.seq };
        notLate = " AND (attribute_not_exists(#lifeSeq) OR #life <> :insertedLife OR #lifeSeq >= :insertedSeq)";
    }
    let expected: string;
    switch (item.expected) {
        case "counted":
            expected = "#state = :counted";
            values[":counted"] = { S: MARKER_STATE.counted };
            break;
        case "uncounted":
            expected = "#state = :uncounted";
            values[":uncounted"] = { S: MARKER_STATE.uncounted };
            break;
        case "absent":
            expected = "attribute_not_exists(#state)";
            break;
        case "notCounted":
            expected = "(attribute_not_exists(#state) OR #state = :uncounted)";
            values[":uncounted"] = { S: MARKER_STATE.uncounted };
            break;
    }
    return {
        TableName: counters,
        Key: key,
        UpdateExpression: `SET ${set.join(", ")}${remove}`,
        ConditionExpression: `(attribute_not_exists(#seq) OR #seq < :seq) AND ${expected}${notLate}${ledger}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    };
}
