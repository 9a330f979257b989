/**
 * Reconciliation: makes a key's markers agree with its items, from the tables themselves, for what the
 * stream can no longer deliver (records that expired, or items written before the counter was attached).
 *
 * Invariant (markers.ts): eventual(key) == markers of key with hc_state "counted". Reconciliation keeps
 * it, since each of its transactions moves the counter and the markers it changes together, and it makes
 * each marker match its item's membership now:
 * - a live item with no "counted" marker is counted: its marker is set "counted" on the condition that it
 *   still holds the state and hc_seq that were read, and the item is still live (ConditionCheck);
 * - a "counted" marker whose item is gone, no longer selected or soft-deleted is uncounted (a tombstone
 *   that expires), on the condition that the item is still not live; a soft-deleted item is hard-deleted
 *   in the same transaction, on its token as read.
 * - a live item whose marker is "uncounted" and names the item's own life (hc_life = its client token, written
 *   by a stream record: hc_life_seq) is a late put of a removed life (markers.ts, "A removed life stays removed"): it is removed, on its token,
 *   and never counted. Not under an attribute selection: there another writer can move a client item out
 *   of the selection and back in, which leaves the same marker beside a legitimate item. Reconcile then
 *   counts it, and if it is a late put, the consumer's INSERT record finds the life named before it and
 *   removes and uncounts it.
 * It never advances hc_seq, so any stream record not applied yet still applies after it, from the state
 * it finds. Safe to run while the consumer runs; running it twice changes nothing.
 *
 * A sharded key (`counterShards` N > 1, runtime/shards/layout.ts) is reconciled shard by shard: an id's marker lives
 * in shard `markerShard(id, N)`, and the invariant is over the key (the sum of its N eventual partials == its counted
 * markers, every shard's: the consumer adds each transaction's delta to a partial of its choice, runtime/stream/
 * markers.ts). Each round reads the key's items once and every shard's markers; shard s's plan compares the items
 * whose marker lives in s with the markers of s, and each of its transactions moves s's markers and adds its delta to
 * s's partial (with the user items' conditions, under the key itself): a transaction that moves the markers and one
 * partial by the same delta keeps the sum, whichever partial it is, so every argument above holds for the key. A
 * "counted" marker found outside its id's shard (no party writes one there; the counting it holds is in the sum, not
 * the item's, whose own marker lives at home) is uncounted in its shard on its state and hc_seq alone: the item is
 * counted, or not, by the marker of its home. Rounds, deadline and transaction sizes are bounded as for an unsharded
 * key; a round costs N marker Queries instead of one.
 */
import {
    TransactWriteItemsCommand,
    TransactionCanceledException,
    type AttributeValue,
    type DynamoDBClient,
    type TransactWriteItem,
} from "@aws-sdk/client-dynamodb";
import {
    COUNTER_ATTRIBUTES as A,
    MARKER_STATE,
    TOMBSTONE_TTL_SECONDS,
    ZERO_SEQ,
    countersTable,
    eventualSortKey,
    markerId,
    markerSortKey,
    type CounterTableConfig,
    type CounterTableLayout,
} from "../shared/config";
import { describeError, isRetryable } from "../shared/aws-errors";
import { markerKeyFits, PARTITION_KEY_MAX_BYTES } from "../shared/key-limits";
import { InvalidArgumentError } from "../shared/errors";
import type { FatalQueue } from "../stream/fatal";
import { COUNTER_CHUNK_LIMITS, itemSize, planChunks, type ChunkLimits } from "../stream/chunking";
import { MARKER_MAX_BYTES, MARKER_WRITE_MAX_BYTES, MAX_TRANSACTION_ACTIONS } from "../stream/markers";
import { queryPartition } from "./partition";
import { isLive, isSelected, isSoftDeleted, liveConditionExpression, notLiveConditionExpression } from "../shared/selection";
import { jsonLogger, type LineSink } from "../shared/telemetry";
import { markerShard, shardCount, shardedKeyProblem, shardPartitionKey, shardPartitionKeys } from "../shards/layout";
import { pause } from "../shared/pauses";

export interface ReconcileOptions {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    /** Where markers that cannot be read (an hc_state that is neither state) are reported. */
    readonly fatal: FatalQueue;
    readonly sink?: LineSink;
    /** How long to keep retrying contention or throttling before answering `incomplete`. @default 60000 */
    readonly timeoutMs?: number;
}

export interface ReconcileResult {
    readonly key: string;
    /** Items to count and markers to uncount found on the first read. */
    readonly found: number;
    /** Of those, committed now. */
    readonly counted: number;
    /** Of those, settled by the consumer (or another reconciliation) meanwhile. */
    readonly alreadySettled: number;
    /** True when something could not be committed; run it again. */
    readonly incomplete: boolean;
    /** Ids of live or deleted items whose marker key cannot fit (key-limits.ts): never counted. Absent when none. */
    readonly unmarkable?: readonly string[];
}

/** One correction of a key: a marker to set "counted" or "uncounted", with what it was read as. */
export interface ReconcileAction {
    /** count: +1; uncount: -1; purge: hard-delete a soft-deleted item no marker counts (no marker write). */
    readonly kind: "count" | "uncount" | "purge";
    readonly id: string;
    /** The marker's state and hc_seq as read (undefined: no marker). */
    readonly markerState?: string;
    readonly markerSeq?: string;
    /**
     * Uncount of a soft-deleted item: hard-delete it, if it still holds this token (undefined: it had none).
     * `late`: the purge of a live late put of a removed life, on its token alone.
     */
    readonly hardDelete?: { readonly token: AttributeValue | undefined; readonly late?: true };
    /**
     * Uncount of a "counted" marker outside its id's shard (a sharded key): its shard's counting is undone on the
     * marker's state and hc_seq alone, whatever the item (whose own marker lives in its home shard).
     */
    readonly misplaced?: true;
}

export interface ReconcilePlan {
    readonly actions: readonly ReconcileAction[];
    /** Markers whose hc_state is unreadable: left alone and reported. */
    readonly badMarkers: ReadonlyArray<Record<string, AttributeValue>>;
    /** Ids of items whose marker key cannot fit (key-limits.ts): never counted, reported. */
    readonly unmarkable: readonly string[];
}

/** Which shard of a sharded key a plan is for. */
export interface ReconcileShard {
    readonly shard: number;
    /** The key's shard count. */
    readonly shards: number;
}

/**
 * Pure planner: compares a key's items (user table) with its markers (counters table). Counter items
 * among `items` (same-table placement) are skipped. With `at`, plans shard `at.shard` of a sharded key: `markers`
 * are that shard's, and only the items whose marker lives there are compared with them.
 */
export function planReconcile(
    items: ReadonlyArray<Record<string, AttributeValue>>,
    markers: ReadonlyArray<Record<string, AttributeValue>>,
    layout: CounterTableLayout,
    at: ReconcileShard = { shard: 0, shards: 1 },
): ReconcilePlan {
    const here = (id: string): boolean => markerShard(id, at.shards) === at.shard;
    const byId = new Map<string, Record<string, AttributeValue>>();
    const unmarkable: string[] = [];
    for (const item of items) {
        const sk = item[layout.sortKey]?.S;
        if (sk !== undefined && !sk.startsWith(layout.counterPrefix) && here(sk)) {
            if (markerKeyFits(layout, sk)) {
                byId.set(sk, item);
            } else {
                unmarkable.push(sk);
            }
        }
    }
    const markerById = new Map<string, Record<string, AttributeValue>>();
    const badMarkers: Array<Record<string, AttributeValue>> = [];
    const actions: ReconcileAction[] = [];
    for (const marker of markers) {
        const id = markerId(layout, marker[layout.sortKey]?.S ?? "");
        if (id === undefined) {
            continue;
        }
        const state = marker[A.state]?.S;
        // A marker no record has reached holds only a client's mark (strict-ledger.ts): it is no marker yet.
        if (marker[A.state] === undefined && marker[A.seq] === undefined) {
            continue;
        }
        if (state !== MARKER_STATE.counted && state !== MARKER_STATE.uncounted) {
            badMarkers.push(marker);
            continue;
        }
        if (!here(id)) {
            if (state === MARKER_STATE.counted) {
                actions.push({ kind: "uncount", id, markerState: state, markerSeq: marker[A.seq]?.S, misplaced: true });
            }
            continue;
        }
        markerById.set(id, marker);
    }
    const badIds = new Set(badMarkers.map((m) => markerId(layout, m[layout.sortKey]?.S ?? "")));
    for (const [id, item] of byId) {
        const marker = markerById.get(id);
        const state = marker?.[A.state]?.S;
        if (badIds.has(id) || state === MARKER_STATE.counted) {
            continue;
        }
        const token = item[layout.tokenAttribute];
        // hc_life_seq: a stream record showed the life (a backfill's hc_life proves nothing; markers.ts).
        const lateKnown =
            layout.selection.kind !== "attribute" &&
            token?.S !== undefined &&
            marker?.[A.life]?.S === token.S &&
            marker[A.lifeSeq]?.S !== undefined;
        if (isLive(item, layout) && lateKnown && state === MARKER_STATE.uncounted) {
            // Its life was counted, left the table and was uncounted: this is a late put of it, never counted.
            actions.push({ kind: "purge", id, hardDelete: { token, late: true } });
        } else if (isLive(item, layout)) {
            actions.push({ kind: "count", id, markerState: state, markerSeq: marker?.[A.seq]?.S });
        } else if (isSelected(item, layout) && isSoftDeleted(item, layout)) {
            // Soft-deleted and not counted: only the hard delete the consumer would have made is left.
            actions.push({ kind: "purge", id, hardDelete: { token: item[layout.tokenAttribute] } });
        }
    }
    for (const [id, marker] of markerById) {
        if (marker[A.state]?.S !== MARKER_STATE.counted) {
            continue;
        }
        const item = byId.get(id);
        if (item !== undefined && isLive(item, layout)) {
            continue;
        }
        const softDeleted = item !== undefined && isSoftDeleted(item, layout);
        actions.push({
            kind: "uncount",
            id,
            markerState: MARKER_STATE.counted,
            markerSeq: marker[A.seq]?.S,
            ...(softDeleted ? { hardDelete: { token: item[layout.tokenAttribute] } } : {}),
        });
    }
    return { actions, badMarkers, unmarkable };
}

/**
 * The transaction actions of one chunk of a plan: the counter's delta, then two actions per correction (one for a
 * misplaced marker). `shard`: the shard of the key whose partial and markers it writes (the user's items stay under the key).
 */
export function reconcileTransaction(
    config: CounterTableConfig,
    key: string,
    actions: readonly ReconcileAction[],
    nowMs: number,
    shard = 0,
): TransactWriteItem[] {
    const counters = countersTable(config);
    const partitionKey = shardPartitionKey(key, shard);
    const counterKey = (sk: string): Record<string, AttributeValue> => ({
        [config.partitionKey]: { S: partitionKey },
        [config.sortKey]: { S: sk },
    });
    const keyOf = (sk: string): Record<string, AttributeValue> => ({ [config.partitionKey]: { S: key }, [config.sortKey]: { S: sk } });
    const delta = actions.reduce((sum, a) => sum + (a.kind === "count" ? 1 : a.kind === "uncount" ? -1 : 0), 0);
    const out: TransactWriteItem[] = [];
    if (delta !== 0) {
        out.push({
            Update: {
                TableName: counters,
                Key: counterKey(eventualSortKey(config)),
                UpdateExpression: "ADD #count :delta",
                ExpressionAttributeNames: { "#count": config.countAttribute },
                ExpressionAttributeValues: { ":delta": { N: String(delta) } },
            },
        });
    }
    const live = liveConditionExpression(config);
    const notLive = notLiveConditionExpression(config);
    for (const a of actions) {
        if (a.kind !== "purge") {
            out.push({ Update: reconcileMarkerUpdate(counters, counterKey(markerSortKey(config, a.id)), a, nowMs) });
        }
        if (a.misplaced) {
            continue;
        }
        if (a.hardDelete) {
            const token = a.hardDelete.token;
            out.push({
                Delete: {
                    TableName: config.tableName,
                    Key: keyOf(a.id),
                    ...(a.hardDelete.late
                        ? {
                              ConditionExpression: "#token = :token",
                              ExpressionAttributeNames: { "#token": config.tokenAttribute },
                              ExpressionAttributeValues: { ":token": token! },
                          }
                        : {
                              ConditionExpression:
                                  token === undefined
                                      ? "#deleted = :true AND attribute_not_exists(#token)"
                                      : "#deleted = :true AND #token = :token",
                              ExpressionAttributeNames: { "#deleted": config.deletedAttribute, "#token": config.tokenAttribute },
                              ExpressionAttributeValues: { ":true": { BOOL: true }, ...(token === undefined ? {} : { ":token": token }) },
                          }),
                },
            });
        } else {
            const condition = a.kind === "count" ? live : notLive;
            out.push({
                ConditionCheck: {
                    TableName: config.tableName,
                    Key: keyOf(a.id),
                    ConditionExpression: condition.expression,
                    ExpressionAttributeNames: condition.names,
                    ...(Object.keys(condition.values).length > 0 ? { ExpressionAttributeValues: condition.values } : {}),
                },
            });
        }
    }
    return out;
}

function reconcileMarkerUpdate(
    counters: string,
    key: Record<string, AttributeValue>,
    a: ReconcileAction,
    nowMs: number,
): NonNullable<TransactWriteItem["Update"]> {
    const names: Record<string, string> = { "#state": A.state, "#seq": A.seq, "#exp": A.expiresAt };
    const values: Record<string, AttributeValue> = { ":target": { S: a.kind === "count" ? MARKER_STATE.counted : MARKER_STATE.uncounted } };
    const conditions: string[] = [];
    if (a.markerState === undefined) {
        conditions.push("attribute_not_exists(#state)");
    } else {
        conditions.push("#state = :readState");
        values[":readState"] = { S: a.markerState };
    }
    if (a.markerSeq === undefined) {
        conditions.push("attribute_not_exists(#seq)");
    } else {
        conditions.push("#seq = :readSeq");
        values[":readSeq"] = { S: a.markerSeq };
    }
    // A marker this writes keeps its hc_seq (or gets ZERO_SEQ): every stream record still applies after it.
    values[":seq"] = { S: a.markerSeq ?? ZERO_SEQ };
    let update = "SET #state = :target, #seq = :seq";
    if (a.kind === "count") {
        // Counted from uncounted: a backfill flag is about the life the marker counted before, and is dropped (markers.ts).
        update += a.markerState === MARKER_STATE.uncounted ? " REMOVE #exp, #be, #beLife" : " REMOVE #exp";
        if (a.markerState === MARKER_STATE.uncounted) {
            names["#be"] = A.beCounted;
            names["#beLife"] = A.beLife;
        }
    } else {
        update += ", #exp = :exp";
        values[":exp"] = { N: String(Math.floor(nowMs / 1000) + TOMBSTONE_TTL_SECONDS) };
    }
    return {
        TableName: counters,
        Key: key,
        UpdateExpression: update,
        ConditionExpression: conditions.join(" AND "),
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
    };
}

/**
 * Corrections per transaction: two actions each (a purge one), one slot kept for the counter, and the
 * items they touch within 4 MB by runtime/stream/chunking.ts's estimate (the user's item as read, plus the marker).
 */
const RECONCILE_CHUNK_LIMITS: ChunkLimits = {
    ...COUNTER_CHUNK_LIMITS,
    maxActions: Math.floor((MAX_TRANSACTION_ACTIONS - 1) / 2) + 1,
};
const MAX_ROUNDS = 20;

/**
 * Settles every marker of one counter key that its first read finds out of step with its item: each later read
 * re-plans those ids only, and the run ends once none of them is out of step. What only a later read shows is left to
 * the consumer (its stream record is on its way) or the next reconcile. Throws InvalidArgumentError
 * for a bad key, and a DynamoDB error only when it is not one worth retrying (access denied, a missing table);
 * throttling and 5xx are retried until `timeoutMs`, after which the result says `incomplete`.
 */
export async function reconcileKey(key: string, options: ReconcileOptions): Promise<ReconcileResult> {
    if (typeof key !== "string" || key.length === 0) {
        throw new InvalidArgumentError("key", "must be a non-empty string");
    }
    if (Buffer.byteLength(key, "utf8") > PARTITION_KEY_MAX_BYTES) {
        throw new InvalidArgumentError("key", `must be at most ${PARTITION_KEY_MAX_BYTES} bytes`);
    }
    const { config, dynamodb } = options;
    const shards = shardCount(config);
    const problem = shardedKeyProblem(key, shards);
    if (problem !== undefined) {
        throw new InvalidArgumentError("key", problem);
    }
    const logger = jsonLogger("hybrid-counter-reconcile", options.sink ?? (() => undefined));
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    let found: number | undefined;
    let committed = 0;
    const reported = new Set<string>();
    let firstFound: Set<string> | undefined;
    for (let round = 0; round < MAX_ROUNDS; round++) {
        let items: Array<Record<string, AttributeValue>>;
        let markers: Array<Array<Record<string, AttributeValue>>>;
        try {
            [items, ...markers] = await Promise.all([
                queryPartition(dynamodb, { tableName: config.tableName, partitionKey: config.partitionKey, key }),
                ...shardPartitionKeys(key, shards).map((partitionKey) =>
                    queryPartition(dynamodb, {
                        tableName: countersTable(config),
                        partitionKey: config.partitionKey,
                        key: partitionKey,
                        under: { sortKey: config.sortKey, prefix: markerSortKey(config, "") },
                    }),
                ),
            ]);
        } catch (error) {
            // Throttling or a 5xx that outlived the SDK's retries: read again until the deadline.
            if (!isRetryable(error)) {
                throw error;
            }
            logger.log("warn", "reconcile read failed; reading the key again", { key, error: describeError(error) });
            const delay = Math.min(1_000, 20 * 2 ** round) * Math.random();
            if (Date.now() + delay >= deadline) {
                break;
            }
            await pause(delay);
            continue;
        }
        const plans = markers.map((shardMarkers, shard) => planReconcile(items, shardMarkers, config, { shard, shards }));
        const plan: ReconcilePlan = {
            actions: plans.flatMap((p) => p.actions),
            badMarkers: plans.flatMap((p) => p.badMarkers),
            unmarkable: plans.flatMap((p) => p.unmarkable),
        };
        for (const bad of plan.badMarkers) {
            const sk = bad[config.sortKey]?.S ?? "";
            if (!reported.has(sk)) {
                reported.add(sk);
                await options.fatal.park({
                    reason: "poison-item",
                    problem: `[${A.state}] must be "counted" or "uncounted" on the marker`,
                    counterKey: key,
                    id: markerId(config, sk),
                    item: bad,
                });
            }
        }
        found ??= plan.actions.length;
        firstFound ??= new Set(plan.actions.map((action) => action.id));
        // Done when nothing the first read found is still to settle. What only a later read shows changed after the first
        // one: the consumer settles it from its stream record, on its way, or the next reconcile of the key does (on a
        // key written without pause some item always has changed, and waiting for a read with none would never end: the
        // settler would never heal the key).
        if (plan.actions.every((action) => !firstFound!.has(action.id))) {
            const unmarkable = plan.unmarkable.length > 0 ? { unmarkable: plan.unmarkable } : {};
            return { key, found, counted: committed, alreadySettled: Math.max(0, found - committed), incomplete: false, ...unmarkable };
        }
        let cancelled = false;
        const sizes = new Map(items.map((item) => [item[config.sortKey]?.S ?? "", itemSize(item)]));
        // A transaction writes one shard's partial and markers: each shard's plan is chunked on its own, each marker
        // weighed as read (plus what the write adds), not at an assumed bound.
        for (const [shard, shardPlan] of plans.entries()) {
            const markerSizes = new Map(markers[shard]!.map((m) => [markerId(config, m[config.sortKey]?.S ?? ""), itemSize(m)]));
            const sizeOf = (a: ReconcileAction): number =>
                (markerSizes.get(a.id) ?? MARKER_MAX_BYTES) + MARKER_WRITE_MAX_BYTES + (a.misplaced ? 0 : (sizes.get(a.id) ?? 0));
            // Only the first read's ids: a later item is the consumer's to count, and a transaction holding it would be
            // cancelled by that count, taking the first read's corrections with it, round after round on a busy key.
            const actions = shardPlan.actions.filter((action) => firstFound!.has(action.id));
            for (const chunk of planChunks(actions, sizeOf, RECONCILE_CHUNK_LIMITS)) {
                try {
                    await dynamodb.send(
                        new TransactWriteItemsCommand({ TransactItems: reconcileTransaction(config, key, chunk, Date.now(), shard) }),
                    );
                    committed += chunk.length;
                } catch (error) {
                    if (!(error instanceof TransactionCanceledException) && !isRetryable(error)) {
                        throw error;
                    }
                    logger.log("warn", "reconcile transaction cancelled; re-reading the key", {
                        key,
                        ...(shards > 1 ? { shard } : {}),
                        error: describeError(error),
                    });
                    cancelled = true;
                }
            }
        }
        if (cancelled) {
            const delay = Math.min(1_000, 20 * 2 ** round) * Math.random();
            if (Date.now() + delay >= deadline) {
                break;
            }
            await pause(delay);
        }
    }
    return { key, found: found ?? 0, counted: committed, alreadySettled: 0, incomplete: true };
}
