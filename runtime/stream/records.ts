/**
 * Pure classification of DynamoDB stream records by membership.
 *
 * A record of a resource item implies whether the item was live before (its OldImage) and after (its
 * NewImage): live = the image exists, is selected and is not soft-deleted (selection.ts). A record
 * that changes membership is a *change* the eventual counter applies; one that does not is ignored,
 * except a soft delete (live before, selected and deleted = true after), which is a change whose
 * application also hard-deletes the item. Counter items (sort key under the reserved prefix) are
 * ignored. A record that cannot be classified, or a change of an id whose marker key cannot fit, is poison:
 * it names the field that is wrong.
 *
 * Sharded counting (runtime/shards/layout.ts): under a shard count above 1, a change of a key that
 * `shardedKeyProblem` refuses (it holds U+0000, the separator of a shard's partition key, or leaves no room for
 * the shard's suffix) is poison too, naming the partition key: its markers would sit under another key's shard,
 * or under a partition key DynamoDB refuses, so it can never be counted. Like an over-long id, only a change is
 * refused (a record that moves no membership needs no marker), and it is parked alone, never its batch.
 */
import type { AttributeValue as SdkAttributeValue } from "@aws-sdk/client-dynamodb";
import type { AttributeValue, DynamoDBRecord } from "aws-lambda";
import { SEQUENCE_DIGITS, type CounterTableConfig, type CounterTableLayout } from "../shared/config";
import { shardCount, shardedKeyProblem } from "../shards/layout";
import { isLive, isSelected, isSoftDeleted, type ItemImage } from "../shared/selection";

import { markerKeyProblem, PARTITION_KEY_MAX_BYTES, SORT_KEY_MAX_BYTES } from "../shared/key-limits";

/** DynamoDB's own key size limits (bytes, UTF-8). A longer key cannot come from a real table. */
export { PARTITION_KEY_MAX_BYTES, SORT_KEY_MAX_BYTES };

/** A record that changes an item's membership. */
export interface MembershipChange {
    /** The counter key: the resource item's partition key value. */
    readonly counterKey: string;
    /** The resource id: the item's sort key value. */
    readonly id: string;
    readonly sequenceNumber: string;
    /** Membership the record's OldImage implies. */
    readonly before: boolean;
    /** Membership the record's NewImage implies. */
    readonly after: boolean;
    /**
     * A soft delete: the item must also be hard-deleted, if it still holds this token (the NewImage's
     * token attribute; undefined when the image had none).
     */
    readonly softDelete?: { readonly token: SdkAttributeValue | undefined };
    /** The client token (S) of the image the record leaves the item in, when it has one. */
    readonly life?: string;
    /** An INSERT: the record put the item into a table that did not hold it (a put, never an update). */
    readonly insert?: true;
    /** Seconds since the epoch, from the stream record, when present. */
    readonly approximateCreationTime?: number;
}

export type Classified =
    | { readonly type: "change"; readonly change: MembershipChange }
    | { readonly type: "ignored"; readonly sequenceNumber: string; readonly reason: string }
    | {
          readonly type: "poison";
          readonly sequenceNumber: string | undefined;
          readonly field: string;
          readonly problem: string;
      };

const SEQUENCE_NUMBER = new RegExp(`^\\d{1,${SEQUENCE_DIGITS}}$`);

/** A layout, with the shard count of a configuration when it has one (absent: unsharded). */
export type ClassifyingLayout = CounterTableLayout & Partial<Pick<CounterTableConfig, "counterShards" | "regions" | "regionAttribute">>;

export function classifyRecord(record: DynamoDBRecord, layout: ClassifyingLayout): Classified {
    const poison = (field: string, problem: string, sequenceNumber?: string): Classified => ({
        type: "poison",
        sequenceNumber,
        field,
        problem,
    });
    if (record === null || typeof record !== "object") {
        return poison("record", "is not an object");
    }
    const stream = record.dynamodb;
    if (stream === null || typeof stream !== "object") {
        return poison("dynamodb", "is missing");
    }
    const sequenceNumber = stream.SequenceNumber;
    if (typeof sequenceNumber !== "string" || !SEQUENCE_NUMBER.test(sequenceNumber)) {
        return poison("dynamodb.SequenceNumber", `must be a decimal string of at most ${SEQUENCE_DIGITS} digits`);
    }
    const keys = stream.Keys;
    if (keys === null || typeof keys !== "object") {
        return poison("dynamodb.Keys", "is missing", sequenceNumber);
    }
    const counterKey = stringKey(keys, layout.partitionKey, PARTITION_KEY_MAX_BYTES);
    if (typeof counterKey !== "string") {
        return poison(`dynamodb.Keys.${layout.partitionKey}`, counterKey.problem, sequenceNumber);
    }
    const id = stringKey(keys, layout.sortKey, SORT_KEY_MAX_BYTES);
    if (typeof id !== "string") {
        return poison(`dynamodb.Keys.${layout.sortKey}`, id.problem, sequenceNumber);
    }
    if (id.startsWith(layout.counterPrefix)) {
        return { type: "ignored", sequenceNumber, reason: "counter item" };
    }
    const approximateCreationTime = typeof stream.ApproximateCreationDateTime === "number" ? stream.ApproximateCreationDateTime : undefined;
    const present = (image: unknown): image is ItemImage => image !== null && image !== undefined && typeof image === "object";
    const next = stream.NewImage;
    const previous = stream.OldImage;

    let oldImage: ItemImage | undefined;
    let newImage: ItemImage | undefined;
    switch (record.eventName) {
        case "INSERT":
            if (!present(next)) {
                return poison("dynamodb.NewImage", "is missing: the stream must carry new and old images", sequenceNumber);
            }
            newImage = next;
            break;
        case "MODIFY":
            if (!present(next)) {
                return poison("dynamodb.NewImage", "is missing: the stream must carry new and old images", sequenceNumber);
            }
            if (!present(previous)) {
                return poison("dynamodb.OldImage", "is missing: the stream must carry new and old images", sequenceNumber);
            }
            newImage = next;
            oldImage = previous;
            break;
        case "REMOVE":
            if (!present(previous)) {
                return poison("dynamodb.OldImage", "is missing: the stream must carry new and old images", sequenceNumber);
            }
            oldImage = previous;
            break;
        default:
            return poison("eventName", `must be INSERT, MODIFY or REMOVE (got ${JSON.stringify(record.eventName)})`, sequenceNumber);
    }
    // Regions (runtime/regions/): an image is live here only when this region owns it (selection.ts). A record
    // neither of whose images this region owns then "stays uncounted" and leaves this region's marker as it is.
    const before = isLive(oldImage, layout);
    const after = isLive(newImage, layout);
    const softDelete = before && newImage !== undefined && isSelected(newImage, layout) && isSoftDeleted(newImage, layout);
    if (before === after) {
        return { type: "ignored", sequenceNumber, reason: after ? "stays counted" : "stays uncounted" };
    }
    // A change needs its marker: an id whose marker key DynamoDB refuses can never be counted (key-limits.ts).
    const unmarkable = markerKeyProblem(layout, id);
    if (unmarkable !== undefined) {
        return poison(`dynamodb.Keys.${layout.sortKey}`, unmarkable, sequenceNumber);
    }
    // A sharded key's markers live under its shards' partition keys: a key that cannot name them is never counted.
    const unshardable = shardedKeyProblem(counterKey, shardCount(layout));
    if (unshardable !== undefined) {
        return poison(`dynamodb.Keys.${layout.partitionKey}`, unshardable, sequenceNumber);
    }
    const left = newImage ?? oldImage;
    const token = left?.[layout.tokenAttribute] as { S?: unknown } | undefined;
    return {
        type: "change",
        change: {
            counterKey,
            id,
            sequenceNumber,
            before,
            after,
            ...(softDelete ? { softDelete: { token: newImage![layout.tokenAttribute] as SdkAttributeValue | undefined } } : {}),
            ...(typeof token?.S === "string" ? { life: token.S } : {}),
            ...(record.eventName === "INSERT" ? { insert: true as const } : {}),
            approximateCreationTime,
        },
    };
}

function stringKey(keys: { [key: string]: AttributeValue }, name: string, maxBytes: number): string | { problem: string } {
    const value = keys[name];
    if (value === undefined || value === null) {
        return { problem: "is missing" };
    }
    if (typeof value !== "object" || typeof value.S !== "string") {
        return { problem: "must be a string (S) attribute" };
    }
    if (value.S.length === 0) {
        return { problem: "must not be empty" };
    }
    if (Buffer.byteLength(value.S, "utf8") > maxBytes) {
        return { problem: `must be at most ${maxBytes} bytes` };
    }
    return value.S;
}

/** Compares two stream sequence numbers (decimal strings of any length). */
export function compareSequenceNumbers(a: string, b: string): number {
    const x = BigInt(a);
    const y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
}

export function lowestSequenceNumber(sequenceNumbers: Iterable<string>): string | undefined {
    let lowest: string | undefined;
    for (const s of sequenceNumbers) {
        if (lowest === undefined || compareSequenceNumbers(s, lowest) < 0) {
            lowest = s;
        }
    }
    return lowest;
}
