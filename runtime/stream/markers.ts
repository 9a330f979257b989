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
import { COUNTER_CHUNK_LIMITS, withMargin, type ChunkLimits } from "./chunking";
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
}

/** All the work a batch holds for one counter key. */
export interface GroupPlan {
    readonly counterKey: string;
    readonly items: readonly ItemIntent[];
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
    const groups = new Map<string, Map<string, ItemIntent>>();
    const poison: PoisonRecord[] = [];
    let ignored = 0;
    for (const record of records) {
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
        let items = groups.get(change.counterKey);
        if (!items) {
            items = new Map();
            groups.set(change.counterKey, items);
        }
        const earlier = items.get(change.id);
        // Keep the item at its first position: its earliest record is what a failure must report.
        items.set(change.id, {
            id: change.id,
            target: change.after ? "counted" : "uncounted",
            expected: earlier?.expected ?? (change.before ? "counted" : "notCounted"),
            seq: paddedSequence(change.sequenceNumber),
            sequenceNumbers: [...(earlier?.sequenceNumbers ?? []), change.sequenceNumber],
            ...(change.softDelete ? { softDelete: change.softDelete } : {}),
            ...(change.life !== undefined ? { life: change.life } : {}),
        });
    }
    return {
        ignored,
        poison,
        groups: [...groups].map(([counterKey, items]) => ({ counterKey, items: [...items.values()] })),
    };
}

/** A marker as read (the attributes the planner needs). */
export interface MarkerRead {
    readonly state?: string;
    readonly seq?: string;
}

/** Reads a marker's state and hc_seq from a stored counter item (undefined: no marker). */
export function markerRead(item: Record<string, AttributeValue> | undefined): MarkerRead | undefined {
    if (item === undefined) {
        return undefined;
    }
    return { state: item[A.state]?.S, seq: item[A.seq]?.S };
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
        return { action: "apply", intent: { ...intent, expected: "absent" } };
    }
    if (marker.seq !== undefined && marker.seq >= intent.seq) {
        return { action: "done", why: "a record as new or newer was applied" };
    }
    if (marker.state === MARKER_STATE.counted || marker.state === MARKER_STATE.uncounted) {
        return { action: "apply", intent: { ...intent, expected: marker.state } };
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
    return intent.softDelete ? 2 : 1;
}

/**
 * Upper bound of a marker item's size: the largest keys DynamoDB allows (2 KB partition key, 1 KB sort
 * key under the prefix) and the marker's few attributes.
 */
export const MARKER_MAX_BYTES = 4 * 1024;

/**
 * Splits a group's intents into transactions DynamoDB accepts (the only chunking decision of the
 * consumer): at most 100 actions with the counter's (a hard delete costs a second action), and items
 * within 4 MB by runtime/stream/chunking.ts's estimate, where `sizeOf` gives the hard-deleted item's size.
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
        const size = withMargin(MARKER_MAX_BYTES + (item.softDelete ? sizeOf(item) : 0), limits);
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
    readonly softDelete?: number;
}

/**
 * Builds the TransactWriteItems actions of one chunk: the counter's delta first (when not zero), then
 * per intent its marker and, for a soft delete, the hard delete of the user's item.
 */
export function transactionActions(
    config: CounterTableConfig,
    counterKey: string,
    items: readonly ItemIntent[],
    nowMs: number,
): { actions: TransactWriteItem[]; index: ActionIndex[] } {
    const counters = countersTable(config);
    const key = (sk: string): Record<string, AttributeValue> => ({
        [config.partitionKey]: { S: counterKey },
        [config.sortKey]: { S: sk },
    });
    const delta = items.reduce((sum, item) => sum + intentDelta(item), 0);
    const actions: TransactWriteItem[] = [];
    if (delta !== 0) {
        actions.push({
            Update: {
                TableName: counters,
                Key: key(eventualSortKey(config)),
                UpdateExpression: "ADD #count :delta",
                ExpressionAttributeNames: { "#count": config.countAttribute },
                ExpressionAttributeValues: { ":delta": { N: String(delta) } },
            },
        });
    }
    const index: ActionIndex[] = [];
    for (const item of items) {
        const marker = actions.length;
        actions.push({ Update: markerUpdate(counters, key(markerSortKey(config, item.id)), item, nowMs) });
        let softDelete: number | undefined;
        if (item.softDelete) {
            softDelete = actions.length;
            const token = item.softDelete.token;
            actions.push({
                Delete: {
                    TableName: config.tableName,
                    Key: key(item.id),
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
    let remove = "";
    if (item.target === "uncounted") {
        set.push("#exp = :exp");
        values[":exp"] = { N: String(Math.floor(nowMs / 1000) + TOMBSTONE_TTL_SECONDS) };
    } else {
        // A counted marker must never expire.
        remove = " REMOVE #exp";
    }
    if (item.life !== undefined) {
        set.push("#life = :life");
        names["#life"] = A.life;
        values[":life"] = { S: item.life };
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
        ConditionExpression: `(attribute_not_exists(#seq) OR #seq < :seq) AND ${expected}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
    };
}
