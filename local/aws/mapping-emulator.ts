/**
 * An emulator of Lambda's event source mapping for a DynamoDB stream, for DynamoDB Local (which
 * never invokes Lambda). It polls the real stream through the Streams API and honours the mapping's
 * settings (mapping-settings.ts): starting position, filter criteria, batch size, batching window, parallelization
 * factor (per-item ordering), retries, bisect on function error, ReportBatchItemFailures checkpoints, maximum record
 * age, the on-failure destination's metadata-only record, and a tumbling window (the shard, window and state in every
 * event, and a final invocation that closes each window).
 *
 * Like Lambda's poller, it reads one GetRecords page per shard per poll and invokes as soon as records
 * are there (or the window has passed), while the next page is read. Reading a shard until it answers
 * empty before invoking would chase the stream's tail for as long as writes keep arriving, and the
 * eventual counter would freeze for seconds at a time under a steady load.
 */
import {
    DescribeStreamCommand,
    GetRecordsCommand,
    GetShardIteratorCommand,
    type DynamoDBStreamsClient,
    type GetRecordsCommandOutput,
    type Shard,
} from "@aws-sdk/client-dynamodb-streams";
import type { DynamoDBRecord } from "aws-lambda";
import { createHash } from "node:crypto";
import { toLambdaRecord } from "../../runtime/stream/reader";
import { matchesAny, parsePattern } from "./filter";
import {
    validateSettings,
    type MappingSettings,
    type MappingStats,
    type OnFailureRecord,
    type StreamInvokeEvent,
} from "./mapping-settings";

export {
    LAMBDA_DEFAULTS,
    validateSettings,
    type MappingSettings,
    type MappingStats,
    type OnFailureRecord,
    type StreamInvokeEvent,
} from "./mapping-settings";

export type Invoke = (event: StreamInvokeEvent) => Promise<unknown>;

export interface MappingEmulatorOptions {
    readonly streams: DynamoDBStreamsClient;
    readonly streamArn: string;
    readonly settings: MappingSettings;
    readonly invoke: Invoke;
    readonly onFailure?: (record: OnFailureRecord) => Promise<void> | void;
    /** Called with every record the mapping read and will deliver (after filtering), when GetRecords returned it. */
    readonly onRead?: (record: DynamoDBRecord, at: number) => void;
    readonly functionArn?: string;
    /** Milliseconds since the epoch; tests move it to age records. */
    readonly now?: () => number;
    /**
     * How long a shard whose last GetRecords came back empty waits before it is read again. Lambda
     * polls a shard "at a base rate of 4 times per second" and reads again at once after records.
     * @default 250
     */
    readonly idlePollIntervalMs?: number;
}

/** Lambda's documented base polling rate for a DynamoDB stream shard: 4 times per second. */
export const LAMBDA_IDLE_POLL_INTERVAL_MS = 250;

interface Pending {
    readonly record: DynamoDBRecord;
    readonly readAt: number;
}

interface Batch {
    records: Pending[];
    /** Failed invocations that included these records. */
    attempts: number;
    invokeCount: number;
}

interface Lane {
    readonly shardId: string;
    readonly pending: Pending[];
    /** The batch being worked on, split into parts by bisection; processed front to back. */
    readonly head: Batch[];
    /** The lane's run while it is invoking: one batch at a time per lane, as Lambda does. */
    running?: Promise<number>;
    /** Under a tumbling window: the start (epoch ms) of the window this lane last delivered in. */
    window?: number;
}

interface ShardState {
    iterator: string | undefined;
    /** The sequence number of the last record read from the shard (filtered out or not). */
    lastSequence?: string;
    closed: boolean;
    /** Date.now() before which the shard is not read again (its last read was empty). */
    nextReadAt: number;
    readonly lanes: Lane[];
}

export class MappingEmulator {
    readonly stats: MappingStats = {
        invocations: 0,
        functionErrors: 0,
        partialFailures: 0,
        recordsRead: 0,
        recordsFiltered: 0,
        recordsDelivered: 0,
        bisections: 0,
        batchesToOnFailure: 0,
        recordsToOnFailure: 0,
        pollMs: 0,
        invokeMs: 0,
        getRecordsCalls: 0,
        getRecordsMs: 0,
        getRecordsMaxMs: 0,
        shardsSeen: 0,
        iteratorsRenewed: 0,
        readErrors: 0,
    };
    private readonly shards = new Map<string, ShardState>();
    private shardList: Shard[] = [];
    private describedAt = -Infinity;
    private readonly patterns;
    private readonly now: () => number;
    private readonly idlePollIntervalMs: number;
    private requestCounter = 0;
    /** The first error a lane running in the background raised (an on-failure destination that threw). */
    private laneError: unknown;

    constructor(private readonly options: MappingEmulatorOptions) {
        const problems = validateSettings(options.settings);
        if (problems.length > 0) {
            throw new Error(`invalid event source mapping settings: ${problems.join("; ")}`);
        }
        this.patterns = options.settings.filterPatterns.map(parsePattern);
        this.now = options.now ?? Date.now;
        this.idlePollIntervalMs = options.idlePollIntervalMs ?? LAMBDA_IDLE_POLL_INTERVAL_MS;
    }

    /** Records read but not yet settled (delivered successfully or sent to the on-failure destination). */
    get backlog(): number {
        let n = 0;
        for (const shard of this.shards.values()) {
            for (const lane of shard.lanes) {
                n += lane.pending.length + lane.head.reduce((s, b) => s + b.records.length, 0);
            }
        }
        return n;
    }

    /**
     * Reads one GetRecords page from every shard that is due (Lambda's cadence) and not backed up.
     * Returns the number of records read.
     */
    async poll(): Promise<number> {
        return this.timedRead(false);
    }

    private async timedRead(ignoreCadence: boolean): Promise<number> {
        const started = Date.now();
        try {
            return await this.readShards(ignoreCadence);
        } finally {
            this.stats.pollMs += Date.now() - started;
        }
    }

    private async readShards(ignoreCadence: boolean): Promise<number> {
        // New shards appear every few hours; describing the stream once a second finds them in time.
        if (Date.now() - this.describedAt > 1_000) {
            const description = await this.options.streams.send(new DescribeStreamCommand({ StreamArn: this.options.streamArn }));
            this.shardList = description.StreamDescription?.Shards ?? [];
            this.stats.shardsSeen = Math.max(this.stats.shardsSeen, this.shardList.length);
            this.describedAt = Date.now();
        }
        const shards = this.shardList;
        let read = 0;
        for (const shard of shards) {
            const shardId = shard.ShardId!;
            let state = this.shards.get(shardId);
            if (!state) {
                // A child shard is read only after its parent is drained, to keep per-item order.
                const parent = shard.ParentShardId ? this.shards.get(shard.ParentShardId) : undefined;
                if (parent && (!parent.closed || this.laneBacklog(parent) > 0)) {
                    continue;
                }
                const iterator = await this.options.streams.send(
                    new GetShardIteratorCommand({
                        StreamArn: this.options.streamArn,
                        ShardId: shardId,
                        ShardIteratorType: this.options.settings.startingPosition,
                    }),
                );
                state = {
                    iterator: iterator.ShardIterator,
                    closed: false,
                    nextReadAt: 0,
                    lanes: Array.from({ length: this.options.settings.parallelizationFactor }, () => ({
                        shardId,
                        pending: [],
                        head: [],
                    })),
                };
                this.shards.set(shardId, state);
            }
            // One page per shard per poll; a shard whose lanes all hold a full batch waits for them.
            if (!state.iterator || state.closed || state.lanes.every((l) => l.pending.length >= this.options.settings.batchSize)) {
                continue;
            }
            if (!ignoreCadence && Date.now() < state.nextReadAt) {
                continue;
            }
            const asked = Date.now();
            const page = await this.readPage(shardId, state);
            if (page === undefined) {
                continue;
            }
            const answered = Date.now();
            this.stats.getRecordsCalls++;
            this.stats.getRecordsMs += answered - asked;
            this.stats.getRecordsMaxMs = Math.max(this.stats.getRecordsMaxMs, answered - asked);
            state.nextReadAt = (page.Records ?? []).length === 0 ? answered + this.idlePollIntervalMs : 0;
            state.iterator = page.NextShardIterator;
            if (!state.iterator) {
                state.closed = true;
            }
            const readAt = this.now();
            for (const raw of page.Records ?? []) {
                state.lastSequence = raw.dynamodb?.SequenceNumber ?? state.lastSequence;
                const record = toLambdaRecord(raw, this.options.streamArn);
                read++;
                this.stats.recordsRead++;
                if (!matchesAny(record, this.patterns)) {
                    this.stats.recordsFiltered++;
                    continue;
                }
                this.options.onRead?.(record, readAt);
                state.lanes[this.laneOf(record)]!.pending.push({ record, readAt });
            }
        }
        return read;
    }

    /**
     * One GetRecords page, or undefined when the read failed and the shard is to be read again at the next poll.
     * A refused iterator is replaced by one after the last record read (or at the starting position when none was),
     * as a Lambda poller does; any other error is counted and reported in the stats, never thrown: a stream read
     * error must not end the system the mapping feeds.
     */
    private async readPage(shardId: string, state: ShardState): Promise<GetRecordsCommandOutput | undefined> {
        try {
            return await this.options.streams.send(new GetRecordsCommand({ ShardIterator: state.iterator, Limit: 1000 }));
        } catch (error) {
            const name = (error as Error).name;
            state.nextReadAt = Date.now() + this.idlePollIntervalMs;
            if (name === "TrimmedDataAccessException" || name === "ExpiredIteratorException") {
                this.stats.iteratorsRenewed++;
                try {
                    const fresh = await this.options.streams.send(
                        new GetShardIteratorCommand(
                            state.lastSequence === undefined
                                ? {
                                      StreamArn: this.options.streamArn,
                                      ShardId: shardId,
                                      ShardIteratorType: this.options.settings.startingPosition,
                                  }
                                : {
                                      StreamArn: this.options.streamArn,
                                      ShardId: shardId,
                                      ShardIteratorType: "AFTER_SEQUENCE_NUMBER",
                                      SequenceNumber: state.lastSequence,
                                  },
                        ),
                    );
                    state.iterator = fresh.ShardIterator;
                    state.nextReadAt = 0;
                    return undefined;
                } catch (renewError) {
                    return this.readFailed(renewError);
                }
            }
            return this.readFailed(error);
        }
    }

    private readFailed(error: unknown): undefined {
        this.stats.readErrors++;
        this.stats.lastReadError = `${(error as Error).name}: ${(error as Error).message}`;
        return undefined;
    }

    /**
     * Starts every idle lane that has records, in the background, and returns at once: the caller
     * keeps polling while the function runs. `deliver()` or `settled()` waits for them.
     */
    start(): void {
        for (const shard of this.shards.values()) {
            for (const lane of shard.lanes) {
                if (lane.running === undefined && (lane.pending.length > 0 || lane.head.length > 0)) {
                    const run = this.runLane(lane);
                    lane.running = run;
                    run.then(
                        () => (lane.running = undefined),
                        (error: unknown) => {
                            lane.running = undefined;
                            this.laneError ??= error;
                        },
                    );
                }
            }
        }
    }

    /** Waits for every running lane. Returns the number of invocations made meanwhile. */
    async settled(): Promise<number> {
        const before = this.stats.invocations;
        for (;;) {
            const running = [...this.shards.values()].flatMap((s) => s.lanes.flatMap((l) => (l.running ? [l.running] : [])));
            if (running.length === 0) {
                break;
            }
            await Promise.allSettled(running);
        }
        if (this.laneError !== undefined) {
            const error = this.laneError;
            this.laneError = undefined;
            throw error;
        }
        return this.stats.invocations - before;
    }

    /** Invokes every batch that is ready, lanes in parallel, and waits. Returns the number of invocations. */
    async deliver(): Promise<number> {
        const before = this.stats.invocations;
        this.start();
        await this.settled();
        return this.stats.invocations - before;
    }

    /**
     * Polls and delivers until the stream has nothing new and nothing is pending, `idlePolls` times
     * in a row. `maxRounds` bounds the work so a test can never loop forever.
     */
    async drain({ idlePolls = 2, pollIntervalMs = 50, maxRounds = 10_000 } = {}): Promise<void> {
        let idle = 0;
        for (let round = 0; round < maxRounds; round++) {
            // Draining reads every shard each round, whatever the cadence: only an empty answer means idle.
            const read = await this.timedRead(true);
            const invoked = await this.deliver();
            if (read === 0 && invoked === 0 && this.backlog === 0) {
                if (++idle >= idlePolls) {
                    return;
                }
            } else {
                idle = 0;
            }
            if (invoked === 0) {
                await new Promise((r) => setTimeout(r, pollIntervalMs));
            }
        }
        throw new Error(`the stream did not drain within ${maxRounds} rounds (backlog ${this.backlog})`);
    }

    private laneBacklog(state: ShardState): number {
        return state.lanes.reduce((n, l) => n + l.pending.length + l.head.length, 0);
    }

    private laneOf(record: DynamoDBRecord): number {
        const n = this.options.settings.parallelizationFactor;
        if (n === 1) {
            return 0;
        }
        // Lambda keeps order per item (partition + sort key) across concurrent batches of a shard.
        const digest = createHash("sha1")
            .update(JSON.stringify(record.dynamodb?.Keys ?? {}))
            .digest();
        return digest.readUInt32BE(0) % n;
    }

    private async runLane(lane: Lane): Promise<number> {
        const s = this.options.settings;
        let invocations = 0;
        for (;;) {
            if (lane.head.length === 0) {
                if (lane.pending.length === 0) {
                    return invocations;
                }
                const windowMs = s.maximumBatchingWindowInSeconds * 1000;
                const full = lane.pending.length >= s.batchSize;
                if (!full && windowMs > 0 && this.now() - lane.pending[0]!.readAt < windowMs) {
                    return invocations;
                }
                lane.head.push({ records: lane.pending.splice(0, s.batchSize), attempts: 0, invokeCount: 0 });
            }
            const batch = lane.head[0]!;
            await this.expireOldRecords(lane, batch);
            if (batch.records.length === 0) {
                lane.head.shift();
                continue;
            }
            invocations++;
            await this.invokeBatch(lane, batch);
        }
    }

    private async expireOldRecords(lane: Lane, batch: Batch): Promise<void> {
        const maxAge = this.options.settings.maximumRecordAgeInSeconds;
        if (maxAge === -1) {
            return;
        }
        const nowSeconds = this.now() / 1000;
        const expired = batch.records.filter((p) => nowSeconds - (p.record.dynamodb?.ApproximateCreationDateTime ?? nowSeconds) > maxAge);
        if (expired.length === 0) {
            return;
        }
        batch.records = batch.records.filter((p) => !expired.includes(p));
        await this.sendToOnFailure(lane, expired, "RecordAgeExceeded", batch.invokeCount, undefined);
    }

    private async invokeBatch(lane: Lane, batch: Batch): Promise<void> {
        const s = this.options.settings;
        this.stats.invocations++;
        this.stats.recordsDelivered += batch.records.length;
        batch.invokeCount++;
        let failedFrom: number | undefined;
        let functionError: string | undefined;
        const started = Date.now();
        try {
            await this.closeWindow(lane);
            const response = await this.options.invoke(
                this.event(
                    lane,
                    batch.records.map((p) => p.record),
                    false,
                ),
            );
            if (s.tumblingWindowInSeconds > 0 && (response === null || typeof response !== "object" || !("state" in response))) {
                // Under a tumbling window an answer without a state is a failed invocation.
                throw new Error("the function answered a tumbling-window event without a state");
            }
            if (s.reportBatchItemFailures) {
                failedFrom = this.checkpoint(batch, response);
            }
        } catch (error) {
            functionError = error instanceof Error ? error.name : "Unhandled";
        } finally {
            this.stats.invokeMs += Date.now() - started;
        }
        if (functionError === undefined && failedFrom === undefined) {
            lane.head.shift();
            return;
        }
        batch.attempts++;
        if (functionError !== undefined) {
            this.stats.functionErrors++;
        } else {
            this.stats.partialFailures++;
            // Records before the checkpoint are done; the rest are retried.
            batch.records = batch.records.slice(failedFrom);
        }
        const exhausted = s.maximumRetryAttempts !== -1 && batch.attempts > s.maximumRetryAttempts;
        if (exhausted) {
            lane.head.shift();
            await this.sendToOnFailure(lane, batch.records, "RetryAttemptsExhausted", batch.invokeCount, functionError);
            return;
        }
        if (functionError !== undefined && s.bisectBatchOnFunctionError && batch.records.length > 1) {
            this.stats.bisections++;
            const half = Math.ceil(batch.records.length / 2);
            lane.head.splice(
                0,
                1,
                { records: batch.records.slice(0, half), attempts: batch.attempts, invokeCount: batch.invokeCount },
                { records: batch.records.slice(half), attempts: batch.attempts, invokeCount: batch.invokeCount },
            );
        }
    }

    /** The event of a delivery: the records, and under a tumbling window the shard, window and state. */
    private event(lane: Lane, records: DynamoDBRecord[], final: boolean): StreamInvokeEvent {
        const seconds = this.options.settings.tumblingWindowInSeconds;
        if (seconds === 0) {
            return { Records: records };
        }
        const start = lane.window ?? Math.floor(this.now() / (seconds * 1000)) * seconds * 1000;
        lane.window = start;
        return {
            Records: records,
            shardId: lane.shardId,
            eventSourceARN: this.options.streamArn,
            window: { start: new Date(start).toISOString(), end: new Date(start + seconds * 1000).toISOString() },
            state: {},
            isFinalInvokeForWindow: final,
            isWindowTerminatedEarly: false,
        };
    }

    /**
     * Under a tumbling window: once the window the lane last delivered in has ended, its final invocation (no records),
     * repeated until it succeeds, as Lambda holds the shard until then.
     */
    private async closeWindow(lane: Lane): Promise<void> {
        const seconds = this.options.settings.tumblingWindowInSeconds;
        if (seconds === 0 || lane.window === undefined || this.now() < lane.window + seconds * 1000) {
            return;
        }
        for (let attempt = 0; ; attempt++) {
            try {
                this.stats.invocations++;
                const response = await this.options.invoke(this.event(lane, [], true));
                if (response !== null && typeof response === "object" && "state" in response) {
                    break;
                }
            } catch {
                // Held until the final invocation succeeds.
            }
            if (attempt >= 100) {
                throw new Error(`the final invocation of shard ${lane.shardId}'s window kept failing`);
            }
        }
        lane.window = undefined;
    }

    /**
     * Interprets a ReportBatchItemFailures response: the index of the lowest reported record, or
     * undefined for success. An empty, unknown or malformed identifier fails the whole batch, as Lambda does.
     */
    private checkpoint(batch: Batch, response: unknown): number | undefined {
        if (response === undefined || response === null) {
            return undefined;
        }
        const failures = (response as { batchItemFailures?: unknown }).batchItemFailures;
        if (failures === undefined || failures === null) {
            return undefined;
        }
        if (!Array.isArray(failures)) {
            return 0;
        }
        let lowest: number | undefined;
        for (const failure of failures) {
            const id = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
            const index =
                typeof id === "string" && id.length > 0 ? batch.records.findIndex((p) => p.record.dynamodb?.SequenceNumber === id) : -1;
            if (index === -1) {
                return 0;
            }
            lowest = lowest === undefined ? index : Math.min(lowest, index);
        }
        return lowest;
    }

    private async sendToOnFailure(
        lane: Lane,
        records: Pending[],
        condition: OnFailureRecord["requestContext"]["condition"],
        invokeCount: number,
        functionError: string | undefined,
    ): Promise<void> {
        this.stats.batchesToOnFailure++;
        this.stats.recordsToOnFailure += records.length;
        const first = records[0]!.record.dynamodb!;
        const last = records[records.length - 1]!.record.dynamodb!;
        const iso = (seconds: number | undefined) => new Date((seconds ?? this.now() / 1000) * 1000).toISOString();
        await this.options.onFailure?.({
            requestContext: {
                requestId: `local-${++this.requestCounter}`,
                functionArn: this.options.functionArn ?? "arn:aws:lambda:ddblocal:000000000000:function:consumer",
                condition,
                approximateInvokeCount: invokeCount,
            },
            responseContext: { statusCode: 200, executedVersion: "$LATEST", ...(functionError ? { functionError: "Unhandled" } : {}) },
            version: "1.0",
            timestamp: new Date(this.now()).toISOString(),
            DDBStreamBatchInfo: {
                shardId: lane.shardId,
                startSequenceNumber: first.SequenceNumber!,
                endSequenceNumber: last.SequenceNumber!,
                approximateArrivalOfFirstRecord: iso(first.ApproximateCreationDateTime),
                approximateArrivalOfLastRecord: iso(last.ApproximateCreationDateTime),
                batchSize: records.length,
                streamArn: this.options.streamArn,
            },
        });
    }
}
