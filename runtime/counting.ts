/**
 * The eventual counter: counts a batch of stream records exactly once.
 *
 * Invariant kept by every transaction this module commits:
 *
 *     eventual(key) == number of items under `key` whose `processed` flag is true
 *
 * A creation flips an item's flag from false to true and adds 1 in the same transaction. A deletion
 * hard-deletes a soft-deleted item and, if its flag was true, subtracts 1 in the same transaction.
 * Once the stream has drained, every live item is processed and every soft-deleted item is gone, so
 * eventual == live items exactly. Redelivered, overlapping or out-of-band records cannot break the
 * invariant, because each action is conditional on the item's current state, not on the record.
 *
 * Records are aggregated per counter key: one TransactWriteItems holds the counter's net delta plus
 * one conditional action per item, chunked to DynamoDB's 100-action and 4 MB limits. That costs about 2 write
 * units per record plus 2 per group, instead of 4 per record with one transaction per record.
 */
import {
    DynamoDBServiceException,
    TransactWriteItemsCommand,
    TransactionCanceledException,
    type AttributeValue,
    type CancellationReason,
    type ConsumedCapacity,
    type DynamoDBClient,
    type TransactWriteItem,
} from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { firstChunk, recordImageSize, separateTooLarge } from "./chunking";
import { eventualSortKey, type CounterTableConfig } from "./config";
import { ITEM_TOO_LARGE, type FatalQueue } from "./fatal";
import { classifyRecord, lowestSequenceNumber, type CounterEvent } from "./records";
import type { Logger, Metrics } from "./telemetry";

/** DynamoDB's limit on actions in one TransactWriteItems. One slot is kept for the counter. */
export const MAX_TRANSACTION_ACTIONS = 100;
const ITEM_ACTIONS_PER_TRANSACTION = MAX_TRANSACTION_ACTIONS - 1;

/** What must become true of one item, decided from the batch's last record for it. */
export interface ItemIntent {
    readonly id: string;
    /** "counted": flag false -> true, +1. "removed": soft-deleted item hard-deleted, -1 if it was counted. */
    readonly target: "counted" | "removed";
    /** For "removed": the flag value the item is expected to hold; decides the delta. */
    readonly expectProcessed: boolean;
    /** Every record of this item in the batch, in stream order. */
    readonly sequenceNumbers: readonly string[];
}

/** All the work a batch holds for one counter key. */
export interface GroupPlan {
    readonly counterKey: string;
    readonly items: readonly ItemIntent[];
}

export interface BatchPlan {
    readonly groups: readonly GroupPlan[];
    readonly ignored: number;
    readonly poison: ReadonlyArray<{ record: DynamoDBRecord; field: string; problem: string; sequenceNumber?: string }>;
}

/**
 * Groups a batch's records by counter key and collapses each item's records to one intent.
 * The last record of an item decides: a later creation can only exist once an earlier deletion of
 * the same id was counted (the id was free again), and a later deletion supersedes the creation.
 */
export function planBatch(records: readonly DynamoDBRecord[], config: CounterTableConfig): BatchPlan {
    const groups = new Map<string, Map<string, { last: CounterEvent; sequenceNumbers: string[] }>>();
    const poison: Array<{ record: DynamoDBRecord; field: string; problem: string; sequenceNumber?: string }> = [];
    let ignored = 0;
    for (const record of records) {
        const classified = classifyRecord(record, config);
        if (classified.type === "ignored") {
            ignored++;
            continue;
        }
        if (classified.type === "poison") {
            poison.push({ record, field: classified.field, problem: classified.problem, sequenceNumber: classified.sequenceNumber });
            continue;
        }
        const event = classified.event;
        let items = groups.get(event.counterKey);
        if (!items) {
            items = new Map();
            groups.set(event.counterKey, items);
        }
        const existing = items.get(event.id);
        if (existing) {
            existing.last = event;
            existing.sequenceNumbers.push(event.sequenceNumber);
            // Keep the item at its first position: its earliest record is what a failure must report.
        } else {
            items.set(event.id, { last: event, sequenceNumbers: [event.sequenceNumber] });
        }
    }
    return {
        ignored,
        poison,
        groups: [...groups].map(([counterKey, items]) => ({
            counterKey,
            items: [...items.values()].map(({ last, sequenceNumbers }) => ({
                id: last.id,
                target: last.kind === "create" ? "counted" : "removed",
                // A deletion whose image shows the flag still false usually means the creation is in
                // this batch or was sent to the dead-letter queue; the item's state corrects a wrong guess.
                expectProcessed: last.kind === "delete" ? last.processedInImage : false,
                sequenceNumbers,
            })),
        })),
    };
}

/** Splits every group into one group per item: one transaction per record, as in the paper. */
function unaggregated(plan: BatchPlan): BatchPlan {
    return {
        ...plan,
        groups: plan.groups.flatMap((g) => g.items.map((item) => ({ counterKey: g.counterKey, items: [item] }))),
    };
}

/** The net change to the eventual counter if every intent commits as planned. */
export function intentDelta(intent: ItemIntent): number {
    if (intent.target === "counted") {
        return 1;
    }
    return intent.expectProcessed ? -1 : 0;
}

/** Builds the TransactWriteItems actions for one chunk of a group: the counter delta first, then the items. */
export function transactionActions(config: CounterTableConfig, counterKey: string, items: readonly ItemIntent[]): TransactWriteItem[] {
    const { tableName, partitionKey, sortKey, processedAttribute, deletedAttribute, countAttribute } = config;
    const key = (sk: string): Record<string, AttributeValue> => ({
        [partitionKey]: { S: counterKey },
        [sortKey]: { S: sk },
    });
    const delta = items.reduce((sum, item) => sum + intentDelta(item), 0);
    const actions: TransactWriteItem[] = [];
    if (delta !== 0) {
        actions.push({
            Update: {
                TableName: tableName,
                Key: key(eventualSortKey(config)),
                UpdateExpression: "ADD #count :delta",
                ExpressionAttributeNames: { "#count": countAttribute },
                ExpressionAttributeValues: { ":delta": { N: String(delta) } },
            },
        });
    }
    for (const item of items) {
        if (item.target === "counted") {
            actions.push({
                Update: {
                    TableName: tableName,
                    Key: key(item.id),
                    UpdateExpression: "SET #processed = :true",
                    ConditionExpression: "#processed = :false",
                    ExpressionAttributeNames: { "#processed": processedAttribute },
                    ExpressionAttributeValues: { ":true": { BOOL: true }, ":false": { BOOL: false } },
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                },
            });
        } else {
            actions.push({
                Delete: {
                    TableName: tableName,
                    Key: key(item.id),
                    ConditionExpression: "#deleted = :true AND #processed = :expected",
                    ExpressionAttributeNames: { "#deleted": deletedAttribute, "#processed": processedAttribute },
                    ExpressionAttributeValues: { ":true": { BOOL: true }, ":expected": { BOOL: item.expectProcessed } },
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                },
            });
        }
    }
    return actions;
}

/** What to do with an item whose condition failed, given its current state (undefined: no such item). */
export type Resolution =
    | { readonly action: "done"; readonly why: string }
    | { readonly action: "retry"; readonly intent: ItemIntent }
    | { readonly action: "poison"; readonly field: string; readonly problem: string };

/**
 * Decides from an item's current state what a failed condition means. "done": the work was already
 * committed by another invocation (or the item belongs to a newer life of the same id). "retry": the
 * flag differs from the guess, so the delta changes.
 */
export function resolveConditionFailure(
    intent: ItemIntent,
    current: Record<string, AttributeValue> | undefined,
    config: CounterTableConfig,
): Resolution {
    if (current === undefined) {
        return { action: "done", why: intent.target === "counted" ? "deleted before it was counted" : "already removed" };
    }
    const processed = current[config.processedAttribute];
    const deleted = current[config.deletedAttribute];
    if (processed === undefined || typeof processed.BOOL !== "boolean") {
        return { action: "poison", field: config.processedAttribute, problem: "must be a boolean on the stored item" };
    }
    if (deleted !== undefined && typeof deleted.BOOL !== "boolean") {
        return { action: "poison", field: config.deletedAttribute, problem: "must be a boolean on the stored item" };
    }
    if (intent.target === "counted") {
        return processed.BOOL
            ? { action: "done", why: "already counted" }
            : { action: "poison", field: config.processedAttribute, problem: "condition failed although the flag is false" };
    }
    if (deleted?.BOOL !== true) {
        return { action: "done", why: "the id was reused by a newer item" };
    }
    if (processed.BOOL === intent.expectProcessed) {
        return { action: "poison", field: config.deletedAttribute, problem: "condition failed although the item matches it" };
    }
    return { action: "retry", intent: { ...intent, expectProcessed: processed.BOOL } };
}

export interface CountingDeps {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    readonly fatal: FatalQueue;
    readonly logger: Logger;
    readonly metrics: Metrics;
    /** Milliseconds left to spend on retries before the failure must be reported. */
    readonly remainingMs: () => number;
    readonly random?: () => number;
    readonly sleep?: (ms: number) => Promise<void>;
    /** Receives the capacity every transaction consumed (for cost measurement). */
    readonly onConsumedCapacity?: (capacity: ConsumedCapacity[]) => void;
    /**
     * Aggregate a batch per counter key (the default). False commits one transaction per record,
     * as the paper does; kept for the benchmark's comparison.
     */
    readonly aggregate?: boolean;
}

export interface CountOutcome {
    /** The lowest sequence number not counted: the checkpoint to report. Undefined when all are done. */
    readonly failedSequenceNumber?: string;
    readonly counted: number;
    readonly duplicates: number;
    readonly ignored: number;
    readonly poison: number;
}

/** Time kept back from the budget: the last attempt must finish before the invocation does. */
const SAFETY_MARGIN_MS = 3_000;
const BACKOFF_BASE_MS = 20;
const BACKOFF_CAP_MS = 1_000;
/** A group whose conditions keep failing in new ways is given up on after this many resolutions. */
const MAX_RESOLUTION_ROUNDS = 10;
/** Groups committed at the same time. Different keys never touch the same item. */
const GROUP_CONCURRENCY = 8;

/**
 * Counts a batch. Never throws for a record: poison goes to the fatal queue, and work that could not
 * commit within the budget is reported as `failedSequenceNumber` so the stream redelivers it.
 * Throws only when a poison record cannot be parked (its fatal-queue send failed and it has no
 * sequence number to report), since the record would otherwise be lost.
 */
export async function countRecords(records: readonly DynamoDBRecord[], deps: CountingDeps): Promise<CountOutcome> {
    const plan = deps.aggregate === false ? unaggregated(planBatch(records, deps.config)) : planBatch(records, deps.config);
    const failed: string[] = [];
    let poison = plan.poison.length;
    deps.metrics.add("RecordsIgnored", plan.ignored);

    for (const p of plan.poison) {
        deps.logger.log("error", "poison record sent to the fatal queue", {
            field: p.field,
            problem: p.problem,
            sequenceNumber: p.sequenceNumber,
        });
        const parked = await deps.fatal.park({
            reason: "poison-record",
            problem: `[${p.field}] ${p.problem}`,
            records: [p.record],
        });
        if (!parked) {
            if (p.sequenceNumber === undefined) {
                throw new Error(
                    `a poison record without a sequence number could not be sent to the fatal queue: [${p.field}] ${p.problem}`,
                );
            }
            failed.push(p.sequenceNumber);
        }
    }

    const bySequence = new Map<string, DynamoDBRecord>();
    for (const record of records) {
        const sequenceNumber = record?.dynamodb?.SequenceNumber;
        if (typeof sequenceNumber === "string") {
            bySequence.set(sequenceNumber, record);
        }
    }

    let counted = 0;
    let duplicates = 0;
    const queue = [...plan.groups];
    const worker = async (): Promise<void> => {
        for (let group = queue.shift(); group !== undefined; group = queue.shift()) {
            const result = await commitGroup(group, deps, bySequence);
            counted += result.counted;
            duplicates += result.duplicates;
            poison += result.poison;
            failed.push(...result.failedSequenceNumbers);
        }
    };
    await Promise.all(Array.from({ length: Math.min(GROUP_CONCURRENCY, queue.length) }, worker));

    deps.metrics.add("RecordsCounted", counted);
    deps.metrics.add("DuplicatesSkipped", duplicates);
    deps.metrics.add("PoisonRecords", poison);
    return { failedSequenceNumber: lowestSequenceNumber(failed), counted, duplicates, ignored: plan.ignored, poison };
}

interface GroupResult {
    counted: number;
    duplicates: number;
    poison: number;
    failedSequenceNumbers: string[];
}

async function commitGroup(group: GroupPlan, deps: CountingDeps, bySequence: ReadonlyMap<string, DynamoDBRecord>): Promise<GroupResult> {
    const result: GroupResult = { counted: 0, duplicates: 0, poison: 0, failedSequenceNumbers: [] };
    const random = deps.random ?? Math.random;
    const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
    // Chunks are bounded by size as well as by count (runtime/chunking.ts): the largest stream image of an item estimates its size.
    const sizeOf = (item: ItemIntent): number => Math.max(0, ...item.sequenceNumbers.map((s) => recordImageSize(bySequence.get(s))));
    const { fitting, tooLarge } = separateTooLarge(group.items, sizeOf);
    for (const item of tooLarge) {
        const parked = await deps.fatal.park({
            reason: ITEM_TOO_LARGE,
            problem: `item of about ${sizeOf(item)} bytes cannot share a transaction (4 MB at most) with its counter`,
            counterKey: group.counterKey,
            id: item.id,
            records: item.sequenceNumbers.flatMap((s) => bySequence.get(s) ?? []),
        });
        if (parked) {
            result.poison++;
        } else {
            result.failedSequenceNumbers.push(...item.sequenceNumbers);
        }
    }
    let pending: ItemIntent[] = fitting;
    let attempt = 0;
    let rounds = 0;

    while (pending.length > 0) {
        const chunk = firstChunk(pending.slice(0, ITEM_ACTIONS_PER_TRANSACTION), sizeOf);
        const actions = transactionActions(deps.config, group.counterKey, chunk);
        const itemOffset = actions.length - chunk.length;
        let retryable = false;
        try {
            const response = await deps.dynamodb.send(
                new TransactWriteItemsCommand({ TransactItems: actions, ReturnConsumedCapacity: "INDEXES" }),
            );
            if (response.ConsumedCapacity) {
                deps.onConsumedCapacity?.(response.ConsumedCapacity);
            }
            deps.metrics.add("GroupsCommitted");
            result.counted += chunk.length;
            pending = pending.slice(chunk.length);
            attempt = 0;
            continue;
        } catch (error) {
            if (error instanceof TransactionCanceledException && error.CancellationReasons) {
                const outcome = await applyCancellation(chunk, error.CancellationReasons, itemOffset, deps, group, bySequence);
                result.duplicates += outcome.done;
                result.poison += outcome.poison;
                pending = [...outcome.remaining, ...pending.slice(chunk.length)];
                retryable = outcome.contention;
                if (!outcome.contention) {
                    rounds++;
                    if (rounds <= MAX_RESOLUTION_ROUNDS) {
                        continue;
                    }
                    deps.logger.log("error", "condition failures did not settle", { counterKey: group.counterKey });
                }
            } else {
                retryable = isRetryable(error);
                deps.logger.log(retryable ? "warn" : "error", "transaction failed", {
                    counterKey: group.counterKey,
                    error: describeError(error),
                });
            }
        }
        attempt++;
        const delay = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt) * random();
        if (!retryable || deps.remainingMs() - delay < SAFETY_MARGIN_MS) {
            result.failedSequenceNumbers.push(...pending.flatMap((item) => item.sequenceNumbers));
            deps.logger.log("warn", "group left for redelivery", {
                counterKey: group.counterKey,
                items: pending.length,
                attempts: attempt,
            });
            return result;
        }
        deps.metrics.add("TransactionRetries");
        await sleep(delay);
    }
    return result;
}

async function applyCancellation(
    chunk: readonly ItemIntent[],
    reasons: readonly CancellationReason[],
    itemOffset: number,
    deps: CountingDeps,
    group: GroupPlan,
    bySequence: ReadonlyMap<string, DynamoDBRecord>,
): Promise<{ remaining: ItemIntent[]; done: number; poison: number; contention: boolean }> {
    const remaining: ItemIntent[] = [];
    let done = 0;
    let poison = 0;
    // Any reason other than "None" (cancelled because another action failed) or a condition failure is
    // contention or throttling, on an item or on the counter: back off before trying again.
    let contention = reasons.some((r) => r.Code !== undefined && r.Code !== "None" && r.Code !== "ConditionalCheckFailed");
    let conditionFailures = 0;
    for (const [index, intent] of chunk.entries()) {
        const reason = reasons[itemOffset + index];
        if (reason?.Code !== "ConditionalCheckFailed") {
            remaining.push(intent);
            continue;
        }
        conditionFailures++;
        const resolution = resolveConditionFailure(intent, reason.Item, deps.config);
        switch (resolution.action) {
            case "done":
                done++;
                break;
            case "retry":
                remaining.push(resolution.intent);
                break;
            case "poison": {
                const parked = await deps.fatal.park({
                    reason: "poison-item",
                    problem: `[${resolution.field}] ${resolution.problem}`,
                    counterKey: group.counterKey,
                    id: intent.id,
                    item: reason.Item,
                    records: intent.sequenceNumbers.flatMap((s) => bySequence.get(s) ?? []),
                });
                if (parked) {
                    poison++;
                } else {
                    remaining.push(intent);
                    contention = true;
                }
                break;
            }
        }
    }
    if (conditionFailures === 0) {
        // A cancellation that names no condition failure is retried like contention.
        contention = true;
    }
    return { remaining, done, poison, contention };
}

/** Errors worth retrying within the invocation: throttling, conflicts and 5xx after the SDK's own retries. */
export function isRetryable(error: unknown): boolean {
    if (!(error instanceof Error)) {
        return false;
    }
    const e = error as DynamoDBServiceException;
    if (e.$retryable) {
        return true;
    }
    const status = e.$metadata?.httpStatusCode ?? 0;
    if (status >= 500 || status === 429) {
        return true;
    }
    return (
        [
            "TransactionConflictException",
            "TransactionCanceledException",
            "TransactionInProgressException",
            "ProvisionedThroughputExceededException",
            "ThrottlingException",
            "RequestLimitExceeded",
            "InternalServerError",
            "ServiceUnavailable",
            "TimeoutError",
        ].includes(e.name) || ["ECONNRESET", "ECONNREFUSED", "EPIPE", "ETIMEDOUT"].includes((e as { code?: string }).code ?? "")
    );
}

export function describeError(error: unknown): Record<string, unknown> {
    if (error instanceof Error) {
        const e = error as DynamoDBServiceException;
        return { name: e.name, message: e.message, status: e.$metadata?.httpStatusCode };
    }
    return { value: String(error) };
}
