/**
 * The marks writers of best-effort leave, in one place: the heal's proof and the heal index depend on all of them
 * writing alike.
 *
 * Invariant: every write of the best-effort count bumps `hc_version` and sets `hc_written_at` (its own clock): the
 * heal's condition proves from them that no write landed since its read, and that the key has been quiet for the
 * window (runtime/heal/heal.ts, A5). Every writer of this version also bumps `hc_lv` and moves the ledger entry of the
 * life it writes for (runtime/ledger/ledger.ts): a heal of a busy key needs both.
 *
 * The heal index lists the keys whose best-effort may be off the live items it accounts for. An entry is `hc_heal`
 * (the key's shard) and `hc_due_at` (set only when absent), written by the party that knows the key may have moved
 * away from its items:
 *   - the client, strict mode: every best-effort write (a reservation or a touch may be followed by nothing, when
 *     the call's process dies, and the slot it holds must heal within a cycle, not wait for the audit);
 *   - the client, utilization mode: none of its writes; at the end of a call whose best-effort writes do not match
 *     the item writes it committed (an absorbed failure, a decrement without its soft delete, a put in doubt, a
 *     write repeated after an attempt that may have committed), one mark (runtime/client/client.ts). A call that
 *     dies between its writes leaves best-effort below the items (utilization's safe side): the audit reaches it,
 *     and `max(best-effort, eventual)` covers it meanwhile;
 *   - the consumer, for a record the client's writes did not account for: a live item removed (TTL, another writer),
 *     moved across the selection or overwritten by another writer, and a late put attempt it removes
 *     (runtime/stream/heal-due.ts);
 *   - a strict backfill, with the units it adds.
 * Keys nobody marks (a crash between two writes of a call, a mark whose write failed) are the audit's
 * (runtime/heal/settle.ts). An entry is written once per heal cycle: the first mark after a heal adds it and the
 * marks after it change nothing in the index (a write that sets an index key attribute to the value it already holds
 * writes nothing to the index). Every mark also bumps `hc_marks`, and a heal's write is conditional on the value it
 * read, so a mark that lands between a heal's read and its write (the consumer removing a late put the heal counted,
 * say) makes that heal lose its race instead of being wiped. A heal removes `hc_heal` and `hc_due_at` together; the settler moves `hc_due_at`
 * forward for a key it found still busy, so that keys written for longer than the window do not hold its budget.
 */
import type { AttributeValue, UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
import {
    COUNTER_ATTRIBUTES as A,
    bestEffortSortKey,
    countersTable,
    healShard,
    type CounterTableConfig,
    type RegionsConfig,
} from "./config";

/** The heal-index entry's part of an UpdateExpression's SET clause. */
const DUE = "#heal = :shard, #due = if_not_exists(#due, :now)";

/**
 * The UpdateExpression of a best-effort write that ADDs `amount` (a value placeholder) to `#count`; with `due`, it
 * also puts the key on the heal index (and counts the mark in `hc_marks`); with `ledger`, it ADDs the same amount to
 * the life's period entry `#ledger` (runtime/ledger/ledger.ts). Every such write bumps `hc_lv` with `hc_version`: its
 * writer keeps the ledger.
 */
export function bestEffortUpdate(amount: string, due = false, ledger = false): string {
    return (
        `ADD #count ${amount}, #version :one, #lv :one${ledger ? `, #ledger ${amount}` : ""}${due ? ", #marks :one" : ""} ` +
        `SET #writtenAt = :now${due ? `, ${DUE}` : ""}`
    );
}

/**
 * The condition of a strict release: only while the key is still in the heal epoch `epoch` (as its touch read it; epoch
 * 0 is no epoch yet). Uses `#epoch` and `:epoch`.
 */
export function inEpochCondition(epoch: number): string {
    return epoch === 0 ? "attribute_not_exists(#epoch) OR #epoch = :epoch" : "#epoch = :epoch";
}

/**
 * The UpdateExpression that only puts a key on the heal index. It moves no count and bumps no version; it bumps
 * `hc_marks`, on which a heal's write is conditional, so a heal that read the key before the mark cannot remove it.
 */
export function dueUpdate(): string {
    return `SET ${DUE} ADD #marks :one`;
}

/**
 * The attribute names the marks use (with `#count`, which the caller names); `due` adds the index entry's, `ledger`
 * names the life's period entry (`bestEffortUpdate`'s `ledger`).
 */
export function bestEffortMarkNames(due = false, ledger?: string): Record<string, string> {
    return {
        "#version": A.version,
        "#lv": A.ledgerVersion,
        "#writtenAt": A.writtenAt,
        ...(ledger === undefined ? {} : { "#ledger": ledger }),
        ...(due ? dueMarkNames() : {}),
    };
}

/** The values the marks use: the writer's clock and, with `due`, the key's heal shard. */
export function bestEffortMarkValues(
    key: string,
    now: number,
    due = false,
    scope: { readonly regions?: RegionsConfig } = {},
): Record<string, AttributeValue> {
    return { ":one": { N: "1" }, ":now": { N: String(now) }, ...(due ? { ":shard": { S: healShard(key, scope) } } : {}) };
}

/** The attribute names of the heal-index entry alone. */
export function dueMarkNames(): Record<string, string> {
    return { "#heal": A.healShard, "#due": A.dueAt, "#marks": A.marks };
}

/** The values of the heal-index entry alone. */
export function dueMarkValues(key: string, now: number, scope: { readonly regions?: RegionsConfig } = {}): Record<string, AttributeValue> {
    return { ":now": { N: String(now) }, ":shard": { S: healShard(key, scope) }, ":one": { N: "1" } };
}

/**
 * The write that only puts `key` on the heal index, as every party sends it (the client at a call's end, the
 * consumer, the model client). `onlyIfCounted`: only a key that has a best-effort item (the consumer's mark, for
 * keys a client or backfill wrote).
 */
export function dueMarkInput(
    config: CounterTableConfig,
    key: string,
    now: number,
    options: { readonly onlyIfCounted?: boolean } = {},
): UpdateItemCommandInput {
    return {
        TableName: countersTable(config),
        Key: { [config.partitionKey]: { S: key }, [config.sortKey]: { S: bestEffortSortKey(config) } },
        UpdateExpression: dueUpdate(),
        ...(options.onlyIfCounted ? { ConditionExpression: "attribute_exists(#count)" } : {}),
        ExpressionAttributeNames: { ...(options.onlyIfCounted ? { "#count": config.countAttribute } : {}), ...dueMarkNames() },
        ExpressionAttributeValues: dueMarkValues(key, now, config),
    };
}
