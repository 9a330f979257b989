/**
 * Parsing a DynamoDB stream record into what counting needs: its sequence number, key, id, time and images. Pure.
 *
 * A record that cannot be read (no sequence number, keys that are not non-empty strings within DynamoDB's limits, a
 * key the counter cannot hold, a missing image for its event) is poison: it names the field at fault, goes to the
 * fatal queue in full, and counts as nothing. A record of a counter item (sort key under the reserved prefix) is
 * ignored.
 */
import type { AttributeValue, DynamoDBRecord } from "aws-lambda";
import type { CounterTableLayout } from "../shared/config";
import type { ItemImage } from "../shared/selection";
import { keyProblem, PARTITION_KEY_MAX_BYTES, SORT_KEY_MAX_BYTES } from "../shared/keys";

/** Stream sequence numbers are decimal strings of up to this many digits; marks pad them to it. */
export const SEQUENCE_DIGITS = 40;

/** A record counting can use. */
export interface ParsedRecord {
    readonly sequenceNumber: string;
    readonly key: string;
    readonly id: string;
    readonly eventName: "INSERT" | "MODIFY" | "REMOVE";
    readonly oldImage?: ItemImage;
    readonly newImage?: ItemImage;
    /** When the record was written (epoch ms; the stream gives seconds). */
    readonly time: number;
    /** The record as delivered (what the fatal queue would receive). */
    readonly raw: DynamoDBRecord;
}

export type Parsed =
    | { readonly kind: "record"; readonly record: ParsedRecord }
    | { readonly kind: "ignored"; readonly sequenceNumber: string }
    | {
          readonly kind: "poison";
          readonly sequenceNumber: string | undefined;
          readonly field: string;
          readonly problem: string;
          readonly key?: string;
      };

const SEQUENCE_NUMBER = new RegExp(`^\\d{1,${SEQUENCE_DIGITS}}$`);

/** Left-pads a sequence number so that strings compare as numbers. */
export function paddedSequence(sequenceNumber: string): string {
    return sequenceNumber.padStart(SEQUENCE_DIGITS, "0");
}

/** Compares two sequence numbers (decimal strings of any length). */
export function compareSequences(a: string, b: string): number {
    const x = BigInt(a);
    const y = BigInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
}

/** The sequence number right after `sequenceNumber` (sequence numbers are integers; the next may not exist). */
export function nextSequence(sequenceNumber: string): string {
    return (BigInt(sequenceNumber) + 1n).toString();
}

function stringKey(keys: Record<string, AttributeValue>, name: string, maxBytes: number): string | { problem: string } {
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
    return Buffer.byteLength(value.S, "utf8") > maxBytes ? { problem: `must be at most ${maxBytes} bytes` } : value.S;
}

function present(image: unknown): image is ItemImage {
    return image !== null && image !== undefined && typeof image === "object";
}

/** Parses one record (see the header). */
export function parseRecord(
    record: DynamoDBRecord,
    layout: Pick<CounterTableLayout, "partitionKey" | "sortKey" | "counterPrefix">,
): Parsed {
    if (record === null || typeof record !== "object" || record.dynamodb === null || typeof record.dynamodb !== "object") {
        return { kind: "poison", sequenceNumber: undefined, field: "dynamodb", problem: "is missing" };
    }
    const stream = record.dynamodb;
    const sequenceNumber = stream.SequenceNumber;
    if (typeof sequenceNumber !== "string" || !SEQUENCE_NUMBER.test(sequenceNumber)) {
        return {
            kind: "poison",
            sequenceNumber: undefined,
            field: "dynamodb.SequenceNumber",
            problem: `must be a decimal string of at most ${SEQUENCE_DIGITS} digits`,
        };
    }
    const poison = (field: string, problem: string, key?: string): Parsed => ({
        kind: "poison",
        sequenceNumber,
        field,
        problem,
        ...(key === undefined ? {} : { key }),
    });
    const keys = stream.Keys;
    if (keys === null || typeof keys !== "object") {
        return poison("dynamodb.Keys", "is missing");
    }
    const key = stringKey(keys, layout.partitionKey, PARTITION_KEY_MAX_BYTES);
    if (typeof key !== "string") {
        return poison(`dynamodb.Keys.${layout.partitionKey}`, key.problem);
    }
    const id = stringKey(keys, layout.sortKey, SORT_KEY_MAX_BYTES);
    if (typeof id !== "string") {
        return poison(`dynamodb.Keys.${layout.sortKey}`, id.problem, key);
    }
    if (id.startsWith(layout.counterPrefix)) {
        return { kind: "ignored", sequenceNumber };
    }
    const images = imagesOf(record.eventName, stream.OldImage, stream.NewImage);
    if ("problem" in images) {
        return poison(images.field, images.problem, key);
    }
    const problem = keyProblem(key);
    if (problem !== undefined && (images.oldImage !== undefined || images.newImage !== undefined)) {
        return poison(`dynamodb.Keys.${layout.partitionKey}`, `cannot be a counter key: ${problem}`, key);
    }
    const seconds = typeof stream.ApproximateCreationDateTime === "number" ? stream.ApproximateCreationDateTime : Date.now() / 1000;
    return {
        kind: "record",
        record: {
            sequenceNumber,
            key,
            id,
            eventName: record.eventName as ParsedRecord["eventName"],
            ...images,
            time: Math.round(seconds * 1000),
            raw: record,
        },
    };
}

function imagesOf(
    eventName: unknown,
    previous: unknown,
    next: unknown,
): { oldImage?: ItemImage; newImage?: ItemImage } | { field: string; problem: string } {
    const missing = (field: string) => ({ field, problem: "is missing: the stream must carry new and old images" });
    switch (eventName) {
        case "INSERT":
            return present(next) ? { newImage: next } : missing("dynamodb.NewImage");
        case "MODIFY":
            if (!present(next)) {
                return missing("dynamodb.NewImage");
            }
            return present(previous) ? { oldImage: previous, newImage: next } : missing("dynamodb.OldImage");
        case "REMOVE":
            return present(previous) ? { oldImage: previous } : missing("dynamodb.OldImage");
        default:
            return { field: "eventName", problem: `must be INSERT, MODIFY or REMOVE (got ${JSON.stringify(eventName)})` };
    }
}
