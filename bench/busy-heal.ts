/**
 * Busy keys and healing (`npm run bench -- --scenario busy-heal`, and the healing rows of `npm run bench`): what the
 * settler's heals cost per key and what becomes of held slots (strict) and undercounts (utilization) on keys that are
 * never quiet, while faults keep making them, with the settler running as deployed beside the traffic.
 *
 * Each row runs the system the component deploys (bench/system.ts) on fresh servers, in one mode at one shard count:
 * the client from its `clientConfig` output, the shipped consumer, redrive and settler with their environments, the
 * settler invoked on the component's schedule compressed by SETTLER_COMPRESSION (local/twin/settler.ts), with calls in
 * flight: nothing holds the traffic back for it. Each key first gets its history (bench/busy-heal-plan.ts: lives two
 * periods old), then is written without pause for `--seconds`, while
 * - calls die between their writes and strict deletes lose their release (local/harness/call-faults.ts, placed by
 *   bench/busy-heal-plan.ts), each one unit of drift, counted when it happens;
 * - another writer hard-deletes live client items (best-effort keeps their units until a heal).
 * An observer checks the mode's bound over and over (`busyBoundHolds`) and samples what the keys hold off their items.
 * The settler's client is metered per part of its runs (`settlerPart`): what the heals' own requests cost per key
 * healed, and what the whole runs cost. Then the traffic stops, the stream drains, and the row reads the keys once more
 * and checks that eventual is exact.
 */
import { DeleteItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { LocalDeployment } from "../local/deployment/deployment";
import { seededRandom } from "../local/engine/faults";
import { CallsInFlight } from "../local/harness/calls";
import { CallFaults } from "../local/harness/call-faults";
import { snapshotKey } from "../local/harness/observe";
import { healFigures, scheduleRuns, SETTLER_COMPRESSION, settlerPeriodMs } from "../local/twin/settler";
import { HybridCounterClient, type CounterMode } from "../runtime/client/client";
import type { SettleReport } from "../runtime/heal/settle";
import { componentArgs } from "./hot-key-ceiling";
import { meterUnits, unitsOf } from "./meters";
import { clockAhead, startBenchSystem, withServers, type BenchServers, type BenchSystem } from "./system";
import {
    BUSY_KEYS,
    DELETE_RATIO,
    HISTORY_ITEMS,
    OTHER_DELETE_EVERY_MS,
    SAMPLE_EVERY_MS,
    STRICT_LIMIT,
    WORKERS_PER_KEY,
    busyBoundHolds,
    busyHealRow,
    HEAL_PARTS,
    faultAfter,
    faultBefore,
    scheduledFault,
    settlerPart,
    type BusyHealOptions,
    type BusyHealRow,
    type BusyMeasured,
    type CallFault,
} from "./busy-heal-plan";

/** The pause between two observations of the bound while the traffic runs. */
const OBSERVE_EVERY_MS = 50;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Layout = LocalDeployment["clientLayout"];

/** What a call of the scenario carries: the rules of busy-heal-plan.ts read its mode, operation and fault. */
export interface BusyCallFault {
    readonly mode: CounterMode;
    readonly operation: "create" | "delete";
    readonly fault: CallFault;
}

/**
 * The scenario's API client on `dynamodb`: the component's client (its `clientConfig`, as deployed), with the call
 * faults of busy-heal-plan.ts on its requests; `onDrift` hears each fault's drift when it happens.
 */
export function busyClient(
    deployment: LocalDeployment,
    dynamodb: DynamoDBClient,
    onDrift: (drift: number) => void,
): { faults: CallFaults<BusyCallFault>; counter: HybridCounterClient } {
    const faults = new CallFaults<BusyCallFault>(deployment.clientLayout, {
        decide: (call, request) => faultBefore({ ...call, ...call.fault }, request),
        after: (call, request) => faultAfter({ ...call, ...call.fault }, request),
        onDrift: (_key, drift) => onDrift(drift),
    });
    faults.attach(dynamodb);
    return { faults, counter: new HybridCounterClient({ ...deployment.clientConfig, dynamodb }) };
}

/**
 * Best-effort (every shard, consistent), then the live client items (a consistent Query of the user's partition):
 * local/harness/observe.ts reads them in that order.
 */
export async function readKey(reader: DynamoDBClient, layout: Layout, key: string): Promise<{ bestEffort: number; clientLive: number }> {
    const s = await snapshotKey(reader, layout, key);
    return { bestEffort: s.bestEffort, clientLive: s.clientLive };
}

/** One row's running state. */
interface BusyRun {
    readonly mode: CounterMode;
    readonly system: BenchSystem;
    readonly layout: Layout;
    readonly faults: CallFaults<BusyCallFault>;
    readonly tracked: ReturnType<CallsInFlight["wrap"]>;
    readonly calls: CallsInFlight;
    /** The observer's client, and another writer's: no faults. */
    readonly observer: DynamoDBClient;
    readonly writer: DynamoDBClient;
    readonly live: Map<string, string[]>;
    readonly otherDeletes: Map<string, number>;
    readonly figures: { driftMade: number; apiErrors: number; boundViolations: number; errorsByName: Record<string, number> };
    done: boolean;
}

async function startRun(servers: BenchServers, mode: CounterMode, shards: number, name: string): Promise<BusyRun> {
    const system = await startBenchSystem(servers, name, { args: componentArgs(mode, shards) });
    const layout = system.deployment.clientLayout;
    if (layout.countersTableName === layout.tableName) {
        throw new Error("the busy-key scenario reads the counters table apart from the user's table");
    }
    const figures = { driftMade: 0, apiErrors: 0, boundViolations: 0, errorsByName: {} as Record<string, number> };
    const { faults, counter } = busyClient(system.deployment, system.api, (drift) => (figures.driftMade += drift));
    const calls = new CallsInFlight();
    return {
        mode,
        system,
        layout,
        faults,
        tracked: calls.wrap(counter),
        calls,
        observer: servers.engine.dynamodb(),
        writer: servers.engine.dynamodb(),
        live: new Map(BUSY_KEYS.map((k) => [k, []])),
        otherDeletes: new Map(BUSY_KEYS.map((k) => [k, 0])),
        figures,
        done: false,
    };
}

/** Creates a key's items through the API's client, without faults; the ids created join the key's live ids. */
async function createItems(run: BusyRun, key: string, ids: readonly string[]): Promise<void> {
    for (const id of ids) {
        const created =
            run.mode === "strict"
                ? (await run.tracked.tryCreate(key, id, STRICT_LIMIT, { payload: "x" })).created
                : (await run.tracked.create(key, id, { payload: "x" })).created;
        if (created) {
            run.live.get(key)!.push(id);
        }
    }
}

/** One caller of `key` in a closed loop until the run is done: creates and deletes, each with its scheduled fault. */
async function worker(run: BusyRun, key: string, seed: number): Promise<void> {
    const random = seededRandom(seed);
    const { mode, tracked, faults } = run;
    let creates = 0;
    let deletes = 0;
    while (!run.done) {
        const ids = run.live.get(key)!;
        if (ids.length > 0 && random() < DELETE_RATIO) {
            const id = ids.splice(Math.floor(random() * ids.length), 1)[0]!;
            const fault = scheduledFault(mode, "delete", deletes++);
            surfaced(run, await faults.run({ mode, operation: "delete", fault }, () => tracked.delete(key, id)));
        } else {
            const id = `${key}-${seed}-${creates}`;
            const fault = scheduledFault(mode, "create", creates++);
            const out = await faults.run({ mode, operation: "create", fault }, async () =>
                mode === "strict"
                    ? (await tracked.tryCreate(key, id, STRICT_LIMIT, { payload: "x" })).created
                    : (await tracked.create(key, id, { payload: "x" })).created,
            );
            surfaced(run, out);
            if (!out.dead && out.result === true) {
                ids.push(id);
            }
        }
    }
}

/** Counts an error the client surfaced to a caller whose process did not die. */
function surfaced(run: BusyRun, out: { dead: boolean; error?: unknown }): void {
    if (!out.dead && out.error !== undefined) {
        run.figures.apiErrors++;
        const name = out.error instanceof Error ? out.error.name : "non-Error";
        run.figures.errorsByName[name] = (run.figures.errorsByName[name] ?? 0) + 1;
    }
}

/** Another writer: hard-deletes a live client item (one whose creating call returned) of each key in turn. */
async function otherWriter(run: BusyRun, seed: number): Promise<void> {
    const random = seededRandom(seed);
    const { layout } = run;
    for (let turn = 0; !run.done; turn++) {
        await sleep(OTHER_DELETE_EVERY_MS);
        const key = BUSY_KEYS[turn % BUSY_KEYS.length]!;
        const ids = run.live.get(key)!;
        if (ids.length === 0 || run.done) {
            continue;
        }
        const id = ids.splice(Math.floor(random() * ids.length), 1)[0]!;
        run.otherDeletes.set(key, run.otherDeletes.get(key)! + 1);
        await run.writer
            .send(
                new DeleteItemCommand({
                    TableName: layout.tableName,
                    Key: { [layout.partitionKey]: { S: key }, [layout.sortKey]: { S: id } },
                    ConditionExpression: "attribute_exists(#token) AND NOT #deleted = :true",
                    ExpressionAttributeNames: { "#token": layout.tokenAttribute, "#deleted": layout.deletedAttribute },
                    ExpressionAttributeValues: { ":true": { BOOL: true } },
                }),
            )
            // Not live any more: nothing removed.
            .catch(() => undefined);
    }
}

/** Reads a key, checks the mode's bound on what it read, and returns best-effort's distance below and above its items. */
async function observe(run: BusyRun, key: string): Promise<{ under: number; over: number }> {
    const during = run.calls.window(key);
    const others = run.otherDeletes.get(key)!;
    const read = await readKey(run.observer, run.layout, key);
    if (!busyBoundHolds(run.mode, { ...read, ...during(), otherDeletes: others }, STRICT_LIMIT)) {
        run.figures.boundViolations++;
    }
    return { under: Math.max(0, read.clientLive - read.bestEffort), over: Math.max(0, read.bestEffort - read.clientLive) };
}

/** Σ over the keys of what the mode reports: held slots (strict) or the undercount (utilization); and the overcount. */
async function offOverKeys(run: BusyRun): Promise<{ off: number; over: number }> {
    let off = 0;
    let over = 0;
    for (const key of BUSY_KEYS) {
        const o = await observe(run, key);
        off += run.mode === "strict" ? o.over : o.under;
        over += o.over;
    }
    return { off, over };
}

/** The observer's loop: the bound, over and over, about 20 times a second, light on the engine the traffic shares. */
async function observing(run: BusyRun): Promise<void> {
    for (let i = 0; !run.done; i++) {
        await observe(run, BUSY_KEYS[i % BUSY_KEYS.length]!);
        await sleep(OBSERVE_EVERY_MS);
    }
}

/** Each key's history: HISTORY_ITEMS lives, drained into eventual, then made two periods old by moving the clock. */
async function writeHistory(run: BusyRun): Promise<() => void> {
    await Promise.all(
        BUSY_KEYS.map((key) =>
            createItems(
                run,
                key,
                Array.from({ length: HISTORY_ITEMS }, (_, i) => `${key}-history-${i}`),
            ),
        ),
    );
    await run.system.pipeline.drain();
    return clockAhead(2 * run.layout.periodMs);
}

/** The traffic, the settler, the observer and the consumer, for `seconds`; the samples taken meanwhile. */
async function traffic(run: BusyRun, options: BusyHealOptions, log: (line: string) => void, label: string) {
    const { pipeline, deployment } = run.system;
    const settler = pipeline.settler;
    const periodMs = settlerPeriodMs(deployment.system, SETTLER_COMPRESSION);
    if (settler === undefined || periodMs === undefined) {
        throw new Error("the component deployed no settler");
    }
    const reports: SettleReport[] = [];
    let runsWithCallsInFlight = 0;
    const loops = [
        pipeline.runUntil(() => run.done),
        scheduleRuns(
            periodMs,
            () => ((runsWithCallsInFlight += run.calls.inFlight > 0 ? 1 : 0), settler()),
            () => run.done,
            reports,
        ),
        observing(run),
        otherWriter(run, options.seed + 7),
        ...BUSY_KEYS.flatMap((key, k) =>
            Array.from({ length: WORKERS_PER_KEY }, (_, w) => worker(run, key, options.seed * 1_000 + k * 100 + w)),
        ),
    ];
    const samples: number[] = [];
    const started = Date.now();
    for (let at = SAMPLE_EVERY_MS; at <= options.seconds * 1000; at += SAMPLE_EVERY_MS) {
        await sleep(Math.max(0, started + at - Date.now()));
        samples.push((await offOverKeys(run)).off);
        log(
            `  busy-heal ${label}: ${at / 1000} s, ${reports.length} settler runs, ${run.mode === "strict" ? "held slots" : "undercount"} ${samples.at(-1)}`,
        );
    }
    await sleep(Math.max(0, started + options.seconds * 1000 - Date.now()));
    run.done = true;
    await Promise.all(loops);
    return { samples, reports, runsWithCallsInFlight };
}

let rowsRun = 0;

/** One row: fresh servers and deployment, the history, `seconds` of busy traffic with faults, the drain, the checks. */
export async function measureBusyRow(
    mode: CounterMode,
    shards: number,
    options: BusyHealOptions,
    log: (line: string) => void,
): Promise<BusyHealRow> {
    return withServers({}, async (servers) => {
        const run = await startRun(servers, mode, shards, `busy${++rowsRun}`);
        let restoreClock = () => undefined as void;
        try {
            restoreClock = await writeHistory(run);
            const meter = meterUnits(run.system.pipeline.clients.settler!, (command, input) =>
                settlerPart({ command, input: input as Parameters<typeof settlerPart>[0]["input"] }, run.layout),
            );
            const label = `${mode} ${shards} shard(s)`;
            const { samples, reports, runsWithCallsInFlight } = await traffic(run, options, log, label);
            await run.system.pipeline.drain();
            const end = await offOverKeys(run);
            let exact = true;
            for (const key of BUSY_KEYS) {
                const s = await snapshotKey(run.observer, run.layout, key);
                exact &&= s.eventual === s.live;
            }
            if (run.figures.apiErrors > 0) {
                log(`  busy-heal ${label}: API errors by name: ${JSON.stringify(run.figures.errorsByName)}`);
            }
            const heals = healFigures(reports, runsWithCallsInFlight);
            return busyHealRow(mode, shards, {
                seconds: options.seconds,
                samples,
                end,
                settler: { runs: heals.runs, runsWithCallsInFlight, healed: heals.healed, drift: heals.drift },
                units: {
                    heal: unitsOf(meter, HEAL_PARTS),
                    parts: Object.fromEntries(
                        HEAL_PARTS.map((part) => [part, unitsOf(meter, [part])]),
                    ) as unknown as BusyMeasured["units"]["parts"],
                    run: unitsOf(meter),
                },
                driftMade: run.figures.driftMade,
                otherDeletes: [...run.otherDeletes.values()].reduce((a, b) => a + b, 0),
                boundViolations: run.figures.boundViolations,
                apiErrors: run.figures.apiErrors,
                exact,
            });
        } finally {
            restoreClock();
            run.observer.destroy();
            run.writer.destroy();
            run.system.close();
        }
    });
}

/** Every mode at every shard count, one row each. */
export async function runBusyHeal(options: BusyHealOptions, log: (line: string) => void): Promise<{ rows: BusyHealRow[] }> {
    const rows: BusyHealRow[] = [];
    for (const mode of options.modes) {
        for (const shards of options.shards) {
            rows.push(await measureBusyRow(mode, shards, options, log));
        }
    }
    return { rows };
}
