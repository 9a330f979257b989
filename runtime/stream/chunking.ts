/**
 * Transaction chunking: splits a counter key's item actions into TransactWriteItems calls that
 * DynamoDB accepts.
 *
 * Invariant of every chunk this module returns, with the counter's own action added to it:
 *
 *     actions <= 100  and  estimated aggregate item size * (1 + margin) <= 4 MB
 *
 * DynamoDB refuses a transaction of more than 100 actions, or whose items add up to more than 4 MB
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Constraints.html, "DynamoDB
 * transactions"). For an Update or a Delete, the size that counts is the stored item's, not the
 * request's, so a chunk of 99 flag flips on 390 KB items is refused although its request is small.
 * The estimate of an item's size is the size of its image in the stream record, computed the way
 * DynamoDB sizes items; the margin covers attributes written after that image (a soft delete's
 * flag and token). An item whose estimate alone does not fit beside the counter is returned apart,
 * so the caller can park it instead of retrying a transaction that can never commit.
 *
 * Pure: no I/O, no clock.
 */
import type { AttributeValue as StreamAttributeValue, DynamoDBRecord } from "aws-lambda";

/** DynamoDB's limit on actions in one TransactWriteItems. */
export const TRANSACTION_MAX_ACTIONS = 100;
/** DynamoDB's limit on the aggregate size of the items in one transaction (1 MB = 1,048,576 bytes). */
export const TRANSACTION_MAX_BYTES = 4 * 1024 * 1024;
/** DynamoDB's item size limit. */
export const ITEM_MAX_BYTES = 400 * 1024;

export interface ChunkLimits {
    readonly maxActions: number;
    readonly maxBytes: number;
    /** Actions kept for what the caller adds to every chunk (the counter's delta). */
    readonly reservedActions: number;
    /** Bytes kept for the items of those actions (the counter item). */
    readonly reservedBytes: number;
    /** Each estimate is multiplied by 1 + margin. */
    readonly margin: number;
}

/**
 * The counter's update is one action on an item of a few hundred bytes; 4 KB covers the largest
 * keys DynamoDB allows (2 KB partition key, 1 KB sort key) with the count beside them.
 */
export const COUNTER_CHUNK_LIMITS: ChunkLimits = {
    maxActions: TRANSACTION_MAX_ACTIONS,
    maxBytes: TRANSACTION_MAX_BYTES,
    reservedActions: 1,
    reservedBytes: 4 * 1024,
    margin: 0.1,
};

/** The bytes an estimate stands for once the margin is applied. */
export function withMargin(estimate: number, limits: ChunkLimits = COUNTER_CHUNK_LIMITS): number {
    // Rounded to a millionth first, so 389,120 * 1.1 is 428,032 and not one byte more.
    return Math.ceil(Number((Math.max(0, estimate) * (1 + limits.margin)).toFixed(6)));
}

/** True when the item cannot share any transaction with the reserved actions. */
export function tooLargeForTransaction(estimate: number, limits: ChunkLimits = COUNTER_CHUNK_LIMITS): boolean {
    return withMargin(estimate, limits) > limits.maxBytes - limits.reservedBytes;
}

/** Separates the items that fit in some transaction from those that fit in none. */
export function separateTooLarge<T>(
    items: readonly T[],
    sizeOf: (item: T) => number,
    limits: ChunkLimits = COUNTER_CHUNK_LIMITS,
): { fitting: T[]; tooLarge: T[] } {
    const fitting: T[] = [];
    const tooLarge: T[] = [];
    for (const item of items) {
        (tooLargeForTransaction(sizeOf(item), limits) ? tooLarge : fitting).push(item);
    }
    return { fitting, tooLarge };
}

/**
 * The longest prefix of `items` that fits in one transaction. Items too large for any transaction
 * must have been separated first; if the first item is one anyway, it is returned alone, so the
 * caller always makes progress and DynamoDB's own refusal reports it.
 */
export function firstChunk<T>(items: readonly T[], sizeOf: (item: T) => number, limits: ChunkLimits = COUNTER_CHUNK_LIMITS): T[] {
    const maxItems = limits.maxActions - limits.reservedActions;
    const budget = limits.maxBytes - limits.reservedBytes;
    const chunk: T[] = [];
    let bytes = 0;
    for (const item of items) {
        const size = withMargin(sizeOf(item), limits);
        if (chunk.length > 0 && (chunk.length >= maxItems || bytes + size > budget)) {
            break;
        }
        chunk.push(item);
        bytes += size;
    }
    return chunk;
}

/** Splits all of `items` into consecutive chunks (see firstChunk). */
export function planChunks<T>(items: readonly T[], sizeOf: (item: T) => number, limits: ChunkLimits = COUNTER_CHUNK_LIMITS): T[][] {
    const chunks: T[][] = [];
    for (let rest = items; rest.length > 0;) {
        const chunk = firstChunk(rest, sizeOf, limits);
        chunks.push(chunk);
        rest = rest.slice(chunk.length);
    }
    return chunks;
}

/** An attribute value in any of its shapes (the SDK's, the stream record's, the wire's). */
type AnyAttributeValue = object;

const utf8 = (s: string): number => Buffer.byteLength(s, "utf8");

/** Bytes of a number as DynamoDB sizes it: 1 byte per two significant digits, plus 1. */
function numberSize(n: string): number {
    const digits = n
        .replace(/^[+-]/, "")
        .replace(/[eE].*$/, "")
        .replace(".", "")
        .replace(/^0+/, "")
        .replace(/0+$/, "");
    return Math.ceil(Math.max(1, digits.length) / 2) + 1;
}

/** Raw bytes of a binary value: base64 on the wire, Uint8Array in the SDK. */
function binarySize(b: unknown): number {
    if (typeof b === "string") {
        return Buffer.from(b, "base64").length;
    }
    if (b instanceof Uint8Array) {
        return b.length;
    }
    return 0;
}

/**
 * The size of one attribute value, as documented in "DynamoDB item sizes and formats"
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
 * strings by their UTF-8 bytes, numbers 1 byte per two significant digits plus 1, binaries by raw
 * bytes, null and Boolean 1 byte, a list or map 3 bytes plus 1 byte per element plus its elements
 * (a map's element counts its name too), sets the sum of their elements.
 */
export function attributeValueSize(attribute: AnyAttributeValue): number {
    if (attribute === null || typeof attribute !== "object") {
        return 0;
    }
    const value = attribute as Record<string, unknown>;
    if (typeof value.S === "string") {
        return utf8(value.S);
    }
    if (typeof value.N === "string") {
        return numberSize(value.N);
    }
    if (value.B !== undefined) {
        return binarySize(value.B);
    }
    if (value.BOOL !== undefined || value.NULL !== undefined) {
        return 1;
    }
    if (Array.isArray(value.SS)) {
        return (value.SS as string[]).reduce((n, s) => n + utf8(s), 0);
    }
    if (Array.isArray(value.NS)) {
        return (value.NS as string[]).reduce((n, s) => n + numberSize(s), 0);
    }
    if (Array.isArray(value.BS)) {
        return (value.BS as unknown[]).reduce<number>((n, b) => n + binarySize(b), 0);
    }
    if (Array.isArray(value.L)) {
        return 3 + (value.L as AnyAttributeValue[]).reduce((n, v) => n + 1 + attributeValueSize(v), 0);
    }
    if (value.M !== null && typeof value.M === "object") {
        return (
            3 +
            Object.entries(value.M as Record<string, AnyAttributeValue>).reduce((n, [k, v]) => n + 1 + utf8(k) + attributeValueSize(v), 0)
        );
    }
    return 0;
}

/** The size of an item: the sum of its attribute names' UTF-8 bytes and its values' sizes. */
export function itemSize(item: AnyAttributeValue | undefined): number {
    if (!item) {
        return 0;
    }
    return Object.entries(item as Record<string, AnyAttributeValue>).reduce(
        (n, [name, value]) => n + utf8(name) + attributeValueSize(value),
        0,
    );
}

/** The larger of a stream record's images: what the item weighed when the record was written. */
export function recordImageSize(record: DynamoDBRecord | undefined): number {
    const images = [record?.dynamodb?.NewImage, record?.dynamodb?.OldImage] as Array<Record<string, StreamAttributeValue> | undefined>;
    return Math.max(0, ...images.map((image) => itemSize(image)));
}
