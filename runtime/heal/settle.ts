/**
 * One settler run: heal the keys the heal index lists as due, oldest first, up to a budget; then audit a few keys of
 * the counters table that nobody listed (a client that crashed between two writes, a threshold event a crashed
 * consumer never sent), and clear what no TTL removes in the same-table placement.
 *
 * Liveness: a key listed stays listed until a heal finds nothing left for later (heal.ts); a heal that meets writes on
 * every attempt leaves it listed. Once writes stop, every listed key is healed within ceil(listed / budget) runs after
 * its young lives turn old (two periods), and every key is audited within one pass of the audit's cursor.
 */
import { DeleteItemCommand, QueryCommand, ScanCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { eventualKey, numberOf, settlerCursorKey, streamPartitionKey, stringOf } from "../shared/keys";
import { readKeyCounters, parseCounterSortKey } from "../client/read";
import { healKey, type HealResult } from "./heal";
import { HEAL_DUE, HEAL_INDEX_NAME, HEAL_PARTITION, HEAL_SHARDS, healMark, healShardValue } from "./index-marks";
import { readThresholdState, THRESHOLD_ATTRIBUTE, type ThresholdEvent } from "../limits/thresholds";
import { regionalCounterPrefix } from "../regions/config";

export interface SettleOptions {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
    /** Keys healed per run. @default 200 */
    readonly keyBudget?: number;
    /** Counter items the audit reads per run. @default 100 */
    readonly auditItems?: number;
    /** Sends threshold events left unsent (a consumer that crashed between its write and its send). */
    readonly sendEvents?: (events: readonly ThresholdEvent[]) => Promise<boolean>;
    /** Stops the run between keys (Ctrl-C); the keys not healed stay listed. */
    readonly signal?: AbortSignal;
}

export const SETTLER_DEFAULTS = Object.freeze({ keyBudget: 200, auditItems: 100 });

export interface SettleReport {
    /** Keys the index listed as due now (up to the budget). */
    readonly due: number;
    readonly healed: number;
    /** Keys whose best-effort moved. */
    readonly corrected: number;
    /** Units moved, over every key healed. */
    readonly drift: number;
    /** Keys whose heal met writes on every attempt (they stay listed). */
    readonly raced: number;
    /** Tombstones removed. */
    readonly removed: number;
    /** Keys the audit looked at, and listed. */
    readonly audited: number;
    readonly listed: number;
    /** Keys whose heal failed with an error (they stay listed). */
    readonly failedKeys: readonly string[];
}

/** One settler run (see the header). */
export async function settle(options: SettleOptions): Promise<SettleReport> {
    const budget = options.keyBudget ?? SETTLER_DEFAULTS.keyBudget;
    const keys = await dueKeys(options, budget);
    const results: HealResult[] = [];
    const failedKeys: string[] = [];
    for (let i = 0; i < keys.length && !options.signal?.aborted; i += 4) {
        await Promise.all(
            keys.slice(i, i + 4).map((key) =>
                healKey(key, options).then(
                    (r) => void results.push(r),
                    () => void failedKeys.push(key),
                ),
            ),
        );
    }
    const audit = options.signal?.aborted ? { audited: 0, listed: 0 } : await auditPage(options);
    return {
        due: keys.length,
        healed: results.filter((r) => r.healed).length,
        corrected: results.filter((r) => r.drift > 0).length,
        drift: results.reduce((s, r) => s + r.drift, 0),
        raced: results.filter((r) => !r.healed).length,
        removed: results.reduce((s, r) => s + r.removed, 0),
        audited: audit.audited,
        listed: audit.listed,
        failedKeys,
    };
}

/** The keys listed due by now, oldest first, at most `budget`. */
export async function dueKeys(options: SettleOptions, budget: number): Promise<string[]> {
    const { config, dynamodb } = options;
    const now = Date.now();
    const found: Array<{ key: string; due: number }> = [];
    await Promise.all(
        Array.from({ length: HEAL_SHARDS }, async (_, shard) => {
            let start: Record<string, AttributeValue> | undefined;
            let taken = 0;
            do {
                const page = await dynamodb.send(
                    new QueryCommand({
                        TableName: config.countersTableName,
                        IndexName: HEAL_INDEX_NAME,
                        KeyConditionExpression: "#hh = :hh AND #hd <= :now",
                        ExpressionAttributeNames: { "#hh": HEAL_PARTITION, "#hd": HEAL_DUE },
                        ExpressionAttributeValues: { ":hh": { S: healShardValue(config, shard) }, ":now": { N: String(now) } },
                        Limit: budget,
                        ...(start === undefined ? {} : { ExclusiveStartKey: start }),
                    }),
                );
                for (const item of page.Items ?? []) {
                    found.push({ key: stringOf(item, config.partitionKey)!, due: numberOf(item, HEAL_DUE) });
                    taken++;
                }
                start = page.LastEvaluatedKey;
            } while (start !== undefined && taken < budget);
        }),
    );
    return found
        .sort((a, b) => a.due - b.due)
        .slice(0, budget)
        .map((f) => f.key);
}

/** Audits a page of the counters table from the cursor (see the header). */
async function auditPage(options: SettleOptions): Promise<{ audited: number; listed: number }> {
    const { config, dynamodb } = options;
    const cursorKey = settlerCursorKey(config);
    const cursor = await dynamodb.send(new QueryCommand({ TableName: config.countersTableName, KeyConditionExpression: "#pk = :pk AND #sk = :sk", ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey }, ExpressionAttributeValues: { ":pk": cursorKey[config.partitionKey]!, ":sk": cursorKey[config.sortKey]! } }));
    const saved = stringOf(cursor.Items?.[0], "hc_cursor");
    const page = await dynamodb.send(
        new ScanCommand({ TableName: config.countersTableName, Limit: options.auditItems ?? SETTLER_DEFAULTS.auditItems, ...(saved === undefined ? {} : { ExclusiveStartKey: JSON.parse(saved) as Record<string, AttributeValue> }) }),
    );
    let audited = 0;
    let listed = 0;
    for (const item of page.Items ?? []) {
        const sortKey = stringOf(item, config.sortKey) ?? "";
        const partition = stringOf(item, config.partitionKey) ?? "";
        if (partition === streamPartitionKey(config)) {
            await dropStaleProgress(item, options);
            continue;
        }
        if (!sortKey.startsWith(regionalCounterPrefix(config)) || parseCounterSortKey(config.counterPrefix, sortKey)?.kind !== "eventual") {
            continue;
        }
        audited++;
        await sendUnsent(partition, item, options);
        listed += (await listIfOff(partition, options)) ? 1 : 0;
    }
    const next = page.LastEvaluatedKey === undefined ? undefined : JSON.stringify(page.LastEvaluatedKey);
    await dynamodb.send(
        new UpdateItemCommand({ TableName: config.countersTableName, Key: cursorKey, ...(next === undefined ? { UpdateExpression: "REMOVE hc_cursor" } : { UpdateExpression: "SET hc_cursor = :c", ExpressionAttributeValues: { ":c": { S: next } } }) }),
    );
    return { audited, listed };
}

/** Lists a key whose best-effort is off its eventual count in a way only a heal mends. */
async function listIfOff(key: string, options: SettleOptions): Promise<boolean> {
    const { config, dynamodb } = options;
    const read = await readKeyCounters(dynamodb, config, key);
    const off = config.mode === "strict" || config.selection.kind === "client" ? read.bestEffort !== read.eventual : read.bestEffort > read.eventual;
    if (!off) {
        return false;
    }
    const mark = healMark(config, key, Date.now());
    await dynamodb
        .send(new UpdateItemCommand({ TableName: config.countersTableName, Key: eventualKey(config, key), UpdateExpression: `SET ${mark.update}`, ConditionExpression: "attribute_not_exists(#hd)", ExpressionAttributeNames: mark.names, ExpressionAttributeValues: mark.values }))
        .catch(() => undefined);
    return true;
}

/** Sends the threshold events a consumer recorded and never sent, then clears them (on the state it read). */
async function sendUnsent(key: string, item: Record<string, AttributeValue>, options: SettleOptions): Promise<void> {
    const state = readThresholdState(item);
    if (state === undefined || state.pending.length === 0 || options.sendEvents === undefined || !(await options.sendEvents(state.pending))) {
        return;
    }
    await options.dynamodb
        .send(
            new UpdateItemCommand({
                TableName: options.config.countersTableName,
                Key: eventualKey(options.config, key),
                UpdateExpression: "SET #th.#p = :none",
                ConditionExpression: "#th = :was",
                ExpressionAttributeNames: { "#th": THRESHOLD_ATTRIBUTE, "#p": "p" },
                ExpressionAttributeValues: { ":none": { L: [] }, ":was": item[THRESHOLD_ATTRIBUTE]! },
            }),
        )
        .catch(() => undefined);
}

/** Deletes a stream shard's progress item not written for two days (no record of it can be delivered any more). */
async function dropStaleProgress(item: Record<string, AttributeValue>, options: SettleOptions): Promise<void> {
    const expires = numberOf(item, "hc_expires");
    if (expires === 0 || expires * 1000 > Date.now()) {
        return;
    }
    const { config } = options;
    await options.dynamodb
        .send(
            new DeleteItemCommand({
                TableName: config.countersTableName,
                Key: { [config.partitionKey]: item[config.partitionKey]!, [config.sortKey]: item[config.sortKey]! },
                ConditionExpression: "hc_expires = :e",
                ExpressionAttributeValues: { ":e": item["hc_expires"]! },
            }),
        )
        .catch(() => undefined);
}
