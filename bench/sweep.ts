/**
 * The performance envelope (`npm run bench -- --sweep`): lag against offered load, consumer cost
 * against key spread for two batch sizes with and without a batching window, and the consumer's
 * sustainable rate. Each point runs on a fresh table beside a yardstick measured on the same engine
 * just before it (raw PutItem/s; raw two-item transactions/s for the throughput points), so every
 * figure reads as a ratio within one run. Writes sweep.json and SVG charts to `--out`.
 */
import { shardCount } from "../runtime/shards/layout";
import { DeleteTableCommand, PutItemCommand, TransactWriteItemsCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { HybridCounterComponent } from "../components/component";
import { meterWrites } from "../local/engine/capacity";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { LagMeter } from "../local/harness/lag";
import { snapshotKey } from "../local/harness/observe";
import { runProgramWithResult } from "../local/deployment/pulumi-mocks";
import { describeDeployedSystem } from "../local/deployment/system";
import { deployLocally } from "../local/deployment/deployment";
import { startPipeline } from "../local/deployment/pipeline";
import { execFileSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { createCounterTable } from "../local/engine/table";
import { runWorkload, type WorkloadTarget } from "../local/harness/workload";
import { HybridCounterClient } from "../runtime/client/client";
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

const rawTransact = (client: DynamoDBClient, ops: number) =>
    yardstick(client, ops, (TableName, i) =>
        client.send(
            new TransactWriteItemsCommand({
                TransactItems: [
                    { Put: { TableName, Item: { pk: { S: `k${i % 8}` }, sk: { S: `r${i}` }, payload: { S: "x" } } } },
                    { Put: { TableName, Item: { pk: { S: `k${i % 8}` }, sk: { S: `s${i}` }, payload: { S: "x" } } } },
                ],
            }),
        ),
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

/** Measures one point on a fresh table, beside its own yardstick of `yardstickOps` operations. */
export async function measurePoint(
    engine: LocalEngine,
    point: SweepPoint,
    options: SweepOptions,
    yardstickOps = YARDSTICK_OPS,
): Promise<PointResult> {
    const admin = engine.dynamodb();
    const rawPutPerSec = await rawPut(admin, yardstickOps);
    const rawTransactPerSec = point.kind === "throughput" ? await rawTransact(admin, yardstickOps) : null;

    // The system the component deploys (tables, heal index, client, consumer and stream mapping), from its outputs;
    // the point replaces the mapping's batch size and batching window, nothing else.
    const deployment = await deployLocally(admin, `sweep-${++tables}`);
    const { clientLayout: layout } = deployment;
    const tableName = layout.tableName;
    const api = engine.dynamodb();
    const consumerDynamo = engine.dynamodb();
    const streams = engine.streams();
    const consumerMeter = meterWrites(consumerDynamo);
    if (options.faults > 0) {
        injectFaults(api, { rate: options.faults, random: seededRandom(options.seed + 1) });
        injectFaults(consumerDynamo, { rate: options.faults, random: seededRandom(options.seed + 2) });
    }
    const lag = new LagMeter(layout);
    lag.watchCommits(consumerDynamo);
    const { emulator } = startPipeline(
        deployment,
        { dynamodb: consumerDynamo, streams },
        {
            functionName: "sweep",
            metricsNamespace: "Sweep",
            batching: { batchSize: point.batchSize, maximumBatchingWindowInSeconds: point.windowSeconds },
            onRead: (record, at) => lag.read(record, at),
            onInvoked: (event, response) => lag.invoked(event, response),
        },
    );
    const client = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: api });
    const keys = Array.from({ length: point.keys }, (_, i) => `k${String(i).padStart(4, "0")}`);
    const onProgress = (r: { events: Array<{ key: string; id: string; at: number; delta: 1 | -1 }> }) => {
        const e = r.events.at(-1);
        if (e) {
            lag.wrote(e);
        }
    };
    let consumingUntil = () => false;
    const consume = async () => {
        while (!consumingUntil()) {
            const read = await emulator.poll();
            emulator.start();
            if (read === 0) {
                await new Promise((r) => setTimeout(r, 25));
            }
        }
        await emulator.settled();
    };

    let offeredOpsPerSec: number | null = null;
    let achievedOpsPerSec: number;
    let ops: number;
    let consumerRecordsPerSec: number | null = null;
    if (point.kind === "throughput") {
        // The backlog first, with the consumer stopped; then the consumer alone drains it.
        const started = Date.now();
        const workload = await runWorkload(
            client,
            { ops: options.backlog, keys, concurrency: 16, deleteRatio: 0.3, seed: options.seed },
            onProgress,
        );
        ops = workload.ops;
        achievedOpsPerSec = ops / ((Date.now() - started) / 1000);
        // The consumer drains it as Lambda would, reading while it invokes; then the last pages settle.
        const expected = workload.events.length;
        const drainStarted = Date.now();
        consumingUntil = () => lag.counted >= expected || Date.now() - drainStarted > 600_000;
        await consume();
        consumerRecordsPerSec = lag.counted / ((Date.now() - drainStarted) / 1000);
        await emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
    } else {
        offeredOpsPerSec = point.load * rawPutPerSec;
        let apiDone = false;
        consumingUntil = () => apiDone;
        const consuming = consume();
        const started = Date.now();
        const deadline = started + options.seconds * 1000;
        const workload = await runWorkload(
            paced(client, offeredOpsPerSec),
            {
                ops: Number.MAX_SAFE_INTEGER,
                keys,
                concurrency: PACED_CONCURRENCY,
                deleteRatio: 0.3,
                seed: options.seed,
                hotKeyShare: point.kind === "load" ? 1 : 0,
                stop: () => Date.now() >= deadline,
            },
            onProgress,
        ).finally(() => (apiDone = true));
        ops = workload.ops;
        achievedOpsPerSec = ops / ((Date.now() - started) / 1000);
        await consuming;
        await emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
    }

    let exact = true;
    for (const key of keys) {
        const s = await snapshotKey(admin, tableName, layout, key, layout.countersTableName, shardCount(layout));
        exact &&= s.eventual === s.live && s.softDeleted === 0;
    }
    for (const table of new Set([tableName, layout.countersTableName])) {
        await admin.send(new DeleteTableCommand({ TableName: table }));
    }
    for (const c of [admin, api, consumerDynamo, streams]) {
        c.destroy();
    }
    const b = lag.breakdown();
    const r2 = (n: number) => Math.round(n * 100) / 100;
    const r3 = (n: number) => Math.round(n * 1000) / 1000;
    return {
        point,
        rawPutPerSec: Math.round(rawPutPerSec),
        rawTransactPerSec: rawTransactPerSec === null ? null : Math.round(rawTransactPerSec),
        offeredOpsPerSec: offeredOpsPerSec === null ? null : r2(offeredOpsPerSec),
        achievedOpsPerSec: r2(achievedOpsPerSec),
        achievedRatio: r3(achievedOpsPerSec / rawPutPerSec),
        ops,
        recordsCounted: lag.counted,
        invocations: emulator.stats.invocations,
        recordsPerInvocation: r2(emulator.stats.recordsDelivered / Math.max(1, emulator.stats.invocations)),
        consumerWcuPerRecord: r2(consumerMeter.billed / Math.max(1, lag.counted)),
        lagMs: { total: b.total, stream: b.stream, pipeline: b.pipeline },
        consumerRecordsPerSec: consumerRecordsPerSec === null ? null : r2(consumerRecordsPerSec),
        consumerRatioToRawTransact:
            consumerRecordsPerSec === null || rawTransactPerSec === null ? null : r3(consumerRecordsPerSec / rawTransactPerSec),
        exact,
    };
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
    const log = (line: string) => (options.json ? process.stderr : process.stdout).write(`${line}\n`);
    if (options.render !== undefined) {
        const saved = JSON.parse(readFileSync(options.render, "utf8")) as { options: SweepOptions; points: PointResult[] };
        const out = path.resolve(argv.includes("--out") ? options.out : path.dirname(options.render));
        for (const [name, svg] of Object.entries(sweepCharts(saved.points, saved.options))) {
            writeFileSync(path.join(out, name), svg);
        }
        log(`charts redrawn from ${options.render} into ${out}`);
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
        const engine = await startEngine();
        try {
            for (const point of points.filter((p) => p.kind === kind)) {
                const result = await measurePoint(engine, point, options);
                results.push(result);
                log(
                    `  ${describePoint(point).padEnd(48)} ${result.achievedRatio.toFixed(3)} x raw put (${result.rawPutPerSec}/s), ` +
                        `lag p50/p99 ${result.lagMs.total.p50}/${result.lagMs.total.p99} ms (pipeline p99 ${result.lagMs.pipeline.p99}), ` +
                        `${result.consumerWcuPerRecord} WCU/record, ${result.recordsPerInvocation} records/invocation` +
                        (result.consumerRatioToRawTransact === null
                            ? ""
                            : `, ${result.consumerRatioToRawTransact} x raw 2-item transactions`) +
                        (result.exact ? "" : ", NOT EXACT"),
                );
            }
        } finally {
            await engine.stop();
        }
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
    log(`sweep done in ${report.seconds} s: ${out}/sweep.json and ${Object.keys(sweepCharts([], options)).length} SVG charts`);
    if (options.json) {
        process.stdout.write(`${JSON.stringify(report)}\n`);
    }
}
