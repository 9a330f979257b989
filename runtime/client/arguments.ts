/**
 * The client's argument checks: every argument is checked before anything is written, and a bad one raises
 * InvalidArgumentError naming it. Pure: no AWS calls.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { InvalidArgumentError } from "../shared/errors";
import { idProblem, keyProblem } from "../shared/keys";
import type { ItemSelection } from "../shared/config";
import { ITEM_MAX_BYTES, itemSize } from "../shared/item-size";

export function checkKey(key: unknown): asserts key is string {
    const problem = keyProblem(key);
    if (problem !== undefined) {
        throw new InvalidArgumentError("key", problem);
    }
}

export function checkId(id: unknown, counterPrefix: string, selection: ItemSelection): asserts id is string {
    const problem = idProblem(id, counterPrefix);
    if (problem !== undefined) {
        throw new InvalidArgumentError("id", problem);
    }
    if (selection.kind === "sortKeyPrefix" && !(id as string).startsWith(selection.prefix)) {
        throw new InvalidArgumentError("id", `must start with the counted prefix "${selection.prefix}"`);
    }
}

export function checkLimit(limit: unknown, field = "limit"): asserts limit is number {
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
        throw new InvalidArgumentError(field, `must be a non-negative safe integer (got ${JSON.stringify(limit)})`);
    }
}

/** Marshals the caller's attributes, refusing reserved names and values DynamoDB cannot store. */
export function marshalAttributes(
    attributes: Record<string, unknown> | undefined,
    reserved: ReadonlySet<string>,
): Record<string, AttributeValue> {
    if (attributes === undefined) {
        return {};
    }
    if (attributes === null || typeof attributes !== "object" || Array.isArray(attributes)) {
        throw new InvalidArgumentError("attributes", "must be an object of attribute names to values");
    }
    const out: Record<string, AttributeValue> = {};
    for (const [name, value] of Object.entries(attributes)) {
        if (reserved.has(name)) {
            throw new InvalidArgumentError(`attributes.${name}`, "is reserved by the counter and cannot be set");
        }
        if (name.length === 0 || Buffer.byteLength(name, "utf8") > 255) {
            throw new InvalidArgumentError(`attributes.${name}`, "must be a name of 1 to 255 bytes");
        }
        if (value === undefined) {
            continue;
        }
        const unstorable = findUnstorable(value);
        if (unstorable !== undefined) {
            throw new InvalidArgumentError(`attributes.${name}`, `cannot be stored: ${unstorable}`);
        }
        try {
            const marshalled = marshall({ [name]: value }, { removeUndefinedValues: true });
            if (marshalled[name] !== undefined) {
                out[name] = marshalled[name];
            }
        } catch (error) {
            throw new InvalidArgumentError(`attributes.${name}`, `cannot be stored: ${(error as Error).message}`);
        }
    }
    return out;
}

/** A value marshall() would drop without a word (a function or a symbol, at any depth), described. */
function findUnstorable(value: unknown, depth = 0): string | undefined {
    if (typeof value === "function" || typeof value === "symbol") {
        return `a ${typeof value} is not a DynamoDB value`;
    }
    if (depth > 32) {
        return "it is nested deeper than DynamoDB allows (32 levels)";
    }
    if (value !== null && typeof value === "object") {
        const children = value instanceof Map ? [...value.values()] : value instanceof Set ? [...value] : Object.values(value);
        for (const child of children) {
            const found = findUnstorable(child, depth + 1);
            if (found !== undefined) {
                return found;
            }
        }
    }
    return undefined;
}

/** DynamoDB's maximum item size: 400 KB, the sum of attribute name and value sizes. */
export const MAX_ITEM_BYTES = ITEM_MAX_BYTES;

/** Refuses an item that would leave less than `headroom` bytes under the 400 KB limit for the counter's later writes. */
export function checkItemSize(item: Record<string, AttributeValue>, headroom: number): void {
    const size = itemSize(item);
    if (size + headroom > MAX_ITEM_BYTES) {
        throw new InvalidArgumentError(
            "attributes",
            `make the item ${size} bytes; at most ${MAX_ITEM_BYTES - headroom} bytes leave room for the counter's own attributes (${headroom} bytes) under DynamoDB's ${MAX_ITEM_BYTES}-byte item limit`,
        );
    }
}
