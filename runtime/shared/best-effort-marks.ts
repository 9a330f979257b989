/**
 * The marks every writer of best-effort leaves (the client, and a strict backfill), in one place: the heal's
 * proof and the heal index depend on all of them writing alike.
 *
 * Invariant: every write of the best-effort count
 *   - bumps `hc_version` and sets `hc_written_at` (its own clock): the heal's condition proves from them that no
 *     write landed since its read, and that the key has been quiet for the window (runtime/heal/heal.ts, A5);
 *   - sets `hc_heal` (the key's shard) and, only when absent, `hc_due_at`: the sparse heal index is keyed on
 *     those two, so the entry is written once per heal cycle (when the first write after a heal adds it) and
 *     not moved by the writes after it. A write that sets an index key attribute to the value it already holds
 *     writes nothing to the index; moving its sort key would cost a delete and a put on every call.
 * A heal removes `hc_heal` and `hc_due_at` together; the settler moves `hc_due_at` forward for a key it found
 * still busy (runtime/heal/settle.ts), so that keys written for longer than the window do not hold its budget.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { COUNTER_ATTRIBUTES as A, healShard } from "./config";

/** The UpdateExpression of a best-effort write that ADDs `amount` (a value placeholder) to `#count`. */
export function bestEffortUpdate(amount: string): string {
    return `ADD #count ${amount}, #version :one SET #writtenAt = :now, #heal = :shard, #due = if_not_exists(#due, :now)`;
}

/** The attribute names the marks use (with `#count`, which the caller names). */
export function bestEffortMarkNames(): Record<string, string> {
    return { "#version": A.version, "#writtenAt": A.writtenAt, "#heal": A.healShard, "#due": A.dueAt };
}

/** The values the marks use: the writer's clock and the key's heal shard. */
export function bestEffortMarkValues(key: string, now: number): Record<string, AttributeValue> {
    return { ":one": { N: "1" }, ":now": { N: String(now) }, ":shard": { S: healShard(key) } };
}
