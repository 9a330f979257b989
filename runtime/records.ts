/**
 * Pure classification of DynamoDB stream records into the counter's events.
 *
 * A creation is an INSERT whose new image carries `processed = false`. A deletion is a MODIFY whose
 * new image has `deleted = true` and whose old image did not. Counter items (sort key under the
 * reserved prefix), the consumer's own flag flips and hard deletes (REMOVE) are ignored. A record
 * that can never be counted is poison: it names the field that is wrong.
 */
import type { AttributeValue, DynamoDBRecord } from "aws-lambda";
import type { CounterTableLayout } from "./config";

/** DynamoDB's own key size limits (bytes, UTF-8). A longer key cannot come from a real table. */
export const PARTITION_KEY_MAX_BYTES = 2048;
export const SORT_KEY_MAX_BYTES = 1024;

export interface CounterEvent {
    readonly kind: "create" | "delete";
    /** The counter key: the resource item's partition key value. */
    readonly counterKey: string;
    /** The resource id: the item's sort key value. */
    readonly id: string;
    readonly sequenceNumber: string;
    /** The `processed` flag in the record's new image (a hint only; the item's current state decides). */
    readonly processedInImage: boolean;
    /** Seconds since the epoch, from the stream record, when present. */
    readonly approximateCreationTime?: number;
}

export type Classified =
    | { readonly type: "event"; readonly event: CounterEvent }
    | { readonly type: "ignored"; readonly sequenceNumber: string; readonly reason: string }
    | {
          readonly type: "poison";
          readonly sequenceNumber: string | undefined;
          readonly field: string;
          readonly problem: string;
      };

const SEQUENCE_NUMBER = /^\d{1,64}$/;

export function classifyRecord(record: DynamoDBRecord, layout: CounterTableLayout): Classified {
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
        return poison("dynamodb.SequenceNumber", "must be a decimal string");
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

    switch (record.eventName) {
        case "REMOVE":
            return { type: "ignored", sequenceNumber, reason: "hard delete" };
        case "INSERT": {
            const image = stream.NewImage;
            if (image === null || typeof image !== "object") {
                return poison("dynamodb.NewImage", "is missing: the stream must carry new images", sequenceNumber);
            }
            const processed = booleanFlag(image, layout.processedAttribute);
            if (processed === "invalid") {
                return poison(`dynamodb.NewImage.${layout.processedAttribute}`, "must be a boolean", sequenceNumber);
            }
            if (processed !== false) {
                return { type: "ignored", sequenceNumber, reason: "not an unprocessed creation" };
            }
            return {
                type: "event",
                event: { kind: "create", counterKey, id, sequenceNumber, processedInImage: false, approximateCreationTime },
            };
        }
        case "MODIFY": {
            const next = stream.NewImage;
            const previous = stream.OldImage;
            if (next === null || typeof next !== "object") {
                return poison("dynamodb.NewImage", "is missing: the stream must carry new images", sequenceNumber);
            }
            if (previous === null || typeof previous !== "object") {
                return poison("dynamodb.OldImage", "is missing: the stream must carry old images", sequenceNumber);
            }
            const deletedNow = booleanFlag(next, layout.deletedAttribute);
            const deletedBefore = booleanFlag(previous, layout.deletedAttribute);
            if (deletedNow === "invalid") {
                return poison(`dynamodb.NewImage.${layout.deletedAttribute}`, "must be a boolean", sequenceNumber);
            }
            if (deletedBefore === "invalid") {
                return poison(`dynamodb.OldImage.${layout.deletedAttribute}`, "must be a boolean", sequenceNumber);
            }
            if (deletedNow !== true || deletedBefore === true) {
                return { type: "ignored", sequenceNumber, reason: "not a soft delete" };
            }
            const processed = booleanFlag(next, layout.processedAttribute);
            if (processed === "invalid") {
                return poison(`dynamodb.NewImage.${layout.processedAttribute}`, "must be a boolean", sequenceNumber);
            }
            if (processed === undefined) {
                // Never created through the counter, so never counted: nothing to take back.
                return { type: "ignored", sequenceNumber, reason: "not a counted item" };
            }
            return {
                type: "event",
                event: {
                    kind: "delete",
                    counterKey,
                    id,
                    sequenceNumber,
                    processedInImage: processed,
                    approximateCreationTime,
                },
            };
        }
        default:
            return poison("eventName", `must be INSERT, MODIFY or REMOVE (got ${JSON.stringify(record.eventName)})`, sequenceNumber);
    }
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

function booleanFlag(image: { [key: string]: AttributeValue }, name: string): boolean | undefined | "invalid" {
    const value = image[name];
    if (value === undefined) {
        return undefined;
    }
    if (value === null || typeof value !== "object" || typeof value.BOOL !== "boolean") {
        return "invalid";
    }
    return value.BOOL;
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
