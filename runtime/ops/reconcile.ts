/**
 * Reconciling a key's eventual count from its items: for the one case the stream cannot mend, records lost before
 * the consumer applied them (older than the stream's 24 hours: a records-expired message in the fatal queue).
 *
 * Eventual is the count of the key's counted items once every record of the key is applied (runtime/stream/). A
 * reconcile reads the eventual item, the items, and the eventual item again, and sets the count to the items' only if
 * the eventual item did not move meanwhile and does not move before its write (the write is conditional on the count
 * and every mark it read). A live item not flagged yet is left to the backfill (its flag's record counts it): the
 * reconcile answers "pending" and writes nothing. What it cannot see is a record written before its read and not yet
 * applied: run it once the key's writes have stopped long enough for the stream to drain (the consumer's lag,
 * normally a second); a key still written is answered "busy" and left as it is.
 */
import {
    ConditionalCheckFailedException,
    GetItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { eventualKey, numberOf } from "../shared/keys";
import { isCounted, wantsFlag, type ItemImage } from "../shared/selection";
import { readItems } from "../heal/heal";
import { MARK_PREFIX } from "../stream/marks";

export interface ReconcileOptions {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
    /** Reads before answering "busy". @default 3 */
    readonly attempts?: number;
}

export interface ReconcileResult {
    readonly key: string;
    /** exact: nothing to do. corrected: eventual set to the items. pending: live items do not count yet (run the backfill, then reconcile again). busy: the key was written meanwhile. */
    readonly outcome: "exact" | "corrected" | "pending" | "busy";
    readonly eventualBefore: number;
    readonly eventualAfter: number;
    /** Counted items in the table. */
    readonly items: number;
    /** Live items that do not carry the counted flag (the backfill's to flag). */
    readonly unflagged: number;
}

export async function reconcileKey(key: string, options: ReconcileOptions): Promise<ReconcileResult> {
    const { config } = options;
    let before = 0;
    for (let attempt = 0; attempt < (options.attempts ?? 3); attempt++) {
        const first = await readEventual(key, options);
        before = numberOf(first, config.countAttribute);
        const items = await readItems(key, options);
        const unflagged = items.filter((item) => wantsFlag(item as ItemImage, config)).length;
        if (unflagged > 0) {
            // Live items that do not count yet: the backfill flags them (their records count them), never a reconcile,
            // which would count them once more when those records arrive.
            return {
                key,
                outcome: "pending",
                eventualBefore: before,
                eventualAfter: before,
                items: items.filter((i) => isCounted(i as ItemImage, config)).length,
                unflagged,
            };
        }
        const counted = items.filter((item) => isCounted(item as ItemImage, config)).length;
        const second = await readEventual(key, options);
        if (!same(first, second, config.countAttribute)) {
            continue;
        }
        if (counted === before) {
            return { key, outcome: "exact", eventualBefore: before, eventualAfter: before, items: counted, unflagged: 0 };
        }
        if (await write(key, counted, second, options)) {
            return { key, outcome: "corrected", eventualBefore: before, eventualAfter: counted, items: counted, unflagged: 0 };
        }
    }
    return { key, outcome: "busy", eventualBefore: before, eventualAfter: before, items: 0, unflagged: 0 };
}

async function readEventual(key: string, options: ReconcileOptions): Promise<Record<string, AttributeValue> | undefined> {
    const response = await options.dynamodb.send(
        new GetItemCommand({ TableName: options.config.countersTableName, Key: eventualKey(options.config, key), ConsistentRead: true }),
    );
    return response.Item;
}

/** The count and every mark: what says the consumer applied nothing between two reads. */
function same(
    a: Record<string, AttributeValue> | undefined,
    b: Record<string, AttributeValue> | undefined,
    countAttribute: string,
): boolean {
    const view = (item: Record<string, AttributeValue> | undefined) =>
        JSON.stringify([
            item?.[countAttribute]?.N ?? null,
            ...Object.entries(item ?? {})
                .filter(([n]) => n.startsWith(MARK_PREFIX))
                .sort(([x], [y]) => (x < y ? -1 : 1)),
        ]);
    return view(a) === view(b);
}

async function write(
    key: string,
    count: number,
    read: Record<string, AttributeValue> | undefined,
    options: ReconcileOptions,
): Promise<boolean> {
    const { config } = options;
    const names: Record<string, string> = { "#c": config.countAttribute };
    const values: Record<string, AttributeValue> = { ":n": { N: String(count) } };
    const conditions = [read?.[config.countAttribute] === undefined ? "attribute_not_exists(#c)" : "#c = :c0"];
    if (read?.[config.countAttribute] !== undefined) {
        values[":c0"] = read[config.countAttribute]!;
    }
    Object.entries(read ?? {})
        .filter(([n]) => n.startsWith(MARK_PREFIX))
        .forEach(([n, v], i) => {
            names[`#m${i}`] = n;
            values[`:m${i}`] = v;
            conditions.push(`#m${i} = :m${i}`);
        });
    try {
        await options.dynamodb.send(
            new UpdateItemCommand({
                TableName: config.countersTableName,
                Key: eventualKey(config, key),
                UpdateExpression: "SET #c = :n",
                ConditionExpression: conditions.join(" AND "),
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: values,
            }),
        );
        return true;
    } catch (error) {
        if (error instanceof ConditionalCheckFailedException) {
            return false;
        }
        throw error;
    }
}
