/**
 * Runs one multi-region history (history.ts here) on one DynamoDB Local engine under the deterministic scheduler
 * (../scheduler.ts), and checks it against the model truth.ts states.
 *
 * Each member region has its own parties, configured as the component configures them in that region (`regions`
 * with `current` = the region): an API client, a consumer and a redrive behind an event source mapping of its own
 * (../mapping.ts: its own checkpoint, retries and dead-letter queue) over the stream, a settler, reconcile and
 * backfill. With no replication every region's stream is the table's stream, so every region's consumer is delivered
 * every record and counts only the ones it owns: ownership is in the consumer as in its mapping's filter, and a
 * record neither of whose images the region owns leaves its markers as they are. The stream filter itself is the
 * component's (components/regions/filter.ts) and is tested there; here every record reaches every consumer, which is
 * the stricter test of the consumer's own ownership check.
 *
 * The schedule and its faults are run.ts's: every request of every region's parties stops at the one gate, and the
 * seed decides which runs next and which meets a fault. Observations are made between two releases, after each write,
 * on the key it wrote. After the events: every region's backfill, every mapping drained (with redrives), each key
 * reconciled in every region, every key quiet for the window and healed in every region.
 *
 * Not here (run.ts keeps them for one region): the per-call accounting of best-effort (calls.ts), late put attempts,
 * items at the size limit, settler runs with calls in flight, plan changes, shards, and other writers but TTL.
 */
import type { AttributeValue, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { DynamoDBRecord } from "aws-lambda";
import { backfill, BackfillError } from "../../../runtime/backfill/backfill";
import { HybridCounterClient } from "../../../runtime/client/client";
import { InvalidArgumentError } from "../../../runtime/shared/errors";
import { healKey } from "../../../runtime/heal/heal";
import { reconcileKey } from "../../../runtime/heal/reconcile";
import { settle } from "../../../runtime/heal/settle";
import type { HandlerConfig, RegionsConfig } from "../../../runtime/shared/config";
import { createStreamHandler } from "../../../runtime/stream/consumer";
import type { FatalMessage } from "../../../runtime/stream/fatal";
import { createRedriveHandler } from "../../../runtime/stream/redrive";
import type { LocalEngine } from "../../../local/engine/engine";
import { seededRandom } from "../../../local/engine/faults";
import { READS, drawFault, onSeededClock, startTracked, whenGateEmpty } from "../schedule";
import { createFuzzSystem, fuzzClient, NO_TIMEOUTS } from "../adapter";
import { describe, metFault } from "../calls";
import { historyKeys, type FuzzEvent } from "../history";
import { StreamMapping } from "../mapping";
import { otherWrite } from "../others";
import { FUZZ_QUIET_WINDOW_MS } from "../run";
import { Scheduler, type Released } from "../scheduler";
import { Trace } from "../trace";
import { membersOf, regionsSetting, type RegionalEvent, type RegionsHistory } from "./history";
import { drainedProblems, healedProblem, observationProblems, readKeyTruth, type KeyTruth } from "./truth";

/** Ways to break one region's parties, to prove the checker rejects them (test/fuzz-regions.test.ts). */
export interface RegionsMutation {
    /** Rewrites the records region `region`'s consumer is delivered, before it sees them. */
    readonly records?: (region: string, records: DynamoDBRecord[]) => DynamoDBRecord[];
    /** The limit region `region`'s client is called with, given the history's. */
    readonly limit?: (region: string, limit: number) => number;
    /** Changes region `region`'s API client's DynamoDB client before anything runs (add middleware that breaks it). */
    readonly api?: (region: string, dynamodb: DynamoDBClient) => void;
}

export interface RegionsRunOptions {
    readonly trace?: (line: string) => void;
    readonly mutate?: RegionsMutation;
}

export interface RegionsRunResult {
    readonly violations: string[];
    /** The digest of every released request, in order (../trace.ts): two runs of one history give the same. */
    readonly trace: string;
    readonly stats: {
        readonly events: number;
        readonly requests: number;
        readonly faults: number;
        readonly observations: number;
        readonly deadLettered: number;
        readonly fatal: number;
        readonly settles: number;
        readonly healed: number;
        readonly backfills: number;
        /** Per region: the API calls made there, and after the final heal the sum over keys of its eventual and best-effort. */
        readonly perRegion: Readonly<Record<string, { calls: number; eventual: number; bestEffort: number }>>;
    };
}

type RegionConfig = HandlerConfig & { readonly regions: RegionsConfig };

const CALLS = new Set<FuzzEvent["op"]>(["create", "tryCreate", "delete", "count"]);

export async function runRegionsHistory(
    engine: LocalEngine,
    history: RegionsHistory,
    options: RegionsRunOptions = {},
): Promise<RegionsRunResult> {
    return onSeededClock(history, (scheduler) => runOnClock(engine, history, options, scheduler));
}

/** One member region's parties. */
interface Region {
    readonly name: string;
    readonly config: RegionConfig;
    readonly client: HybridCounterClient;
    readonly consumer: Parameters<StreamMapping["consume"]>[1];
    readonly redrive: Parameters<StreamMapping["redrive"]>[0];
    readonly mapping: StreamMapping;
    readonly dynamodb: { readonly api: DynamoDBClient; readonly pipeline: DynamoDBClient; readonly settler: DynamoDBClient };
    calls: number;
}

async function runOnClock(
    engine: LocalEngine,
    history: RegionsHistory,
    options: RegionsRunOptions,
    scheduler: Scheduler,
): Promise<RegionsRunResult> {
    const time = scheduler.time;
    const reader = engine.dynamodb({ requestHandler: NO_TIMEOUTS, direct: true });
    const streams = engine.streams({ requestHandler: NO_TIMEOUTS });
    const system = await createFuzzSystem(reader, "separate", "client", 1);
    const members = membersOf(history);
    const home = regionsSetting(members[0]!, members);
    const trace = new Trace([
        [system.config.countersTableName!, "COUNTERS"],
        [system.config.tableName, "TABLE"],
    ]);
    const random = seededRandom((history.seed ^ 0x5bd1e995) >>> 0);
    const violations: string[] = [];
    const keys = historyKeys(history);
    const faultsByTask = new Map<number, number>();
    const requestsByTask = new Map<number, number>();
    const released: Released[] = [];
    const totals = { requests: 0, faults: 0, observations: 0, settles: 0, healed: 0, backfills: 0 };
    let faultRate = history.faultRate;
    const onOutcome = (request: Released): void => {
        totals.requests++;
        requestsByTask.set(request.task.id, (requestsByTask.get(request.task.id) ?? 0) + 1);
        if (metFault(request)) {
            faultsByTask.set(request.task.id, (faultsByTask.get(request.task.id) ?? 0) + 1);
        }
        released.push(request);
        // Every request goes into the digest, traced or not.
        const line = trace.add(request);
        options.trace?.(`${trace.requests} ${line}`);
    };
    const sleep = (ms: number) => scheduler.sleep(ms);
    const gated = (): DynamoDBClient => {
        const client = fuzzClient(engine, sleep);
        scheduler.gate(client, onOutcome);
        return client;
    };
    scheduler.track(streams);
    scheduler.track(reader);
    const noSqs = new SQSClient({
        region: "us-east-1",
        endpoint: "http://127.0.0.1:9",
        credentials: { accessKeyId: "x", secretAccessKey: "x" },
    });
    scheduler.track(noSqs);
    const fatalMessages: FatalMessage[] = [];
    const fatal = { park: async (m: FatalMessage) => (fatalMessages.push(m), true) };
    const sink = () => undefined;
    const otherDynamo = gated();
    const backfillDynamo = gated();
    const regions = new Map<string, Region>();
    for (const name of members) {
        const config: RegionConfig = { ...system.config, regions: regionsSetting(name, members) };
        const dynamodb = { api: gated(), pipeline: gated(), settler: gated() };
        options.mutate?.api?.(name, dynamodb.api);
        const handler = createStreamHandler({ config, dynamodb: dynamodb.pipeline, sqs: noSqs, sink, fatal });
        const rewrite = options.mutate?.records;
        const consumer: Region["consumer"] = (event, context) =>
            handler(rewrite === undefined ? event : { Records: rewrite(name, event.Records) }, context);
        const mapping = new StreamMapping(streams, system.streamArn, config.sortKey);
        await mapping.startAfterExisting();
        regions.set(name, {
            name,
            config,
            client: new HybridCounterClient({ ...config, dynamodb: dynamodb.api, mode: history.mode }),
            consumer,
            redrive: createRedriveHandler({ config, dynamodb: dynamodb.pipeline, streams, sqs: noSqs, sink, fatal }),
            mapping,
            dynamodb,
            calls: 0,
        });
    }
    const configs = new Map([...regions].map(([name, r]) => [name, r.config]));
    const regionOf = (event: RegionalEvent): Region => regions.get(members[event.region ?? 0]!)!;

    const observe = async (key: string, context: string): Promise<KeyTruth> => {
        const truth = await readKeyTruth(reader, configs, key);
        totals.observations++;
        for (const problem of observationProblems(truth, history.mode, history.limits[key] ?? 0, home)) {
            violations.push(`${context}: ${key} ${problem}`);
        }
        return truth;
    };
    /** Whether the task met a fault: a party may throw only then. */
    const faulted = (): boolean => (faultsByTask.get(scheduler.current()!.id) ?? 0) > 0;
    const mayThrow = (label: string, error: unknown, allowed = true): void => {
        if (!allowed || !faulted()) {
            violations.push(`${label}: threw ${describe(error)}${allowed ? " although none of its requests met a fault" : ""}`);
        }
    };
    const healOptions = (r: Region) => ({
        config: r.config,
        dynamodb: r.dynamodb.settler,
        mode: history.mode,
        quietWindowMs: FUZZ_QUIET_WINDOW_MS,
    });
    const runBackfill = async (r: Region, runId: string, pageSize: number, label: string): Promise<void> => {
        totals.backfills++;
        try {
            await backfill({
                config: r.config,
                dynamodb: backfillDynamo,
                mode: history.mode,
                runId: `${r.name}-${runId}`,
                segments: 1,
                pageSize,
                readUnitsPerSecond: Infinity,
                writeUnitsPerSecond: Infinity,
                clock: { now: () => Date.now(), sleep },
            });
        } catch (error) {
            mayThrow(label, error, error instanceof BackfillError);
        }
    };
    const runReconcile = async (r: Region, key: string, label: string): Promise<void> => {
        try {
            await reconcileKey(key, { config: r.config, dynamodb: r.dynamodb.pipeline, fatal, sink, timeoutMs: 600_000 });
        } catch (error) {
            mayThrow(label, error);
        }
    };

    const runEvent = async (event: RegionalEvent, index: number): Promise<void> => {
        const label = `#${index} ${JSON.stringify(event)}`;
        const r = regionOf(event);
        switch (event.op) {
            case "consume":
                return r.mapping.consume(event, r.consumer);
            case "redrive":
                return r.mapping.redrive(r.redrive, fatalMessages);
            case "reconcile":
                return runReconcile(r, event.key, label);
            case "backfill":
                return runBackfill(r, event.runId, event.pageSize, label);
            case "ttlDelete":
                await otherWrite(otherDynamo, system, event);
                return;
            case "settle":
                totals.settles++;
                // Every call began before the move has ended (the schedule waits for that): see run.ts, "Time".
                time.advance(FUZZ_QUIET_WINDOW_MS + 1_000);
                try {
                    const report = await settle({
                        ...healOptions(r),
                        fatal,
                        sink,
                        keyBudget: event.keyBudget,
                        auditSegments: event.auditSegments,
                        auditPageSize: 3,
                        concurrency: 2,
                    });
                    totals.healed += report.healed;
                } catch (error) {
                    mayThrow(label, error);
                }
                return;
            case "create":
            case "tryCreate":
            case "delete":
            case "count":
                r.calls++;
                try {
                    if (event.op === "create") {
                        await r.client.create(event.key, event.id);
                    } else if (event.op === "tryCreate") {
                        const limit = history.limits[event.key] ?? 0;
                        await r.client.tryCreate(event.key, event.id, options.mutate?.limit?.(r.name, limit) ?? limit);
                    } else if (event.op === "delete") {
                        await r.client.delete(event.key, event.id);
                    } else {
                        await r.client.count(event.key);
                    }
                } catch (error) {
                    // The contract: DynamoDB's own errors after every retry, only when a fault met the call's requests.
                    mayThrow(label, error, !(error instanceof InvalidArgumentError));
                }
                return;
            default:
                violations.push(`${label}: not an event of a multi-region history`);
        }
    };

    /** Observes the keys a released write named (reads change nothing). */
    const account = async (request: Released): Promise<void> => {
        if (READS.has(request.command) || request.command === "DescribeStreamCommand") {
            return;
        }
        const context = `after ${request.task.label} ${request.command}${request.fault ? ` (${request.fault})` : ""}`;
        for (const key of keysOf(request.input, system.config.partitionKey).filter((k) => keys.includes(k))) {
            await observe(key, context);
        }
    };
    const settleReleased = async (): Promise<void> => {
        for (const request of released.splice(0)) {
            await account(request);
        }
    };

    // The schedule, as run.ts's: start events (up to the concurrency) and release requests, both chosen by the seed.
    const running = new Set<Promise<void>>();
    let next = 0;
    let callsInFlight = 0;
    for (;;) {
        await scheduler.quiescent();
        await settleReleased();
        if (scheduler.fireTimer(false)) {
            continue;
        }
        const pending = scheduler.pending;
        const upcoming = history.events[next];
        const waits = upcoming?.op === "settle" && callsInFlight > 0;
        const canStart = next < history.events.length && running.size < history.concurrency && !waits;
        if (canStart && (pending.length === 0 || random() < 0.3)) {
            const index = next++;
            const event = history.events[index]!;
            const call = CALLS.has(event.op);
            callsInFlight += call ? 1 : 0;
            const where = event.region === undefined ? "" : ` ${members[event.region]}`;
            startTracked(
                scheduler,
                running,
                `#${index} ${event.op}${where}`,
                () => runEvent(event, index),
                () => (callsInFlight -= call ? 1 : 0),
                (error) => violations.push(`#${index} ${JSON.stringify(event)}: failed: ${describe(error)}`),
            );
            continue;
        }
        if (pending.length === 0) {
            if (whenGateEmpty(scheduler, next >= history.events.length, running) === "done") {
                break;
            }
            continue;
        }
        const index = Math.floor(random() * pending.length);
        const request = pending[index]!;
        const fault = drawFault(random, faultRate, request.command);
        totals.faults += fault === undefined ? 0 : 1;
        scheduler.release(index, fault);
    }

    // Drain: no more faults; every region's backfill, then every mapping delivered and redriven until nothing is left.
    faultRate = 0;
    const drain = async (label: string, work: () => Promise<void>): Promise<void> => {
        const done = scheduler.spawn(label, work);
        for (;;) {
            await scheduler.quiescent();
            await settleReleased();
            if (scheduler.fireTimer(false)) {
                continue;
            }
            if (scheduler.pending.length === 0) {
                if (scheduler.fireTimer(true)) {
                    continue;
                }
                break;
            }
            scheduler.release(0, undefined);
        }
        await done;
    };
    for (const r of regions.values()) {
        await drain(`backfill ${r.name}`, () => runBackfill(r, "after-drain", 25, `${r.name}'s backfill after the events`));
    }
    const allDrained = async () => (await Promise.all([...regions.values()].map((r) => r.mapping.drained()))).every(Boolean);
    for (let round = 0; round < 50 && !(await allDrained()); round++) {
        for (const r of regions.values()) {
            await drain(`drain ${r.name}`, () => r.mapping.consume({ op: "consume", max: 100, overlap: 0, crash: "none" }, r.consumer));
            await drain(`redrive ${r.name}`, () => r.mapping.redrive(r.redrive, fatalMessages));
        }
    }
    for (const r of regions.values()) {
        if (!(await r.mapping.drained())) {
            violations.push(`${r.name}'s stream did not drain: ${r.mapping.describe()}`);
        }
    }
    // A fatal message needs an operator: they reconcile its keys, in every region (docs/operating.md).
    const reconcileAll = async (stage: string) => {
        for (const key of keys) {
            for (const r of regions.values()) {
                await drain(`reconcile ${r.name}`, () => runReconcile(r, key, `${r.name}'s reconcile ${stage}`));
            }
        }
    };
    if (fatalMessages.length > 0) {
        await reconcileAll("after a fatal message");
    }
    for (const key of keys) {
        const truth = await observe(key, "after the drain");
        violations.push(...drainedProblems(truth).map((problem) => `after the drain: ${key} ${problem}`));
    }
    // The settler's reconcile in every region: nothing soft-deleted is left, and eventual is still exact.
    await reconcileAll("after the drain");
    for (const key of keys) {
        const truth = await observe(key, "after the settler's reconcile");
        violations.push(...drainedProblems(truth).map((problem) => `after the settler's reconcile: ${key} ${problem}`));
        if (truth.softDeleted !== 0) {
            violations.push(`after the settler's reconcile: ${key} has ${truth.softDeleted} soft-deleted items left`);
        }
    }
    // Every key quiet for the window, then healed in each region: each region's best-effort is what it owns.
    time.advance(FUZZ_QUIET_WINDOW_MS + 1_000);
    const perRegion: Record<string, { calls: number; eventual: number; bestEffort: number }> = {};
    for (const r of regions.values()) {
        perRegion[r.name] = { calls: r.calls, eventual: 0, bestEffort: 0 };
    }
    for (const key of keys) {
        for (const r of regions.values()) {
            let outcome = "";
            await drain(`heal ${r.name}`, async () => {
                const result = await healKey(key, healOptions(r));
                outcome = result.outcome === "skipped" ? `skipped (${result.reason})` : result.outcome;
            });
            const truth = await observe(key, `after ${r.name}'s final heal`);
            const problem = healedProblem(r.name, truth.regions.get(r.name)!);
            if (problem !== undefined) {
                violations.push(`after ${r.name}'s final heal (${outcome}): ${key} ${problem}`);
            }
        }
        const truth = await readKeyTruth(reader, configs, key);
        for (const [name, r] of truth.regions) {
            perRegion[name]!.eventual += r.eventual;
            perRegion[name]!.bestEffort += r.bestEffort;
        }
    }
    for (const client of [reader, otherDynamo, backfillDynamo, ...[...regions.values()].flatMap((r) => Object.values(r.dynamodb))]) {
        client.destroy();
    }
    streams.destroy();
    return {
        violations,
        trace: trace.digest(),
        stats: {
            events: history.events.length,
            ...totals,
            deadLettered: [...regions.values()].reduce((n, r) => n + r.mapping.deadLettered, 0),
            fatal: fatalMessages.length,
            perRegion,
        },
    };
}

/** The partition keys a request's input names (a single item's, a batch's or a transaction's). */
function keysOf(input: Record<string, unknown>, partitionKey: string): string[] {
    const found = new Set<string>();
    const visit = (value: unknown, depth: number): void => {
        if (depth > 6 || value === null || typeof value !== "object") {
            return;
        }
        const record = value as Record<string, unknown>;
        for (const field of ["Key", "Item"]) {
            const pk = (record[field] as Record<string, AttributeValue> | undefined)?.[partitionKey]?.S;
            if (pk !== undefined) {
                found.add(pk);
            }
        }
        for (const child of Object.values(record)) {
            visit(child, depth + 1);
        }
    };
    visit(input, 0);
    return [...found];
}
