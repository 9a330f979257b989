/**
 * Runs one history on DynamoDB Local under the deterministic scheduler and checks it against the contract the README's
 * Guarantees state (docs/checker.md lists what is checked, and what is not):
 * - at every observation (after each write, between two releases) the counters keep their invariants (account.ts,
 *   model.ts): eventual exact record for record, best-effort within the mode's bound, strict admissions within the
 *   limit in force;
 * - every answer is one the contract allows, and every error one it names (parties.ts);
 * - once the traffic stops, within the documented time every key converges (liveness.ts): eventual equals the items
 *   that count, best-effort equals what a heal sets, nothing is left listed, held, unsent or unbounded.
 *
 * The parties: the API's client, two consumer instances, the redrive, the settler, the backfill, other writers and
 * the table's TTL, each sending through a DynamoDB client the scheduler gates. Faults come from the history's rate and
 * its bursts; a request held past its call lands later (`land`), or is refused once older than a request's lifetime.
 */
import { DynamoDBServiceException } from "@aws-sdk/client-dynamodb";
import { HybridCounterClient } from "../../runtime/client/client";
import { createRedriveHandler } from "../../runtime/stream/redrive";
import { createStreamHandler } from "../../runtime/stream/consumer";
import { parityByDefault, type EngineOptions, type LocalEngine } from "../../local/engine/engine";
import { seededRandom } from "../../local/engine/faults";
import { account, itemBefore, noteOutcome } from "./account";
import { historyKeys, type FuzzEvent, type History } from "./history";
import { checkLiveness } from "./liveness";
import { StreamMapping } from "./mapping";
import { describe, runEvent, sendEvents } from "./parties";
import { RecordTimes } from "./record-times";
import { drawFault, onSeededClock, startTracked, whenGateEmpty } from "./schedule";
import type { Released, Scheduler } from "./scheduler";
import { RunState, type Parties, type Run, type TaskInfo } from "./state";
import { clientOptionsOf, createFuzzSystem, fuzzClient, NO_TIMEOUTS, writePreexisting, type Item } from "./system";
import { Trace } from "./trace";

export interface RunResult {
    readonly violations: string[];
    /** The digest of every released request, in order (trace.ts): two runs of one history give the same. */
    readonly trace: string;
    readonly stats: RunState["stats"] & {
        readonly events: number;
        readonly requests: number;
        readonly faults: number;
        readonly deadLettered: number;
        readonly fatal: number;
        readonly thresholdEvents: number;
        /** Virtual milliseconds from the first event's start to the last one's end. */
        readonly eventsMs: number;
    };
}

/** The checker's engine: the parity layer meters throughput on the clock every party reads (the virtual one). */
export const FUZZ_ENGINE: EngineOptions = { parity: parityByDefault() ? { now: () => Date.now() } : false };

/** A change to the system under test that the checker must catch (mutants.ts): given the run before anything runs. */
export type Mutant = (run: Run) => () => void;

export interface RunOptions {
    readonly mutant?: Mutant;
    /** Hears one line per released request. */
    readonly trace?: (line: string) => void;
}

export async function runHistory(engine: LocalEngine, history: History, options: RunOptions = {}): Promise<RunResult> {
    return onSeededClock(history, (scheduler) => runOnClock(engine, history, options, scheduler));
}

async function runOnClock(engine: LocalEngine, history: History, options: RunOptions, scheduler: Scheduler): Promise<RunResult> {
    const run = await setUp(engine, history, options, scheduler);
    const restore = options.mutant?.(run) ?? (() => undefined);
    try {
        const started = scheduler.time.now();
        await runEvents(run, seededRandom((history.seed ^ 0x5bd1e995) >>> 0));
        const eventsMs = scheduler.time.now() - started;
        await checkLiveness(run, (work, kind) => drain(run, work, kind));
        const { state } = run;
        return {
            violations: state.violations,
            trace: state.trace.digest(),
            stats: {
                ...state.stats,
                events: history.events.length,
                requests: state.index,
                faults: state.faults,
                deadLettered: run.mapping.deadLettered,
                fatal: state.fatal.length,
                thresholdEvents: state.sent.length,
                eventsMs,
            },
        };
    } finally {
        restore();
        for (const client of [...Object.values(run.parties), run.state.reader]) {
            client.destroy();
        }
        run.state.streams.destroy();
        run.handlerStreams.destroy();
    }
}

async function setUp(engine: LocalEngine, history: History, options: RunOptions, scheduler: Scheduler): Promise<Run> {
    // The checker's own reads go to the engine itself: they are no party's traffic.
    const reader = engine.dynamodb({ requestHandler: NO_TIMEOUTS, direct: true });
    // The mapping reads the stream through `streams`; the consumer and the redrive re-read it through their own client.
    const streams = engine.streams({ requestHandler: NO_TIMEOUTS });
    const handlerStreams = engine.streams({ requestHandler: NO_TIMEOUTS });
    const times = new RecordTimes(() => scheduler.time.now());
    times.install(streams);
    times.install(handlerStreams);
    const system = await createFuzzSystem(reader, history);
    await writePreexisting(reader, system, history);
    const trace = new Trace([
        [`${system.config.tableName}-counters`, "COUNTERS"],
        [system.config.tableName, "TABLE"],
        [system.generation, "GENERATION"],
    ]);
    const state = new RunState(history, system, scheduler, reader, streams, trace, historyKeys(history));
    state.onTrace = options.trace;
    const sleep = (ms: number) => scheduler.sleep(ms);
    const parties: Parties = {
        api: fuzzClient(engine, sleep),
        pipeline: fuzzClient(engine, sleep),
        other: fuzzClient(engine, sleep),
        backfill: fuzzClient(engine, sleep),
        settler: fuzzClient(engine, sleep),
    };
    const released: Released[] = [];
    for (const client of Object.values(parties)) {
        scheduler.gate(client, (request) => {
            noteOutcome(run, request);
            released.push(request);
        });
    }
    // Reads a task waits for without the gate (the stream's records, the checker's reads): no move while one runs.
    scheduler.track(streams);
    scheduler.track(handlerStreams);
    scheduler.track(reader);
    const mapping = new StreamMapping(streams, system.streamArn);
    await mapping.startAfterExisting();
    const fatal = { park: async (message: import("../../runtime/stream/fatal").FatalMessage) => (state.fatal.push(message), true) };
    const run: Run = {
        state,
        parties,
        handlerStreams,
        mapping,
        sleep,
        released,
        client: new HybridCounterClient({ ...clientOptionsOf(system), dynamodb: parties.api }),
        handlers: {
            consumers: [0, 1].map(() =>
                createStreamHandler({
                    config: system.config,
                    dynamodb: parties.pipeline,
                    streams: handlerStreams,
                    fatal,
                    sendEvents: (events) => sendEvents(run, events),
                    sink: process.env.FUZZ_LOG ? (line: string) => console.log(line) : () => undefined,
                }),
            ) as unknown as Run["handlers"]["consumers"],
            redrive: createRedriveHandler({
                config: system.config,
                dynamodb: parties.pipeline,
                streams: handlerStreams,
                fatal,
                sendEvents: (events) => sendEvents(run, events),
                sink: process.env.FUZZ_LOG ? (line: string) => console.log(line) : () => undefined,
            }),
        },
    };
    return run;
}

/** Accounts for every request released since the last move (account.ts). */
async function accountReleased(run: Run, before: Map<Record<string, unknown>, Item | undefined>): Promise<void> {
    for (const request of run.released.splice(0)) {
        await account(run, request, before.get(request.input));
        before.delete(request.input);
    }
}

/** The schedule: start events (up to the history's concurrency) and release requests, both chosen by the seed. */
async function runEvents(run: Run, random: () => number): Promise<void> {
    const { state } = run;
    const { scheduler, history } = state;
    const running = new Set<Promise<void>>();
    const before = new Map<Record<string, unknown>, Item | undefined>();
    let next = 0;
    for (;;) {
        await scheduler.quiescent();
        await accountReleased(run, before);
        if (scheduler.fireTimer(false)) {
            continue;
        }
        const pending = scheduler.pending;
        if (next < history.events.length && running.size < history.concurrency && (pending.length === 0 || random() < 0.3)) {
            const index = next++;
            const event = history.events[index]!;
            const label = `#${index} ${JSON.stringify(event)}`;
            startTracked(
                scheduler,
                running,
                `#${index} ${event.op}`,
                () => runEvent(run, event, label),
                () => undefined,
                (error) => state.violation(`${label}: failed: ${describe(error)}`),
            );
            continue;
        }
        if (pending.length === 0) {
            if (whenGateEmpty(scheduler, next >= history.events.length, running) === "done") {
                return;
            }
            continue;
        }
        const index = Math.floor(random() * pending.length);
        const request = pending[index]!;
        if (state.task(request.task.id)?.kind === "other") {
            before.set(request.input, await itemBefore(run, request));
        }
        scheduler.release(index, faultOf(run, request, random));
    }
}

/** The fault a request meets: held (a late call's first put), a burst's, or one drawn at the history's rate. */
function faultOf(
    run: Run,
    request: { task: { id: number }; command: string; input: Record<string, unknown> },
    random: () => number,
): ReturnType<typeof drawFault> | "late" {
    const { state } = run;
    if (
        request.command === "PutItemCommand" &&
        (request.input as { TableName?: string }).TableName === state.system.config.tableName &&
        state.lateTasks.delete(request.task.id)
    ) {
        state.stats.held++;
        return "late";
    }
    if (state.burst !== undefined && state.burst.left > 0) {
        state.burst.left--;
        return state.burst.kind;
    }
    // A healing history's settler meets faults often (at least one request in four), lost answers among them.
    const settler = state.history.profile.healing && state.task(request.task.id)?.kind === "settle";
    return drawFault(random, settler ? Math.max(state.faultRate, 0.25) : state.faultRate, request.command);
}

/**
 * Runs `work` as a task to its end with no faults: every request released in turn, every timer fired (the clock jumps
 * to it), every request accounted for.
 */
export async function drain(run: Run, work: () => Promise<unknown>, kind: TaskInfo["kind"] = "drain"): Promise<void> {
    const { scheduler } = run.state;
    let failure: unknown;
    const done = scheduler
        .spawn(`drain ${kind}`, async () => {
            run.state.tasks.set(scheduler.current()!.id, { kind, requests: 0, faults: 0, putApplied: false, softDeleted: false });
            await work();
        })
        .catch((error: unknown) => void (failure = error));
    const before = new Map<Record<string, unknown>, Item | undefined>();
    for (;;) {
        await scheduler.quiescent();
        await accountReleased(run, before);
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
    if (failure !== undefined && !(failure instanceof DynamoDBServiceException)) {
        throw failure;
    }
}

export type { FuzzEvent };
