/**
 * The performance envelope (`npm run bench -- --sweep`): lag against offered load, consumer cost
 * against key spread for two batch sizes with and without a batching window, and the consumer's
 * sustainable rate. Each point runs on a fresh deployment of the component (bench/system.ts) beside a
 * yardstick measured on the same engine just before it (raw PutItem/s), so every figure reads as a ratio
 * within one run. Writes sweep.json and SVG charts to `--out`.
 */
import { DeleteTableCommand, PutItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { HybridCounterComponent } from "../components/component";
import { snapshotKey } from "../local/harness/observe";
import { runProgramWithResult } from "../local/deployment/pulumi-mocks";
import { describeDeployedSystem } from "../local/deployment/system";
import { execFileSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { createCounterTable } from "../local/engine/table";
import { runWorkload, type WorkloadTarget } from "../local/harness/workload";
import { consumerUnits, r2, startBenchSystem, withServers, type BenchServers, type BenchSystem } from "./system";
import {
    parseSweepArgs,
    planSweep,
    sweepCharts,
    SWEEP_USAGE,
    SweepUsageError,
    type PointResult,
    type SweepOptions,
    type SweepPoint,
} from "./sweep-plan";

/** Operations of each yardstick: enough to steady the rate, short beside the point it measures. */
const YARDSTICK_OPS = 400;
const YARDSTICK_CONCURRENCY = 8;
/** Callers the paced workload may hold open at once; an offered load past the engine's reach saturates them. */
const PACED_CONCURRENCY = 32;

let tables = 0;

async function yardstick(client: DynamoDBClient, ops: number, send: (tableName: string, i: number) => Promise<unknown>): Promise<number> {
    const tableName = `sweep-yardstick-${++tables}`;
    await createCounterTable(client, tableName);
    let next = 0;
    const started = Date.now();
    await Promise.all(
        Array.from({ length: YARDSTICK_CONCURRENCY }, async () => {
            while (next < ops) {
                await send(tableName, next++);
            }
        }),
    );
    const rate = ops / ((Date.now() - started) / 1000);
    await client.send(new DeleteTableCommand({ TableName: tableName }));
    return rate;
}

const rawPut = (client: DynamoDBClient, ops: number) =>
    yardstick(client, ops, (TableName, i) =>
        client.send(new PutItemCommand({ TableName, Item: { pk: { S: `k${i % 8}` }, sk: { S: `r${i}` }, payload: { S: "x" } } })),
    );

/** Spaces the calls `perSecond` apart, whoever makes them: an offered load, not a closed loop. */
export function paced(target: WorkloadTarget, perSecond: number): WorkloadTarget {
    let nextSlot = Date.now();
    const slot = async () => {
        const at = Math.max(nextSlot, Date.now());
        nextSlot = at + 1000 / perSecond;
        const wait = at - Date.now();
        if (wait > 0) {
            await new Promise((r) => setTimeout(r, wait));
        }
    };
    return {
        create: async (...a) => (await slot(), target.create(...a)),
        delete: async (...a) => (await slot(), target.delete(...a)),
        tryCreate: async (...a) => (await slot(), target.tryCreate(...a)),
    };
}

/** Measures one point on a fresh deployment, beside its own yardstick of `yardstickOps` operations. */
export async function measurePoint(
    servers: BenchServers,
    point: SweepPoint,
    options: SweepOptions,
    yardstickOps = YARDSTICK_OPS,
): Promise<PointResult> {
    const yardstickClient = servers.engine.dynamodb();
    const rawPutPerSec = await rawPut(yardstickClient, yardstickOps).finally(() => yardstickClient.destroy());
    // The system the component deploys; the point replaces the mapping's batch size and batching window, nothing else.
    const system = await startBenchSystem(servers, `sweep-${++tables}`, {
        batching: { batchSize: point.batchSize, maximumBatchingWindowInSeconds: point.windowSeconds },
        ...(options.faults > 0 ? { faults: { rate: options.faults, seed: options.seed } } : {}),
    });
    try {
        const keys = Array.from({ length: point.keys }, (_, i) => `k${String(i).padStart(4, "0")}`);
        const measured =
            point.kind === "throughput"
                ? await drainBacklog(system, keys, options)
                : await offerLoad(system, point, keys, options, rawPutPerSec);
        const layout = system.deployment.clientLayout;
        let exact = true;
        for (const key of keys) {
            const s = await snapshotKey(system.admin, layout, key);
            exact &&= s.eventual === s.live;
        }
        // DynamoDB Local slows as data accumulates: the next point starts from an engine holding no other deployment.
        for (const table of new Set([layout.tableName, layout.countersTableName])) {
            await system.admin.send(new DeleteTableCommand({ TableName: table }));
        }
        const { lag, pipeline } = system;
        const b = lag.breakdown();
        const st = pipeline.emulator.stats;
        return {
            point,
            rawPutPerSec: Math.round(rawPutPerSec),
            offeredOpsPerSec: measured.offered === null ? null : r2(measured.offered),
            achievedOpsPerSec: r2(measured.achieved),
            achievedRatio: r3(measured.achieved / rawPutPerSec),
            ops: measured.ops,
            recordsCounted: lag.counted,
            invocations: st.invocations,
            recordsPerInvocation: r2(st.recordsDelivered / Math.max(1, st.invocations)),
            consumerWcuPerRecord: r2(consumerUnits(system) / Math.max(1, lag.counted)),
            lagMs: { total: b.total, stream: b.stream, pipeline: b.pipeline },
            consumerRecordsPerSec: measured.consumerRecordsPerSec === null ? null : r2(measured.consumerRecordsPerSec),
            consumerRatioToRawPut: measured.consumerRecordsPerSec === null ? null : r3(measured.consumerRecordsPerSec / rawPutPerSec),
            exact,
        };
    } finally {
        system.close();
    }
}

const r3 = (n: number) => Math.round(n * 1000) / 1000;

interface Measured {
    readonly offered: number | null;
    readonly achieved: number;
    readonly ops: number;
    readonly consumerRecordsPerSec: number | null;
}

function lagOf(system: BenchSystem) {
    return (r: { events: Array<{ key: string; id: string; at: number; delta: 1 | -1 }> }) => {
        const e = r.events.at(-1);
        if (e) {
            system.lag.wrote(e);
        }
    };
}

/** A throughput point: the backlog written with the consumer stopped; then the consumer alone drains it. */
async function drainBacklog(system: BenchSystem, keys: string[], options: SweepOptions): Promise<Measured> {
    const started = Date.now();
    const workload = await runWorkload(
        system.client,
        { ops: options.backlog, keys, concurrency: 16, deleteRatio: 0.3, seed: options.seed },
        lagOf(system),
    );
    const achieved = workload.ops / ((Date.now() - started) / 1000);
    // The consumer drains it as Lambda would, reading while it invokes; then the last pages settle.
    const expected = workload.events.length;
    const drainStarted = Date.now();
    await system.pipeline.runUntil(() => system.lag.counted >= expected || Date.now() - drainStarted > 600_000);
    const consumerRecordsPerSec = system.lag.counted / ((Date.now() - drainStarted) / 1000);
    await system.pipeline.drain();
    return { offered: null, achieved, ops: workload.ops, consumerRecordsPerSec };
}

/** A load or spread point: an offered load, paced, with the consumer beside it. */
async function offerLoad(
    system: BenchSystem,
    point: SweepPoint,
    keys: string[],
    options: SweepOptions,
    rawPutPerSec: number,
): Promise<Measured> {
    const offered = (point as { load: number }).load * rawPutPerSec;
    let apiDone = false;
    const consuming = system.pipeline.runUntil(() => apiDone);
    const started = Date.now();
    const deadline = started + options.seconds * 1000;
    const workload = await runWorkload(
        paced(system.client, offered),
        {
            ops: Number.MAX_SAFE_INTEGER,
            keys,
            concurrency: PACED_CONCURRENCY,
            deleteRatio: 0.3,
            seed: options.seed,
            hotKeyShare: point.kind === "load" ? 1 : 0,
            stop: () => Date.now() >= deadline,
        },
        lagOf(system),
    ).finally(() => (apiDone = true));
    const achieved = workload.ops / ((Date.now() - started) / 1000);
    await consuming;
    await system.pipeline.drain();
    return { offered, achieved, ops: workload.ops, consumerRecordsPerSec: null };
}

function describePoint(p: SweepPoint): string {
    const batching = `batch ${p.batchSize}, window ${p.windowSeconds} s`;
    return p.kind === "throughput" ? `throughput ${p.keys} keys, ${batching}` : `${p.kind} ${p.load} x raw, ${p.keys} keys, ${batching}`;
}

/** The commit the sweep measured, with " (modified)" when the tree differs from it; "unknown" outside a git checkout. */
function currentCommit(): string {
    try {
        const head = execFileSync("git", ["rev-parse", "HEAD"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
        const dirty = execFileSync("git", ["status", "--porcelain"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
        return dirty.length > 0 ? `${head} (modified)` : head;
    } catch {
        return "unknown";
    }
}

const round2 = (n: number) => Math.round(n * 100) / 100;

export async function runSweep(argv: readonly string[]): Promise<void> {
    if (argv.includes("--help") || argv.includes("-h")) {
        process.stdout.write(SWEEP_USAGE);
        return;
    }
    const loadAtStart = loadavg().map(round2);
    let options: SweepOptions;
    try {
        options = parseSweepArgs(argv);
    } catch (error) {
        if (error instanceof SweepUsageError) {
            process.stderr.write(`error: ${error.message}\n`);
            process.exit(2);
        }
        throw error;
    }
    // Progress goes to stderr: the functions run in this process, and their stdout is muted while they run.
    const log = (line: string) => process.stderr.write(`${line}\n`);
    const result = (line: string) => (options.json ? process.stderr : process.stdout).write(`${line}\n`);
    if (options.render !== undefined) {
        const saved = JSON.parse(readFileSync(options.render, "utf8")) as { options: SweepOptions; points: PointResult[] };
        const out = path.resolve(argv.includes("--out") ? options.out : path.dirname(options.render));
        for (const [name, svg] of Object.entries(sweepCharts(saved.points, saved.options))) {
            writeFileSync(path.join(out, name), svg);
        }
        result(`charts redrawn from ${options.render} into ${out}`);
        return;
    }
    const run = await runProgramWithResult(() => new HybridCounterComponent("sweep", {}));
    const system = describeDeployedSystem(run.resources);
    const points = planSweep(options, {
        batchSize: system.streamMapping.batchSize,
        windowSeconds: system.streamMapping.maximumBatchingWindowInSeconds,
    });
    log(`sweep: ${points.length} points, ${options.seconds} s of offered load each; a fresh DynamoDB Local per curve`);
    const started = Date.now();
    const results: PointResult[] = [];
    // DynamoDB Local slows as a run accumulates data: each curve gets a fresh engine, each point a fresh table.
    for (const kind of ["load", "spread", "throughput"] as const) {
        await withServers({}, async (servers) => {
            for (const point of points.filter((p) => p.kind === kind)) {
                const result = await measurePoint(servers, point, options);
                results.push(result);
                log(
                    `  ${describePoint(point).padEnd(48)} ${result.achievedRatio.toFixed(3)} x raw put (${result.rawPutPerSec}/s), ` +
                        `lag p50/p99 ${result.lagMs.total.p50}/${result.lagMs.total.p99} ms (pipeline p99 ${result.lagMs.pipeline.p99}), ` +
                        `${result.consumerWcuPerRecord} WCU/record, ${result.recordsPerInvocation} records/invocation` +
                        (result.consumerRatioToRawPut === null ? "" : `, ${result.consumerRatioToRawPut} x raw PutItem`) +
                        (result.exact ? "" : ", NOT EXACT"),
                );
            }
        });
    }
    const report = {
        // Where and on what it ran: a figure means little without the machine's load and the code's commit.
        machine: { cores: cpus().length, loadAverageAtStart: loadAtStart, loadAverageAtEnd: loadavg().map(round2) },
        commit: currentCommit(),
        options: { ...options, out: undefined, json: undefined },
        defaults: { batchSize: system.streamMapping.batchSize, windowSeconds: system.streamMapping.maximumBatchingWindowInSeconds },
        seconds: Math.round((Date.now() - started) / 1000),
        points: results,
    };
    const out = path.resolve(options.out);
    mkdirSync(out, { recursive: true });
    writeFileSync(path.join(out, "sweep.json"), `${JSON.stringify(report, null, 2)}\n`);
    for (const [name, svg] of Object.entries(sweepCharts(results, options))) {
        writeFileSync(path.join(out, name), svg);
    }
    result(`sweep done in ${report.seconds} s: ${out}/sweep.json and ${Object.keys(sweepCharts([], options)).length} SVG charts`);
    if (options.json) {
        process.stdout.write(`${JSON.stringify(report)}\n`);
    }
}
