/**
 * The client's input checks: every argument is checked before anything is written, and a bad one
 * raises InvalidArgumentError naming it. Pure: no AWS calls.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { ConfigurationError, layoutProblems, layoutWithDefaults, type CounterTableConfig, type CounterTableLayout } from "./config";
import { InvalidArgumentError } from "./errors";
import { PARTITION_KEY_MAX_BYTES, SORT_KEY_MAX_BYTES } from "./records";

export type CounterMode = "utilization" | "strict";

export const DEFAULT_ATTEMPTS = 6;

/** The client's options once checked, with defaults filled in. */
export interface ResolvedClientOptions {
    readonly config: CounterTableConfig;
    readonly mode: CounterMode;
    readonly attempts: number;
    /** Where a soft delete stores its own token: `<tokenAttribute>_delete`. */
    readonly deleteTokenAttribute: string;
    /** Attribute names callers cannot set: the keys and the counter's own attributes. */
    readonly reserved: ReadonlySet<string>;
}

/**
 * Checks the client's constructor options; throws ConfigurationError naming every bad field.
 */
export function resolveClientOptions(
    options: Partial<CounterTableLayout> & { tableName?: unknown; dynamodb?: unknown; mode?: unknown; attempts?: unknown },
): ResolvedClientOptions {
    const problems: string[] = [];
    const layout = layoutWithDefaults(options);
    problems.push(...layoutProblems(layout));
    const tableName = options.tableName;
    if (typeof tableName !== "string" || tableName.length < 3 || tableName.length > 255) {
        problems.push("[tableName] must be a table name of 3 to 255 characters");
    }
    const dynamodb = options.dynamodb as { send?: unknown } | undefined;
    if (!dynamodb || typeof dynamodb.send !== "function") {
        problems.push("[dynamodb] must be a DynamoDBClient");
    }
    const mode = options.mode ?? "utilization";
    if (mode !== "utilization" && mode !== "strict") {
        problems.push(`[mode] must be "utilization" or "strict"`);
    }
    const attempts = options.attempts ?? DEFAULT_ATTEMPTS;
    if (typeof attempts !== "number" || !Number.isInteger(attempts) || attempts < 1 || attempts > 20) {
        problems.push("[attempts] must be an integer from 1 to 20");
    }
    const deleteTokenAttribute = `${layout.tokenAttribute}_delete`;
    const names = [layout.partitionKey, layout.sortKey, layout.processedAttribute, layout.deletedAttribute];
    if (names.includes(deleteTokenAttribute) || Buffer.byteLength(deleteTokenAttribute, "utf8") > 255) {
        problems.push(`[tokenAttribute] must leave "${deleteTokenAttribute}" free for the soft delete's token (at most 255 bytes)`);
    }
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return {
        config: { ...layout, tableName: tableName as string },
        mode: mode as CounterMode,
        attempts: attempts as number,
        deleteTokenAttribute,
        reserved: new Set([
            layout.partitionKey,
            layout.sortKey,
            layout.processedAttribute,
            layout.deletedAttribute,
            layout.tokenAttribute,
            deleteTokenAttribute,
        ]),
    };
}

export function checkKey(key: unknown): asserts key is string {
    if (typeof key !== "string" || key.length === 0) {
        throw new InvalidArgumentError("key", "must be a non-empty string");
    }
    if (Buffer.byteLength(key, "utf8") > PARTITION_KEY_MAX_BYTES) {
        throw new InvalidArgumentError("key", `must be at most ${PARTITION_KEY_MAX_BYTES} bytes`);
    }
}

export function checkId(id: unknown, counterPrefix: string): asserts id is string {
    if (typeof id !== "string" || id.length === 0) {
        throw new InvalidArgumentError("id", "must be a non-empty string");
    }
    if (Buffer.byteLength(id, "utf8") > SORT_KEY_MAX_BYTES) {
        throw new InvalidArgumentError("id", `must be at most ${SORT_KEY_MAX_BYTES} bytes`);
    }
    if (id.startsWith(counterPrefix)) {
        throw new InvalidArgumentError("id", `must not start with the reserved prefix "${counterPrefix}"`);
    }
}

export function checkLimit(limit: unknown): asserts limit is number {
    if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
        throw new InvalidArgumentError("limit", "must be a non-negative safe integer");
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
