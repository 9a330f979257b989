/**
 * Backfill: brings the items that existed before the counter was attached into the eventual counter
 * (and, in strict mode, into best-effort), while the API, other writers and the stream consumer run.
 *
 * Invariant kept by every transaction this module commits (the eventual counter's own, see DESIGN):
 *
 *     eventual(key) == number of markers of key with hc_state = "counted"
 *
 * and in strict mode, additionally: every marker backfill writes with hc_be = true added exactly one
 * unit to best-effort in the same transaction (so best-effort >= live client-counted items holds). The items that
 * take a unit are those no client reservation backs: no client token, or a token from before the counter
 * (plan.ts `fromBeforeClients`). On a sharded key the transaction that adds units also disarms every shard's stored
 * quota (runtime/shards/reservation.ts): the next tryCreate checks the key's exact sum against its limit.
 *
 * Each transaction is, per counter key and chunk of at most 99 (strict: 98) items:
 *   `ADD eventual :n` [+ `ADD best-effort :n, hc_version :1`] + per item
 *   `marker SET hc_state = counted, hc_seq = ZERO_SEQ [, hc_be = true] CONDITION attribute_not_exists(hc_state)`.
 * A marker that exists (counted by the consumer, or a tombstone left by a removal) fails its condition
 * and the item is dropped from the chunk. No ConditionCheck on the user item is needed: an item deleted
 * after it was scanned has a stream record that is later than ZERO_SEQ and uncounts it. An extra
 * best-effort unit in strict mode only holds a slot back.
 *
 * The Scan is segmented (Segment/TotalSegments, one worker per segment), rate-limited by token buckets
 * fed with the capacity DynamoDB reports, and checkpointed per segment after each page in the counters
 * table (sk `${counterPrefix}backfill#<runId>#<segment>`). A crash between a page's transactions and its
 * checkpoint only repeats the page: its markers exist then, and the conditions refuse a second count.
 * Running the same run again after it completed reads only its checkpoints; a new run changes nothing
 * and reports every item as already counted.
 *
 * A sharded key (`counterShards` N > 1, runtime/shards/layout.ts) keeps the invariant per shard:
 *
 *     eventual partial of shard s == number of counted markers in shard s
 *
 * An item's marker lives in `markerShard(id, N)`, and a transaction holds only items of one key and one marker
 * shard, so its `ADD eventual :n` moves that shard's partial by the markers it creates there, and the conditions
 * above hold marker by marker as for an unsharded key; the consumer moves each shard's partial with that shard's
 * markers alike, so the sum over shards is the key's eventual. In strict mode the transaction's items also share
 * the home of their units, `homeShard(id, token, N)` (the shard a heal counts them in), and its best-effort write
 * goes to that shard's item, conditional on that shard's heal epoch, which the flags carry: epochs are per
 * best-effort item, and a delete that later takes a flag reads the epoch of the item's home. The transaction may so
 * span two partitions of the counters table (marker shard, home shard); both are in one transaction, so the unit and
 * its flag still come and go together. A key that cannot be sharded (U+0000, or too long for a shard's suffix) is
 * never counted, and reported as an id whose marker key does not fit. N = 1 puts every item in the key's own
 * partition: today's transactions, item for item.
 */
import { TransactionCanceledException, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { randomUUID } from "node:crypto";
import { ConfigurationError, counterShardsProblems, type CounterTableConfig } from "../shared/config";
import { describeError, isRetryable } from "../shared/aws-errors";
import {
    backfillActions,
    cancellationOutcome,
    chunkShards,
    estimate,
    freshCheckpoint,
    planPage,
    liveCandidates,
    type BackfillConfig,
    type BackfillMode,
    type Candidate,
    type SegmentCheckpoint,
} from "./plan";
import { BackfillStore } from "./store";
import { withRetries } from "../shared/retry";
import { realClock, TokenBucket, type Clock } from "../shared/token-bucket";
import { shardPartitionKey } from "../shards/layout";

export type { BackfillConfig, BackfillMode, SegmentCheckpoint } from "./plan";

export const BACKFILL_DEFAULTS = Object.freeze({
    runId: "default",
    segments: 4,
    pageSize: 500,
    /** Share of a provisioned table's capacity backfill may use. */
    capacityShare: 0.5,
    /** Read units per second on an on-demand user table. */
    readUnitsPerSecond: 500,
    /** Write units per second on an on-demand counters table. */
    writeUnitsPerSecond: 500,
    progressIntervalMs: 1_000,
});

export interface BackfillOptions {
    /** The table layout; `countersTableName` defaults to `tableName`. */
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    /** The counter's mode: strict also counts the items into best-effort. @default "utilization" */
    readonly mode?: BackfillMode;
    /**
     * Strict: the instant (ms since the epoch) the strict clients of this counters table began writing. A live item
     * whose client token was made before it (with the clock skew allowed), or that carries a token no client made, is
     * an item from before the counter: no reservation of this table backs it, so the backfill adds its unit, as for an
     * item with no token (docs/adopting.md). Absent: only tokens no client made are from before the counter (a table
     * whose items were all written by this table's strict clients, or by other programs).
     */
    readonly clientsSince?: number;
    /** Names the run: a run resumes from its own checkpoints; a new id starts over. @default "default" */
    readonly runId?: string;
    /** Scan segments, each read by its own worker (1..1000). Fixed for a run once started. @default 4 */
    readonly segments?: number;
    /** Items per Scan page (1..10000); a checkpoint follows every page. @default 500 */
    readonly pageSize?: number;
    /** Share (0..1] of a provisioned table's read (user table) and write (counters table) capacity. @default 0.5 */
    readonly capacityShare?: number;
    /** Read units per second for the Scan; required reading for on-demand tables, overrides the share. @default 500 on demand */
    readonly readUnitsPerSecond?: number;
    /** Write units per second for the counters table; overrides the share. @default 500 on demand */
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
    /** Items this backfill counted (a marker written, eventual moved). */
    readonly counted: number;
    /** Live selected items that already had a marker. */
    readonly alreadyCounted: number;
    /** Items that are not live counted resources (other entities, counter items, soft-deleted items). */
    readonly skipped: number;
}

export interface BackfillProgress extends BackfillCounts {
    readonly runId: string;
    readonly segments: number;
    readonly segmentsDone: number;
    readonly itemsPerSecond: number;
    /** From DynamoDB's approximate item count; null while unknown. */
    readonly etaSeconds: number | null;
}

export interface BackfillReport {
    readonly runId: string;
    readonly tableName: string;
    readonly countersTableName: string;
    readonly mode: BackfillMode;
    readonly segments: number;
    /** complete: every segment done. aborted: the signal fired. deadline: `stopAt` passed. overtaken: another runner moved a segment further. */
    readonly status: "complete" | "aborted" | "deadline" | "overtaken";
    /** The run was complete before this call: nothing was scanned or written. */
    readonly alreadyComplete: boolean;
    /** This call started from checkpoints of an earlier call. */
    readonly resumed: boolean;
    readonly segmentsDone: number;
    /** Across every call of this run, from the checkpoints. */
    readonly total: BackfillCounts;
    /** This call only. */
    readonly thisCall: BackfillCounts & {
        readonly transactions: number;
        readonly retries: number;
        /** Read units of the Scan and of the marker reads. */
        readonly readUnits: number;
        /** Of those, the marker reads (counters table). */
        readonly markerReadUnits: number;
        readonly writeUnits: number;
        readonly elapsedMs: number;
        /**
         * Live items whose marker key cannot fit (runtime/shared/key-limits.ts), or whose key cannot be sharded under
         * `counterShards` (runtime/shards/layout.ts, `shardedKeyProblem`): skipped, never counted. Absent when none.
         */
        readonly unmarkable?: ReadonlyArray<{ readonly counterKey: string; readonly id: string }>;
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
const MAX_ATTEMPTS = 25;
const BACKOFF_BASE_MS = 25;
const BACKOFF_CAP_MS = 2_000;

/** Problems in the options, each naming its field; empty when they are valid. */
export function backfillOptionsProblems(options: Partial<BackfillOptions>): string[] {
    const problems: string[] = [];
    const intIn = (field: keyof BackfillOptions, min: number, max: number) => {
        const v = options[field];
        if (v !== undefined && (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max)) {
            problems.push(`[${field}] must be an integer from ${min} to ${max}`);
        }
    };
    const positive = (field: keyof BackfillOptions) => {
        const v = options[field];
        if (v !== undefined && (typeof v !== "number" || !(v > 0))) {
            problems.push(`[${field}] must be a positive number (Infinity for no limit)`);
        }
    };
    if (options.mode !== undefined && options.mode !== "utilization" && options.mode !== "strict") {
        problems.push(`[mode] must be "utilization" or "strict"`);
    }
    if (options.runId !== undefined && (typeof options.runId !== "string" || !RUN_ID.test(options.runId))) {
        problems.push("[runId] must be 1 to 64 letters, digits or _ . : -");
    }
    intIn("segments", 1, 1_000);
    intIn("pageSize", 1, 10_000);
    const share = options.capacityShare;
    if (share !== undefined && (typeof share !== "number" || !(share > 0 && share <= 1))) {
        problems.push("[capacityShare] must be a number in (0, 1]");
    }
    positive("readUnitsPerSecond");
    positive("writeUnitsPerSecond");
    const since = options.clientsSince;
    if (since !== undefined && (typeof since !== "number" || !Number.isFinite(since) || since < 0)) {
        problems.push("[clientsSince] must be a time in milliseconds since the epoch");
    }
    if (options.config === undefined || typeof options.config.tableName !== "string") {
        problems.push("[config.tableName] must be set");
    } else {
        const { counterShards, tableName, countersTableName } = options.config;
        problems.push(
            ...counterShardsProblems(counterShards, tableName, countersTableName ?? tableName).map((p) =>
                p.replace("[counterShards]", "[config.counterShards]"),
            ),
        );
    }
    return problems;
}

/** Resolves the counters table: the counters share the user's table unless a counters table is named. */
export function backfillConfig(config: CounterTableConfig): BackfillConfig {
    return { ...config, countersTableName: config.countersTableName ?? config.tableName };
}

/** Runs (or resumes) a backfill. Resolves with the report; throws BackfillError when it cannot go on. */
export async function backfill(options: BackfillOptions): Promise<BackfillReport> {
    const problems = backfillOptionsProblems(options);
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    const config = backfillConfig(options.config);
    const clock = options.clock ?? realClock;
    const mode = options.mode ?? "utilization";
    const runId = options.runId ?? BACKFILL_DEFAULTS.runId;
    const store = new BackfillStore(config, options.dynamodb, clock);
    const started = clock.now();
    // A request that cannot go on (refused as written, or retried to the end) stops the run with a BackfillError, wherever
    // it is sent: the run's checkpoints stay valid, and the next invocation resumes from them.
    const retrying = async <T>(fn: () => Promise<T>): Promise<T> => {
        try {
            return await withRetries(fn, isRetryable, 8);
        } catch (error) {
            throw error instanceof BackfillError
                ? error
                : new BackfillError(`backfill failed: ${JSON.stringify(describeError(error))}`, error);
        }
    };

    const existing = await retrying(() => store.checkpoints(runId));
    const storedSegments = [...existing.values()][0]?.totalSegments;
    if (storedSegments !== undefined && options.segments !== undefined && options.segments !== storedSegments) {
        throw new ConfigurationError([
            `[segments] run "${runId}" was started with ${storedSegments} segments; resume it with the same number or start a new run`,
        ]);
    }
    const segments = storedSegments ?? options.segments ?? BACKFILL_DEFAULTS.segments;
    const checkpoints = new Map<number, SegmentCheckpoint>();
    for (let s = 0; s < segments; s++) {
        checkpoints.set(s, existing.get(s) ?? freshCheckpoint(s, segments));
    }
    const alreadyComplete = [...checkpoints.values()].every((c) => c.done);

    const [userCapacity, countersCapacity] = alreadyComplete
        ? [{}, {}]
        : await Promise.all([retrying(() => store.capacity(config.tableName)), retrying(() => store.capacity(config.countersTableName))]);
    const share = options.capacityShare ?? BACKFILL_DEFAULTS.capacityShare;
    const readRate =
        options.readUnitsPerSecond ??
        (userCapacity.readUnits !== undefined ? userCapacity.readUnits * share : BACKFILL_DEFAULTS.readUnitsPerSecond);
    const writeRate =
        options.writeUnitsPerSecond ??
        (countersCapacity.writeUnits !== undefined ? countersCapacity.writeUnits * share : BACKFILL_DEFAULTS.writeUnitsPerSecond);
    const readBucket = new TokenBucket(readRate, clock);
    const writeBucket = new TokenBucket(writeRate, clock);

    const call = {
        scanned: 0,
        counted: 0,
        alreadyCounted: 0,
        skipped: 0,
        transactions: 0,
        retries: 0,
        readUnits: 0,
        markerReadUnits: 0,
        writeUnits: 0,
    };
    // Live items whose marker key cannot fit (key-limits.ts) or whose key cannot be sharded: skipped, never counted, named in the report.
    const unmarkable: Candidate[] = [];
    let stopped: BackfillReport["status"] | undefined;
    let failure: unknown;
    const stopReason = (): BackfillReport["status"] | undefined => {
        if (options.signal?.aborted || failure !== undefined) {
            return "aborted";
        }
        if (options.stopAt !== undefined && clock.now() >= options.stopAt) {
            return "deadline";
        }
        return undefined;
    };

    const totals = (): BackfillCounts => {
        const all = [...checkpoints.values()];
        const sum = (f: (c: SegmentCheckpoint) => number) => all.reduce((n, c) => n + f(c), 0);
        return {
            scanned: sum((c) => c.scanned),
            counted: sum((c) => c.counted),
            alreadyCounted: sum((c) => c.alreadyCounted),
            skipped: sum((c) => c.skipped),
        };
    };
    let lastProgress = 0;
    const progress = (force = false) => {
        const now = clock.now();
        if (!options.onProgress || (!force && now - lastProgress < (options.progressIntervalMs ?? BACKFILL_DEFAULTS.progressIntervalMs))) {
            return;
        }
        lastProgress = now;
        const total = totals();
        options.onProgress({
            runId,
            segments,
            segmentsDone: [...checkpoints.values()].filter((c) => c.done).length,
            ...total,
            ...estimate(call.scanned, total.scanned, now - started, userCapacity.itemCount),
        });
    };

    /** Commits one chunk until every item is counted or found already counted. */
    const commitChunk = async (counterKey: string, items: readonly Candidate[]): Promise<{ counted: number; alreadyCounted: number }> => {
        let pending = items;
        let token = randomUUID();
        // A token names one request: its retry (after a lost answer, the transaction may have committed) must send the
        // same actions, time stamps included, or DynamoDB refuses it as IdempotentParameterMismatch. A new token goes
        // with new actions, stamped anew.
        let stampedAt = clock.now();
        const renew = () => {
            token = randomUUID();
            stampedAt = clock.now();
        };
        let alreadyCounted = 0;
        let lastEpoch: number | undefined;
        for (let attempt = 1; pending.length > 0; attempt++) {
            await writeBucket.take();
            let backoff = false;
            try {
                // Strict: the units are flagged with their home shard's heal epoch, on the condition that it has not moved
                // (the shard whose best-effort item backfillActions writes).
                const home = shardPartitionKey(counterKey, chunkShards(config, pending, mode).home);
                const epoch = mode === "strict" ? await store.epoch(home) : 0;
                if (lastEpoch !== undefined && epoch !== lastEpoch) {
                    renew(); // other actions: a reused token would be refused as a parameter mismatch
                }
                lastEpoch = epoch;
                const actions = backfillActions(config, counterKey, pending, mode, stampedAt, epoch);
                const { writeUnits } = await store.commit(actions, token);
                // DynamoDB bills 2 units per transactional item write; use that when the engine reports less.
                const spent = Math.max(writeUnits, 2 * actions.length);
                writeBucket.spend(spent);
                call.writeUnits += spent;
                call.transactions++;
                return { counted: pending.filter((item) => item.flagOnly !== true).length, alreadyCounted };
            } catch (error) {
                if (error instanceof TransactionCanceledException && error.CancellationReasons) {
                    const outcome = cancellationOutcome(pending, error.CancellationReasons, mode);
                    // A flag-only item was already reported as counted by the page plan.
                    alreadyCounted += outcome.alreadyCounted.filter((item) => item.flagOnly !== true).length;
                    if (outcome.alreadyCounted.length > 0) {
                        // Different actions: a reused token would be refused as a parameter mismatch.
                        renew();
                    }
                    pending = outcome.remaining;
                    backoff = outcome.contention;
                } else if (isRetryable(error)) {
                    backoff = true;
                } else {
                    throw new BackfillError(`transaction on key "${counterKey}" failed: ${JSON.stringify(describeError(error))}`, error);
                }
            }
            if (pending.length === 0) {
                break;
            }
            if (attempt >= MAX_ATTEMPTS) {
                throw new BackfillError(`transaction on key "${counterKey}" did not commit after ${attempt} attempts`);
            }
            call.retries++;
            if (backoff) {
                await clock.sleep(Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt) * Math.random());
            }
        }
        return { counted: 0, alreadyCounted };
    };

    const runSegment = async (segment: number): Promise<void> => {
        let checkpoint = checkpoints.get(segment)!;
        while (!checkpoint.done) {
            const reason = stopReason();
            if (reason) {
                stopped ??= reason;
                return;
            }
            await readBucket.take();
            const page = await retrying(() =>
                store.scan(segment, segments, checkpoint.next, options.pageSize ?? BACKFILL_DEFAULTS.pageSize),
            );
            readBucket.spend(page.readUnits);
            call.readUnits += page.readUnits;
            const candidates = liveCandidates(page.items, config, unmarkable);
            const markers = await retrying(() => store.markedIds(candidates));
            call.readUnits += markers.readUnits;
            call.markerReadUnits += markers.readUnits;
            const plan = planPage(page.items, config, markers.marked, mode, markers.unflagged, options.clientsSince);
            let counted = 0;
            let alreadyCounted = plan.alreadyCounted;
            for (const chunk of plan.chunks) {
                if (options.signal?.aborted || failure !== undefined) {
                    // The page is left unfinished and unrecorded: the next call repeats it.
                    call.counted += counted;
                    stopped ??= "aborted";
                    return;
                }
                const result = await commitChunk(chunk.counterKey, chunk.items);
                counted += result.counted;
                alreadyCounted += result.alreadyCounted;
            }
            const next: SegmentCheckpoint = {
                segment,
                totalSegments: segments,
                ...(page.next ? { next: page.next } : {}),
                done: page.next === undefined,
                pages: checkpoint.pages + 1,
                scanned: checkpoint.scanned + page.items.length,
                counted: checkpoint.counted + counted,
                alreadyCounted: checkpoint.alreadyCounted + alreadyCounted,
                skipped: checkpoint.skipped + plan.skipped,
            };
            const saved = await retrying(() => store.saveCheckpoint(runId, next));
            call.writeUnits += saved.writeUnits;
            call.scanned += page.items.length;
            call.counted += counted;
            call.alreadyCounted += alreadyCounted;
            call.skipped += plan.skipped;
            if (!saved.saved) {
                stopped ??= "overtaken";
                return;
            }
            checkpoint = next;
            checkpoints.set(segment, next);
            progress();
        }
    };

    if (!alreadyComplete) {
        // One failing segment stops the others at their next page or chunk; then the first error is raised.
        await Promise.all(
            [...checkpoints.values()]
                .filter((c) => !c.done)
                .map((c) =>
                    runSegment(c.segment).catch((error: unknown) => {
                        failure ??= error;
                    }),
                ),
        );
        if (failure !== undefined) {
            throw failure instanceof BackfillError
                ? failure
                : new BackfillError(`backfill failed: ${JSON.stringify(describeError(failure))}`, failure);
        }
    }
    progress(true);
    const segmentsDone = [...checkpoints.values()].filter((c) => c.done).length;
    return {
        runId,
        tableName: config.tableName,
        countersTableName: config.countersTableName,
        mode,
        segments,
        status: segmentsDone === segments ? "complete" : (stopped ?? "aborted"),
        alreadyComplete,
        resumed: existing.size > 0,
        segmentsDone,
        total: totals(),
        thisCall: { ...call, elapsedMs: clock.now() - started, ...(unmarkable.length > 0 ? { unmarkable } : {}) },
    };
}
