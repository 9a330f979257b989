/**
 * The local twin's run: the system HybridCounterComponent deploys, on DynamoDB Local and the local SQS and SNS
 * server, driven by a workload.
 *
 * The component runs under Pulumi mocks and its tables are created as declared (local/deployment/deployment.ts); its
 * functions are the shipped bundles, each with its own environment, behind the mapping emulator (the stream mapping's
 * settings as declared), the first DLQ's mapping and the settler's schedule (local/deployment/pipeline.ts); threshold
 * events go to a topic on the local SNS server, whose SQS subscription the twin reads. The API's client is built from
 * the component's `clientConfig` output; every key's limit is stored before the workload, whose creates are tryCreate
 * without a limit. After the drain the twin reads the table's stream itself and replays it (local/harness/replay.ts):
 * every crossing must have reached the subscriber, and every key's usage must be what the stream says.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { HybridCounterComponentArgs } from "../../components/args";
import { HybridCounterClient } from "../../runtime/client/client";
import type { BackfillReport } from "../../runtime/backfill/backfill";
import type { SettleReport } from "../../runtime/heal/settle";
import type { UsageDay } from "../../runtime/limits/usage";
import { meterWrites, type CapacityMeter } from "../engine/capacity";
import { startEngine, type LocalEngine } from "../engine/engine";
import { injectFaults, seededRandom, type FaultStats } from "../engine/faults";
import { describeParity } from "../engine/parity";
import { startLocalSqs, type LocalSqs } from "../aws/sqs";
import { deployLocally, type LocalDeployment } from "../deployment/deployment";
import { startPipeline, type LocalPipeline } from "../deployment/pipeline";
import { CallsInFlight } from "../harness/calls";
import { LagMeter } from "../harness/lag";
import { snapshotKey, type KeySnapshot } from "../harness/observe";
import { readWholeStream, replayStream, thresholdFigures, usageFigures, type KeyReplay } from "../harness/replay";
import { runWorkload, type WorkloadResult } from "../harness/workload";
import { seedAndBackfill } from "./adopt";
import { API_ERRORS_LISTED, twinKeys, type TwinOptions } from "./options";
import { progressRenderer, TwinObserver } from "./observer";
import { endFigures, worstKeys, writeChart, type TwinReport } from "./report";
import { healFigures, scheduleRuns, SETTLER_COMPRESSION, settlerPeriodMs } from "./settler";
import { silencer } from "./silence";

/** The twin's component name: its tables, functions and schedule are named after it. */
export const TWIN_NAME = "twin";

/**
 * Deploys the component on the engine as every harness deploys it, with its threshold topic. The twin runs the
 * default placement and selection; `args` lets a test deploy another.
 */
export async function deployTwin(admin: DynamoDBClient, args: HybridCounterComponentArgs = {}): Promise<LocalDeployment> {
    return deployLocally(admin, TWIN_NAME, { createThresholdTopic: true, ...args });
}

/** What a twin run starts. */
interface TwinSystem {
    readonly engine: LocalEngine;
    readonly deployment: LocalDeployment;
    readonly pipeline: LocalPipeline;
    /** The API's client (faults injected on its DynamoDB client), and the operator's (none). */
    readonly client: HybridCounterClient;
    readonly operator: HybridCounterClient;
    readonly admin: DynamoDBClient;
    readonly lag: LagMeter;
    readonly meters: { readonly api: CapacityMeter; readonly consumer: CapacityMeter; readonly redrive: CapacityMeter };
    readonly faults: { readonly api?: FaultStats; readonly consumer: FaultStats[] };
    readonly backfill?: BackfillReport;
}

/** What the traffic phase leaves for the report. */
interface TwinTraffic {
    readonly keys: string[];
    readonly observer: TwinObserver;
    readonly workload: WorkloadResult;
    readonly settlerReports: SettleReport[];
    readonly runsWithCallsInFlight: number;
    readonly started: number;
    readonly apiDone: number;
    readonly interrupted: boolean;
}

export async function runTwin(
    options: TwinOptions,
    log: (line: string) => void,
    progress: NodeJS.WriteStream | null,
    stop?: AbortSignal,
): Promise<TwinReport> {
    const engine = await startEngine({ parity: options.parity });
    let sqs: LocalSqs | undefined;
    let system: TwinSystem | undefined;
    try {
        sqs = await startLocalSqs();
        system = await startTwinSystem(options, engine, sqs, log);
        const traffic = await driveTraffic(system, options, progress, stop);
        return await finish(system, traffic, options, log);
    } finally {
        system?.pipeline.close();
        system?.admin.destroy();
        await sqs?.stop();
        await engine.stop();
    }
}

async function startTwinSystem(options: TwinOptions, engine: LocalEngine, sqs: LocalSqs, log: (line: string) => void): Promise<TwinSystem> {
    const admin = engine.dynamodb();
    const deployment = await deployTwin(admin, {
        ...(options.mode === "strict" ? { counterMode: "strict" as const } : {}),
        ...(options.shards === undefined || options.shards === 1 ? {} : { counterShards: options.shards }),
    });
    const { system, clientLayout: config } = deployment;
    const m = system.streamMapping;
    log(
        `component: ${deployment.resources.length} resources; table ${system.table.name}, stream ${system.table.streamViewType}; counters table ${config.countersTableName}`,
    );
    log(
        `stream mapping: batch ${m.batchSize}, window ${m.maximumBatchingWindowInSeconds}s, tumbling window ${m.tumblingWindowInSeconds}s, parallelization ${m.parallelizationFactor}, ` +
            `retries ${m.maximumRetryAttempts}, max age ${m.maximumRecordAgeInSeconds}s, bisect ${m.bisectBatchOnFunctionError}, ${m.filterPatterns.length} filter patterns`,
    );
    const backfill =
        options.seedItems > 0 ? await seedAndBackfill(admin, config, { items: options.seedItems, keys: options.keys }, log) : undefined;
    const lag = new LagMeter(config);
    // Lambda logs go to CloudWatch; locally they would drown the report (silence.ts).
    const silence = silencer();
    const pipeline = await startPipeline(deployment, {
        sqs,
        streams: engine.streams(),
        functions: { kind: "bundles", dynamodbEndpoint: engine.endpoint },
        around: (invocation) => silence(invocation)(),
        onRead: (record, at) => lag.read(record, at),
        onInvoked: (event, response) => lag.invoked(event, response),
    });
    const apiDynamo = engine.dynamodb();
    const seeded = (n: number) => seededRandom(options.seed * 7 + n);
    const faults = {
        consumer:
            options.faults > 0
                ? [pipeline.clients.consumer, pipeline.clients.redrive].map((c, i) =>
                      injectFaults(c, { rate: options.faults, random: seeded(i + 1) }),
                  )
                : [],
        ...(options.faults > 0 ? { api: injectFaults(apiDynamo, { rate: options.faults, random: seeded(3) }) } : {}),
    };
    for (const client of [pipeline.clients.consumer, pipeline.clients.redrive]) {
        lag.watchCommits(client);
    }
    return {
        engine,
        deployment,
        pipeline,
        client: new HybridCounterClient({ ...deployment.clientConfig, dynamodb: apiDynamo }),
        operator: new HybridCounterClient({ ...deployment.clientConfig, dynamodb: admin }),
        admin,
        lag,
        meters: {
            api: meterWrites(apiDynamo),
            consumer: meterWrites(pipeline.clients.consumer),
            redrive: meterWrites(pipeline.clients.redrive),
        },
        faults,
        ...(backfill === undefined ? {} : { backfill }),
    };
}

/** The traffic: the workload, with the mapping, the redrive, the subscriber, the settler and the observer beside it. */
async function driveTraffic(
    system: TwinSystem,
    options: TwinOptions,
    progress: NodeJS.WriteStream | null,
    stop?: AbortSignal,
): Promise<TwinTraffic> {
    const { pipeline, deployment } = system;
    const keys = twinKeys(options.keys);
    for (const key of keys) {
        await system.operator.setLimit(key, options.limit);
    }
    const started = Date.now();
    const observer = new TwinObserver(system.admin, deployment.clientLayout, keys, options.mode, options.limit, started);
    const calls = new CallsInFlight();
    let done = false;
    let interrupted = false;
    stop?.addEventListener("abort", () => (interrupted = true));
    const consuming = pipeline.runUntil(() => done);
    const settlerReports: SettleReport[] = [];
    let runsWithCallsInFlight = 0;
    const periodMs = settlerPeriodMs(deployment.system, SETTLER_COMPRESSION);
    const settler = pipeline.settler;
    // Beside the API's calls, as the scheduled function runs in AWS: nothing waits for the keys to go quiet.
    const settling =
        settler === undefined || periodMs === undefined
            ? Promise.resolve()
            : scheduleRuns(
                  periodMs,
                  () => ((runsWithCallsInFlight += calls.inFlight > 0 ? 1 : 0), settler()),
                  () => done,
                  settlerReports,
              );
    const observing = observer.run(calls, () => done);
    const deadline = options.durationSeconds > 0 ? started + options.durationSeconds * 1000 : Infinity;
    let last: WorkloadResult | undefined;
    const render = progressRenderer(progress, observer, () => last, pipeline, system.lag);
    const ticker = setInterval(render, 1000);
    let workload: WorkloadResult;
    try {
        workload = await runWorkload(
            calls.wrap(system.client),
            {
                ops: options.durationSeconds > 0 ? Number.MAX_SAFE_INTEGER : options.ops,
                keys,
                concurrency: options.concurrency,
                deleteRatio: options.deleteRatio,
                limit: "stored",
                seed: options.seed,
                hotKeyShare: 1,
                stop: () => interrupted || Date.now() >= deadline,
            },
            (r) => {
                last = r;
                const e = r.events.at(-1);
                if (e) {
                    system.lag.wrote(e);
                }
            },
        );
    } finally {
        done = true;
    }
    const apiDone = Date.now();
    await Promise.all([consuming, observing, settling]);
    clearInterval(ticker);
    render(true);
    return { keys, observer, workload, settlerReports, runsWithCallsInFlight, started, apiDone, interrupted };
}

/** Drains, runs the settler once more, replays the stream, and builds the report. */
async function finish(system: TwinSystem, traffic: TwinTraffic, options: TwinOptions, log: (line: string) => void): Promise<TwinReport> {
    const { pipeline, deployment } = system;
    await pipeline.drain();
    if (pipeline.settler !== undefined) {
        // The schedule's next run, once the traffic is over; then what it wrote drains too.
        traffic.settlerReports.push(await pipeline.settler());
        await pipeline.drain();
    }
    await pipeline.thresholds?.receive();
    const consumerDone = Date.now();
    const st = pipeline.emulator.stats;
    log(
        `mapping: ${st.invocations} invocations, ${st.recordsDelivered} records delivered, ${st.recordsFiltered} filtered out, ${(st.invokeMs / 1000).toFixed(1)} s in the function`,
    );
    const last = new Map<string, KeySnapshot>();
    for (const key of traffic.keys) {
        const s = await snapshotKey(system.admin, deployment.clientLayout, key);
        last.set(key, s);
        traffic.observer.record(key, s);
    }
    const records = await readWholeStream(system.engine.streams(), deployment.streamArn);
    const replays = replayStream(records, deployment.clientLayout, () => options.limit, pipeline.config.thresholds);
    const usage = usageFigures(replays, await storedUsage(system.operator, replays));
    if (!usage.exact) {
        log(`usage differs from the stream's: ${JSON.stringify(usage.differing.slice(0, 3))}`);
    }
    const chartedKeys = worstKeys(traffic.keys, traffic.observer.samples, options.chartKeys);
    const chart = writeChart({
        file: options.chart,
        title: `hybrid-counter twin (${options.mode}, limit ${options.limit}, faults ${options.faults}): worst keys`,
        mode: options.mode,
        offOverTime: traffic.observer.offOverTime,
        keys: chartedKeys,
        samples: traffic.observer.samples,
        crossings: new Map([...replays].map(([key, r]) => [key, r.crossings])),
        started: traffic.started,
    });
    return assemble(system, traffic, options, {
        last,
        consumerDone,
        chart,
        chartedKeys,
        thresholds: thresholdFigures(replays, pipeline.thresholds?.received ?? []),
        usage: { days: usage.days, exact: usage.exact },
        fatal: await pipeline.depth(pipeline.queues.fatal),
    });
}

/** Every replayed key's usage as the consumer stored it, over the days the stream shows. */
async function storedUsage(operator: HybridCounterClient, replays: ReadonlyMap<string, KeyReplay>): Promise<Map<string, UsageDay[]>> {
    const days = [...replays.values()].flatMap((r) => r.usage.map((d) => d.day)).sort();
    const stored = new Map<string, UsageDay[]>();
    for (const key of replays.keys()) {
        stored.set(key, days.length === 0 ? [] : await operator.usage(key, { from: days[0]!, to: days.at(-1)! }));
    }
    return stored;
}

interface Measured {
    readonly last: ReadonlyMap<string, KeySnapshot>;
    readonly consumerDone: number;
    readonly chart: string;
    readonly chartedKeys: string[];
    readonly thresholds: TwinReport["thresholds"];
    readonly usage: TwinReport["usage"];
    readonly fatal: number;
}

function assemble(system: TwinSystem, traffic: TwinTraffic, options: TwinOptions, measured: Measured): TwinReport {
    const { workload, observer, started } = traffic;
    const { pipeline, meters, deployment } = system;
    const round2 = (n: number) => Math.round(n * 100) / 100;
    const injected = (s: FaultStats | undefined) => (s === undefined ? 0 : Object.values(s.injected).reduce((a, b) => a + b, 0));
    const st = pipeline.emulator.stats;
    const m = deployment.system.streamMapping;
    const strict = options.mode === "strict";
    return {
        ops: workload.ops,
        created: workload.created,
        deleted: workload.deleted,
        ...endFigures(traffic.keys, measured.last),
        overcountKeys: [...observer.overcountKeys].sort(),
        overcounts: observer.overcounts.slice(0, API_ERRORS_LISTED),
        deleteRaces: observer.deleteRaces,
        limitExceededKeys: [...observer.exceeded].sort(),
        apiErrors: workload.apiErrors.length,
        apiErrorList: workload.apiErrors.slice(0, API_ERRORS_LISTED),
        lagMs: system.lag.figures(),
        lagSplitMs: system.lag.split(st),
        streamReads: { iteratorsRenewed: st.iteratorsRenewed, errors: st.readErrors, lastError: st.lastReadError ?? null },
        opsPerSec: round2(workload.ops / ((traffic.apiDone - started) / 1000)),
        consumerRecordsPerSec: round2(system.lag.counted / ((measured.consumerDone - started) / 1000)),
        wcuPerOp: {
            api: round2(meters.api.billed / workload.ops),
            consumer: round2((meters.consumer.billed + meters.redrive.billed) / workload.ops),
        },
        engineReportedWcuPerOp: {
            api: round2(meters.api.reported / workload.ops),
            consumer: round2((meters.consumer.reported + meters.redrive.reported) / workload.ops),
        },
        dlq: { first: pipeline.counts.toFirstDlq, fatal: measured.fatal, redriven: pipeline.counts.redriven },
        mode: options.mode,
        limit: options.limit,
        keys: options.keys,
        faultRate: options.faults,
        faultsInjected: { api: injected(system.faults.api), consumer: system.faults.consumer.reduce((n, s) => n + injected(s), 0) },
        observations: observer.observations,
        durationMs: measured.consumerDone - started,
        chart: measured.chart,
        backfill: system.backfill ?? null,
        heals: healFigures(traffic.settlerReports, traffic.runsWithCallsInFlight),
        thresholds: measured.thresholds,
        usage: measured.usage,
        parity: describeParity(system.engine.parity),
        settings: {
            batchSize: m.batchSize,
            maximumRetryAttempts: m.maximumRetryAttempts,
            maximumRecordAgeInSeconds: m.maximumRecordAgeInSeconds,
            parallelizationFactor: m.parallelizationFactor,
            tumblingWindowInSeconds: m.tumblingWindowInSeconds,
        },
        heldSlotsOverTime: strict ? observer.offOverTime : null,
        bestEffortDriftOverTime: strict ? null : observer.offOverTime,
        chartedKeys: measured.chartedKeys,
        interrupted: traffic.interrupted,
    };
}
