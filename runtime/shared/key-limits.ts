/**
 * The key sizes the counter's own items derive from a resource item's keys.
 *
 * Bound kept here: every item the counter writes for resource item (key, id) has the partition key
 * `key` (the resource item's own, so DynamoDB's 2,048-byte partition key limit is already met by the
 * resource item) and, for its marker, the sort key `${counterPrefix}item#${id}`. DynamoDB refuses a sort
 * key over 1,024 bytes (UTF-8), so the marker fits exactly when
 *
 *     bytes(id) <= 1,024 - bytes(counterPrefix) - bytes("item#")
 *
 * An id past that cannot be counted at all: the client refuses it (client-validation.ts), the consumer and
 * the redrive park its record (records.ts), backfill and reconciliation skip it and report it.
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-partition-sort-keys
 */
import { markerSortKey, type CounterKeyScope } from "./config";

/** DynamoDB's own key size limits (bytes, UTF-8). */
export const PARTITION_KEY_MAX_BYTES = 2048;
export const SORT_KEY_MAX_BYTES = 1024;

/** The largest id (UTF-8 bytes) whose marker sort key DynamoDB accepts under this layout. */
export function markerIdMaxBytes(layout: CounterKeyScope): number {
    return SORT_KEY_MAX_BYTES - Buffer.byteLength(markerSortKey(layout, ""), "utf8");
}

/** Whether the marker of `id` has a sort key DynamoDB accepts. */
export function markerKeyFits(layout: CounterKeyScope, id: string): boolean {
    return Buffer.byteLength(id, "utf8") <= markerIdMaxBytes(layout);
}

/** The problem with `id`'s marker key, in the words an InvalidArgumentError or a parked record uses. */
export function markerKeyProblem(layout: CounterKeyScope, id: string): string | undefined {
    return markerKeyFits(layout, id)
        ? undefined
        : `must be at most ${markerIdMaxBytes(layout)} bytes: its marker's sort key ("${markerSortKey(layout, "")}" + id) must fit DynamoDB's ${SORT_KEY_MAX_BYTES}-byte limit (got ${Buffer.byteLength(id, "utf8")} bytes)`;
}
