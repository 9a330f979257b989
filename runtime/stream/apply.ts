/**
 * Applies a run of one stream shard's records (a batch, or a range re-read from the stream): per key, one conditional
 * write of its eventual item (plan.ts), and each record's side effects (effects.ts): a flag on an item that should
 * count, the removal of a settled tombstone. Every write here is exact by its own condition, so applying a run twice,
 * or a run that overlaps one already applied, changes nothing the first did not.
 *
 * What fails is retried within the run's budget; what still fails is reported by the lowest sequence number of the
 * records it concerns, and every record from there on is applied again later (the marks skip what was applied).
 */
import {
    BatchGetItemCommand,
    ConditionalCheckFailedException,
    GetItemCommand,
    TransactWriteItemsCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { HandlerConfig } from "../shared/config";
import { defaultLimitKey, eventualKey, limitKey, usageKey } from "../shared/keys";
import { flagItem, removeTombstone, type Tombstone } from "../shared/item-writes";
import { isRetryable } from "../shared/aws-errors";
import { backoff } from "../shared/retry";
import { LIMIT_ATTRIBUTE } from "../limits/limits";
import { dayOf, daysBefore, dropDaysBefore, EXPIRES_ATTRIBUTE, usageAttributes } from "../limits/usage";
import { THRESHOLD_ATTRIBUTE, type ThresholdEvent } from "../limits/thresholds";
import { effectsOf } from "./effects";
import { planKey, type KeyPlan, type Step } from "./plan";
import { markName } from "./marks";
import { compareSequences, paddedSequence, type ParsedRecord } from "./records";

/** Sends threshold events (runtime/limits/publish.ts); resolves false when they could not all be sent. */
export type EventSink = (events: readonly ThresholdEvent[]) => Promise<boolean>;

export interface ApplyContext {
    readonly config: HandlerConfig;
    readonly dynamodb: DynamoDBClient;
    readonly deleteTokenAttribute: string;
    readonly sendEvents: EventSink;
    /** Milliseconds left in the invocation. */
    readonly remainingMs: () => number;
}

export interface ApplyOutcome {
    /** Records that moved a count. */
    readonly counted: number;
    /** Records already applied (below their key's mark). */
    readonly duplicates: number;
    /** Keys listed for a heal. */
    readonly markedDue: number;
    /** Writes that succeeded (eventual items, flags, tombstone removals). */
    readonly writes: number;
    /** The lowest sequence number of a record whose work did not finish (undefined: all done). */
    readonly failedFrom?: string;
}

/** Time kept back at the end of an invocation to answer Lambda. */
const SAFETY_MS = 2_000;
const KEY_CONCURRENCY = 16;
const ATTEMPTS = 6;

interface KeyWork {
    readonly key: string;
    readonly steps: Step[];
    readonly first: string;
}

/** Applies one stream shard's records (see the header). */
export async function applyRecords(records: readonly ParsedRecord[], shardId: string, ctx: ApplyContext): Promise<ApplyOutcome> {
    const now = Date.now();
    const keys = new Map<string, KeyWork>();
    const flags: ParsedRecord[] = [];
    const removals: Array<{ record: ParsedRecord; tombstone: Tombstone }> = [];
    for (const record of records) {
        const effects = effectsOf(record, ctx.config, ctx.deleteTokenAttribute, now);
        if (effects.delta !== 0 || effects.dueAt !== undefined) {
            const work: KeyWork = keys.get(record.key) ?? { key: record.key, steps: [], first: record.sequenceNumber };
            keys.set(record.key, work);
            const due = effects.dueAt === undefined ? {} : { dueAt: effects.dueAt };
            work.steps.push({ sequenceNumber: record.sequenceNumber, time: record.time, delta: effects.delta, ...due });
        }
        if (effects.flag) {
            flags.push(record);
        }
        if (effects.remove !== undefined) {
            removals.push({ record, tombstone: effects.remove });
        }
    }
    const failed: string[] = [];
    const results = await inBatches([...keys.values()], KEY_CONCURRENCY, (work) =>
        applyKey(work, shardId, ctx, now).catch(() => undefined),
    );
    let counted = 0;
    let duplicates = 0;
    let markedDue = 0;
    let writes = 0;
    results.forEach((plan, i) => {
        const work = [...keys.values()][i]!;
        if (plan === undefined) {
            failed.push(work.first);
            return;
        }
        counted += plan.applied.filter((step) => step.delta !== 0).length;
        duplicates += work.steps.length - plan.applied.length;
        markedDue += plan.marked ? 1 : 0;
        writes += plan.write === undefined ? 0 : 1;
    });
    const effects = await inBatches(
        [...flags.map((r) => ({ kind: "flag" as const, record: r })), ...removals.map((r) => ({ kind: "remove" as const, ...r }))],
        KEY_CONCURRENCY,
        (e) =>
            (e.kind === "flag"
                ? flagItem(ctx.dynamodb, ctx.config, e.record.key, e.record.id)
                : removeTombstone(ctx.dynamodb, ctx.config, e.record.key, e.tombstone)
            ).then(
                (wrote) => ({ wrote }),
                () => ({ failed: e.record.sequenceNumber }),
            ),
    );
    for (const effect of effects) {
        if ("failed" in effect) {
            failed.push(effect.failed);
        } else {
            writes += effect.wrote ? 1 : 0;
        }
    }
    const failedFrom = failed.sort(compareSequences)[0];
    return { counted, duplicates, markedDue, writes, ...(failedFrom === undefined ? {} : { failedFrom }) };
}

/** One key: read, plan, write (again on a condition that no longer holds), then send its events. */
async function applyKey(work: KeyWork, shardId: string, ctx: ApplyContext, now: number): Promise<KeyPlan> {
    const read = await readKey(work.key, ctx);
    const limit = read.limit;
    let item = read.item;
    for (let attempt = 1; ; attempt++) {
        const plan = planKey(ctx.config, {
            key: work.key,
            shardId,
            steps: work.steps,
            item,
            limit,
            thresholds: ctx.config.thresholds,
            announce: ctx.config.thresholdTopicArn !== undefined,
            now,
        });
        try {
            if (plan.write !== undefined) {
                await writePlan(work.key, shardId, plan, ctx);
            }
            await sendPending(work.key, plan, ctx);
            return plan;
        } catch (error) {
            const refused = error instanceof ConditionalCheckFailedException;
            if (attempt >= ATTEMPTS || ctx.remainingMs() < SAFETY_MS || (!refused && !isRetryable(error))) {
                throw error;
            }
            if (!refused) {
                await backoff(attempt);
            }
            item = await readEventual(work.key, ctx);
        }
    }
}

async function writePlan(key: string, shardId: string, plan: KeyPlan, ctx: ApplyContext): Promise<void> {
    const { config, dynamodb } = ctx;
    // The retention keeps the current day and the `usageRetentionDays - 1` days before it.
    const kept = daysBefore(plan.today ?? dayOf(Date.now()), config.usageRetentionDays - 1);
    if (plan.archive.length > 0) {
        // Before the write that moves the day: once that write lands, a delivery of the same records again moves no
        // day, so a drop after it that failed would never be tried again. Dropping is idempotent, and a day before
        // `kept` is past the retention whatever the write's fate (a record of the day `kept` counts from exists).
        await dropDaysBefore(dynamodb, config, key, kept);
    }
    for (const late of plan.late.filter((d) => d.day >= kept)) {
        await dynamodb
            .send(
                new UpdateItemCommand({
                    TableName: config.countersTableName,
                    Key: usageKey(config, key, late.day),
                    UpdateExpression: "ADD creates :c, deletes :x SET #m = :m, #d = if_not_exists(#d, :day)",
                    ConditionExpression: "attribute_not_exists(#m) OR #m < :first",
                    ExpressionAttributeNames: { "#m": markName(shardId), "#d": "day" },
                    ExpressionAttributeValues: {
                        ":c": { N: String(late.creates) },
                        ":x": { N: String(late.deletes) },
                        ":m": { S: paddedSequence(late.last) },
                        ":first": { S: paddedSequence(late.first) },
                        ":day": { S: late.day },
                    },
                }),
            )
            .catch((error: unknown) => {
                // Already applied by an earlier attempt of this run (its mark is at or past these records).
                if (!(error instanceof ConditionalCheckFailedException)) {
                    throw error;
                }
            });
    }
    const write = plan.write!;
    const update = {
        TableName: config.countersTableName,
        Key: eventualKey(config, key),
        UpdateExpression: write.update,
        ConditionExpression: write.condition,
        ExpressionAttributeNames: write.names,
        ...(Object.keys(write.values).length > 0 ? { ExpressionAttributeValues: write.values } : {}),
    };
    const archive = plan.archive.filter((d) => d.day >= kept);
    if (archive.length === 0) {
        await dynamodb.send(new UpdateItemCommand(update));
    } else {
        // A finished day leaves the eventual item in one transaction with its own item (once per key and day): its
        // tallies are the ones the write was planned from, and no other writer's can land in between.
        await dynamodb
            .send(
                new TransactWriteItemsCommand({
                    TransactItems: [
                        { Update: update },
                        ...archive.map((day) => ({
                            Put: {
                                TableName: config.countersTableName,
                                Item: {
                                    ...usageKey(config, key, day.day),
                                    ...usageAttributes(day),
                                    [EXPIRES_ATTRIBUTE]: { N: String(expiresOf(day.day, config.usageRetentionDays)) },
                                },
                            },
                        })),
                    ],
                }),
            )
            .catch((error: unknown) => {
                const reasons = (error as { CancellationReasons?: Array<{ Code?: string }> }).CancellationReasons;
                throw reasons?.[0]?.Code === "ConditionalCheckFailed"
                    ? new ConditionalCheckFailedException({ message: "the eventual item moved", $metadata: {} })
                    : error;
            });
    }
}

/** When a day's item expires: the end of the retention after the day. */
function expiresOf(day: string, retentionDays: number): number {
    return Math.floor(Date.parse(`${day}T00:00:00Z`) / 1000) + (retentionDays + 1) * 86_400;
}

/** Sends the key's outbox, then clears it on the state it sent from (a later write's events stay). */
async function sendPending(key: string, plan: KeyPlan, ctx: ApplyContext): Promise<void> {
    if (plan.events.length === 0 || ctx.config.thresholdTopicArn === undefined) {
        return;
    }
    if (!(await ctx.sendEvents(plan.events))) {
        return;
    }
    const item = await readEventual(key, ctx);
    const state = item?.[THRESHOLD_ATTRIBUTE];
    const sent = new Set(plan.events.map((e) => e.id));
    const pending = (state?.M?.["p"]?.L ?? []).filter((v) => !sent.has((JSON.parse(v.S ?? "{}") as ThresholdEvent).id));
    await ctx.dynamodb
        .send(
            new UpdateItemCommand({
                TableName: ctx.config.countersTableName,
                Key: eventualKey(ctx.config, key),
                UpdateExpression: "SET #th.#p = :rest",
                ConditionExpression: "#th = :was",
                ExpressionAttributeNames: { "#th": THRESHOLD_ATTRIBUTE, "#p": "p" },
                ExpressionAttributeValues: { ":rest": { L: pending }, ":was": state! },
            }),
        )
        .catch(() => undefined);
}

/** The key's eventual item and the limit in force (its own, else the default), read strongly consistent. */
async function readKey(
    key: string,
    ctx: ApplyContext,
): Promise<{ item: Record<string, AttributeValue> | undefined; limit: number | undefined }> {
    const { config } = ctx;
    const keys = [eventualKey(config, key), limitKey(config, key), defaultLimitKey(config)];
    const response = await ctx.dynamodb.send(
        new BatchGetItemCommand({ RequestItems: { [config.countersTableName]: { Keys: keys, ConsistentRead: true } } }),
    );
    if ((response.UnprocessedKeys?.[config.countersTableName]?.Keys?.length ?? 0) > 0) {
        throw Object.assign(new Error("the read of the key's counter was throttled"), { name: "ProvisionedThroughputExceededException" });
    }
    const items = response.Responses?.[config.countersTableName] ?? [];
    const find = (wanted: Record<string, AttributeValue>) =>
        items.find(
            (i) => i[config.partitionKey]?.S === wanted[config.partitionKey]?.S && i[config.sortKey]?.S === wanted[config.sortKey]?.S,
        );
    const limitOf = (item: Record<string, AttributeValue> | undefined) =>
        item?.[LIMIT_ATTRIBUTE]?.N === undefined ? undefined : Number(item[LIMIT_ATTRIBUTE].N);
    return { item: find(keys[0]!), limit: limitOf(find(keys[1]!)) ?? limitOf(find(keys[2]!)) };
}

async function readEventual(key: string, ctx: ApplyContext): Promise<Record<string, AttributeValue> | undefined> {
    const response = await ctx.dynamodb.send(
        new GetItemCommand({ TableName: ctx.config.countersTableName, Key: eventualKey(ctx.config, key), ConsistentRead: true }),
    );
    return response.Item;
}

/** Runs `fn` over `items`, at most `limit` at a time, results in order. */
async function inBatches<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
    const results: R[] = new Array(items.length);
    let next = 0;
    const worker = async (): Promise<void> => {
        while (next < items.length) {
            const i = next++;
            results[i] = await fn(items[i]!);
        }
    };
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
    return results;
}
