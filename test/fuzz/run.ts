/**
 * Runs one history on DynamoDB Local under the deterministic scheduler and checks it against the
 * contract the README's Guarantees state (docs/guarantees.md lists what is checked):
 *
 * - strict: right after a tryCreate's reservation under its limit L (limits.ts: a plan may change), the key's
 *   best-effort sum is at most L; at the end every marker is within strict-ledger.ts's bound (marker-bound.ts);
 *   a token rewrite by another writer moves an item's home shard (retoken.ts says what the bounds allow for it);
 * - at every observation (between two released requests), the mode's bound holds, restated over the
 *   client's own items because best-effort covers only those (others.ts says why and what it allows):
 *   utilization `bestEffort <= clientLive + lives other writers ended`; strict `clientLive <= bestEffort`,
 *   `clientLive <= limit` and `bestEffort <= limit + what strict backfills added`; and at every
 *   observation eventual equals the markers in state "counted";
 * - every call's own accounting: a call that moved best-effort away from the items it wrote (an
 *   undercount in utilization, a held slot in strict) met a fault, reported an absorbed failure or threw;
 * - every answer is one the contract allows: `created: true` means this call wrote the item, `created:
 *   false` and `deleted: false` mean it wrote nothing, a utilization `tryCreate` passes its limit only by
 *   the creates that raced it plus the undercount of `max(bestEffort, eventual)` when it read;
 * - the only errors are contract errors: InvalidArgumentError for bad input (nothing written; an item one byte past
 *   the largest the client accepts among it), and DynamoDB's own errors for the call's requests after every retry;
 * - DynamoDB never refuses a write of the counting as written (every party's but another writer's): on an item as
 *   large as the client accepts, the soft delete's additions fit (big-items.ts);
 * - a backfill call resolves, or throws BackfillError only after a fault met one of its requests;
 * - a settler run (heal index, audit, reconcile) resolves, or throws only after a fault met one of its
 *   requests; the bounds above hold through its heals; so does a reconcileKey run of the history;
 * - once the stream, the retries and the dead-letter queue have drained and a backfill has run to the
 *   end (the operator's step after attaching to a table that held items), eventual == live selected
 *   items for every key, whoever wrote them, and no put attempt held past its call (history.ts, `late`)
 *   that landed after its life was removed has left that life in the table (until the consumer removes
 *   such an item, the bounds leave it out: it is no one's live resource), unless another life of the id was
 *   put after its first landing, or the consumer counted it (docs/limits.md: the marker names another life, or
 *   none when the batch that showed the life ended with another writer's replacement, so it counts as live, and
 *   strict mode's bound allows it); once the settler has reconciled the keys no soft-deleted item
 *   is left (an item moved into the selection already soft-deleted is reconcile's); and once the keys have been
 *   quiet for the window and healed, best-effort == the live items it accounts for (heal.ts).
 *
 * Sharded counters (history.ts `counterShards`; runtime/shards/layout.ts). The system runs with the history's shard
 * count in every party. Every read of the checker reads every shard: the counters are sums over the key's shards, a
 * marker is read in its id's shard, a request's partition key is mapped back to its key (adapter.ts). The bounds
 * above hold on the sums and, each shard being a counter of its own over the client's items homed there, per shard
 * too (others.ts); the heal index lists a key when an entry of any of its shards does; once healed, each shard's
 * best-effort equals the live items homed there that it accounts for. A call's moves of best-effort are summed over
 * the shards it wrote, and a utilization tryCreate's read is the sum of its per-shard reads.
 *
 * Time. The heal trusts a quiet window Q (its assumptions A1-A4: no write of an API call lands more than Q
 * after the call began). The checker runs on a virtual clock (clock.ts), which only the schedule moves (scheduler.ts):
 * every timer of the system sleeps on it, and a settler run moves it Q past the present before it starts. A settler
 * run starts when no API call is in flight (the calls that began before it have ended, so no write older than Q can
 * still land), or, a busy run, at once: the move takes the calls in flight past their deadline (A1: the client sends
 * nothing more) and every request of theirs still waiting at the gate past a request's lifetime (A2: the scheduler
 * refuses it as DynamoDB refuses an expired signature). Either way the calls that begin while it runs are within the
 * window and race its heals as they would on AWS.
 */
import { GetItemCommand, PutItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SQSClient } from "@aws-sdk/client-sqs";
import { backfill, BackfillError } from "../../runtime/backfill/backfill";
import { HybridCounterClient } from "../../runtime/client/client";
import { healKey } from "../../runtime/heal/heal";
import { queryPartition } from "../../runtime/heal/partition";
import { isLive } from "../../runtime/shared/selection";
import { settle } from "../../runtime/heal/settle";
import { createStreamHandler } from "../../runtime/stream/consumer";
import { HEAL_DUE_FAILED } from "../../runtime/stream/heal-due";
import { COUNTER_ATTRIBUTES, bestEffortSortKey, countersTable } from "../../runtime/shared/config";
import { InvalidArgumentError } from "../../runtime/shared/errors";
import { markerIdMaxBytes } from "../../runtime/shared/key-limits";
import type { FatalMessage } from "../../runtime/stream/fatal";
import { reconcileKey } from "../../runtime/heal/reconcile";
import { createRedriveHandler } from "../../runtime/stream/redrive";
import { parityByDefault, type EngineOptions, type LocalEngine } from "../../local/engine/engine";
import { seededRandom } from "../../local/engine/faults";
import { drawFault, onSeededClock, startTracked, whenGateEmpty } from "./schedule";
import {
    classifyRequest,
    createFuzzSystem,
    fuzzClient,
    healTarget,
    liveByUnit,
    readTruth,
    shardsOf,
    type FuzzSystem,
    type LiveByUnit,
    type RequestEffect,
    type Truth,
    NO_TIMEOUTS,
} from "./adapter";
import { DEFAULT_DEADLINE_MS } from "../../runtime/client/validation";
import { callProblems, describe, metFault, newLedger, recordRequest, type CallLedger } from "./calls";
import { ACTIVE, historyKeys, ID_PREFIX, STATUS_ATTRIBUTE, type FuzzEvent, type History } from "./history";
import { countedLateInserts, lateItemsAHealMayCount } from "./late-puts";
import { StreamMapping } from "./mapping";
import { boundProblem, EndedLives, otherWrite, shardBoundProblem } from "./others";
import { lifeShard, shardPartitionKey } from "../../runtime/shards/layout";
import { Scheduler, type Released } from "./scheduler";
import { Trace } from "./trace";
import { admissionProblem, callLimit, LimitsInForce } from "./limits";
import { markerBoundProblems } from "./marker-bound";
import { retokened, retokenWrite } from "./retoken";
import { LedgerAges, RecordTimes, wroteTable } from "./record-times";
import { bigAttributes, GrownItems, refusedWrite } from "./big-items";

export interface RunResult {
    readonly violations: string[];
    /** The digest of every released request, in order (trace.ts): two runs of one history give the same. */
    readonly trace: string;
    readonly stats: {
        readonly events: number;
        readonly requests: number;
        readonly faults: number;
        readonly observations: number;
        readonly deadLettered: number;
        readonly fatal: number;
        readonly reconciledAfterDrain: boolean;
        /** Other writers' writes that were not served after every attempt (the table says what they did). */
        readonly otherWritesFailed: number;
        /** Backfill calls that ran (in the history, and the one after the drain). */
        readonly backfills: number;
        /** Items backfill calls counted, and found already counted. */
        readonly backfillCounted: number;
        readonly backfillAlreadyCounted: number;
        /** Client lives other writers ended. */
        readonly livesEnded: number;
        /** Settler runs, and the heals they wrote (the final heal of every key not included). */
        readonly settles: number;
        readonly healed: number;
        /** Settler runs that started with API calls in flight, and the requests of theirs refused as expired (A2). */
        readonly busySettles: number;
        readonly expired: number;
        /** Put attempts held past their calls, and of those, the ones that landed over a removed life. */
        readonly held: number;
        readonly latePutsBack: number;
        /** Of those, the ones that landed after another life of the id was put (docs/limits.md: not caught). */
        readonly latePutsAfterAnotherLife: number;
        /** Late puts a settler run found in the table that its heal may count (run.ts, `lateAHealMayCount`). */
        readonly latePutsAHealMayCount: number;
        /**
         * `hc_released` and `hc_pending` values the consumer read on the markers of a delivered batch, not yet sealed at
         * their record's time (it keeps them) and sealed (it removes them): record-times.ts.
         */
        readonly ledgerUnsealed: number;
        readonly ledgerSealed: number;
        /** Client lives put (a token's first applied put), and the most of them one id of one key had. */
        readonly lives: number;
        readonly mostLivesOfOneId: number;
        /** Virtual milliseconds from the first event's start to the last one's end, settler runs' moves included. */
        readonly eventsMs: number;
    };
}

/**
 * How the checker starts its engine: the parity layer (local/engine/parity.ts) meters each partition's throughput on the
 * clock every party reads, the virtual one while a history runs (clock.ts), so that a write throttled at 1,000 units a
 * second (a 400 KB item's put takes 400) is throttled in every run of the seed, on a quiet machine or a busy one.
 */
export const FUZZ_ENGINE: EngineOptions = { parity: parityByDefault() ? { now: () => Date.now() } : false };

/** The settler's quiet window in the checker (the component's default). */
export const FUZZ_QUIET_WINDOW_MS = 600_000;

export interface RunOptions {
    /** Hears one line per released request: what ran, with which fault, and how it ended. */
    readonly trace?: (line: string) => void;
    /**
     * Changes the system under test, to prove the checker catches what it claims to: it is given the
     * API's, the pipeline's (consumer, redrive, reconciliation), the other writers' and the backfill's
     * DynamoDB clients before anything runs (add middleware that breaks them).
     */
    readonly mutate?: (clients: FuzzClients) => void;
    /**
     * A mutant of the settler's order (runtime/heal/settle.ts, "Order"): each key of a run is healed before it is
     * settled, as the settler did before it purged late puts ahead of its heal.
     */
    readonly settlerHealsFirst?: true;
}

export interface FuzzClients {
    readonly api: DynamoDBClient;
    readonly pipeline: DynamoDBClient;
    readonly other: DynamoDBClient;
    readonly backfill: DynamoDBClient;
    readonly settler: DynamoDBClient;
}

const CLIENT_CALLS = new Set<FuzzEvent["op"]>(["create", "tryCreate", "delete", "count", "invalid"]);

export async function runHistory(engine: LocalEngine, history: History, options: RunOptions = {}): Promise<RunResult> {
    return onSeededClock(history, (scheduler) => runOnClock(engine, history, options, scheduler));
}

async function runOnClock(engine: LocalEngine, history: History, options: RunOptions, scheduler: Scheduler): Promise<RunResult> {
    const time = scheduler.time;
    // The checker's own reads go to the engine itself: they are no party's traffic, so no partition's throughput is
    // theirs to use (an observation of a key holding 400 KB items reads 100 units, after every request).
    const reader = engine.dynamodb({ requestHandler: NO_TIMEOUTS, direct: true });
    const streams = engine.streams({ requestHandler: NO_TIMEOUTS });
    // Every record carries the virtual time of its write (record-times.ts), the stream read right after it (below).
    new RecordTimes(() => time.now()).install(streams);
    const system = await createFuzzSystem(
        reader,
        history.placement ?? "same-table",
        history.selection ?? "client",
        history.counterShards ?? 1,
    );
    const shards = shardsOf(system);
    await writePreexisting(reader, system, history);
    const trace = new Trace([
        [system.config.countersTableName ?? system.config.tableName, "COUNTERS"],
        [system.config.tableName, "TABLE"],
    ]);
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
    const faultsByTask = new Map<number, number>();
    /** The tasks of other writers, and what their request about to run will replace. */
    const otherTasks = new Set<number>();
    const replacing = new Map<number, Record<string, AttributeValue> | null>();
    const ended = new EndedLives();
    const limitsInForce = new LimitsInForce(history);
    const ledgerAges = new LedgerAges(system.config, countersTable(system.config));
    /** The ClientRequestTokens of served transactions, and the requests that were served again under one of them. */
    const servedTransactions = new Set<string>();
    const replayedTransactions = new Set<Released>();
    const backfilled = new Map<string, number>();
    const backfillTotals = { calls: 0, counted: 0, alreadyCounted: 0 };
    const settleTotals = { runs: 0, healed: 0, busy: 0, expired: 0 };
    /** Client items other writers moved back into the selection, per key (others.ts). */
    const movedIn = new Map<string, number>();
    /** The same, per key and shard of their home (sharded histories). */
    const movedInShards = new Map<string, number[]>();
    let callsInFlight = 0;
    let otherWritesFailed = 0;
    /** Calls whose first put attempt is to be held (history.ts, `late`), and held attempts landing now. */
    const lateTasks = new Set<number>();
    let landing = 0;
    let heldTotal = 0;
    /** The inputs of held requests: one released again is a held attempt landing. */
    const heldInputs = new Set<Record<string, unknown>>();
    /** Client tokens whose put applied, and per key the tokens put again after that: late puts of a removed life. */
    const appliedTokens = new Set<string>();
    const lateTokens = new Map<string, Set<string>>();
    /**
     * Late puts the consumer does not promise to catch (docs/limits.md): another life of the id was put after the
     * late one's first landing, so the marker names that life. They count as live items, and strict mode's bound
     * allows them (no slot backs them) until a heal.
     */
    const unpromisedTokens = new Map<string, Set<string>>();
    /**
     * Per key, late puts a settler run found in the table that its heal may count (docs/limits.md; late-puts.ts,
     * `lateItemsAHealMayCount`): each may leave best-effort one above the live items until the heal the consumer's
     * removal of it asks for, which a history need not reach; so each is allowed for the rest of the history, and the
     * end, after its heals, must be exact.
     */
    const lateAHealMayCount = new Map<string, Set<string>>();
    let latePutsAHealMayCount = 0;
    /** Per key and id, the token of the last client put that applied (not a late one), and how many lives it had. */
    const lastLife = new Map<string, string>();
    const livesOfId = new Map<string, number>();
    /** Client tokens whose item a client delete soft-deleted (calls.ts `deletedMine`). */
    const softDeletedTokens = new Set<string>();
    const landHeld = (): Promise<void> => {
        const count = scheduler.heldCount;
        landing += count;
        return scheduler.land().finally(() => (landing -= count));
    };

    // Runs as each request finishes, before its task goes on: the call's ledger is current when it answers.
    const grownItems = new GrownItems();
    const onOutcome = (request: Released): void => {
        requests++;
        requestsByTask.set(request.task.id, (requestsByTask.get(request.task.id) ?? 0) + 1);
        if (metFault(request)) {
            faultsByTask.set(request.task.id, (faultsByTask.get(request.task.id) ?? 0) + 1);
        }
        settleTotals.expired += request.fault === "expired" ? 1 : 0;
        const effect = classifyRequest(system, request);
        ledgerAges.read(request);
        // Every write the counting sends fits the item it writes (big-items.ts); another writer's writes are its own.
        const other = otherTasks.has(request.task.id);
        const target = (request.input as { Key?: Record<string, AttributeValue> }).Key;
        const grown = grownItems.has(target?.[system.config.partitionKey]?.S, target?.[system.config.sortKey]?.S);
        const refused = other ? undefined : refusedWrite(request, grown);
        if ((effect.kind === "put" || effect.kind === "flip") && effect.applied) {
            grownItems.written(effect.key, effect.id, !other);
        }
        if (refused !== undefined) {
            violations.push(`${request.task.label} ${request.command}: ${refused}`);
        }
        // A transaction served again under a ClientRequestToken already served (the SDK's retry after a 500 that followed
        // the commit) is DynamoDB's idempotent answer: it applies nothing, so it admits nothing (limits.ts).
        const idempotency = (request.input as { ClientRequestToken?: string }).ClientRequestToken;
        if (request.command === "TransactWriteItemsCommand" && request.served && idempotency !== undefined) {
            if (servedTransactions.has(idempotency)) {
                replayedTransactions.add(request);
            }
            servedTransactions.add(idempotency);
        }
        // A second put of one token is a late attempt over a removed life: no life of its call, and no item the
        // counters account for (markers.ts); the consumer removes it.
        let late = false;
        if (effect.kind === "put" && effect.applied && effect.token !== undefined) {
            late = appliedTokens.has(effect.token);
            appliedTokens.add(effect.token);
            const id = `${effect.key}\u0000${effect.id}`;
            if (!late) {
                lastLife.set(id, effect.token);
                livesOfId.set(id, (livesOfId.get(id) ?? 0) + 1);
            } else if (lastLife.get(id) === effect.token) {
                lateTokens.set(effect.key, (lateTokens.get(effect.key) ?? new Set()).add(effect.token));
            } else {
                unpromisedTokens.set(effect.key, (unpromisedTokens.get(effect.key) ?? new Set()).add(effect.token));
            }
        }
        // The consumer counted a late put's INSERT: its marker did not name the life (a batch that showed the life only
        // with the change that replaced it writes no hc_life), which docs/limits.md does not promise to catch either.
        for (const { key, life } of countedLateInserts(request, system, mapping)) {
            lateAHealMayCount.get(key)?.delete(life);
            if (lateTokens.get(key)?.delete(life)) {
                unpromisedTokens.set(key, (unpromisedTokens.get(key) ?? new Set()).add(life));
            }
        }
        if (effect.kind === "put" && effect.applied && heldInputs.has(request.input) && settleTotals.runs > 0) {
            landedAfterSettle.add(effect.key);
        }
        const ledger = ledgers.get(request.task.id);
        if (ledger !== undefined && effect.kind === "soft-delete" && effect.applied && effect.createToken !== undefined) {
            softDeletedTokens.add(effect.createToken);
        }
        if (ledger && !late) {
            recordRequest(ledger, request, effect);
            if (effect.kind === "put" && effect.applied && heldInputs.has(request.input)) {
                ledger.lateLanded++;
            }
            // The item a soft delete of a late token ends is the late attempt's: that life's slot was given back already.
            const lateToken =
                (effect.kind === "soft-delete" || effect.kind === "life-write") &&
                effect.createToken !== undefined &&
                (lateTokens.get(effect.key)?.has(effect.createToken) === true ||
                    unpromisedTokens.get(effect.key)?.has(effect.createToken) === true);
            if (lateToken) {
                // The call deletes a late put attempt: in utilization mode its decrement is a second one for the life.
                ledger.lateTarget = true;
            }
            if (lateToken && effect.kind === "soft-delete" && effect.applied) {
                ledger.lateDeleted++;
            }
        }
        if (
            otherTasks.has(request.task.id) &&
            (effect.kind === "put" || effect.kind === "hard-delete" || effect.kind === "flip") &&
            effect.applied
        ) {
            const before = replacing.get(request.task.id) ?? null;
            ended.replaced(system, effect.key, effect.kind === "flip" && effect.into ? null : before);
            if (
                effect.kind === "flip" &&
                effect.into &&
                before?.[system.config.tokenAttribute]?.S !== undefined &&
                !isLive(before, system.config)
            ) {
                movedIn.set(effect.key, (movedIn.get(effect.key) ?? 0) + 1);
                const perShard = movedInShards.get(effect.key) ?? new Array<number>(shards).fill(0);
                perShard[lifeShard(before[system.config.tokenAttribute]!.S!, shards)]!++;
                movedInShards.set(effect.key, perShard);
            }
        }
        // A token rewrite ends the life it replaces, and homes the item in another shard (retoken.ts).
        const moved = otherTasks.has(request.task.id) ? retokened(system, request) : undefined;
        if (moved !== undefined) {
            ended.replaced(system, moved.key, replacing.get(request.task.id) ?? null);
            const perShard = movedInShards.get(moved.key) ?? new Array<number>(shards).fill(0);
            perShard[moved.to]!++;
            movedInShards.set(moved.key, perShard);
            // A late put whose token another writer rewrote before the consumer removed it (checker seed 230070): its new
            // token names no removed life, so no one can tell it from a client life any more (docs/limits.md). The
            // consumer counts it, no slot backs it, and a client delete of it gives one back: the key's sums allow one
            // item for it, for good (only looser; the shard of its new home already allows one for the rewrite).
            const was = moved.was ?? "";
            if (lateTokens.get(moved.key)?.delete(was) === true || unpromisedTokens.get(moved.key)?.has(was) === true) {
                movedIn.set(moved.key, (movedIn.get(moved.key) ?? 0) + 1);
            }
        }
        if (effect.kind === "best-effort-transaction" && effect.applied) {
            backfilled.set(effect.key, (backfilled.get(effect.key) ?? 0) + effect.delta);
        }
        released.push({ request, effect });
        const line = trace.add(request);
        options.trace?.(`${trace.requests} ${line}`);
    };
    const sleep = (ms: number) => scheduler.sleep(ms);
    const clientDynamo = fuzzClient(engine, sleep);
    const pipelineDynamo = fuzzClient(engine, sleep);
    const otherDynamo = fuzzClient(engine, sleep);
    const backfillDynamo = fuzzClient(engine, sleep);
    const settlerDynamo = fuzzClient(engine, sleep);
    for (const client of [clientDynamo, pipelineDynamo, otherDynamo, backfillDynamo, settlerDynamo]) {
        scheduler.gate(client, onOutcome);
    }
    // Reads that tasks wait for without the gate (the stream's records, the late items a settler run looks for):
    // no move is made while one is under way.
    scheduler.track(streams);
    scheduler.track(reader);
    options.mutate?.({ api: clientDynamo, pipeline: pipelineDynamo, other: otherDynamo, backfill: backfillDynamo, settler: settlerDynamo });

    const fatalMessages: FatalMessage[] = [];
    const fatal = { park: async (m: FatalMessage) => (fatalMessages.push(m), true) };
    const noSqs = new SQSClient({
        region: "us-east-1",
        endpoint: "http://127.0.0.1:9",
        credentials: { accessKeyId: "x", secretAccessKey: "x" },
    });
    scheduler.track(noSqs);
    /** Keys whose heal-index mark could not be written (the client's `due` failures, the consumer's log): the audit's. */
    const unmarked = new Set<string>();
    /**
     * Keys where a held put attempt landed after a settler run: later than a request lives on DynamoDB (the heal's
     * assumption A2), so a heal may have read the key before it and consumed the mark its call left (heal.ts).
     */
    const landedAfterSettle = new Set<string>();
    const sink = (line: string) => {
        if (line.includes(HEAL_DUE_FAILED)) {
            const key = (JSON.parse(line) as { counterKey?: string }).counterKey;
            if (key !== undefined) {
                unmarked.add(key);
            }
        }
    };
    const handler = createStreamHandler({ config: system.config, dynamodb: pipelineDynamo, sqs: noSqs, sink, fatal });
    const consumer: typeof handler = (event, context) => {
        const task = scheduler.current();
        if (task !== undefined) {
            ledgerAges.delivered(task.id, event.Records);
        }
        return handler(event, context);
    };
    const redrive = createRedriveHandler({ config: system.config, dynamodb: pipelineDynamo, streams, sqs: noSqs, sink, fatal });
    const client = new HybridCounterClient({
        ...system.config,
        dynamodb: clientDynamo,
        mode: history.mode,
        onBestEffortFailure: (failure) => {
            if (failure.operation === "due") {
                unmarked.add(failure.key);
            }
            const task = scheduler.current();
            const ledger = task ? ledgers.get(task.id) : undefined;
            if (ledger) {
                ledger.reported++;
            }
        },
    });
    const mapping = new StreamMapping(streams, system.streamArn, system.config.sortKey);
    // Attached to a table in use: the mapping starts after the records of the items already there.
    await mapping.startAfterExisting();

    const observe = async (key: string, context: string): Promise<Truth & { late: number }> => {
        const raw = await readTruth(reader, system, key);
        // Late items still in the table are no one's live resource: the bounds are over the rest.
        const late = await lateItems(reader, system, key, lateTokens.get(key));
        const unpromised = await lateItems(reader, system, key, unpromisedTokens.get(key));
        const truth = { ...raw, live: raw.live - late, clientLive: raw.clientLive - late };
        observations++;
        const limit = limitsInForce.ceiling(key);
        const healedLate = lateAHealMayCount.get(key) ?? new Set<string>();
        const bound = boundProblem(history.mode, truth, limit, {
            ended: ended.of(key),
            backfilled: backfilled.get(key) ?? 0,
            movedIn: (movedIn.get(key) ?? 0) + unpromised,
            healedLate: healedLate.size,
        });
        if (bound !== undefined) {
            violations.push(`${context}: ${key} ${bound}`);
        }
        if (truth.counted !== truth.eventual) {
            violations.push(`${context}: ${key} eventual ${truth.eventual} != ${truth.counted} items counted`);
        }
        if (shards > 1) {
            // Each shard keeps the bound over the client's items homed there (late items left out, as above).
            const lateOnes = lateTokens.get(key) ?? new Set<string>();
            const unpromisedOnes = unpromisedTokens.get(key) ?? new Set<string>();
            const tokens = raw.clientTokens!;
            for (let shard = 0; shard < shards; shard++) {
                const problem = shardBoundProblem(history.mode, {
                    shard,
                    bestEffort: raw.shardBestEffort[shard]!,
                    clientLive: tokens[shard]!.filter((token) => !lateOnes.has(token)).length,
                    ended: ended.ofShard(key, shard),
                    movedIn: (movedInShards.get(key)?.[shard] ?? 0) + tokens[shard]!.filter((token) => unpromisedOnes.has(token)).length,
                    healedLate: [...healedLate].filter((token) => lifeShard(token, shards) === shard).length,
                });
                if (problem !== undefined) {
                    violations.push(`${context}: ${key} ${problem}`);
                }
            }
        }
        return { ...raw, late };
    };

    const runEvent = async (event: FuzzEvent, index: number): Promise<void> => {
        const label = `#${index} ${JSON.stringify(event)}`;
        switch (event.op) {
            case "consume":
                return mapping.consume(event, consumer);
            case "redrive":
                return mapping.redrive(redrive, fatalMessages);
            case "reconcile": {
                // As a settler run's: it throws only after a fault met one of its requests (a request a busy settler run's
                // move left waiting past its lifetime among them: DynamoDB refuses its signature, and it is not retried).
                const task = scheduler.current()!;
                try {
                    await reconcileKey(event.key, { config: system.config, dynamodb: pipelineDynamo, fatal, sink, timeoutMs: 600_000 });
                } catch (error) {
                    if ((faultsByTask.get(task.id) ?? 0) === 0) {
                        violations.push(`${label}: threw ${describe(error)} although none of its requests met a fault`);
                    }
                }
                return;
            }
            case "invalid":
                return checkInvalid(event, label);
            case "otherRetoken":
                otherTasks.add(scheduler.current()!.id);
                otherWritesFailed += (await retokenWrite(otherDynamo, system, event)) ? 0 : 1;
                return;
            case "otherPut":
            case "otherDelete":
            case "otherFlip":
            case "ttlDelete": {
                otherTasks.add(scheduler.current()!.id);
                if (!(await otherWrite(otherDynamo, system, event))) {
                    otherWritesFailed++;
                }
                return;
            }
            case "backfill":
                return runBackfill(event.runId, event.pageSize, label);
            case "land":
                // Not awaited: the held attempts are tasks of their own calls, released by the schedule.
                void landHeld();
                return;
            case "settle":
                return runSettle(event, label);
            default:
                return runCall(event, label);
        }
    };

    const healOptions = { config: system.config, dynamodb: settlerDynamo, mode: history.mode, quietWindowMs: FUZZ_QUIET_WINDOW_MS };

    const runSettle = async (event: Extract<FuzzEvent, { op: "settle" }>, label: string): Promise<void> => {
        const task = scheduler.current()!;
        settleTotals.runs++;
        // A heal counts a late put's item as live until the consumer has read its record and removed it (docs/limits.md):
        // the consumer reads first, as it does within its lag, far inside the window the clock moves by.
        for (let round = 0; round < 10; round++) {
            let late = 0;
            for (const key of keys) {
                late += await lateItems(reader, system, key, lateTokens.get(key));
            }
            if (late === 0) {
                break;
            }
            await mapping.consume({ op: "consume", max: 100, overlap: 0, crash: "none" }, consumer);
        }
        // What is left (a record in the first DLQ, an attribute selection) the heal may count.
        for (const key of keys) {
            const allowed = lateAHealMayCount.get(key) ?? new Set<string>();
            for (const token of await lateItemsAHealMayCount(reader, system, key, lateTokens.get(key))) {
                latePutsAHealMayCount += allowed.has(token) ? 0 : 1;
                allowed.add(token);
            }
            lateAHealMayCount.set(key, allowed);
        }
        // Every write of a call that began before this move has landed or never will: either no call is in flight (the
        // schedule waited for that), or (a busy run) the move takes the calls in flight past their deadline, so they send
        // nothing more, and the requests they sent reach DynamoDB more than a request's lifetime after they were signed,
        // so it refuses them (scheduler.ts). A4 (the window longer than both) is what the move relies on.
        time.advance(FUZZ_QUIET_WINDOW_MS + 1_000);
        try {
            const settledAfter: string[] = [];
            const report = await settle({
                ...healOptions,
                fatal,
                sink,
                keyBudget: event.keyBudget,
                auditSegments: event.auditSegments,
                auditPageSize: 3,
                concurrency: 2,
                ...(options.settlerHealsFirst
                    ? {
                          settleKey: async (key: string) => {
                              settledAfter.push(key);
                              return { key, found: 0, counted: 0, alreadySettled: 0, incomplete: false };
                          },
                      }
                    : {}),
            });
            for (const key of settledAfter) {
                await reconcileKey(key, { config: system.config, dynamodb: settlerDynamo, fatal, sink });
            }
            settleTotals.healed += report.healed;
        } catch (error) {
            // The contract: a run throws only when the heal index or the audit cursor cannot be read at all.
            if ((faultsByTask.get(task.id) ?? 0) === 0) {
                violations.push(`${label}: threw ${describe(error)} although none of its requests met a fault`);
            }
        }
    };

    const checkInvalid = async (event: Extract<FuzzEvent, { op: "invalid" }>, label: string): Promise<void> => {
        const key = event.field === "key" ? "" : event.key;
        // A bad id: empty, or (for a create) one byte longer than the marker's key allows, under the selection's prefix.
        const tooLong = ID_PREFIX + "x".repeat(markerIdMaxBytes(system.config) + 1 - ID_PREFIX.length);
        const id = event.field !== "id" ? "i0" : event.call === "create" || event.call === "tryCreate" ? tooLong : "";
        const limit = event.field === "limit" ? -1 : (history.limits[event.key] ?? 1);
        // Bad attributes: a reserved name, or (tooBig) one byte past the largest item the client accepts.
        const attributes =
            event.field !== "attributes"
                ? undefined
                : event.tooBig
                  ? bigAttributes(system.config, key, id, 1)
                  : { [system.config.sortKey]: "x" };
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

    const runBackfill = async (runId: string, pageSize: number, label: string): Promise<void> => {
        const task = scheduler.current()!;
        backfillTotals.calls++;
        try {
            const report = await backfill({
                config: system.config,
                dynamodb: backfillDynamo,
                mode: history.mode,
                runId,
                segments: segmentsOf(runId),
                pageSize,
                readUnitsPerSecond: Infinity,
                writeUnitsPerSecond: Infinity,
                clock: { now: () => Date.now(), sleep },
            });
            backfillTotals.counted += report.thisCall.counted;
            backfillTotals.alreadyCounted += report.thisCall.alreadyCounted;
        } catch (error) {
            // The contract: BackfillError when it cannot go on (retries exhausted); its checkpoints stay valid.
            if (!(error instanceof BackfillError)) {
                violations.push(`${label}: threw ${describe(error)}, which is not in the contract`);
            } else if ((faultsByTask.get(task.id) ?? 0) === 0) {
                violations.push(`${label}: threw ${describe(error)} although none of its requests met a fault`);
            }
        }
    };

    const runCall = async (event: Extract<FuzzEvent, { op: "create" | "tryCreate" | "delete" | "count" }>, label: string) => {
        const task = scheduler.current()!;
        const ledger = newLedger(event, ended.count);
        ledgers.set(task.id, ledger);
        limitsInForce.begin(event);
        if ((event.op === "create" || event.op === "tryCreate") && event.late) {
            lateTasks.add(task.id);
        }
        let answer: unknown;
        let thrown: unknown;
        const startedAt = Date.now();
        try {
            switch (event.op) {
                case "create":
                    answer = await client.create(
                        event.key,
                        event.id,
                        event.big ? bigAttributes(system.config, event.key, event.id) : undefined,
                    );
                    break;
                case "tryCreate":
                    answer = await client.tryCreate(
                        event.key,
                        event.id,
                        callLimit(history, event),
                        event.big ? bigAttributes(system.config, event.key, event.id) : undefined,
                    );
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
        for (const problem of callProblems(ledger, {
            answer,
            thrown,
            mode: history.mode,
            endedMine: ended.endedSince(ledger.tokens, ledger.endedBefore),
            // At most one: a delete reads one life, and a token counted as ended during the call is not counted again.
            endedBeforeMine: Math.min(
                1,
                ended.endedBy(
                    ledger.tokens.filter(
                        (token) => !ledger.softDeleted.includes(token) && ended.endedSince([token], ledger.endedBefore) === 0,
                    ),
                    ledger.endedBefore,
                ),
            ),
            deletedMine: new Set(ledger.tokens.filter((token) => softDeletedTokens.has(token))).size,
            elapsedMs: Date.now() - startedAt,
            deadlineMs: DEFAULT_DEADLINE_MS,
        })) {
            violations.push(`${label}: ${problem}`);
        }
    };

    /** Observes what a released request left behind, and checks a utilization tryCreate's allowance. */
    const account = async ({ request, effect }: { request: Released; effect: RequestEffect }): Promise<void> => {
        const ledger = ledgers.get(request.task.id);
        const context = `after ${request.task.label} ${request.command}${request.fault ? ` (${request.fault})` : ""}`;
        switch (effect.kind) {
            case "best-effort": {
                const truth = await observe(effect.key, context);
                if (ledger?.event.op === "tryCreate" && effect.applied && !replayedTransactions.has(request)) {
                    const problem = admissionProblem(history.mode, callLimit(history, ledger.event), effect.delta, truth);
                    if (problem !== undefined) {
                        violations.push(`${context}: ${effect.key} ${problem}`);
                    }
                }
                return;
            }
            case "best-effort-transaction":
            case "soft-delete":
            case "hard-delete":
            case "backfill-unit-taken":
            case "life-write":
            case "flip":
                await observe(effect.key, context);
                return;
            case "put": {
                if (!effect.applied) {
                    await observe(effect.key, context);
                    return;
                }
                putsApplied.set(effect.key, (putsApplied.get(effect.key) ?? 0) + 1);
                const truth = await observe(effect.key, context);
                const live = truth.live - truth.late;
                if (ledger?.read && ledger.event.op === "tryCreate" && history.mode === "utilization") {
                    const limit = callLimit(history, ledger.event);
                    const raced = putsApplied.get(effect.key)! - 1 - ledger.read.putsBefore;
                    const undercount = Math.max(0, ledger.read.live - ledger.read.value);
                    if (live > limit + raced + undercount) {
                        violations.push(
                            `${context}: tryCreate passed limit ${limit} to ${live} live; it read ${ledger.read.value} with ` +
                                `${ledger.read.live} live (undercount ${undercount}) and ${raced} creates raced it`,
                        );
                    }
                }
                return;
            }
            case "counter-read": {
                const truth = await observe(effect.key, context);
                if (ledger && effect.bestEffort !== undefined && effect.eventual !== undefined) {
                    // A read is one Query per shard, each released on its own (and a retry may read a shard again): its
                    // value is max(sum of best-effort, sum of eventual), each shard's lowest read (the read the call used
                    // is at least that), its live count the highest and its puts before the earliest: the loosest allowance.
                    const reads = (ledger.shardReads ??= new Map());
                    const seen = reads.get(effect.shard);
                    reads.set(effect.shard, {
                        bestEffort: Math.min(seen?.bestEffort ?? Infinity, effect.bestEffort),
                        eventual: Math.min(seen?.eventual ?? Infinity, effect.eventual),
                    });
                    const live = Math.max(ledger.firstRead?.live ?? 0, truth.live - truth.late);
                    const putsBefore = ledger.firstRead?.putsBefore ?? putsApplied.get(effect.key) ?? 0;
                    ledger.firstRead = { live, putsBefore };
                    if (reads.size === shards) {
                        const sum = (counter: "bestEffort" | "eventual") => [...reads.values()].reduce((n, read) => n + read[counter], 0);
                        ledger.read = { value: Math.max(sum("bestEffort"), sum("eventual")), live, putsBefore };
                    }
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

    /** Reads the records a write to the user's table made, before the clock moves: they carry its time (record-times.ts). */
    const stampRecords = async (request: Released): Promise<void> => {
        if (wroteTable(request, system.config.tableName)) {
            await mapping.refresh();
        }
    };

    // The schedule: start events (up to the concurrency) and release requests, both chosen by the seed.
    const startedAt = time.now();
    const running = new Set<Promise<void>>();
    let next = 0;
    for (;;) {
        await scheduler.quiescent();
        for (const request of released.splice(0)) {
            await stampRecords(request.request);
            await account(request);
        }
        // A timer that is due fires before anything else moves (the clock moved past it with the last release).
        if (scheduler.fireTimer(false)) {
            continue;
        }
        const pending = scheduler.pending;
        // A settler run waits until no API call is in flight (see "Time" at the top), held put attempts included:
        // they land first (within a request's lifetime, shorter than the window the run moves the clock by).
        const upcoming = history.events[next];
        const settling = upcoming?.op === "settle";
        if (settling && scheduler.heldCount > 0) {
            void landHeld();
        }
        // A busy run starts with calls in flight: the clock's move past the window ends them as A1 and A2 say.
        const waits = settling && (landing > 0 || (callsInFlight > 0 && upcoming.busy !== true));
        const canStart = next < history.events.length && running.size < history.concurrency && !waits;
        if (canStart && (pending.length === 0 || random() < 0.3)) {
            const index = next++;
            const event = history.events[index]!;
            settleTotals.busy += event.op === "settle" && callsInFlight > 0 ? 1 : 0;
            const call = CLIENT_CALLS.has(event.op);
            callsInFlight += call ? 1 : 0;
            startTracked(
                scheduler,
                running,
                `#${index} ${event.op}`,
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
        if (otherTasks.has(request.task.id)) {
            replacing.set(request.task.id, await EndedLives.before(reader, system, request));
        }
        if (request.command === "PutItemCommand" && lateTasks.delete(request.task.id)) {
            // The call's first put attempt: held past the call (history.ts, `late`).
            faults++;
            heldTotal++;
            heldInputs.add(request.input);
            scheduler.release(index, "late");
            continue;
        }
        const fault = drawFault(random, faultRate, request.command);
        faults += fault === undefined ? 0 : 1;
        scheduler.release(index, fault);
        if (next >= history.events.length && running.size === 0 && scheduler.pending.length === 0) {
            break;
        }
    }

    const eventsMs = Math.round(time.now() - startedAt);
    // Drain: no more faults; deliver everything, retry and redrive until nothing is left.
    faultRate = 0;
    const drain = async (work: () => Promise<void>, asTask = true) => {
        const done = asTask ? scheduler.spawn("drain", work) : work();
        for (;;) {
            await scheduler.quiescent();
            for (const request of released.splice(0)) {
                await stampRecords(request.request);
                await account(request);
            }
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
    // Every attempt still held lands now, within its lifetime (outside any task: they are their calls' own).
    await drain(landHeld, false);
    // The operator's step after attaching to a table in use: a backfill run to the end. It must count
    // the items that were there before (their records were never delivered) and nothing twice.
    await drain(() => runBackfill("after-drain", 25, "the backfill after the events"));
    for (let round = 0; round < 50 && !(await mapping.drained()); round++) {
        await drain(() => mapping.consume({ op: "consume", max: 100, overlap: 0, crash: "none" }, consumer));
        await drain(() => mapping.redrive(redrive, fatalMessages));
    }
    if (!(await mapping.drained())) {
        violations.push(`the stream did not drain: ${mapping.describe()}`);
    }
    // A fatal message needs an operator by contract: settle its keys as docs/operating.md tells them to.
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
        // A removed life stays removed: the consumer has read every late put's record and removed its item.
        if (truth.late !== 0) {
            violations.push(`after the drain: ${key} has ${truth.late} late put attempts that brought a removed life back`);
        }
    }
    // The settler's reconcile of every key (it runs on a schedule): an item that entered the selection already
    // soft-deleted (another writer moved it in) has no record the consumer acts on, and only reconcile purges it.
    if (!reconciledAfterDrain) {
        for (const key of keys) {
            await drain(async () => {
                await reconcileKey(key, { config: system.config, dynamodb: pipelineDynamo, fatal, sink, timeoutMs: 600_000 });
            });
        }
    }
    for (const key of keys) {
        const truth = await observe(key, "after the settler's reconcile");
        if (truth.eventual !== truth.live) {
            violations.push(`after the settler's reconcile: ${key} eventual ${truth.eventual} != live ${truth.live}`);
        }
        if (truth.softDeleted !== 0) {
            violations.push(`after the settler's reconcile: ${key} has ${truth.softDeleted} soft-deleted items left`);
        }
    }
    // A backfill run after the stream has drained (strict): every item without the client's token that is
    // live then gets its unit in best-effort, those the consumer counted included (its flag-only action).
    await drain(() => runBackfill("after-the-stream", 25, "the backfill after the stream drained"));
    if (history.mode === "strict") {
        for (const key of keys) {
            const { eventualOnly } = await liveByUnit(reader, system, key);
            if (eventualOnly !== 0) {
                violations.push(`after the last backfill: ${key} has ${eventualOnly} live items without the token and without a unit`);
            }
        }
    }
    // Every key quiet for the window, then healed (the operator's heal --key): best-effort is exact. Before it, the
    // heal index lists every key a heal would change, unless its mark could not be written (the audit reaches
    // those): whoever moved best-effort away from the items marked the key (runtime/shared/best-effort-marks.ts).
    time.advance(FUZZ_QUIET_WINDOW_MS + 1_000);
    // A sharded key's heal sets each shard to the items homed there: it changes the key when any shard is off.
    for (const key of keys) {
        const truth = await readTruth(reader, system, key);
        const off = offTarget(truth, await liveByUnit(reader, system, key), history.mode);
        if (off !== undefined && !unmarked.has(key) && !landedAfterSettle.has(key) && !(await listedForHeal(reader, system, key))) {
            violations.push(`before the final heal: ${key} ${off}, and the heal index does not list it`);
        }
    }
    for (const key of keys) {
        let outcome = "";
        await drain(async () => {
            const result = await healKey(key, healOptions);
            outcome = result.outcome === "skipped" ? `skipped (${result.reason})` : result.outcome;
        });
        const truth = await observe(key, "after the final heal");
        const off = offTarget(truth, await liveByUnit(reader, system, key), history.mode);
        if (off !== undefined) {
            violations.push(`after the final heal (${outcome}): ${key} ${off} live items it accounts for`);
        }
    }
    // Whatever an id's reuse, its marker stays within strict-ledger.ts's bound (marker-bound.ts).
    for (const key of keys) {
        violations.push(...(await markerBoundProblems(reader, system, key)).map((problem) => `at the end: ${problem}`));
    }
    for (const client of [reader, clientDynamo, pipelineDynamo, otherDynamo, backfillDynamo, settlerDynamo]) {
        client.destroy();
    }
    streams.destroy();
    return {
        violations,
        trace: trace.digest(),
        stats: {
            events: history.events.length,
            requests,
            faults,
            observations,
            deadLettered: mapping.deadLettered,
            fatal: fatalMessages.length,
            reconciledAfterDrain,
            otherWritesFailed,
            backfills: backfillTotals.calls,
            backfillCounted: backfillTotals.counted,
            backfillAlreadyCounted: backfillTotals.alreadyCounted,
            livesEnded: ended.count,
            settles: settleTotals.runs,
            healed: settleTotals.healed,
            busySettles: settleTotals.busy,
            expired: settleTotals.expired,
            held: heldTotal,
            latePutsBack: [...lateTokens.values(), ...unpromisedTokens.values()].reduce((n, tokens) => n + tokens.size, 0),
            latePutsAfterAnotherLife: [...unpromisedTokens.values()].reduce((n, tokens) => n + tokens.size, 0),
            latePutsAHealMayCount,
            ledgerUnsealed: ledgerAges.unsealed,
            ledgerSealed: ledgerAges.sealed,
            lives: appliedTokens.size,
            mostLivesOfOneId: Math.max(0, ...livesOfId.values()),
            eventsMs,
        },
    };
}

/**
 * How a key's best-effort is off what a heal would write (heal.ts), undefined when it is not: the sum against the live
 * items it accounts for, and for a sharded key each shard against the items homed there.
 */
function offTarget(truth: Truth, units: LiveByUnit, mode: History["mode"]): string | undefined {
    const target = healTarget(units, mode);
    if (truth.bestEffort !== target) {
        return `best-effort ${truth.bestEffort} != ${target}`;
    }
    if (truth.shardBestEffort.length > 1) {
        const off = units.shards.flatMap((homed, shard) => {
            const wanted = healTarget(homed, mode);
            return truth.shardBestEffort[shard] === wanted
                ? []
                : [`shard ${shard} best-effort ${truth.shardBestEffort[shard]} != ${wanted}`];
        });
        return off.length === 0 ? undefined : off.join(", ");
    }
    return undefined;
}

/**
 * Whether the heal index lists `key`: a best-effort item of one of its shards carries an entry (the settler maps a
 * shard's entry back to its key and heals every shard).
 */
async function listedForHeal(reader: DynamoDBClient, system: FuzzSystem, key: string): Promise<boolean> {
    const { config } = system;
    for (let shard = 0; shard < shardsOf(system); shard++) {
        const read = await reader.send(
            new GetItemCommand({
                TableName: countersTable(config),
                Key: { [config.partitionKey]: { S: shardPartitionKey(key, shard) }, [config.sortKey]: { S: bestEffortSortKey(config) } },
                ConsistentRead: true,
            }),
        );
        if (read.Item?.[COUNTER_ATTRIBUTES.healShard] !== undefined && read.Item?.[COUNTER_ATTRIBUTES.dueAt] !== undefined) {
            return true;
        }
    }
    return false;
}

/** Live items of `key` carrying one of `tokens`: late puts the consumer has not removed yet. */
async function lateItems(
    reader: DynamoDBClient,
    system: FuzzSystem,
    key: string,
    tokens: ReadonlySet<string> | undefined,
): Promise<number> {
    if (tokens === undefined || tokens.size === 0) {
        return 0;
    }
    const { config } = system;
    const items = await queryPartition(reader, { tableName: config.tableName, partitionKey: config.partitionKey, key });
    return items.filter((item) => isLive(item, config) && tokens.has(item[config.tokenAttribute]?.S ?? "")).length;
}

/** Run "b" scans in 3 segments, every other run in 1: a run keeps its segment count, as backfill requires. */
function segmentsOf(runId: string): number {
    return runId === "b" ? 3 : 1;
}

/** Writes the items the table held before the counter was attached: plain items, no client token. */
async function writePreexisting(reader: DynamoDBClient, system: FuzzSystem, history: History): Promise<void> {
    const { tableName, partitionKey, sortKey, selection } = system.config;
    const status: Record<string, AttributeValue> = selection.kind === "attribute" ? { [STATUS_ATTRIBUTE]: { S: ACTIVE } } : {};
    for (const { key, id } of history.preexisting ?? []) {
        await reader.send(
            new PutItemCommand({
                TableName: tableName,
                Item: { [partitionKey]: { S: key }, [sortKey]: { S: id }, ...status, source: { S: "before-the-counter" } },
            }),
        );
    }
}
