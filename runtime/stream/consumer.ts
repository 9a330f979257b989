/**
 * The stream consumer Lambda handler: counts a batch of one stream shard into the eventual counters.
 *
 * Invariant (marks.ts): for every key and stream shard, eventual has applied exactly the key's records up to its mark.
 * Why each party's write keeps it:
 * - this handler applies, with its batch, every record of the shard after its frontier that Lambda gave up on (read
 *   again from the stream), each key's records above its mark in one conditional write (plan.ts), and only then moves
 *   the frontier (progress.ts): no mark passes a record that is not applied, and no record is applied twice;
 * - the redrive applies a first-DLQ message's records the same way, from the frontier (redrive.ts);
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
import { deleteTokenAttribute, type HandlerConfig } from "../shared/config";
import { ConfigurationError } from "../shared/errors";
import { jsonLogger, Metrics, stdoutSink, type LineSink, type Logger } from "../shared/telemetry";
import { applyRecords, type ApplyContext, type EventSink } from "./apply";
import { compareSequences, parseRecord, type ParsedRecord } from "./records";
import { advanceFrontier, readFrontier } from "./progress";
import { readSpan, type Span } from "./reader";
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

/** What applying a batch (or a span re-read from the stream) needs, and where poison and events go. */
export interface ShardRun {
    readonly deps: StreamHandlerDeps;
    readonly shardId: string;
    readonly streamArn: string;
    readonly logger: Logger;
    readonly metrics: Metrics;
    readonly remainingMs: () => number;
    readonly frontiers: Frontiers;
}

/** How long this process trusts the frontier it last wrote or read for a shard, instead of reading it again. */
const FRONTIER_TRUSTED_MS = 60_000;

/** The most records this process moves a shard's frontier past without writing it. */
export const FRONTIER_WRITE_RECORDS = 1_000;

/**
 * The frontier of each shard this process last handled. A frontier it knows is true (every record up to it is
 * applied): read from the shard's progress item, written by this process, or moved by this process past records it
 * applied that needed no write (that move is written at most once a minute). So a frontier known here may be above the
 * stored one, never wrongly; and a stored one read long ago is only lower, which makes the next batch re-read records
 * it then finds applied. It is trusted for a minute, so that a batch never re-reads hours of a shard another process
 * has handled since.
 */
export class Frontiers {
    private readonly known = new Map<string, { sequence: string | undefined; at: number; writtenAt: number; unwritten: number }>();

    constructor(private readonly deps: Pick<StreamHandlerDeps, "config" | "dynamodb">) {}

    async get(shardId: string): Promise<string | undefined> {
        const known = this.known.get(shardId);
        if (known !== undefined && Date.now() - known.at < FRONTIER_TRUSTED_MS) {
            return known.sequence;
        }
        const sequence = await readFrontier(this.deps.config, this.deps.dynamodb, shardId);
        this.known.set(shardId, { sequence, at: Date.now(), writtenAt: 0, unwritten: 0 });
        return sequence;
    }

    /**
     * Moves the frontier to `to`, past `records` more records: written when `write`, or when this process has not
     * written it for a minute or for FRONTIER_WRITE_RECORDS records, else kept in this process. A frontier not written
     * is only lower in the table: a process that starts from it re-reads at most that many records from the stream
     * (fewer than one invocation reads, SPAN_MAX_RECORDS) and finds them applied.
     */
    async advance(shardId: string, to: string, records: number, write: boolean): Promise<void> {
        const known = this.known.get(shardId);
        const now = Date.now();
        const unwritten = (known?.unwritten ?? 0) + records;
        if (write || known === undefined || now - known.writtenAt >= FRONTIER_TRUSTED_MS || unwritten >= FRONTIER_WRITE_RECORDS) {
            await advanceFrontier(this.deps.config, this.deps.dynamodb, shardId, to);
            this.known.set(shardId, { sequence: to, at: now, writtenAt: now, unwritten: 0 });
        } else {
            this.known.set(shardId, { sequence: to, at: now, writtenAt: known.writtenAt, unwritten });
        }
    }
}

export function createStreamHandler(deps: StreamHandlerDeps): (event: StreamEvent, context?: Context) => Promise<StreamResponse> {
    const sink = deps.sink ?? stdoutSink;
    const logger = jsonLogger("hybrid-counter-consumer", sink);
    const frontiers = new Frontiers(deps);
    return async (event, context) => {
        const metrics = new Metrics(deps.config.metricsNamespace, "hybrid-counter-consumer", sink);
        try {
            const records = Array.isArray(event?.Records) ? event.Records : [];
            if (records.length === 0) {
                return { state: {}, batchItemFailures: [] };
            }
            if (typeof event.shardId !== "string" || event.shardId.length === 0) {
                throw new ConfigurationError([
                    "[shardId] the stream event names no shard: the event source mapping needs a tumbling window (TumblingWindowInSeconds)",
                ]);
            }
            const run: ShardRun = {
                deps,
                shardId: event.shardId,
                streamArn: event.eventSourceARN ?? records[0]!.eventSourceARN ?? "",
                logger,
                metrics,
                remainingMs: remainingTime(context),
                frontiers,
            };
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

/** The most records of a span after the frontier one invocation applies: the rest waits for the next attempt. */
export const SPAN_MAX_RECORDS = 2_000;

/**
 * Counts one batch with every record Lambda gave up on before it (progress.ts); returns the first record to deliver
 * again (undefined: all done). Records at or below the frontier are applied already, and are left out.
 */
async function countBatch(records: readonly DynamoDBRecord[], run: ShardRun): Promise<string | undefined> {
    const sequences = records.map((r) => r?.dynamodb?.SequenceNumber).filter((s): s is string => typeof s === "string" && /^\d+$/.test(s));
    if (sequences.length === 0) {
        await parseAll(records, run);
        return undefined;
    }
    const first = sequences[0]!;
    let frontier: string | undefined;
    try {
        frontier = await run.frontiers.get(run.shardId);
    } catch (error) {
        run.logger.log("warn", "could not read the shard's frontier", { shardId: run.shardId, error: String(error) });
        return first;
    }
    const fresh = records.filter(
        (r) =>
            frontier === undefined ||
            !/^\d+$/.test(r?.dynamodb?.SequenceNumber ?? "") ||
            compareSequences(r.dynamodb!.SequenceNumber!, frontier) > 0,
    );
    run.metrics.add("DuplicatesSkipped", records.length - fresh.length);
    if (fresh.length === 0) {
        return undefined;
    }
    const follows = frontier !== undefined && compareSequences(frontier, first) >= 0;
    const span = follows
        ? { records: [], complete: true, expired: false }
        : await readSkipped({ after: frontier, until: first, inclusive: false, max: SPAN_MAX_RECORDS }, run);
    if (span === undefined) {
        return first;
    }
    run.metrics.add("RangesRedriven", span.records.length > 0 ? 1 : 0);
    if (!span.complete) {
        // More records after the frontier than one invocation applies: these, and the batch again from the start.
        await applyAfter(frontier, span.records, run, span.expired);
        return first;
    }
    // A span the stream no longer held went to the fatal queue: the frontier is written past it, not to park it again.
    const failedFrom = await applyAfter(frontier, [...span.records, ...fresh], run, span.expired);
    if (failedFrom === undefined) {
        return undefined;
    }
    return compareSequences(failedFrom, first) < 0 ? first : failedFrom;
}

/**
 * Reads the records of `span` again from the stream (at most `span.max`: `complete` false when more follow). Records
 * gone from it (older than 24 hours) go to the fatal queue as a records-expired message: the keys they touched need a
 * reconcile. Undefined when the read failed (or the fatal queue refused): the caller tries again later.
 */
export async function readSkipped(
    span: Span,
    run: ShardRun,
): Promise<{ records: DynamoDBRecord[]; complete: boolean; expired: boolean } | undefined> {
    let read;
    try {
        read = await readSpan(run.deps.streams, run.streamArn, run.shardId, span);
    } catch (error) {
        run.logger.log("warn", "could not read the records after the frontier", {
            shardId: run.shardId,
            after: span.after,
            until: span.until,
            error: String(error),
        });
        return undefined;
    }
    if (read.trimmed) {
        const parked = await run.deps.fatal.park({
            reason: "records-expired",
            problem: `records of stream shard ${run.shardId} after ${span.after} are gone from the stream (older than 24 hours) and may not all be counted: reconcile the keys they touched`,
            detail: { shardId: run.shardId, streamArn: run.streamArn, startSequenceNumber: span.after, endSequenceNumber: span.until },
        });
        if (!parked) {
            return undefined;
        }
        run.metrics.add("RangesExpired");
    }
    return { records: read.records, complete: read.complete, expired: read.trimmed };
}

/**
 * Applies `records` (every record of the shard after `frontier` up to the last of them) and moves the frontier to the
 * last record before the first that failed; returns that first failed record (undefined: all applied).
 *
 * The frontier is written when `writeFrontier` (the redrive's rare ranges), when a record was parked (a later process
 * must not park it again), and otherwise once a minute or every FRONTIER_WRITE_RECORDS records (Frontiers.advance): the marks, not the frontier, keep a record from
 * being applied twice, so the common batch pays no write for its progress, and the consumer's own writes (the
 * same-table placement) never feed it batches without end.
 */
export async function applyAfter(
    frontier: string | undefined,
    records: readonly DynamoDBRecord[],
    run: ShardRun,
    writeFrontier = false,
): Promise<string | undefined> {
    const { parsed, unparked, parked } = await parseAll(records, run);
    const outcome = await applyRecords(parsed, run.shardId, applyContext(run));
    run.metrics.add("RecordsCounted", outcome.counted);
    run.metrics.add("DuplicatesSkipped", outcome.duplicates);
    run.metrics.add("KeysMarkedDue", outcome.markedDue);
    const failedFrom = lowest(outcome.failedFrom, unparked);

    const applied = records
        .map((r) => r?.dynamodb?.SequenceNumber)
        .filter(
            (s): s is string =>
                typeof s === "string" && /^\d+$/.test(s) && (failedFrom === undefined || compareSequences(s, failedFrom) < 0),
        )
        .reduce<string | undefined>((top, s) => (top === undefined || compareSequences(s, top) > 0 ? s : top), undefined);
    if (applied !== undefined && (frontier === undefined || compareSequences(applied, frontier) > 0)) {
        try {
            await run.frontiers.advance(run.shardId, applied, records.length, writeFrontier || parked > 0);
        } catch (error) {
            // Every record up to `applied` is applied all the same: the next batch re-reads them and finds them applied.
            run.logger.log("warn", "could not move the shard's frontier", { shardId: run.shardId, to: applied, error: String(error) });
        }
    }
    return failedFrom;
}

function applyContext(run: ShardRun): ApplyContext {
    const { config, dynamodb, sendEvents } = run.deps;
    return { config, dynamodb, deleteTokenAttribute: deleteTokenAttribute(config), sendEvents, remainingMs: run.remainingMs };
}

function lowest(a: string | undefined, b: string | undefined): string | undefined {
    if (a === undefined || b === undefined) {
        return a ?? b;
    }
    return compareSequences(a, b) <= 0 ? a : b;
}

/**
 * Parses records; poison goes to the fatal queue (in full) and counts as nothing. `unparked`: the first poison record
 * the queue refused, to deliver again rather than lose.
 */
async function parseAll(
    records: readonly DynamoDBRecord[],
    run: ShardRun,
): Promise<{ parsed: ParsedRecord[]; unparked?: string; parked: number }> {
    const parsed: ParsedRecord[] = [];
    let unparked: string | undefined;
    let parked = 0;
    for (const record of records) {
        const result = parseRecord(record, run.deps.config);
        if (result.kind === "record") {
            parsed.push(result.record);
        } else if (result.kind === "poison") {
            run.metrics.add("PoisonRecords");
            const sent = await run.deps.fatal.park({
                reason: "poison-record",
                problem: `[${result.field}] ${result.problem}`,
                ...(result.key === undefined ? {} : { counterKey: result.key }),
                records: [record],
            });
            unparked = sent ? unparked : lowest(unparked, result.sequenceNumber);
            parked += sent ? 1 : 0;
        }
    }
    return { parsed, parked, ...(unparked === undefined ? {} : { unparked }) };
}
