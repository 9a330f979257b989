/**
 * The stream consumer Lambda handler: counts a batch of one stream shard into the eventual counters.
 *
 * Invariant (marks.ts): for every key and stream shard, eventual has applied exactly the key's records up to its mark.
 * Why each party's write keeps it:
 * - this handler opens the batch's range before applying anything, applies first every range Lambda gave up on below
 *   it (progress.ts), then each key's records above its mark in one conditional write (plan.ts), and closes what it
 *   applied: no mark passes a record that is not applied, and no record is applied twice;
 * - the redrive applies a range from the first DLQ the same way, lowest open range first (redrive.ts);
 * - nothing else writes a mark or an eventual count (a reconcile corrects a key's count only with its marks held: ops/).
 *
 * Failure contract:
 * - a record that can never be counted (poison: unreadable keys or images) goes whole to the fatal queue and counts as
 *   nothing; the batch goes on;
 * - work that does not finish (throttling, an outage) is reported through ReportBatchItemFailures at the lowest record
 *   it concerns, and Lambda delivers the batch again from there;
 * - the handler throws only when its configuration is wrong (no shard id: the mapping has no tumbling window).
 *
 * The event must carry the stream shard's id: the component configures the mapping with a tumbling window
 * (`TumblingWindowInSeconds`) for that alone, and the handler answers every invocation with an empty state.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { Context, DynamoDBRecord } from "aws-lambda";
import type { HandlerConfig } from "../shared/config";
import { ConfigurationError } from "../shared/errors";
import { jsonLogger, Metrics, stdoutSink, type LineSink, type Logger } from "../shared/telemetry";
import { applyRecords, type ApplyContext, type EventSink } from "./apply";
import { compareSequences, parseRecord, type ParsedRecord } from "./records";
import { doneOf, rangeAt, ShardProgress, type Range } from "./progress";
import { readRange } from "./reader";
import type { FatalQueue } from "./fatal";

/** A stream event as Lambda delivers it under a tumbling window: the records, and the shard they come from. */
export interface StreamEvent {
    readonly Records?: DynamoDBRecord[];
    readonly shardId?: string;
    readonly eventSourceARN?: string;
    readonly state?: Record<string, string>;
    readonly isFinalInvokeForWindow?: boolean;
}

/** The answer under a tumbling window: an empty state, and the first record to deliver again (if any). */
export interface StreamResponse {
    readonly state: Record<string, string>;
    readonly batchItemFailures: Array<{ itemIdentifier: string }>;
}

export interface StreamHandlerDeps {
    readonly config: HandlerConfig;
    readonly dynamodb: DynamoDBClient;
    readonly streams: DynamoDBStreamsClient;
    readonly fatal: FatalQueue;
    readonly sendEvents: EventSink;
    readonly sink?: LineSink;
}

/** The budget when no Lambda context says how long is left (local runs, tests). */
const DEFAULT_BUDGET_MS = 60_000;

export function remainingTime(context: Pick<Context, "getRemainingTimeInMillis"> | undefined): () => number {
    if (context && typeof context.getRemainingTimeInMillis === "function") {
        return () => context.getRemainingTimeInMillis();
    }
    const deadline = Date.now() + DEFAULT_BUDGET_MS;
    return () => deadline - Date.now();
}

/** What applying a batch (or a re-read range) needs: the shard's progress, and where poison and events go. */
export interface ShardRun {
    readonly deps: StreamHandlerDeps;
    readonly shardId: string;
    readonly streamArn: string;
    readonly logger: Logger;
    readonly metrics: Metrics;
    readonly remainingMs: () => number;
}

/** The progress of each shard this process has handled (one instance usually handles one shard's batches in turn). */
const progressByShard = new Map<string, ShardProgress>();

export function shardProgress(deps: StreamHandlerDeps, shardId: string): ShardProgress {
    const key = `${deps.config.countersTableName}\u0000${shardId}`;
    let progress = progressByShard.get(key);
    if (progress === undefined) {
        progress = new ShardProgress(deps.config, deps.dynamodb, shardId);
        progressByShard.set(key, progress);
    }
    return progress;
}

export function createStreamHandler(deps: StreamHandlerDeps): (event: StreamEvent, context?: Context) => Promise<StreamResponse> {
    const sink = deps.sink ?? stdoutSink;
    const logger = jsonLogger("hybrid-counter-consumer", sink);
    return async (event, context) => {
        const metrics = new Metrics(deps.config.metricsNamespace, "hybrid-counter-consumer", sink);
        try {
            const records = Array.isArray(event?.Records) ? event.Records : [];
            if (records.length === 0) {
                return { state: {}, batchItemFailures: [] };
            }
            if (typeof event.shardId !== "string" || event.shardId.length === 0) {
                throw new ConfigurationError(["[shardId] the stream event names no shard: the event source mapping needs a tumbling window (TumblingWindowInSeconds)"]);
            }
            const run: ShardRun = { deps, shardId: event.shardId, streamArn: event.eventSourceARN ?? records[0]!.eventSourceARN ?? "", logger, metrics, remainingMs: remainingTime(context) };
            const failedFrom = await countBatch(records, run);
            if (failedFrom !== undefined) {
                metrics.add("BatchItemFailures");
            }
            return { state: {}, batchItemFailures: failedFrom === undefined ? [] : [{ itemIdentifier: failedFrom }] };
        } finally {
            metrics.flush();
        }
    };
}

/** Counts one batch; returns the first record to deliver again (undefined: all done). */
async function countBatch(records: readonly DynamoDBRecord[], run: ShardRun): Promise<string | undefined> {
    const sequences = records.map((r) => r?.dynamodb?.SequenceNumber).filter((s): s is string => typeof s === "string" && /^\d+$/.test(s));
    if (sequences.length === 0) {
        await parseAll(records, run);
        return undefined;
    }
    const range = rangeAt(sequences[0]!, sequences.at(-1)!);
    const progress = shardProgress(run.deps, run.shardId);
    let skipped: Range[];
    try {
        skipped = await progress.open(range);
    } catch (error) {
        run.logger.log("warn", "could not open the batch's range", { shardId: run.shardId, error: String(error) });
        return range.from;
    }
    for (const gap of skipped) {
        if (!(await applyRange(gap, run, progress))) {
            return range.from;
        }
    }
    const { parsed, unparked } = await parseAll(records, run);
    const outcome = await applyRecords(parsed, run.shardId, applyContext(run));
    run.metrics.add("RecordsCounted", outcome.counted);
    run.metrics.add("DuplicatesSkipped", outcome.duplicates);
    run.metrics.add("KeysMarkedDue", outcome.markedDue);
    const failedFrom = lowest(outcome.failedFrom, unparked);
    progress.close(doneOf(range, failedFrom));
    return failedFrom;
}

function applyContext(run: ShardRun): ApplyContext {
    const { config, dynamodb, sendEvents } = run.deps;
    return { config, dynamodb, deleteTokenAttribute: `${config.tokenAttribute}_delete`, sendEvents, remainingMs: run.remainingMs };
}

function lowest(a: string | undefined, b: string | undefined): string | undefined {
    if (a === undefined || b === undefined) {
        return a ?? b;
    }
    return compareSequences(a, b) <= 0 ? a : b;
}

/**
 * Applies a range Lambda gave up on, read again from the stream, and closes it. Records the stream no longer holds
 * go to the fatal queue as a records-expired message (their keys need a reconcile), and the range is closed.
 */
export async function applyRange(range: Range, run: ShardRun, progress: ShardProgress): Promise<boolean> {
    let records: DynamoDBRecord[];
    try {
        records = await readRange(run.deps.streams, run.streamArn, run.shardId, range);
    } catch (error) {
        if ((error as Error).name !== "TrimmedDataAccessException" && (error as Error).name !== "ResourceNotFoundException") {
            run.logger.log("warn", "could not re-read a range", { shardId: run.shardId, from: range.from, to: range.to, error: String(error) });
            return false;
        }
        const parked = await run.deps.fatal.park({
            reason: "records-expired",
            problem: `records ${range.from} to ${range.to} of stream shard ${run.shardId} are gone from the stream (older than 24 hours): reconcile the keys they touched`,
            detail: { shardId: run.shardId, streamArn: run.streamArn, startSequenceNumber: range.from, endSequenceNumber: range.to },
        });
        if (!parked) {
            return false;
        }
        run.metrics.add("RangesExpired");
        progress.close({ from: range.from, to: range.to, rest: range.to, restAfter: true });
        return true;
    }
    const { parsed, unparked } = await parseAll(records, run);
    const outcome = await applyRecords(parsed, run.shardId, applyContext(run));
    run.metrics.add("RecordsCounted", outcome.counted);
    run.metrics.add("RangesRedriven");
    if (outcome.failedFrom !== undefined || unparked !== undefined) {
        return false;
    }
    progress.close({ from: range.from, to: range.to, rest: records.at(-1)?.dynamodb?.SequenceNumber ?? range.anchor, restAfter: records.length > 0 || range.after });
    return true;
}

/**
 * Parses records; poison goes to the fatal queue (in full) and counts as nothing. `unparked`: the first poison record
 * the queue refused, to deliver again rather than lose.
 */
async function parseAll(records: readonly DynamoDBRecord[], run: ShardRun): Promise<{ parsed: ParsedRecord[]; unparked?: string }> {
    const parsed: ParsedRecord[] = [];
    let unparked: string | undefined;
    for (const record of records) {
        const result = parseRecord(record, run.deps.config);
        if (result.kind === "record") {
            parsed.push(result.record);
        } else if (result.kind === "poison") {
            run.metrics.add("PoisonRecords");
            const sent = await run.deps.fatal.park({ reason: "poison-record", problem: `[${result.field}] ${result.problem}`, ...(result.key === undefined ? {} : { counterKey: result.key }), records: [record] });
            unparked = sent ? unparked : lowest(unparked, result.sequenceNumber);
        }
    }
    return { parsed, ...(unparked === undefined ? {} : { unparked }) };
}
