/**
 * Item sizes as DynamoDB counts them ("DynamoDB item sizes and formats"), and its size limits. Shared by the parity
 * layer (which meters capacity with them) and the client (which refuses an item with no room left for a delete).
 * Pure: no I/O.
 */

/** DynamoDB's limit on actions in one TransactWriteItems. */
export const TRANSACTION_MAX_ACTIONS = 100;
/** DynamoDB's limit on the aggregate size of the items in one transaction (1 MB = 1,048,576 bytes). */
export const TRANSACTION_MAX_BYTES = 4 * 1024 * 1024;
/** DynamoDB's item size limit. */
export const ITEM_MAX_BYTES = 400 * 1024;

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
