/**
 * Backfill: brings the items a table held before the counter was attached into the count, while the API, other
 * writers and the consumer run.
 *
 * It counts nothing itself. It flags every live selected item that does not carry the counter's flag (one conditional
 * UpdateItem each: the item still exists, is live, selected and unflagged), and the stream carries the flag's record
 * to the consumer, which counts it once like any other (runtime/shared/selection.ts). So an item the consumer counted
 * already, or whose record is on its way, is never counted twice, and running a backfill again flags nothing new.
 * It then lists every key it flagged items of on the heal index: a heal gives those items their units of best-effort
 * (in strict mode every counted item, in utilization the client's lives a copied table holds), so a key adopted at its
 * limit refuses once healed (docs/limits.md).
 *
 * The Scan is segmented (one worker per segment), rate-limited by token buckets fed with the capacity DynamoDB reports,
 * and checkpointed per segment after each page (checkpoints.ts). A crash between a page's writes and its checkpoint
 * only repeats the page.
 */
import { DescribeTableCommand, ScanCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { ConfigurationError, type CounterConfig } from "../shared/config";
import { describeError, isRetryable } from "../shared/aws-errors";
import { withRetries } from "../shared/retry";
import { realClock, TokenBucket, type Clock } from "../shared/token-bucket";
import { eventualKey, stringOf } from "../shared/keys";
import { isCounted, isLive, wantsFlag, type ItemImage } from "../shared/selection";
import { flagItem } from "../shared/item-writes";
import { healMark } from "../heal/index-marks";
import { CheckpointStore, freshCheckpoint, type SegmentCheckpoint } from "./checkpoints";

export type { SegmentCheckpoint } from "./checkpoints";

export const BACKFILL_DEFAULTS = Object.freeze({
    runId: "default",
    segments: 4,
    pageSize: 500,
    /** Share of a provisioned table's capacity backfill may use. */
    capacityShare: 0.5,
    /** Read units per second on an on-demand user table. */
    readUnitsPerSecond: 500,
    /** Write units per second on an on-demand table. */
    writeUnitsPerSecond: 500,
    progressIntervalMs: 1_000,
});

export interface BackfillOptions {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
    /** Names the run: a run resumes from its own checkpoints; a new id starts over. @default "default" */
    readonly runId?: string;
    /** Scan segments, each read by its own worker (1..1000). Fixed for a run once started. @default 4 */
    readonly segments?: number;
    /** Items per Scan page (1..10000); a checkpoint follows every page. @default 500 */
    readonly pageSize?: number;
    /** Share (0..1] of a provisioned table's capacity. @default 0.5 */
    readonly capacityShare?: number;
    /** Read units per second for the Scan (overrides the share). @default 500 on demand */
    readonly readUnitsPerSecond?: number;
    /** Write units per second for the flags (overrides the share). @default 500 on demand */
    readonly writeUnitsPerSecond?: number;
    /** Stops the run between pages (Ctrl-C); it resumes from its checkpoints. */
    readonly signal?: AbortSignal;
    /** Epoch ms after which no new page is started (a Lambda's time budget). */
    readonly stopAt?: number;
    readonly onProgress?: (progress: BackfillProgress) => void;
    /** @default 1000 */
    readonly progressIntervalMs?: number;
    readonly clock?: Clock;
}

export interface BackfillCounts {
    readonly scanned: number;
    /** Items this backfill flagged: each counts once its flag's record reaches the consumer. */
    readonly counted: number;
    /** Live selected items that already counted. */
    readonly alreadyCounted: number;
    /** Items that are not live selected items of this region (other entities, counter items, tombstones). */
    readonly skipped: number;
}

export interface BackfillProgress extends BackfillCounts {
    readonly runId: string;
    readonly segments: number;
    readonly segmentsDone: number;
}

export interface BackfillReport {
    readonly runId: string;
    readonly tableName: string;
    readonly countersTableName: string;
    readonly segments: number;
    /** complete: every segment done. aborted: the signal fired. deadline: `stopAt` passed. overtaken: another runner moved a segment on. */
    readonly status: "complete" | "aborted" | "deadline" | "overtaken";
    /** This call started from checkpoints of an earlier call. */
    readonly resumed: boolean;
    readonly segmentsDone: number;
    /** Across every call of this run. */
    readonly total: BackfillCounts;
    /** This call only, with the keys it listed for a heal and the capacity it used. */
    readonly thisCall: BackfillCounts & {
        readonly keysListed: number;
        readonly readUnits: number;
        readonly writeUnits: number;
        readonly elapsedMs: number;
    };
}

/** A backfill that cannot go on (a non-retryable error, or retries exhausted). Its checkpoints stay valid. */
export class BackfillError extends Error {
    constructor(
        message: string,
        readonly cause?: unknown,
    ) {
        super(message);
        this.name = "BackfillError";
    }
}

const RUN_ID = /^[A-Za-z0-9_.:-]{1,64}$/;

/** Problems in the options, each naming its field; empty when they are valid. */
export function backfillOptionsProblems(options: Partial<BackfillOptions>): string[] {
    const problems: string[] = [];
    const intIn = (field: "segments" | "pageSize", min: number, max: number) => {
        const v = options[field];
        if (v !== undefined && (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)) {
            problems.push(`[${field}] must be an integer from ${min} to ${max}`);
        }
    };
    if (options.runId !== undefined && (typeof options.runId !== "string" || !RUN_ID.test(options.runId))) {
        problems.push("[runId] must be 1 to 64 letters, digits or _ . : -");
    }
    intIn("segments", 1, 1_000);
    intIn("pageSize", 1, 10_000);
    const share = options.capacityShare;
    if (share !== undefined && (typeof share !== "number" || !(share > 0 && share <= 1))) {
        problems.push("[capacityShare] must be a number in (0, 1]");
    }
    for (const field of ["readUnitsPerSecond", "writeUnitsPerSecond"] as const) {
        const v = options[field];
        if (v !== undefined && (typeof v !== "number" || !(v > 0))) {
            problems.push(`[${field}] must be a positive number (Infinity for no limit)`);
        }
    }
    if (options.config === undefined || typeof options.config.tableName !== "string") {
        problems.push("[config.tableName] must be set");
    }
    return problems;
}

/** What one call of a run shares between its segment workers. */
interface Run {
    readonly options: BackfillOptions;
    readonly runId: string;
    readonly segments: number;
    readonly store: CheckpointStore;
    readonly checkpoints: Map<number, SegmentCheckpoint>;
    readonly reads: TokenBucket;
    readonly writes: TokenBucket;
    readonly clock: Clock;
    readonly call: {
        scanned: number;
        counted: number;
        alreadyCounted: number;
        skipped: number;
        keysListed: number;
        readUnits: number;
        writeUnits: number;
    };
    /** The keys this call listed (a key flagged on several pages is listed after each, counted once). */
    readonly listed: Set<string>;
    stopped?: BackfillReport["status"];
    failure?: unknown;
}

/** Runs (or resumes) a backfill. Resolves with the report; throws BackfillError when it cannot go on. */
export async function backfill(options: BackfillOptions): Promise<BackfillReport> {
    const problems = backfillOptionsProblems(options);
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    const clock = options.clock ?? realClock;
    const started = clock.now();
    const runId = options.runId ?? BACKFILL_DEFAULTS.runId;
    const store = new CheckpointStore(options.config, options.dynamodb);
    const existing = await retrying(() => store.read(runId));
    const stored = [...existing.values()][0]?.totalSegments;
    if (stored !== undefined && options.segments !== undefined && options.segments !== stored) {
        throw new ConfigurationError([
            `[segments] run "${runId}" was started with ${stored} segments; resume it with the same number or start a new run`,
        ]);
    }
    const segments = stored ?? options.segments ?? BACKFILL_DEFAULTS.segments;
    const checkpoints = new Map(Array.from({ length: segments }, (_, s) => [s, existing.get(s) ?? freshCheckpoint(s, segments)] as const));
    const rates = await capacityRates(options);
    const run: Run = {
        options,
        runId,
        segments,
        store,
        checkpoints,
        reads: new TokenBucket(rates.read, clock),
        writes: new TokenBucket(rates.write, clock),
        clock,
        call: { scanned: 0, counted: 0, alreadyCounted: 0, skipped: 0, keysListed: 0, readUnits: 0, writeUnits: 0 },
        listed: new Set(),
    };
    await Promise.all(
        [...checkpoints.values()]
            .filter((c) => !c.done)
            .map((c) => runSegment(run, c.segment).catch((error: unknown) => void (run.failure ??= error))),
    );
    if (run.failure !== undefined) {
        throw run.failure instanceof BackfillError
            ? run.failure
            : new BackfillError(`backfill failed: ${JSON.stringify(describeError(run.failure))}`, run.failure);
    }
    const segmentsDone = [...checkpoints.values()].filter((c) => c.done).length;
    const total = totals(checkpoints);
    if (segmentsDone === segments) {
        await retrying(() => store.remove(runId));
    }
    options.onProgress?.({ runId, segments, segmentsDone, ...total });
    return {
        runId,
        tableName: options.config.tableName,
        countersTableName: options.config.countersTableName,
        segments,
        status: segmentsDone === segments ? "complete" : (run.stopped ?? "aborted"),
        resumed: existing.size > 0,
        segmentsDone,
        total,
        thisCall: { ...run.call, elapsedMs: clock.now() - started },
    };
}

function totals(checkpoints: ReadonlyMap<number, SegmentCheckpoint>): BackfillCounts {
    const all = [...checkpoints.values()];
    const sum = (f: (c: SegmentCheckpoint) => number) => all.reduce((n, c) => n + f(c), 0);
    return {
        scanned: sum((c) => c.scanned),
        counted: sum((c) => c.counted),
        alreadyCounted: sum((c) => c.alreadyCounted),
        skipped: sum((c) => c.skipped),
    };
}

async function capacityRates(options: BackfillOptions): Promise<{ read: number; write: number }> {
    const share = options.capacityShare ?? BACKFILL_DEFAULTS.capacityShare;
    if (options.readUnitsPerSecond !== undefined && options.writeUnitsPerSecond !== undefined) {
        return { read: options.readUnitsPerSecond, write: options.writeUnitsPerSecond };
    }
    const table = (await retrying(() => options.dynamodb.send(new DescribeTableCommand({ TableName: options.config.tableName })))).Table;
    const provisioned =
        table?.BillingModeSummary?.BillingMode !== "PAY_PER_REQUEST" && (table?.ProvisionedThroughput?.ReadCapacityUnits ?? 0) > 0;
    return {
        read:
            options.readUnitsPerSecond ??
            (provisioned ? table!.ProvisionedThroughput!.ReadCapacityUnits! * share : BACKFILL_DEFAULTS.readUnitsPerSecond),
        write:
            options.writeUnitsPerSecond ??
            (provisioned ? table!.ProvisionedThroughput!.WriteCapacityUnits! * share : BACKFILL_DEFAULTS.writeUnitsPerSecond),
    };
}

function stopReason(run: Run): BackfillReport["status"] | undefined {
    if (run.options.signal?.aborted || run.failure !== undefined) {
        return "aborted";
    }
    return run.options.stopAt !== undefined && run.clock.now() >= run.options.stopAt ? "deadline" : undefined;
}

async function runSegment(run: Run, segment: number): Promise<void> {
    let checkpoint = run.checkpoints.get(segment)!;
    while (!checkpoint.done) {
        const reason = stopReason(run);
        if (reason !== undefined) {
            run.stopped ??= reason;
            return;
        }
        await run.reads.take();
        const page = await retrying(() =>
            run.options.dynamodb.send(
                new ScanCommand({
                    TableName: run.options.config.tableName,
                    Segment: segment,
                    TotalSegments: run.segments,
                    Limit: run.options.pageSize ?? BACKFILL_DEFAULTS.pageSize,
                    ReturnConsumedCapacity: "TOTAL",
                    ...(checkpoint.next === undefined ? {} : { ExclusiveStartKey: checkpoint.next }),
                }),
            ),
        );
        const readUnits = page.ConsumedCapacity?.CapacityUnits ?? 0;
        run.reads.spend(readUnits);
        run.call.readUnits += readUnits;
        const done = await flagPage(run, page.Items ?? []);
        const next: SegmentCheckpoint = {
            ...checkpoint,
            ...(page.LastEvaluatedKey === undefined ? { next: undefined } : { next: page.LastEvaluatedKey }),
            done: page.LastEvaluatedKey === undefined,
            pages: checkpoint.pages + 1,
            scanned: checkpoint.scanned + (page.Items?.length ?? 0),
            counted: checkpoint.counted + done.counted,
            alreadyCounted: checkpoint.alreadyCounted + done.alreadyCounted,
            skipped: checkpoint.skipped + done.skipped,
        };
        if (!(await retrying(() => run.store.save(run.runId, next)))) {
            run.stopped ??= "overtaken";
            return;
        }
        checkpoint = next;
        run.checkpoints.set(segment, next);
        run.options.onProgress?.({
            runId: run.runId,
            segments: run.segments,
            segmentsDone: [...run.checkpoints.values()].filter((c) => c.done).length,
            ...totals(run.checkpoints),
        });
    }
}

/** Flags a page's live unflagged items and lists the keys that need a heal; returns what it did. */
async function flagPage(
    run: Run,
    items: ReadonlyArray<Record<string, AttributeValue>>,
): Promise<{ counted: number; alreadyCounted: number; skipped: number }> {
    const { config, dynamodb } = run.options;
    let counted = 0;
    let alreadyCounted = 0;
    let skipped = 0;
    const keys = new Set<string>();
    for (const item of items) {
        const image = item as ItemImage;
        if (!isLive(image, config)) {
            skipped++;
            continue;
        }
        if (isCounted(image, config) || !wantsFlag(image, config)) {
            alreadyCounted++;
            continue;
        }
        await run.writes.take();
        const flagged = await retrying(() =>
            flagItem(dynamodb, config, stringOf(item, config.partitionKey)!, stringOf(item, config.sortKey)!),
        );
        run.writes.spend(1);
        run.call.writeUnits += 1;
        if (flagged) {
            counted++;
            keys.add(stringOf(item, config.partitionKey)!);
        } else {
            alreadyCounted++;
        }
    }
    for (const key of keys) {
        await retrying(() => listForHeal(dynamodb, config, key));
        run.call.writeUnits += 1;
    }
    keys.forEach((key) => run.listed.add(key));
    run.call.keysListed = run.listed.size;
    run.call.scanned += items.length;
    run.call.counted += counted;
    run.call.alreadyCounted += alreadyCounted;
    run.call.skipped += skipped;
    return { counted, alreadyCounted, skipped };
}

/** Lists `key` on the heal index: a heal gives the flagged items units of best-effort (runtime/heal/plan.ts). */
async function listForHeal(dynamodb: DynamoDBClient, config: CounterConfig, key: string): Promise<void> {
    const mark = healMark(config, key, Date.now());
    await dynamodb.send(
        new UpdateItemCommand({
            TableName: config.countersTableName,
            Key: eventualKey(config, key),
            UpdateExpression: `SET ${mark.update}`,
            ExpressionAttributeNames: mark.names,
            ExpressionAttributeValues: mark.values,
        }),
    );
}

async function retrying<T>(fn: () => Promise<T>): Promise<T> {
    try {
        return await withRetries(fn, isRetryable, 8);
    } catch (error) {
        throw error instanceof BackfillError ? error : new BackfillError(`backfill failed: ${JSON.stringify(describeError(error))}`, error);
    }
}
