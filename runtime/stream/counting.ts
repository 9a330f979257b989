/**
 * The eventual counter's adapter: applies a batch of stream records to the markers (see markers.ts for
 * the invariant and the pure planner).
 *
 * Per counter key: the markers of the batch's items are read first (consistent BatchGetItem), so work an
 * earlier delivery already applied is skipped for the price of a read, whatever the range's length;
 * what remains commits in transactions of the counter's net delta plus one conditional action per
 * marker (and per hard delete), chunked to DynamoDB's 100-action limit. A failed condition is resolved
 * from the marker or item DynamoDB returns with it. Every committed chunk is progress a redelivery keeps:
 * when the invocation's time runs out, the lowest record not yet applied is reported and everything
 * before it stays applied.
 *
 * A sharded key (runtime/shards/layout.ts) is planned as one group, as any key: its markers are read and
 * written in their ids' shards, and each transaction attempt adds its delta to a partial picked at random
 * (markers.ts), so two invocations on one key conflict only when they pick the same partial or hold one id
 * (retried as any other). Logs and parked messages name the user's key; the key due for a heal is the user's key
 * (heal-due.ts).
 */
import {
    BatchGetItemCommand,
    type BatchGetItemCommandOutput,
    TransactWriteItemsCommand,
    TransactionCanceledException,
    type AttributeValue,
    type CancellationReason,
    type ConsumedCapacity,
    type DynamoDBClient,
    type KeysAndAttributes,
} from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { describeError, isRetryable, VALIDATION_ERROR } from "../shared/aws-errors";
import { recordImageSize, separateTooLarge } from "./chunking";
import { countersTable, markerSortKey, type CounterTableConfig } from "../shared/config";
import { markerShard, shardCount, shardPartitionKey } from "../shards/layout";
import { ITEM_TOO_LARGE, type FatalQueue } from "./fatal";
import {
    chunkIntents,
    partialShard,
    markerRead,
    planBatch,
    refineIntent,
    removesItem,
    transactionActions,
    unresurrect,
    type BatchPlan,
    type GroupPlan,
    type ItemIntent,
    type MarkerRead,
} from "./markers";
import { driftedKey, markKeysDue } from "./heal-due";
import { lowestSequenceNumber } from "./records";
import type { Logger, Metrics } from "../shared/telemetry";
import { pause } from "../shared/pauses";

export { MAX_TRANSACTION_ACTIONS, planBatch, transactionActions, type BatchPlan, type GroupPlan, type ItemIntent } from "./markers";

export interface CountingDeps {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    readonly fatal: FatalQueue;
    readonly logger: Logger;
    readonly metrics: Metrics;
    /** Milliseconds left to spend before the failure must be reported. */
    readonly remainingMs: () => number;
    readonly random?: () => number;
    readonly sleep?: (ms: number) => Promise<void>;
    /** Epoch milliseconds (tombstones' TTL). @default Date.now */
    readonly now?: () => number;
    /** Receives the capacity every transaction consumed (for cost measurement). */
    readonly onConsumedCapacity?: (capacity: ConsumedCapacity[]) => void;
    /**
     * Aggregate a batch per counter key (the default). False commits one transaction per record,
     * as the paper does; kept for the benchmark's comparison.
     */
    readonly aggregate?: boolean;
}

export interface CountOutcome {
    /** The lowest sequence number not applied: the checkpoint to report. Undefined when all are done. */
    readonly failedSequenceNumber?: string;
    /** Markers written (membership changes applied now). */
    readonly counted: number;
    /** Changes an earlier delivery had already applied. */
    readonly duplicates: number;
    readonly ignored: number;
    readonly poison: number;
}

/** Time kept back from the budget: the last attempt must finish before the invocation does. */
const SAFETY_MARGIN_MS = 3_000;
const BACKOFF_BASE_MS = 20;
const BACKOFF_CAP_MS = 1_000;
/** A chunk whose conditions keep failing in new ways is given up on after this many resolutions in a row. */
const MAX_RESOLUTION_ROUNDS = 10;
/** Groups committed at the same time. Different keys never touch the same item. */
const GROUP_CONCURRENCY = 8;
/** BatchGetItem reads at most 100 keys per call. */
const BATCH_GET_KEYS = 100;

/** Splits every group into one group per item: one transaction per record, as in the paper. */
function unaggregated(plan: BatchPlan): BatchPlan {
    return {
        ...plan,
        groups: plan.groups.flatMap((g) => g.items.map((item) => ({ ...g, items: [item] }))),
    };
}

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
    const due = new Set<string>();
    for (const record of records) {
        const key = driftedKey(record, deps.config);
        if (key !== undefined) {
            due.add(key);
        }
    }
    const queue = [...plan.groups];
    const worker = async (): Promise<void> => {
        for (let group = queue.shift(); group !== undefined; group = queue.shift()) {
            const result = await commitGroup(group, deps, bySequence);
            if (result.drifted) {
                due.add(group.counterKey);
            }
            counted += result.counted;
            duplicates += result.duplicates;
            poison += result.poison;
            failed.push(...result.failedSequenceNumbers);
        }
    };
    await Promise.all(Array.from({ length: Math.min(GROUP_CONCURRENCY, queue.length) }, worker));
    // After the transactions: a heal the mark lets run then reads the counts they wrote.
    await markKeysDue(due, deps);

    deps.metrics.add("RecordsCounted", counted);
    deps.metrics.add("DuplicatesSkipped", duplicates);
    deps.metrics.add("PoisonRecords", poison);
    return { failedSequenceNumber: lowestSequenceNumber(failed), counted, duplicates, ignored: plan.ignored, poison };
}

interface GroupResult {
    /** A late put attempt of a removed life was removed: the key is due for a heal (heal-due.ts). */
    drifted: boolean;
    counted: number;
    duplicates: number;
    poison: number;
    failedSequenceNumbers: string[];
}

/**
 * Reads the markers of `ids` of `counterKey` (consistent), keyed by id, each in its shard's partition
 * (`markerShard`; the key itself when unsharded); retries unprocessed keys.
 */
export async function readMarkers(
    config: CounterTableConfig,
    dynamodb: DynamoDBClient,
    counterKey: string,
    ids: readonly string[],
): Promise<Map<string, MarkerRead>> {
    const table = countersTable(config);
    const found = new Map<string, MarkerRead>();
    const prefixLength = markerSortKey(config, "").length;
    const shards = shardCount(config);
    for (let i = 0; i < ids.length; i += BATCH_GET_KEYS) {
        let request: Record<string, KeysAndAttributes> | undefined = {
            [table]: {
                Keys: ids.slice(i, i + BATCH_GET_KEYS).map((id) => ({
                    [config.partitionKey]: { S: shardPartitionKey(counterKey, markerShard(id, shards)) },
                    [config.sortKey]: { S: markerSortKey(config, id) },
                })),
                // The whole marker: its size sizes the transactions that write it (markers.ts, `chunkIntents`).
                ConsistentRead: true,
            },
        };
        for (let round = 0; request !== undefined && Object.keys(request).length > 0; round++) {
            if (round > 0) {
                await pause(Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** round));
            }
            const response: BatchGetItemCommandOutput = await dynamodb.send(new BatchGetItemCommand({ RequestItems: request }));
            for (const item of response.Responses?.[table] ?? []) {
                const sk = item[config.sortKey]?.S;
                if (sk !== undefined) {
                    found.set(sk.slice(prefixLength), markerRead(item)!);
                }
            }
            request = response.UnprocessedKeys;
        }
    }
    return found;
}

async function commitGroup(group: GroupPlan, deps: CountingDeps, bySequence: ReadonlyMap<string, DynamoDBRecord>): Promise<GroupResult> {
    const result: GroupResult = { drifted: false, counted: 0, duplicates: 0, poison: 0, failedSequenceNumbers: [] };
    const random = deps.random ?? Math.random;
    const sleep = deps.sleep ?? pause;
    const now = deps.now ?? Date.now;
    const shards = shardCount(deps.config);
    const giveUp = (pending: readonly ItemIntent[], why: string): GroupResult => {
        result.failedSequenceNumbers.push(...pending.flatMap((item) => item.sequenceNumbers));
        deps.logger.log("warn", "group left for redelivery", { counterKey: group.counterKey, items: pending.length, why });
        return result;
    };
    const park = async (intent: ItemIntent, field: string, problem: string, item?: Record<string, AttributeValue>): Promise<boolean> => {
        const parked = await deps.fatal.park({
            reason: "poison-item",
            problem: `[${field}] ${problem}`,
            counterKey: group.counterKey,
            id: intent.id,
            item,
            records: intent.sequenceNumbers.flatMap((s) => bySequence.get(s) ?? []),
        });
        if (parked) {
            result.poison++;
        }
        return parked;
    };

    // Chunks are bounded by size as well as by count: a hard delete's item weighs what its largest stream image does.
    const sizeOf = (item: ItemIntent): number => Math.max(0, ...item.sequenceNumbers.map((s) => recordImageSize(bySequence.get(s))));
    const { fitting, tooLarge } = separateTooLarge(group.items, (item) => (removesItem(item) ? sizeOf(item) : 0));
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

    // Cheap skip: what an earlier delivery applied costs one read, never a failed transaction.
    let pending: ItemIntent[] = [];
    try {
        const markers = await readMarkers(
            deps.config,
            deps.dynamodb,
            group.counterKey,
            fitting.map((i) => i.id),
        );
        for (const intent of fitting) {
            const refined = refineIntent(intent, markers.get(intent.id));
            if (refined.action === "done") {
                result.duplicates++;
            } else if (refined.action === "apply") {
                pending.push(refined.intent);
            } else if (!(await park(intent, refined.field, refined.problem))) {
                pending.push(intent);
            }
        }
    } catch (error) {
        deps.logger.log(isRetryable(error) ? "warn" : "error", "could not read markers; planning from the records", {
            counterKey: group.counterKey,
            error: describeError(error),
        });
        pending = [...fitting];
    }

    let attempt = 0;
    let rounds = 0;
    while (pending.length > 0) {
        if (deps.remainingMs() < SAFETY_MARGIN_MS) {
            // What committed so far stays committed: the redelivery from the checkpoint skips it for a read.
            return giveUp(pending, "out of time");
        }
        const chunk = chunkIntents(pending, sizeOf)[0]!;
        const rest = pending.slice(chunk.length);
        const { actions, index } = transactionActions(deps.config, group.counterKey, chunk, now(), partialShard(shards, random));
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
            result.drifted ||= chunk.some((intent) => intent.resurrected !== undefined || intent.lateSeen === true);
            pending = rest;
            attempt = 0;
            rounds = 0;
            continue;
        } catch (error) {
            if (error instanceof TransactionCanceledException && error.CancellationReasons) {
                const outcome = await resolveCancellation(chunk, index, error.CancellationReasons, park);
                result.duplicates += outcome.done;
                pending = [...outcome.remaining, ...rest];
                if (outcome.refused) {
                    deps.logger.log("error", "transaction refused by DynamoDB", {
                        counterKey: group.counterKey,
                        error: describeError(error),
                    });
                    return giveUp(pending, "refused (ValidationError)");
                }
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
        if (!retryable) {
            return giveUp(pending, "not retryable");
        }
        if (deps.remainingMs() - delay < SAFETY_MARGIN_MS) {
            return giveUp(pending, "out of time");
        }
        deps.metrics.add("TransactionRetries");
        await sleep(delay);
    }
    return result;
}

/** Resolution of a cancelled chunk, item by item, from the values DynamoDB returned with it. */
export async function resolveCancellation(
    chunk: readonly ItemIntent[],
    index: readonly { marker: number; softDelete?: number }[],
    reasons: readonly CancellationReason[],
    park: (intent: ItemIntent, field: string, problem: string, item?: Record<string, AttributeValue>) => Promise<boolean>,
): Promise<{ remaining: ItemIntent[]; done: number; contention: boolean; refused: boolean }> {
    const remaining: ItemIntent[] = [];
    let done = 0;
    // Any reason other than "None" (cancelled because another action failed), a condition failure or a
    // refusal is contention or throttling, on an item or on the counter: back off before trying again.
    let contention = reasons.some(
        (r) => r.Code !== undefined && r.Code !== "None" && r.Code !== "ConditionalCheckFailed" && r.Code !== VALIDATION_ERROR,
    );
    let conditionFailures = 0;
    // A ValidationError is DynamoDB refusing the request as written: the same actions fail the same way
    // every time, so it is never retried. An item's own refused action parks that item; any other leaves
    // the chunk refused, for the caller to report.
    let refused = false;
    const refusedActions = new Set(reasons.flatMap((r, i) => (r.Code === VALIDATION_ERROR ? [i] : [])));
    for (const [i, intent] of chunk.entries()) {
        const markerReason = reasons[index[i]!.marker];
        const deleteReason = index[i]!.softDelete === undefined ? undefined : reasons[index[i]!.softDelete!];
        const refusal = [markerReason, deleteReason].find((r) => r?.Code === VALIDATION_ERROR);
        if (refusal !== undefined) {
            refusedActions.delete(index[i]!.marker);
            if (index[i]!.softDelete !== undefined) {
                refusedActions.delete(index[i]!.softDelete!);
            }
            conditionFailures++;
            if (!(await park(intent, "item", `was refused by DynamoDB (ValidationError): ${refusal.Message ?? "no message"}`))) {
                remaining.push(intent);
                refused = true;
            }
            continue;
        }
        let next: ItemIntent = intent;
        if (deleteReason?.Code === "ConditionalCheckFailed" && next.resurrected !== undefined) {
            // The late put's item no longer holds its life: gone stays uncounted, a replacement counts (markers.ts).
            conditionFailures++;
            next = unresurrect(next, deleteReason.Item !== undefined);
        } else if (deleteReason?.Code === "ConditionalCheckFailed") {
            // The soft-deleted life is gone (hard-deleted already, or the id was created again): only the marker is left to write.
            conditionFailures++;
            const { softDelete: _dropped, ...rest } = next;
            next = rest;
        }
        if (markerReason?.Code === "ConditionalCheckFailed") {
            conditionFailures++;
            const refined = refineIntent(next, markerRead(markerReason.Item));
            if (refined.action === "done") {
                done++;
                continue;
            }
            if (refined.action === "poison") {
                if (!(await park(intent, refined.field, refined.problem, markerReason.Item))) {
                    remaining.push(next);
                    contention = true;
                }
                continue;
            }
            next = refined.intent;
        }
        remaining.push(next);
    }
    if (conditionFailures === 0) {
        // A cancellation that names no condition failure is retried like contention.
        contention = true;
    }
    if (refusedActions.size > 0) {
        // The counter's own action was refused: nothing an item can be parked for.
        refused = true;
    }
    return { remaining, done, contention: contention && !refused, refused };
}
