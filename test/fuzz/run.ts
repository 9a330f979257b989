/**
 * Runs one history on DynamoDB Local under the deterministic scheduler and checks it against the
 * contract the README states:
 *
 * - at every observation (between two released requests), the mode's bound holds:
 *   utilization `bestEffort <= live`; strict `live <= bestEffort <= limit`;
 * - every call's own accounting: a call that moved best-effort away from the items it wrote (an
 *   undercount in utilization, a held slot in strict) met a fault, reported an absorbed failure or threw;
 * - every answer is one the contract allows: `created: true` means this call wrote the item, `created:
 *   false` and `deleted: false` mean it wrote nothing, a utilization `tryCreate` passes its limit only by
 *   the creates that raced it plus the undercount of `max(bestEffort, eventual)` when it read;
 * - the only errors are contract errors: InvalidArgumentError for bad input (nothing written), and
 *   DynamoDB's own errors for the call's requests after every retry;
 * - once the stream, the retries and the dead-letter queue have drained, eventual == live for every key.
 */
import { DynamoDBServiceException, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
    DescribeStreamCommand,
    GetRecordsCommand,
    GetShardIteratorCommand,
    type DynamoDBStreamsClient,
} from "@aws-sdk/client-dynamodb-streams";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { DynamoDBBatchResponse, DynamoDBRecord, SQSEvent } from "aws-lambda";
import { HybridCounterClient } from "../../runtime/client";
import { createStreamHandler } from "../../runtime/consumer";
import { InvalidArgumentError } from "../../runtime/errors";
import type { FatalMessage } from "../../runtime/fatal";
import { reconcileKey } from "../../runtime/reconcile";
import { createRedriveHandler } from "../../runtime/redrive";
import { toLambdaRecord } from "../../runtime/stream-reader";
import type { LocalEngine } from "../../local/engine";
import { FAULT_KINDS, seededRandom, type FaultKind } from "../../local/faults";
import { lambdaContext } from "../../local/lambda-context";
import { classifyRequest, createFuzzSystem, fuzzClient, readTruth, type RequestEffect, type Truth } from "./adapter";
import { historyKeys, type FuzzEvent, type History } from "./history";
import { Scheduler, type Released } from "./scheduler";

export interface RunResult {
    readonly violations: string[];
    readonly stats: {
        readonly events: number;
        readonly requests: number;
        readonly faults: number;
        readonly observations: number;
        readonly deadLettered: number;
        readonly fatal: number;
        readonly reconciledAfterDrain: boolean;
    };
}

/** Per API call: what its requests did, and what it answered. */
interface CallLedger {
    readonly event: FuzzEvent;
    bestEffort: number;
    live: number;
    faults: number;
    reported: number;
    /** Utilization tryCreate: what it read, and the truth then. */
    read?: { value: number; live: number; putsBefore: number };
    /** Utilization tryCreate: the allowance, checked when its put applied. */
}

const READS = new Set(["GetItemCommand", "QueryCommand", "BatchGetItemCommand", "ScanCommand"]);
/** The mapping's retries before a batch goes to the first dead-letter queue (kept small to exercise it). */
const MAX_RETRIES = 1;
/** Receives of a first-DLQ message before SQS moves it to the fatal queue (the component's redriveMaxReceiveCount). */
const MAX_RECEIVES = 5;

export interface RunOptions {
    /** Hears one line per released request: what ran, with which fault, and how it ended. */
    readonly trace?: (line: string) => void;
    /**
     * Changes the system under test, to prove the checker catches what it claims to: it is given the
     * API's and the pipeline's DynamoDB clients before anything runs (add middleware that breaks them).
     */
    readonly mutate?: (clients: { api: DynamoDBClient; pipeline: DynamoDBClient }) => void;
}

export async function runHistory(engine: LocalEngine, history: History, options: RunOptions = {}): Promise<RunResult> {
    const reader = engine.dynamodb();
    const streams = engine.streams();
    const system = await createFuzzSystem(reader, history.placement ?? "same-table");
    const scheduler = new Scheduler();
    const random = seededRandom((history.seed ^ 0x5bd1e995) >>> 0);
    const violations: string[] = [];
    const keys = historyKeys(history);
    const ledgers = new Map<number, CallLedger>();
    const putsApplied = new Map<string, number>();
    let requests = 0;
    let faults = 0;
    let observations = 0;
    let faultRate = history.faultRate;
    const released: Array<{ request: Released; effect: RequestEffect }> = [];
    const requestsByTask = new Map<number, number>();

    // Runs as each request finishes, before its task goes on: the call's ledger is current when it answers.
    const onOutcome = (request: Released): void => {
        requests++;
        requestsByTask.set(request.task.id, (requestsByTask.get(request.task.id) ?? 0) + 1);
        const effect = classifyRequest(system, request);
        const ledger = ledgers.get(request.task.id);
        if (ledger) {
            if (request.fault !== undefined) {
                ledger.faults++;
            }
            if (effect.kind === "best-effort" && effect.applied) {
                ledger.bestEffort += effect.delta;
            } else if (effect.kind === "put" && effect.applied) {
                ledger.live++;
            } else if (effect.kind === "soft-delete" && effect.applied) {
                ledger.live--;
            }
        }
        released.push({ request, effect });
        if (options.trace) {
            const error = request.outcome?.error;
            const ending = error === undefined ? "ok" : error instanceof Error ? error.name : String(error);
            options.trace(
                `${request.task.label} ${request.command}${request.fault ? ` [${request.fault}]` : ""} -> ${ending} ${JSON.stringify(effect)}`,
            );
        }
    };
    const clientDynamo = fuzzClient(engine);
    const pipelineDynamo = fuzzClient(engine);
    scheduler.gate(clientDynamo, onOutcome);
    scheduler.gate(pipelineDynamo, onOutcome);
    options.mutate?.({ api: clientDynamo, pipeline: pipelineDynamo });

    const fatalMessages: FatalMessage[] = [];
    const fatal = { park: async (m: FatalMessage) => (fatalMessages.push(m), true) };
    const noSqs = new SQSClient({
        region: "us-east-1",
        endpoint: "http://127.0.0.1:9",
        credentials: { accessKeyId: "x", secretAccessKey: "x" },
    });
    const sink = () => undefined;
    const consumer = createStreamHandler({ config: system.config, dynamodb: pipelineDynamo, sqs: noSqs, sink, fatal });
    const redrive = createRedriveHandler({ config: system.config, dynamodb: pipelineDynamo, streams, sqs: noSqs, sink, fatal });
    const client = new HybridCounterClient({
        ...system.config,
        dynamodb: clientDynamo,
        mode: history.mode,
        onBestEffortFailure: () => {
            const task = scheduler.current();
            const ledger = task ? ledgers.get(task.id) : undefined;
            if (ledger) {
                ledger.reported++;
            }
        },
    });
    const mapping = new StreamMapping(streams, system.streamArn);

    const observe = async (key: string, context: string): Promise<Truth> => {
        const truth = await readTruth(reader, system, key);
        observations++;
        const limit = history.limits[key] ?? Infinity;
        if (history.mode === "utilization" && truth.bestEffort > truth.live) {
            violations.push(`${context}: ${key} best-effort ${truth.bestEffort} > live ${truth.live}`);
        }
        if (history.mode === "strict" && (truth.live > truth.bestEffort || truth.bestEffort > limit)) {
            violations.push(`${context}: ${key} strict bound broken: live ${truth.live}, best-effort ${truth.bestEffort}, limit ${limit}`);
        }
        if (truth.counted !== truth.eventual) {
            violations.push(`${context}: ${key} eventual ${truth.eventual} != ${truth.counted} items counted`);
        }
        return truth;
    };

    const runEvent = async (event: FuzzEvent, index: number): Promise<void> => {
        const label = `#${index} ${JSON.stringify(event)}`;
        switch (event.op) {
            case "consume":
                return mapping.consume(event, consumer);
            case "redrive":
                return mapping.redrive(redrive, fatalMessages);
            case "reconcile": {
                await reconcileKey(event.key, { config: system.config, dynamodb: pipelineDynamo, fatal, sink, timeoutMs: 600_000 });
                return;
            }
            case "invalid":
                return checkInvalid(event, label);
            default:
                return runCall(event, label);
        }
    };

    const checkInvalid = async (event: Extract<FuzzEvent, { op: "invalid" }>, label: string): Promise<void> => {
        const key = event.field === "key" ? "" : event.key;
        const id = event.field === "id" ? "" : "i0";
        const limit = event.field === "limit" ? -1 : (history.limits[event.key] ?? 1);
        const attributes = event.field === "attributes" ? { [system.config.sortKey]: "x" } : undefined;
        const task = scheduler.current()!;
        try {
            if (event.call === "create") {
                await client.create(key, id, attributes);
            } else if (event.call === "tryCreate") {
                await client.tryCreate(key, id, limit, attributes);
            } else if (event.call === "delete") {
                await client.delete(key, id);
            } else {
                await client.count(key);
            }
            violations.push(`${label}: a bad ${event.field} was accepted`);
        } catch (error) {
            if (!(error instanceof InvalidArgumentError) || !(error.field === event.field || error.field.startsWith(`${event.field}.`))) {
                violations.push(`${label}: expected InvalidArgumentError on [${event.field}], got ${describe(error)}`);
            }
        }
        const sent = requestsByTask.get(task.id) ?? 0;
        if (sent !== 0) {
            violations.push(`${label}: bad input sent ${sent} requests`);
        }
    };

    const runCall = async (event: Exclude<FuzzEvent, { op: "consume" | "redrive" | "reconcile" | "invalid" }>, label: string) => {
        const task = scheduler.current()!;
        const ledger: CallLedger = { event, bestEffort: 0, live: 0, faults: 0, reported: 0 };
        ledgers.set(task.id, ledger);
        let answer: unknown;
        let thrown: unknown;
        try {
            switch (event.op) {
                case "create":
                    answer = await client.create(event.key, event.id);
                    break;
                case "tryCreate":
                    answer = await client.tryCreate(event.key, event.id, history.limits[event.key]!);
                    break;
                case "delete":
                    answer = await client.delete(event.key, event.id);
                    break;
                case "count":
                    answer = await client.count(event.key);
                    break;
            }
        } catch (error) {
            thrown = error;
        }
        const explained = ledger.faults > 0 || ledger.reported > 0 || thrown !== undefined;
        if (thrown !== undefined) {
            if (!(thrown instanceof DynamoDBServiceException)) {
                violations.push(`${label}: threw ${describe(thrown)}, which is not in the contract`);
            } else if (ledger.faults === 0) {
                violations.push(`${label}: threw ${describe(thrown)} although none of its requests met a fault`);
            }
        }
        const created = (answer as { created?: boolean } | undefined)?.created;
        const deleted = (answer as { deleted?: boolean } | undefined)?.deleted;
        if (created === true && ledger.live !== 1) {
            violations.push(`${label}: answered created but its writes changed live items by ${ledger.live}`);
        }
        if ((created === false || deleted === false) && ledger.live !== 0) {
            violations.push(`${label}: answered ${JSON.stringify(answer)} but its writes changed live items by ${ledger.live}`);
        }
        const drift = ledger.live - ledger.bestEffort;
        if (history.mode === "utilization" && drift < 0) {
            violations.push(`${label}: moved best-effort ${ledger.bestEffort} for ${ledger.live} live items: an overcount`);
        }
        if (history.mode === "strict" && drift > 0) {
            violations.push(`${label}: moved best-effort ${ledger.bestEffort} for ${ledger.live} live items: below the live count`);
        }
        if (drift !== 0 && !explained) {
            violations.push(
                `${label}: moved best-effort ${ledger.bestEffort} for ${ledger.live} live items with no fault, no reported failure and no error`,
            );
        }
    };

    /** Observes what a released request left behind, and checks a utilization tryCreate's allowance. */
    const account = async ({ request, effect }: { request: Released; effect: RequestEffect }): Promise<void> => {
        const ledger = ledgers.get(request.task.id);
        const context = `after ${request.task.label} ${request.command}${request.fault ? ` (${request.fault})` : ""}`;
        switch (effect.kind) {
            case "best-effort":
            case "soft-delete":
                await observe(effect.key, context);
                return;
            case "put": {
                if (!effect.applied) {
                    await observe(effect.key, context);
                    return;
                }
                putsApplied.set(effect.key, (putsApplied.get(effect.key) ?? 0) + 1);
                const truth = await observe(effect.key, context);
                if (ledger?.read && ledger.event.op === "tryCreate" && history.mode === "utilization") {
                    const limit = history.limits[effect.key]!;
                    const raced = putsApplied.get(effect.key)! - 1 - ledger.read.putsBefore;
                    const undercount = Math.max(0, ledger.read.live - ledger.read.value);
                    if (truth.live > limit + raced + undercount) {
                        violations.push(
                            `${context}: tryCreate passed limit ${limit} to ${truth.live} live; it read ${ledger.read.value} with ` +
                                `${ledger.read.live} live (undercount ${undercount}) and ${raced} creates raced it`,
                        );
                    }
                }
                return;
            }
            case "counter-read": {
                const truth = await observe(effect.key, context);
                if (ledger && effect.value !== undefined) {
                    ledger.read = { value: effect.value, live: truth.live, putsBefore: putsApplied.get(effect.key) ?? 0 };
                }
                return;
            }
            case "other":
                for (const key of effect.keys) {
                    await observe(key, context);
                }
                return;
        }
    };

    // The schedule: start events (up to the concurrency) and release requests, both chosen by the seed.
    const running = new Set<Promise<void>>();
    let next = 0;
    for (;;) {
        await scheduler.quiescent();
        for (const request of released.splice(0)) {
            await account(request);
        }
        const pending = scheduler.pending;
        const canStart = next < history.events.length && running.size < history.concurrency;
        if (canStart && (pending.length === 0 || random() < 0.3)) {
            const index = next++;
            const event = history.events[index]!;
            const work = scheduler.spawn(`#${index} ${event.op}`, () => runEvent(event, index));
            const tracked: Promise<void> = work.then(
                () => undefined,
                (error: unknown) => {
                    violations.push(`#${index} ${JSON.stringify(event)}: failed: ${describe(error)}`);
                },
            );
            running.add(tracked);
            void tracked.finally(() => running.delete(tracked));
            continue;
        }
        if (pending.length === 0) {
            if (next >= history.events.length && running.size === 0) {
                break;
            }
            await Promise.race(running);
            continue;
        }
        const index = Math.floor(random() * pending.length);
        const request = pending[index]!;
        let fault: FaultKind | undefined;
        if (random() < faultRate) {
            const eligible = READS.has(request.command) ? FAULT_KINDS.filter((k) => k === "throttle" || k === "500-before") : FAULT_KINDS;
            fault = eligible[Math.floor(random() * eligible.length)];
            faults++;
        }
        scheduler.release(index, fault);
        if (next >= history.events.length && running.size === 0 && scheduler.pending.length === 0) {
            break;
        }
    }

    // Drain: no more faults; deliver everything, retry and redrive until nothing is left.
    faultRate = 0;
    const drain = async (work: () => Promise<void>) => {
        const done = scheduler.spawn("drain", work);
        for (;;) {
            await scheduler.quiescent();
            for (const request of released.splice(0)) {
                await account(request);
            }
            if (scheduler.pending.length === 0) {
                break;
            }
            scheduler.release(0, undefined);
        }
        await done;
    };
    for (let round = 0; round < 50 && !(await mapping.drained()); round++) {
        await drain(() => mapping.consume({ op: "consume", max: 100, overlap: 0, crash: "none" }, consumer));
        await drain(() => mapping.redrive(redrive, fatalMessages));
    }
    if (!(await mapping.drained())) {
        violations.push(`the stream did not drain: ${mapping.describe()}`);
    }
    // A fatal message needs an operator by contract: settle its keys as the README tells them to.
    const reconciledAfterDrain = fatalMessages.length > 0;
    if (reconciledAfterDrain) {
        for (const key of keys) {
            await drain(async () => {
                await reconcileKey(key, { config: system.config, dynamodb: pipelineDynamo, fatal, sink, timeoutMs: 600_000 });
            });
        }
    }
    for (const key of keys) {
        const truth = await observe(key, "after the drain");
        if (truth.eventual !== truth.live) {
            violations.push(`after the drain: ${key} eventual ${truth.eventual} != live ${truth.live}`);
        }
        if (truth.softDeleted !== 0) {
            violations.push(`after the drain: ${key} has ${truth.softDeleted} soft-deleted items left`);
        }
    }
    reader.destroy();
    clientDynamo.destroy();
    pipelineDynamo.destroy();
    streams.destroy();
    return {
        violations,
        stats: {
            events: history.events.length,
            requests,
            faults,
            observations,
            deadLettered: mapping.deadLettered,
            fatal: fatalMessages.length,
            reconciledAfterDrain,
        },
    };
}

function describe(error: unknown): string {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * Lambda's event source mapping, reduced to what the checker needs and driven by the schedule: one
 * checkpoint per stream, bounded retries with ReportBatchItemFailures, then the batch's metadata to
 * the first dead-letter queue; redeliveries and overlapping deliveries on demand.
 */
class StreamMapping {
    private readonly records: Array<{ record: DynamoDBRecord; shardId: string }> = [];
    private readonly iterators = new Map<string, string | undefined>();
    private checkpoint = 0;
    private attempts = 0;
    private readonly firstDlq: Array<{ body: string; receives: number }> = [];
    deadLettered = 0;

    constructor(
        private readonly streams: DynamoDBStreamsClient,
        private readonly streamArn: string,
    ) {}

    /** Reads every record the stream holds that this mapping has not seen (DynamoDB Local shows them at once). */
    async refresh(): Promise<void> {
        const description = await this.streams.send(new DescribeStreamCommand({ StreamArn: this.streamArn }));
        const shards = [...(description.StreamDescription?.Shards ?? [])].sort((a, b) =>
            compareSequence(a.SequenceNumberRange?.StartingSequenceNumber ?? "0", b.SequenceNumberRange?.StartingSequenceNumber ?? "0"),
        );
        for (const shard of shards) {
            const shardId = shard.ShardId!;
            if (!this.iterators.has(shardId)) {
                const { ShardIterator } = await this.streams.send(
                    new GetShardIteratorCommand({ StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON" }),
                );
                this.iterators.set(shardId, ShardIterator);
            }
            for (let iterator = this.iterators.get(shardId); iterator;) {
                let page;
                try {
                    page = await this.streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
                } catch (error) {
                    // DynamoDB Local can refuse an idle iterator: take a new one after the last record read.
                    if ((error as Error).name !== "TrimmedDataAccessException" && (error as Error).name !== "ExpiredIteratorException") {
                        throw error;
                    }
                    iterator = await this.iteratorAfterLast(shardId);
                    continue;
                }
                for (const record of page.Records ?? []) {
                    this.records.push({ record: toLambdaRecord(record, this.streamArn), shardId });
                }
                this.iterators.set(shardId, page.NextShardIterator);
                if ((page.Records ?? []).length === 0) {
                    break;
                }
                iterator = page.NextShardIterator;
            }
        }
    }

    private async iteratorAfterLast(shardId: string): Promise<string | undefined> {
        const last = [...this.records].reverse().find((r) => r.shardId === shardId)?.record.dynamodb?.SequenceNumber;
        const { ShardIterator } = await this.streams.send(
            new GetShardIteratorCommand(
                last === undefined
                    ? { StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "TRIM_HORIZON" }
                    : { StreamArn: this.streamArn, ShardId: shardId, ShardIteratorType: "AFTER_SEQUENCE_NUMBER", SequenceNumber: last },
            ),
        );
        this.iterators.set(shardId, ShardIterator);
        return ShardIterator;
    }

    async consume(
        event: Extract<FuzzEvent, { op: "consume" }>,
        consumer: (e: { Records: DynamoDBRecord[] }, c: ReturnType<typeof lambdaContext>) => Promise<DynamoDBBatchResponse>,
    ): Promise<void> {
        await this.refresh();
        const from = this.checkpoint;
        const start = Math.max(0, from - event.overlap);
        if (start >= this.records.length) {
            return;
        }
        const shardId = this.records[start]!.shardId;
        let end = start;
        while (end < this.records.length && end < from + event.max && this.records[end]!.shardId === shardId) {
            end++;
        }
        const batch = this.records.slice(start, end).map((r) => r.record);
        let failedAt: number | undefined;
        if (event.crash === "before") {
            failedAt = from;
        } else {
            const response = await consumer({ Records: batch }, lambdaContext("consumer", 600_000));
            if (event.crash === "after") {
                failedAt = from;
            } else if (response.batchItemFailures.length > 0) {
                const sequence = response.batchItemFailures[0]!.itemIdentifier;
                const index = this.records.findIndex((r) => r.record.dynamodb?.SequenceNumber === sequence);
                failedAt = Math.max(from, index < 0 ? from : index);
            }
        }
        if (this.checkpoint !== from) {
            return; // another invocation moved the checkpoint meanwhile
        }
        if (failedAt === undefined) {
            this.checkpoint = Math.max(this.checkpoint, end);
            this.attempts = 0;
            return;
        }
        if (failedAt >= end) {
            this.checkpoint = end;
            this.attempts = 0;
            return;
        }
        this.checkpoint = failedAt;
        if (++this.attempts > MAX_RETRIES) {
            this.deadLetter(failedAt, end);
            this.checkpoint = end;
            this.attempts = 0;
        }
    }

    private deadLetter(from: number, end: number): void {
        const first = this.records[from]!;
        const last = this.records[end - 1]!;
        this.deadLettered++;
        this.firstDlq.push({
            receives: 0,
            body: JSON.stringify({
                requestContext: {
                    requestId: `fuzz-${this.deadLettered}`,
                    functionArn: "arn:aws:lambda:us-east-1:000000000000:function:consumer",
                    condition: "RetryAttemptsExhausted",
                    approximateInvokeCount: MAX_RETRIES + 1,
                },
                responseContext: { statusCode: 200, executedVersion: "$LATEST" },
                version: "1.0",
                timestamp: new Date(0).toISOString(),
                DDBStreamBatchInfo: {
                    shardId: first.shardId,
                    startSequenceNumber: first.record.dynamodb!.SequenceNumber,
                    endSequenceNumber: last.record.dynamodb!.SequenceNumber,
                    approximateArrivalOfFirstRecord: new Date(0).toISOString(),
                    approximateArrivalOfLastRecord: new Date(0).toISOString(),
                    batchSize: end - from,
                    streamArn: this.streamArn,
                },
            }),
        });
    }

    async redrive(
        handler: (
            event: SQSEvent,
            context: ReturnType<typeof lambdaContext>,
        ) => Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }>,
        fatal: FatalMessage[],
    ): Promise<void> {
        const messages = this.firstDlq.splice(0);
        if (messages.length === 0) {
            return;
        }
        const event: SQSEvent = {
            Records: messages.map((m, i) => ({
                messageId: `m${i}`,
                receiptHandle: `r${i}`,
                body: m.body,
                attributes: {
                    ApproximateReceiveCount: String(++m.receives),
                    SentTimestamp: "0",
                    SenderId: "fuzz",
                    ApproximateFirstReceiveTimestamp: "0",
                },
                messageAttributes: {},
                md5OfBody: "",
                eventSource: "aws:sqs",
                eventSourceARN: "arn:aws:sqs:us-east-1:000000000000:first-dlq",
                awsRegion: "us-east-1",
            })),
        };
        const response = await handler(event, lambdaContext("redrive", 600_000));
        const failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
        messages.forEach((m, i) => {
            if (!failed.has(`m${i}`)) {
                return;
            }
            if (m.receives >= MAX_RECEIVES) {
                fatal.push({ reason: "redrive-exhausted", problem: "moved by maxReceiveCount", detail: m.body });
            } else {
                this.firstDlq.push(m);
            }
        });
    }

    async drained(): Promise<boolean> {
        await this.refresh();
        return this.checkpoint >= this.records.length && this.firstDlq.length === 0;
    }

    describe(): string {
        return `checkpoint ${this.checkpoint} of ${this.records.length} records, ${this.firstDlq.length} in the first DLQ`;
    }
}

function compareSequence(a: string, b: string): number {
    return a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0;
}
