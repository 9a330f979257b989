/**
 * The client's input checks: every argument is checked before anything is written, and a bad one
 * raises InvalidArgumentError naming it. Pure: no AWS calls.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import {
    ConfigurationError,
    counterShardsProblems,
    layoutProblems,
    regionAttributeProblems,
    layoutWithDefaults,
    type CounterTableConfig,
    type CounterTableLayout,
    type FlatSelection,
} from "../shared/config";
import { removedFieldProblems } from "../shared/removed-fields";
import { InvalidArgumentError } from "../shared/errors";
import {
    CLOCK_SKEW_MS,
    MAX_CLIENT_DEADLINE_MS,
    MIN_CLIENT_DEADLINE_MS,
    REQUEST_LIFETIME_MS,
    smallestQuietWindowSeconds,
    windowCovers,
} from "../heal/heal-window";
import { markerKeyProblem, PARTITION_KEY_MAX_BYTES, SORT_KEY_MAX_BYTES } from "../shared/key-limits";
import type { ItemSelection } from "../shared/selection";
import { shardedKeyProblem } from "../shards/layout";
import { DEFAULT_REGION_ATTRIBUTE, normalizedRegions, REGION_NAME_MAX_BYTES, regionsProblems, type RegionsConfig } from "../regions/config";
import { FOREIGN_DELETE_ATTRIBUTE } from "../regions/ownership";
import { ledgerPeriodMs } from "../ledger/ledger";

export type CounterMode = "utilization" | "strict";

/**
 * Attempts per write. The SDK's own retries are off for the client's writes, so this is the whole
 * budget (it used to multiply the SDK's 3); the call's deadline bounds it in time.
 */
export const DEFAULT_ATTEMPTS = 10;

/** The default client deadline: no write of one call is sent later than this after the call began. */
export const DEFAULT_DEADLINE_MS = 10_000;

/** The layout and tables the client works on, with every default filled in. */
export interface ClientConfig extends CounterTableConfig {
    readonly countersTableName: string;
    readonly selection: ItemSelection;
}

/** The client's options once checked, with defaults filled in. */
export interface ResolvedClientOptions {
    readonly config: ClientConfig;
    readonly mode: CounterMode;
    readonly attempts: number;
    readonly deadlineMs: number;
    /** Where a soft delete (and a delete's claim) stores its own token: `<tokenAttribute>_delete`. */
    readonly deleteTokenAttribute: string;
    /** Attribute names callers cannot set: the keys and the counter's own attributes. */
    readonly reserved: ReadonlySet<string>;
    /** Bytes a created item must leave free for the counter's later writes to it (the soft delete's additions). */
    readonly headroom: number;
    /** The period of the ledger entries the client writes: a tenth of the deployed quiet window (runtime/ledger/). */
    readonly ledgerPeriodMs: number;
}

/** The bytes of a client token (a UUIDv7 in its 36-character text form). */
const TOKEN_BYTES = 36;

function checkTableName(value: unknown, field: string, problems: string[]): void {
    if (typeof value !== "string" || value.length < 3 || value.length > 255) {
        problems.push(`[${field}] must be a table name of 3 to 255 characters`);
    }
}

/**
 * Checks the client's constructor options; throws ConfigurationError naming every bad field.
 */
export function resolveClientOptions(
    options: Partial<CounterTableLayout> &
        FlatSelection & {
            tableName?: unknown;
            countersTableName?: unknown;
            dynamodb?: unknown;
            mode?: unknown;
            attempts?: unknown;
            deadlineMs?: unknown;
            healQuietWindowSeconds?: unknown;
            ledgerPeriodSeconds?: unknown;
            counterShards?: unknown;
            selection?: ItemSelection;
            regions?: unknown;
            regionAttribute?: unknown;
        },
): ResolvedClientOptions {
    const problems: string[] = removedFieldProblems(options);
    const layout = layoutWithDefaults(options);
    // The selection is checked below, once, under the client's own option names ([selection.*]).
    problems.push(...layoutProblems(layout).filter((p) => !p.startsWith("[counted")));
    checkTableName(options.tableName, "tableName", problems);
    // No default: the component deploys a counters table of its own by default, and a client that silently
    // took the user's table would write best-effort where nothing reads eventual.
    if (options.countersTableName === undefined) {
        problems.push(
            "[countersTableName] must be set: the counters table the component deploys (its clientConfig's countersTableName), or the same name as [tableName] for the same-table placement",
        );
    } else {
        checkTableName(options.countersTableName, "countersTableName", problems);
    }
    problems.push(
        ...counterShardsProblems(
            options.counterShards,
            typeof options.tableName === "string" ? options.tableName : undefined,
            typeof options.countersTableName === "string" ? options.countersTableName : undefined,
        ),
    );
    // The regions setting (runtime/regions/): its shape, the stamp's name, and a counters table of its own.
    problems.push(
        ...regionsProblems(options.regions, undefined, {
            tableName: typeof options.tableName === "string" ? options.tableName : undefined,
            countersTableName: typeof options.countersTableName === "string" ? options.countersTableName : undefined,
        }),
        ...regionAttributeProblems(layout, options.regionAttribute),
    );
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
    const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
    const deadlineValid =
        typeof deadlineMs === "number" &&
        Number.isInteger(deadlineMs) &&
        deadlineMs >= MIN_CLIENT_DEADLINE_MS &&
        deadlineMs <= MAX_CLIENT_DEADLINE_MS;
    if (!deadlineValid) {
        problems.push(`[deadlineMs] must be an integer from ${MIN_CLIENT_DEADLINE_MS} to ${MAX_CLIENT_DEADLINE_MS}`);
    }
    // The deployed settler's quiet window (the component's clientConfig) must cover this deadline (heal-window.ts).
    const window = options.healQuietWindowSeconds;
    if (window !== undefined) {
        if (typeof window !== "number" || !Number.isInteger(window) || window <= 0) {
            problems.push("[healQuietWindowSeconds] must be a positive integer (the component's clientConfig value)");
        } else if (deadlineValid && !windowCovers(window * 1000, deadlineMs)) {
            problems.push(
                `[deadlineMs] must be below [healQuietWindowSeconds] (${window} s) - ${REQUEST_LIFETIME_MS / 1000} s request lifetime - ${CLOCK_SKEW_MS / 1000} s clock skew: ` +
                    `the settler's heal would not wait for this client's last write (deadlineMs ${deadlineMs} needs a window of at least ${smallestQuietWindowSeconds(deadlineMs)} s)`,
            );
        }
    }
    const period = options.ledgerPeriodSeconds;
    if (period !== undefined && (typeof period !== "number" || !Number.isInteger(period) || period < 1 || period > 86_400)) {
        problems.push("[ledgerPeriodSeconds] must be an integer from 1 to 86400");
    }
    const deleteTokenAttribute = `${layout.tokenAttribute}_delete`;
    const names = [layout.partitionKey, layout.sortKey, layout.deletedAttribute];
    if (names.includes(deleteTokenAttribute) || Buffer.byteLength(deleteTokenAttribute, "utf8") > 255) {
        problems.push(`[tokenAttribute] must leave "${deleteTokenAttribute}" free for the soft delete's token (at most 255 bytes)`);
    }
    // The selection as an object, or flat as the component's clientConfig output carries it (layoutWithDefaults reads both).
    const selection = layout.selection;
    const reserved = new Set([layout.partitionKey, layout.sortKey, layout.deletedAttribute, layout.tokenAttribute, deleteTokenAttribute]);
    problems.push(...selectionProblems(selection, layout, reserved));
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    if (selection.kind === "attribute") {
        reserved.add(selection.name);
    }
    if (options.regions !== undefined) {
        // The stamp is the client's: a caller's attribute must not name another region as the owner.
        reserved.add(typeof options.regionAttribute === "string" ? options.regionAttribute : DEFAULT_REGION_ATTRIBUTE);
        reserved.add(FOREIGN_DELETE_ATTRIBUTE);
    }
    const tableName = options.tableName as string;
    return {
        config: {
            ...layout,
            selection,
            tableName,
            countersTableName: options.countersTableName as string,
            ...(options.counterShards === undefined || options.counterShards === 1
                ? {}
                : { counterShards: options.counterShards as number }),
            ...(options.regions === undefined ? {} : { regions: normalizedRegions(options.regions as RegionsConfig) }),
            ...(options.regionAttribute === undefined ? {} : { regionAttribute: options.regionAttribute as string }),
        },
        mode: mode as CounterMode,
        attempts: attempts as number,
        deadlineMs: deadlineMs as number,
        deleteTokenAttribute,
        reserved,
        ledgerPeriodMs: period === undefined ? ledgerPeriodMs(window as number | undefined) : (period as number) * 1000,
        // What a soft delete (or a delete's claim) adds: `deleted = true` and the delete token.
        headroom:
            Buffer.byteLength(layout.deletedAttribute, "utf8") +
            1 +
            Buffer.byteLength(deleteTokenAttribute, "utf8") +
            TOKEN_BYTES +
            // Regions: a delete made in another region than the owner's also writes the deleting region.
            (options.regions === undefined ? 0 : Buffer.byteLength(FOREIGN_DELETE_ATTRIBUTE, "utf8") + REGION_NAME_MAX_BYTES),
    };
}

function selectionProblems(selection: unknown, layout: CounterTableLayout, reserved: ReadonlySet<string>): string[] {
    const s = selection as { kind?: unknown; prefix?: unknown; name?: unknown; value?: unknown } | null;
    switch (s?.kind) {
        case "client":
            return [];
        case "sortKeyPrefix":
            if (typeof s.prefix !== "string" || s.prefix.length === 0 || Buffer.byteLength(s.prefix, "utf8") > SORT_KEY_MAX_BYTES) {
                return [`[selection.prefix] must be a non-empty string of at most ${SORT_KEY_MAX_BYTES} bytes`];
            }
            return s.prefix.startsWith(layout.counterPrefix) || layout.counterPrefix.startsWith(s.prefix)
                ? [`[selection.prefix] must not overlap the counter prefix "${layout.counterPrefix}"`]
                : [];
        case "attribute": {
            const problems: string[] = [];
            if (typeof s.name !== "string" || s.name.length === 0 || Buffer.byteLength(s.name, "utf8") > 255) {
                problems.push("[selection.name] must be an attribute name of 1 to 255 bytes");
            } else if (reserved.has(s.name)) {
                problems.push(`[selection.name] must not be one of the counter's own attributes ("${s.name}")`);
            }
            if (typeof s.value !== "string" || s.value.length === 0) {
                problems.push("[selection.value] must be a non-empty string");
            }
            return problems;
        }
        default:
            return [`[selection.kind] must be "client", "sortKeyPrefix" or "attribute"`];
    }
}

export function checkKey(key: unknown, counterShards = 1): asserts key is string {
    if (typeof key !== "string" || key.length === 0) {
        throw new InvalidArgumentError("key", "must be a non-empty string");
    }
    if (Buffer.byteLength(key, "utf8") > PARTITION_KEY_MAX_BYTES) {
        throw new InvalidArgumentError("key", `must be at most ${PARTITION_KEY_MAX_BYTES} bytes`);
    }
    const problem = shardedKeyProblem(key, counterShards);
    if (problem !== undefined) {
        throw new InvalidArgumentError("key", problem);
    }
}

export function checkId(id: unknown, counterPrefix: string, selection?: ItemSelection, regions?: RegionsConfig): asserts id is string {
    if (typeof id !== "string" || id.length === 0) {
        throw new InvalidArgumentError("id", "must be a non-empty string");
    }
    // Regions: the id's marker lives under its owner's prefix, which may be any member's (the longest is the bound).
    const longest = regions?.members
        .map((m) => m.region)
        .reduce((a, b) => (Buffer.byteLength(b, "utf8") > Buffer.byteLength(a, "utf8") ? b : a));
    const unmarkable = markerKeyProblem(
        regions === undefined || longest === undefined ? { counterPrefix } : { counterPrefix, regions: { ...regions, current: longest } },
        id,
    );
    if (unmarkable !== undefined) {
        throw new InvalidArgumentError("id", unmarkable);
    }
    if (id.startsWith(counterPrefix)) {
        throw new InvalidArgumentError("id", `must not start with the reserved prefix "${counterPrefix}"`);
    }
    if (selection?.kind === "sortKeyPrefix" && !id.startsWith(selection.prefix)) {
        throw new InvalidArgumentError("id", `must start with the counted prefix "${selection.prefix}"`);
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

/**
 * DynamoDB's maximum item size: 400 KB, counted as the sum of attribute name and value sizes.
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html#limits-items
 */
export const MAX_ITEM_BYTES = 400 * 1024;

/**
 * The size DynamoDB counts for an item, from the rules in "DynamoDB item sizes and formats"
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html):
 * each attribute is its name's UTF-8 bytes plus its value's size; a string is its UTF-8 bytes, a
 * binary its raw bytes, a number about 1 byte per two significant digits plus 1, a null or boolean
 * 1 byte, a list or map 3 bytes plus 1 byte and the size of each element (a map's element includes
 * its name). Where the rule is approximate (numbers, sets) this errs high by a byte, so an item it
 * accepts always fits.
 */
export function itemSize(item: Record<string, AttributeValue>): number {
    let size = 0;
    for (const [name, value] of Object.entries(item)) {
        size += Buffer.byteLength(name, "utf8") + valueSize(value);
    }
    return size;
}

function valueSize(value: AttributeValue): number {
    if (value.S !== undefined) {
        return Buffer.byteLength(value.S, "utf8");
    }
    if (value.N !== undefined) {
        return numberSize(value.N);
    }
    if (value.B !== undefined) {
        return value.B.byteLength;
    }
    if (value.BOOL !== undefined || value.NULL !== undefined) {
        return 1;
    }
    if (value.L !== undefined) {
        return 3 + value.L.reduce((sum, element) => sum + 1 + valueSize(element), 0);
    }
    if (value.M !== undefined) {
        return (
            3 + Object.entries(value.M).reduce((sum, [name, element]) => sum + 1 + Buffer.byteLength(name, "utf8") + valueSize(element), 0)
        );
    }
    if (value.SS !== undefined) {
        return 3 + value.SS.reduce((sum, element) => sum + 1 + Buffer.byteLength(element, "utf8"), 0);
    }
    if (value.NS !== undefined) {
        return 3 + value.NS.reduce((sum, element) => sum + 1 + numberSize(element), 0);
    }
    if (value.BS !== undefined) {
        return 3 + value.BS.reduce((sum, element) => sum + 1 + element.byteLength, 0);
    }
    return 0;
}

/** 1 byte per two significant digits (leading and trailing zeroes trimmed), plus 1, plus 1 to err high. */
function numberSize(text: string): number {
    const mantissa = text.replace(/^[-+]/, "").split(/e/i)[0] ?? "";
    const digits = mantissa.replace(".", "").replace(/^0+/, "").replace(/0+$/, "");
    return Math.ceil(Math.max(digits.length, 1) / 2) + 2;
}

/**
 * Refuses an item that would leave less than `headroom` bytes under DynamoDB's limit: the room the
 * counter's own later writes to the item need (the soft delete's flag and token), so that an item the
 * client creates can always be deleted.
 */
export function checkItemSize(item: Record<string, AttributeValue>, headroom: number): void {
    const size = itemSize(item);
    if (size + headroom > MAX_ITEM_BYTES) {
        throw new InvalidArgumentError(
            "attributes",
            `make the item ${size} bytes; at most ${MAX_ITEM_BYTES - headroom} bytes leave room for the counter's own attributes (${headroom} bytes) under DynamoDB's ${MAX_ITEM_BYTES}-byte item limit`,
        );
    }
}
