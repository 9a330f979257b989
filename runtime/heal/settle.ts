/**
 * One settler run: heal the keys the heal index lists as due, oldest first, up to a budget; then audit a page of the
 * counters table: heal the keys nobody listed that look off (a call whose best-effort write and whose mark were both
 * lost, stale ledger entries), send threshold events a crashed consumer never sent, and delete stale stream progress.
 *
 * Liveness: a key listed stays listed until a heal finds nothing left for later (heal.ts); a heal that meets writes on
 * every attempt leaves it listed. Once writes stop and the stream has drained, two periods later (every life old),
 * every listed key is healed within ceil(listed / budget) runs, and every other key within one pass of the audit.
 */
import {
    DeleteItemCommand,
    QueryCommand,
    ScanCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { backfillPartitionKey, eventualKey, numberOf, settlerCursorKey, streamPartitionKey, stringOf } from "../shared/keys";
import { readKeyCounters, parseCounterSortKey } from "../client/read";
import { healKey, type HealResult } from "./heal";
import { HEAL_DUE, HEAL_INDEX_NAME, HEAL_PARTITION, HEAL_SHARDS, healShardValue } from "./index-marks";
import { entriesOf, periodOf, stalePeriods } from "../ledger/ledger";
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
    /** Keys the audit looked at, and healed (they looked off and nobody had listed them). */
    readonly audited: number;
    readonly auditHealed: number;
    /** Keys whose heal failed with an error (they stay listed). */
    readonly failedKeys: readonly string[];
}

/** One settler run (see the header). */
export async function settle(options: SettleOptions): Promise<SettleReport> {
    const budget = options.keyBudget ?? SETTLER_DEFAULTS.keyBudget;
    const keys = await dueKeys(options, budget);
    const due = await healAll(keys, options);
    const audit = options.signal?.aborted ? { audited: 0, results: [], failedKeys: [] } : await auditPage(options);
    const results = [...due.results, ...audit.results];
    return {
        due: keys.length,
        healed: results.filter((r) => r.healed).length,
        corrected: results.filter((r) => r.drift > 0).length,
        drift: results.reduce((s, r) => s + r.drift, 0),
        raced: results.filter((r) => !r.healed).length,
        removed: results.reduce((s, r) => s + r.removed, 0),
        audited: audit.audited,
        auditHealed: audit.results.length,
        failedKeys: [...due.failedKeys, ...audit.failedKeys],
    };
}

/** Heals `keys`, four at a time, until the signal stops it. */
async function healAll(keys: readonly DueKey[], options: SettleOptions): Promise<{ results: HealResult[]; failedKeys: string[] }> {
    const results: HealResult[] = [];
    const failedKeys: string[] = [];
    for (let i = 0; i < keys.length && !options.signal?.aborted; i += 4) {
        await Promise.all(
            keys.slice(i, i + 4).map(({ key, due }) =>
                healKey(key, options, { due }).then(
                    (r) => void results.push(r),
                    () => void failedKeys.push(key),
                ),
            ),
        );
    }
    return { results, failedKeys };
}

/** A key the heal index lists, with its mark as the index gave it (the heal takes it off by that value). */
export interface DueKey {
    readonly key: string;
    readonly due?: AttributeValue;
}

/** The keys listed due by now, oldest first, at most `budget`. */
export async function dueKeys(options: SettleOptions, budget: number): Promise<DueKey[]> {
    const { config, dynamodb } = options;
    const now = Date.now();
    const found: Array<DueKey & { at: number }> = [];
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
                    found.push({ key: stringOf(item, config.partitionKey)!, due: item[HEAL_DUE]!, at: numberOf(item, HEAL_DUE) });
                    taken++;
                }
                start = page.LastEvaluatedKey;
            } while (start !== undefined && taken < budget);
        }),
    );
    return found
        .sort((a, b) => a.at - b.at)
        .slice(0, budget)
        .map(({ key, due }) => ({ key, due }));
}

/** Audits a page of the counters table from the cursor (see the header). */
async function auditPage(options: SettleOptions): Promise<{ audited: number; results: HealResult[]; failedKeys: string[] }> {
    const { config, dynamodb } = options;
    const cursorKey = settlerCursorKey(config);
    const cursor = await dynamodb.send(
        new QueryCommand({
            TableName: config.countersTableName,
            KeyConditionExpression: "#pk = :pk AND #sk = :sk",
            ExpressionAttributeNames: { "#pk": config.partitionKey, "#sk": config.sortKey },
            ExpressionAttributeValues: { ":pk": cursorKey[config.partitionKey]!, ":sk": cursorKey[config.sortKey]! },
        }),
    );
    const saved = stringOf(cursor.Items?.[0], "hc_cursor");
    const page = await dynamodb.send(
        new ScanCommand({
            TableName: config.countersTableName,
            Limit: options.auditItems ?? SETTLER_DEFAULTS.auditItems,
            ...(saved === undefined ? {} : { ExclusiveStartKey: JSON.parse(saved) as Record<string, AttributeValue> }),
        }),
    );
    let audited = 0;
    const off: DueKey[] = [];
    for (const item of page.Items ?? []) {
        const sortKey = stringOf(item, config.sortKey) ?? "";
        const partition = stringOf(item, config.partitionKey) ?? "";
        if (partition === streamPartitionKey(config) || partition === backfillPartitionKey(config)) {
            await dropExpired(item, options);
            continue;
        }
        if (!sortKey.startsWith(regionalCounterPrefix(config)) || parseCounterSortKey(config.counterPrefix, sortKey)?.kind !== "eventual") {
            continue;
        }
        audited++;
        await sendUnsent(partition, item, options);
        if (item[HEAL_DUE] === undefined && (await looksOff(partition, options))) {
            off.push({ key: partition });
        }
    }
    const healed = await healAll(off, options);
    const next = page.LastEvaluatedKey === undefined ? undefined : JSON.stringify(page.LastEvaluatedKey);
    await dynamodb.send(
        new UpdateItemCommand({
            TableName: config.countersTableName,
            Key: cursorKey,
            ...(next === undefined
                ? { UpdateExpression: "REMOVE hc_cursor" }
                : { UpdateExpression: "SET hc_cursor = :c", ExpressionAttributeValues: { ":c": { S: next } } }),
        }),
    );
    return { audited, ...healed };
}

/**
 * Whether a key nobody listed may need a heal: its best-effort differs from its eventual count, or a best-effort shard
 * holds ledger entries no longer young (the key was written since its last heal). The first covers a call whose
 * best-effort write and whose mark were both lost; with items other writers put (a selection by prefix or attribute,
 * utilization), best-effort is below eventual by design, and such a key is healed once per pass of the audit.
 */
async function looksOff(key: string, options: SettleOptions): Promise<boolean> {
    const { config, dynamodb } = options;
    const read = await readKeyCounters(dynamodb, config, key);
    const nowPeriod = periodOf(Date.now(), config.periodMs);
    const stale = read.shards.some((item) => stalePeriods(entriesOf(item), nowPeriod).length > 0);
    return stale || read.bestEffort !== read.eventual;
}

/** Sends the threshold events a consumer recorded and never sent, then clears them (on the state it read). */
async function sendUnsent(key: string, item: Record<string, AttributeValue>, options: SettleOptions): Promise<void> {
    const state = readThresholdState(item);
    if (
        state === undefined ||
        state.pending.length === 0 ||
        options.sendEvents === undefined ||
        !(await options.sendEvents(state.pending))
    ) {
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

/**
 * Deletes an item past its `hc_expires` that no TTL removed (the same-table placement): a stream shard's progress not
 * written for two days (no record of it can be delivered any more), an abandoned backfill run's checkpoint.
 */
async function dropExpired(item: Record<string, AttributeValue>, options: SettleOptions): Promise<void> {
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
