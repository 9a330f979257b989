/**
 * The pure half of the parity layer (local/engine/parity.ts): DynamoDB's documented limits and how it
 * meters work, with no I/O.
 *
 * Invariant: every figure here is DynamoDB's documented rule, with its source beside it; where
 * DynamoDB documents no rule (the depth of a partition's token bucket), the choice is stated.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { itemSize } from "../../runtime/shared/item-size";

export {
    itemSize,
    attributeValueSize,
    ITEM_MAX_BYTES,
    TRANSACTION_MAX_ACTIONS,
    TRANSACTION_MAX_BYTES,
} from "../../runtime/shared/item-size";

export type Item = Record<string, AttributeValue>;

/**
 * Write units of one item write: 1 per KB (1,024 bytes), rounded up, at least 1. A transactional
 * write costs twice that (prepare + commit).
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/provisioned-capacity-mode.html
 */
export function writeUnits(bytes: number): number {
    return Math.max(1, Math.ceil(bytes / 1024));
}

/** Read units of one item read: 1 per 4 KB, rounded up; half for an eventually consistent read. */
export function readUnits(bytes: number, consistent: boolean): number {
    const units = Math.max(1, Math.ceil(bytes / 4096));
    return consistent ? units : units / 2;
}

/**
 * Each partition serves at most 1,000 WCU/s and 3,000 RCU/s, in both capacity modes
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html).
 * The 300 seconds of unused capacity DynamoDB retains ("burst capacity") are table-level and
 * "can't alleviate partition-level throttling" (AWS Knowledge Center, "How does DynamoDB handle
 * spiky workloads in short intervals"), so a partition's bucket holds one second of its rate.
 */
export const PARTITION_WRITE_UNITS_PER_SECOND = 1_000;
export const PARTITION_READ_UNITS_PER_SECOND = 3_000;
export const PARTITION_BUCKET_SECONDS = 1;

/**
 * How the layer meters one table: the rates of each of its metered units, and what a unit is.
 *
 * - "partition": every item of one partition key value shares one bucket. That is the most one key can
 *   get from DynamoDB (a real partition holds many keys), and the default for every table.
 * - "item": each item (partition and sort key) has a bucket of its own. That is the most split for heat
 *   can give a key whose items spread over sort keys: DynamoDB may split a hot partition's key range down
 *   to single items, never below one, so one item is still served at most a partition's rate.
 *
 * A harness that cannot reach DynamoDB's rates on DynamoDB Local (a few hundred writes a second on two
 * cores) scales them down per table, so that the ratios between the API's writes, the consumer's
 * transactions and one partition's capacity stay DynamoDB's.
 */
export interface TableMetering {
    readonly writeUnitsPerSecond: number;
    readonly readUnitsPerSecond: number;
    readonly per: "partition" | "item";
}

/** DynamoDB's own metering, every table's unless a harness says otherwise. */
export const DEFAULT_METERING: TableMetering = Object.freeze({
    writeUnitsPerSecond: PARTITION_WRITE_UNITS_PER_SECOND,
    readUnitsPerSecond: PARTITION_READ_UNITS_PER_SECOND,
    per: "partition",
});

/**
 * The name of the bucket an item is metered on: `table/<partition key value>` for a table metered per
 * partition (the layer's names since it was written), `table/<partition key value>/<sort key value>` for
 * one metered per item. Undefined when the item lacks a key attribute the unit needs.
 */
export function meteredUnit(
    table: string,
    per: TableMetering["per"],
    hashValue: AttributeValue | undefined,
    rangeValue: AttributeValue | undefined,
): string | undefined {
    if (hashValue === undefined) {
        return undefined;
    }
    const partition = `${table}/${JSON.stringify(hashValue)}`;
    if (per === "partition") {
        return partition;
    }
    return rangeValue === undefined ? partition : `${partition}/${JSON.stringify(rangeValue)}`;
}

/**
 * A token bucket in DynamoDB's manner: a request is admitted while the bucket holds any capacity,
 * and what it consumed is taken afterwards, so one large request can leave the bucket in debt and
 * the requests after it are throttled until the debt is refilled.
 */
export class TokenBucket {
    private tokens: number;
    private last: number;

    constructor(
        readonly ratePerSecond: number,
        readonly depthSeconds: number,
        now: number,
    ) {
        this.tokens = ratePerSecond * depthSeconds;
        this.last = now;
    }

    private refill(now: number): void {
        const elapsed = Math.max(0, now - this.last) / 1000;
        this.tokens = Math.min(this.ratePerSecond * this.depthSeconds, this.tokens + elapsed * this.ratePerSecond);
        this.last = now;
    }

    /** True when a request arriving now is served. */
    admits(now: number): boolean {
        this.refill(now);
        return this.tokens > 0;
    }

    consume(units: number, now: number): void {
        this.refill(now);
        this.tokens -= units;
    }

    level(now: number): number {
        this.refill(now);
        return this.tokens;
    }
}

/** A document path of the update expression resolved to a top-level attribute name, or undefined. */
function topLevelName(path: string, names: Record<string, string>): string | undefined {
    const p = path.trim();
    if (!/^[#A-Za-z_][A-Za-z0-9_]*$/.test(p)) {
        return undefined; // a nested path (a.b, a[0]): not evaluated
    }
    return p.startsWith("#") ? names[p] : p;
}

/** Splits on commas outside parentheses. */
function splitTopLevel(text: string): string[] {
    const parts: string[] = [];
    let depth = 0;
    let current = "";
    for (const ch of text) {
        if (ch === "(") depth++;
        if (ch === ")") depth--;
        if (ch === "," && depth === 0) {
            parts.push(current);
            current = "";
        } else {
            current += ch;
        }
    }
    if (current.trim() !== "") {
        parts.push(current);
    }
    return parts;
}

function addNumbers(a: string, b: string, sign: 1 | -1): string {
    // Exact for integers (what counters use); other numbers go through floating point.
    if (/^-?\d+$/.test(a) && /^-?\d+$/.test(b)) {
        return String(BigInt(a) + BigInt(sign) * BigInt(b));
    }
    return String(Number(a) + sign * Number(b));
}

/**
 * The item an UpdateItem leaves, for the SET / REMOVE / ADD / DELETE forms on top-level attributes
 * (`SET a = :v`, `SET a = if_not_exists(a, :v)`, `SET a = a + :v`, `ADD a :n`, `REMOVE a`).
 * Returns undefined for anything else (nested paths, list_append): the caller then bounds the size.
 */
export function applyUpdateExpression(
    current: Item | undefined,
    key: Item,
    expression: string,
    names: Record<string, string> = {},
    values: Record<string, AttributeValue> = {},
): Item | undefined {
    const item: Item = { ...(current ?? key) };
    const clauses = expression.split(/\b(SET|REMOVE|ADD|DELETE)\b/i).map((s) => s.trim());
    const operand = (text: string): AttributeValue | undefined => {
        const t = text.trim();
        if (t.startsWith(":")) {
            return values[t];
        }
        const ifNotExists = /^if_not_exists\s*\(\s*([^,]+?)\s*,\s*(.+?)\s*\)$/i.exec(t);
        if (ifNotExists) {
            const name = topLevelName(ifNotExists[1]!, names);
            if (name === undefined) {
                return undefined;
            }
            return item[name] ?? operand(ifNotExists[2]!);
        }
        const name = topLevelName(t, names);
        return name === undefined ? undefined : item[name];
    };
    for (let i = 1; i < clauses.length; i += 2) {
        const verb = clauses[i]!.toUpperCase();
        for (const action of splitTopLevel(clauses[i + 1] ?? "")) {
            if (verb === "SET") {
                const eq = action.indexOf("=");
                const name = eq < 0 ? undefined : topLevelName(action.slice(0, eq), names);
                if (name === undefined) {
                    return undefined;
                }
                const rhs = action.slice(eq + 1).trim();
                const arithmetic = /^(.+?)\s*([+-])\s*(.+)$/.exec(rhs);
                let value: AttributeValue | undefined;
                if (arithmetic && !/^if_not_exists/i.test(rhs)) {
                    const a = operand(arithmetic[1]!);
                    const b = operand(arithmetic[3]!);
                    if (a?.N === undefined || b?.N === undefined) {
                        return undefined;
                    }
                    value = { N: addNumbers(a.N, b.N, arithmetic[2] === "+" ? 1 : -1) };
                } else {
                    value = operand(rhs);
                }
                if (value === undefined) {
                    return undefined;
                }
                item[name] = value;
            } else if (verb === "REMOVE") {
                const name = topLevelName(action, names);
                if (name === undefined) {
                    return undefined;
                }
                delete item[name];
            } else {
                const [path, valueRef] = action.trim().split(/\s+/);
                const name = path === undefined ? undefined : topLevelName(path, names);
                const value = valueRef === undefined ? undefined : values[valueRef];
                if (name === undefined || value === undefined) {
                    return undefined;
                }
                const existing = item[name];
                if (verb === "ADD" && value.N !== undefined) {
                    item[name] = { N: existing?.N === undefined ? value.N : addNumbers(existing.N, value.N, 1) };
                } else if (value.SS || value.NS || value.BS) {
                    const type = value.SS ? "SS" : value.NS ? "NS" : "BS";
                    const before = ((existing as unknown as Record<string, unknown> | undefined)?.[type] as unknown[] | undefined) ?? [];
                    const change = (value as unknown as Record<string, unknown>)[type] as unknown[];
                    const after = verb === "ADD" ? [...new Set([...before, ...change])] : before.filter((v) => !change.includes(v));
                    if (after.length === 0) {
                        delete item[name];
                    } else {
                        item[name] = { [type]: after } as unknown as AttributeValue;
                    }
                } else {
                    return undefined;
                }
            }
        }
    }
    return item;
}

/**
 * The size of the item an update leaves: exact when the expression is evaluated, otherwise an
 * upper bound (the current item plus every value and name the request carries).
 */
export function updatedItemSize(
    current: Item | undefined,
    key: Item,
    expression: string | undefined,
    names: Record<string, string> | undefined,
    values: Record<string, AttributeValue> | undefined,
): number {
    if (expression === undefined) {
        return itemSize(current ?? key);
    }
    const updated = applyUpdateExpression(current, key, expression, names, values);
    if (updated) {
        return itemSize(updated);
    }
    const extra =
        Object.values(values ?? {}).reduce((n, v) => n + itemSize({ v }) - 1, 0) +
        Object.values(names ?? {}).reduce((n, name) => n + Buffer.byteLength(name, "utf8"), 0);
    return itemSize(current ?? key) + extra;
}

/** A global secondary index as the layer bills it: its key attributes and what it projects. */
export interface IndexSchema {
    readonly name: string;
    readonly hashKey: string;
    readonly rangeKey?: string;
    readonly projection: "ALL" | "KEYS_ONLY" | "INCLUDE";
    /** INCLUDE: the projected attributes besides the keys. */
    readonly projected?: readonly string[];
    /** The table's own key attributes: an index entry holds them too. */
    readonly tableKeys: readonly string[];
}

/**
 * Write units one item write costs an index, as DynamoDB bills them: an entry added or removed is one write
 * (per KB of the entry), an entry whose index key changes is a delete and a put, an entry whose key stays and
 * whose projected attributes change is one write, and an item the index does not hold (sparse: a key
 * attribute missing) costs nothing. `before` and `after` are the item's images (undefined: no item).
 */
export function indexWriteUnits(index: IndexSchema, before: Item | undefined, after: Item | undefined): number {
    const entry = (item: Item | undefined): Item | undefined => {
        if (
            item === undefined ||
            item[index.hashKey] === undefined ||
            (index.rangeKey !== undefined && item[index.rangeKey] === undefined)
        ) {
            return undefined;
        }
        if (index.projection === "ALL") {
            return item;
        }
        const names = [...index.tableKeys, index.hashKey, ...(index.rangeKey ? [index.rangeKey] : []), ...(index.projected ?? [])];
        return Object.fromEntries(names.filter((n) => item[n] !== undefined).map((n) => [n, item[n]!]));
    };
    const old = entry(before);
    const next = entry(after);
    const sameKey = (a: Item, b: Item) =>
        JSON.stringify(a[index.hashKey]) === JSON.stringify(b[index.hashKey]) &&
        (index.rangeKey === undefined || JSON.stringify(a[index.rangeKey]) === JSON.stringify(b[index.rangeKey]));
    if (old === undefined && next === undefined) {
        return 0;
    }
    if (old === undefined) {
        return writeUnits(itemSize(next));
    }
    if (next === undefined) {
        return writeUnits(itemSize(old));
    }
    if (!sameKey(old, next)) {
        return writeUnits(itemSize(old)) + writeUnits(itemSize(next));
    }
    return JSON.stringify(old) === JSON.stringify(next) ? 0 : writeUnits(itemSize(next));
}

/** DynamoDB's messages, as the service returns them. */
export const MESSAGES = {
    /**
     * Throttling on an on-demand table, from the TransactionCanceledException reference
     * (ThrottlingError, "returned when writes get throttled on an On-Demand table").
     */
    onDemandThrottled:
        "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. " +
        "If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html.",
    /** Throttling on a provisioned table (ProvisionedThroughputExceededException). */
    provisionedThrottled:
        "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.",
    /**
     * A transaction whose items add up to more than 4 MB. AWS documents the limit, not its message;
     * this is the message independent conformance suites record from the service (nubo-db/dynoxide).
     */
    transactionTooLarge:
        "Collection size of items exceeded, which can also be caused by the aggregate size of the items in the transaction exceeding the 4MB limit",
    /** More than 100 actions: the service's request-validation envelope. */
    tooManyActions: (count: number): string =>
        `1 validation error detected: Value '[${Array.from({ length: count }, (_, i) => `com.amazonaws.dynamodb.v20120810.TransactWriteItem@${(0x1f000000 + i * 7919).toString(16)}`).join(", ")}]' ` +
        "at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100",
    transactionCancelled: (codes: readonly string[]): string =>
        `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(", ")}]`,
};
