/**
 * The local twin (`npm start`): runs the system HybridCounterComponent deploys on DynamoDB Local.
 *
 * The component runs under Pulumi mocks and its tables are created as declared, as every harness sets them
 * up (local/deployment/deployment.ts); the stream mapping's settings, the consumer's bundle, environment
 * and timeout, the queues and the redrive path are all read from the resources it registered. The bundled
 * handlers (the exact files `pulumi up` uploads) are invoked by the mapping emulator, which polls the
 * table's real stream. A workload drives HybridCounterClient, built from the component's `clientConfig`
 * output, and the twin reports what it measured. A client and a handler that disagree on a table or a
 * layout field are refused before anything runs.
 */
import { silencer } from "./silence";
import { shardCount } from "../../runtime/shards/layout";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { GetQueueAttributesCommand, SendMessageCommand } from "@aws-sdk/client-sqs";
import type { DynamoDBBatchResponse, DynamoDBStreamEvent, SQSBatchResponse, SQSEvent, Context } from "aws-lambda";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import type { HybridCounterComponentArgs } from "../../components/args";
import { HybridCounterComponent } from "../../components/component";
import { HybridCounterClient, type CounterMode, type HybridCounterClientOptions } from "../../runtime/client/client";
import { ENV } from "../../runtime/shared/config";
import { meterWrites, type CapacityMeter } from "../engine/capacity";
import { chartSvg, type Panel } from "./chart";
import { startEngine, type LocalEngine } from "../engine/engine";
import { injectFaults, seededRandom, type FaultStats } from "../engine/faults";
import { LagMeter, type LagSplit } from "../harness/lag";
import { describeParity } from "../engine/parity";
import { lambdaContext } from "../aws/lambda-context";
import { MappingEmulator } from "../aws/mapping-emulator";
import { assertHarnessAgrees, deployLocally, type LocalDeployment } from "../deployment/deployment";
import { pollQueueOnce, startLocalSqs, type LocalSqs } from "../aws/sqs";
import { CallsInFlight } from "../harness/calls";
import {
    COMPRESSED_CLIENT_DEADLINE_MS,
    SETTLER_COMPRESSION,
    assertCompressionCovers,
    scheduleRuns,
    twinSettlerSpec,
    type TwinSettlerSpec,
} from "./settler";
import type { SettleReport } from "../../runtime/heal/settle";
import { runWorkload, type WorkloadResult } from "../harness/workload";
import { snapshotKey, type KeySnapshot } from "../harness/observe";
import { seedAndBackfill } from "./adopt";
import { printRegionsReport, runRegionsTwin } from "./regions";
import { API_ERRORS_LISTED, type TwinWorkloadOptions } from "./options";
import { LOCAL_REGIONS } from "../regions/deployment";
import type { BackfillReport } from "../../runtime/backfill/backfill";

export interface TwinOptions extends TwinWorkloadOptions {
    readonly json: boolean;
    readonly chart: string;
    /** Items written before the counter attaches, counted by a backfill before the workload. */
    readonly seedItems: number;
    /** How many keys the chart shows, worst first. */
    readonly chartKeys: number;
    /** Regions of a global table, each its own engine (local/twin/regions.ts); undefined: one region, as before. */
    readonly regions?: number;
    /** With `regions`: how long a write takes to reach the other regions. */
    readonly replicationDelayMs?: number;
}

export { API_ERRORS_LISTED };

export const USAGE = `Usage: npm start -- [options]

Runs the system HybridCounterComponent deploys on DynamoDB Local, drives it with a workload and
reports what it measured.

Options:
  --ops <n>            operations to run (default 3000)
  --keys <n>           counter keys (tenants) (default 8)
  --concurrency <n>    concurrent API callers (default 8)
  --delete-ratio <r>   share of operations that delete a live item, 0..1 (default 0.3)
  --limit <n>          per-key limit enforced through tryCreate (default: none)
  --mode <m>           utilization | strict (default utilization)
  --shards <n>         spread each key's counting over n partitions of the counters table, 1..16 (default 1)
  --faults <rate>      probability 0..1 of an injected fault per DynamoDB attempt, in the API and the
                       consumer: TransactionConflict, throttling, 500 before and after commit (default 0.02)
  --seed <n>           random seed (default 1)
  --regions <n>        run n regions of a global table, 2..6, each on its own DynamoDB Local, replicated
                       last-writer-wins; the report adds per-region figures and doubleCounted
  --replication-delay-ms <n>
                       with --regions: how long a write takes to reach the other regions (default 100)
  --seed-items <n>     items written before the counter attaches, counted by a backfill run first (default 0)
  --duration <s>       run the workload for this many seconds instead of --ops
  --watch              run until Ctrl-C
  --json               print one final JSON report and nothing else on stdout
  --no-parity          run DynamoDB Local without the parity layer (AWS's transaction size, partition
                       throughput and transaction billing are enforced by default), to compare
  --chart <path>       where to write the SVG chart (default twin-output/chart.svg)
  --chart-keys <n>     keys in the chart, worst first (default 3)
  -h, --help           show this help`;

export class UsageError extends Error {
    override name = "UsageError";
}

export function parseTwinArgs(argv: readonly string[]): TwinOptions | "help" {
    let parsed;
    try {
        parsed = parseArgs({
            args: [...argv],
            strict: true,
            allowPositionals: false,
            options: {
                ops: { type: "string" },
                keys: { type: "string" },
                concurrency: { type: "string" },
                "delete-ratio": { type: "string" },
                limit: { type: "string" },
                mode: { type: "string" },
                shards: { type: "string" },
                regions: { type: "string" },
                "replication-delay-ms": { type: "string" },
                faults: { type: "string" },
                seed: { type: "string" },
                "seed-items": { type: "string" },
                duration: { type: "string" },
                watch: { type: "boolean" },
                json: { type: "boolean" },
                chart: { type: "string" },
                "no-parity": { type: "boolean" },
                "chart-keys": { type: "string" },
                help: { type: "boolean", short: "h" },
            },
        });
    } catch (error) {
        throw new UsageError((error as Error).message);
    }
    const v = parsed.values;
    if (v.help) {
        return "help";
    }
    const problems: string[] = [];
    const integer = (name: string, raw: string | undefined, fallback: number, min: number, max: number): number => {
        if (raw === undefined) {
            return fallback;
        }
        const n = Number(raw);
        if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n) || n < min || n > max) {
            problems.push(`--${name} must be an integer from ${min} to ${max} (got "${raw}")`);
            return fallback;
        }
        return n;
    };
    const ratio = (name: string, raw: string | undefined, fallback: number): number => {
        if (raw === undefined) {
            return fallback;
        }
        const n = Number(raw);
        if (raw.trim() === "" || !Number.isFinite(n) || n < 0 || n > 1) {
            problems.push(`--${name} must be a number from 0 to 1 (got "${raw}")`);
            return fallback;
        }
        return n;
    };
    const shards = v.shards === undefined ? undefined : integer("shards", v.shards, 1, 1, 16);
    const mode = v.mode ?? "utilization";
    if (mode !== "utilization" && mode !== "strict") {
        problems.push(`--mode must be utilization or strict (got "${mode}")`);
    }
    if (v.watch && v.duration !== undefined) {
        problems.push("--watch and --duration exclude each other");
    }
    const options: TwinOptions = {
        ops: integer("ops", v.ops, 3_000, 1, 10_000_000),
        keys: integer("keys", v.keys, 8, 1, 10_000),
        concurrency: integer("concurrency", v.concurrency, 8, 1, 256),
        deleteRatio: ratio("delete-ratio", v["delete-ratio"], 0.3),
        limit: v.limit === undefined ? undefined : integer("limit", v.limit, 0, 0, 1_000_000),
        mode: mode as CounterMode,
        ...(shards === undefined ? {} : { shards }),
        faults: ratio("faults", v.faults, 0.02),
        seed: integer("seed", v.seed, 1, 0, 2 ** 31),
        durationSeconds: v.watch ? Infinity : integer("duration", v.duration, 0, 1, 86_400),
        json: v.json ?? false,
        chart: v.chart ?? path.join("twin-output", "chart.svg"),
        chartKeys: integer("chart-keys", v["chart-keys"], 3, 1, 16),
        ...(v["no-parity"] ? { parity: false } : {}),
        seedItems: integer("seed-items", v["seed-items"], 0, 0, 1_000_000),
    };
    if (options.mode === "strict" && options.limit === undefined) {
        problems.push("--mode strict needs --limit: strict mode exists to enforce one");
    }
    const regions = v.regions === undefined ? undefined : integer("regions", v.regions, 2, 2, LOCAL_REGIONS.length);
    if (regions === undefined && v["replication-delay-ms"] !== undefined) {
        problems.push("--replication-delay-ms needs --regions");
    }
    const replicationDelayMs = integer("replication-delay-ms", v["replication-delay-ms"], 100, 0, 600_000);
    if (regions !== undefined && options.seedItems > 0) {
        problems.push("--seed-items is not supported with --regions");
    }
    if (problems.length > 0) {
        throw new UsageError(problems.join("\n"));
    }
    return regions === undefined ? options : { ...options, regions, replicationDelayMs };
}

/** The twin runs the settler's schedule and quiet window this many times faster than the component declares them. */
export { SETTLER_COMPRESSION } from "./settler";

/** The twin's component name: its tables, functions and schedule are named after it. */
export const TWIN_NAME = "twin";

/** The system the twin runs: the component deployed on the engine as every harness deploys it, and its settler compressed. */
export interface TwinDeployment {
    readonly deployment: LocalDeployment;
    /** Undefined when the component deploys no settler. */
    readonly settlerSpec: TwinSettlerSpec | undefined;
}

/**
 * Deploys the component on the engine (its tables as declared, the heal index where the counter items live).
 * The twin runs the default placement and selection (`args` empty); `args` lets a test deploy another.
 */
export async function deployTwin(admin: DynamoDBClient, args: HybridCounterComponentArgs = {}): Promise<TwinDeployment> {
    const deployment = await deployLocally(admin, TWIN_NAME, args);
    return { deployment, settlerSpec: twinSettlerSpec(deployment.resources, TWIN_NAME, SETTLER_COMPRESSION) };
}

/** What the twin starts: the client's options and each bundle's environment. */
export interface TwinFunctions {
    readonly clientOptions: HybridCounterClientOptions;
    readonly environments: {
        readonly consumer: Record<string, string>;
        readonly redrive: Record<string, string>;
        readonly settler?: Record<string, string>;
    };
}

/**
 * The client's options and every bundle's environment as the twin starts them: the component's outputs, with
 * the local fatal queue and the settler's compressed window. Throws HarnessMismatchError, naming the handler
 * and the fields, when the client and a handler would count in different places.
 */
export function twinFunctions(
    twin: TwinDeployment,
    client: Pick<HybridCounterClientOptions, "dynamodb" | "mode">,
    fatalQueueUrl: string,
): TwinFunctions {
    const { clientConfig, system } = twin.deployment;
    const clientOptions: HybridCounterClientOptions = { ...clientConfig, ...client };
    const fatal = { [ENV.fatalQueueUrl]: fatalQueueUrl };
    const environments = {
        consumer: { ...system.consumer.environment, ...fatal },
        redrive: { ...system.redrive.environment, ...fatal },
        ...(twin.settlerSpec === undefined ? {} : { settler: { ...twin.settlerSpec.environment, ...fatal } }),
    };
    assertHarnessAgrees(clientOptions, environments);
    return { clientOptions, environments };
}

export interface TwinReport {
    ops: number;
    created: number;
    deleted: number;
    live: number;
    eventual: number;
    bestEffort: number;
    exact: boolean;
    /** Utilization: keys whose best-effort an observation saw above live by more than the deletes in flight during it. */
    overcountKeys: string[];
    /** The first of those observations: what it read, and the deletes of its key in flight while it read. */
    overcounts: Array<{ key: string; atMs: number; bestEffort: number; live: number; deletesInFlight: number }>;
    /**
     * Utilization: observations that saw best-effort above live by no more than the deletes of the key in flight while
     * they read (a delete decrements, then soft-deletes: the observation read best-effort before the one and the items
     * after the other). Not an overcount (local/harness/calls.ts); counted to show how often the reads met a delete.
     */
    deleteRaces: number;
    limitExceededKeys: string[];
    apiErrors: number;
    /** The first API_ERRORS_LISTED of them: the call, and the error's name and message. */
    apiErrorList: Array<{ operation: string; error: string }>;
    /** From the API call's return to the commit of the item's count: the lag a user sees. */
    lagMs: { p50: number; p99: number; max: number };
    /**
     * The same lag split where the mapping read the record: stream (DynamoDB Local's stream and
     * Lambda's polling cadence) and pipeline (batching, invocation, the consumer's transactions).
     */
    lagSplitMs: LagSplit;
    opsPerSec: number;
    consumerRecordsPerSec: number;
    wcuPerOp: { api: number; consumer: number };
    engineReportedWcuPerOp: { api: number; consumer: number };
    dlq: { first: number; fatal: number; redriven: number };
    mode: CounterMode;
    limit: number | null;
    keys: number;
    faultRate: number;
    faultsInjected: { api: number; consumer: number };
    observations: number;
    durationMs: number;
    chart: string;
    /** Each key's best-effort and live count at the end. */
    bestEffortByKey: Record<string, number>;
    liveByKey: Record<string, number>;
    /** The settler on the component's schedule, compressed: its runs and what they healed. */
    heals: {
        runs: number;
        healed: number;
        corrected: number;
        drift: number;
        raced: number;
        skipped: Record<string, number>;
        /** Runs that started while API calls were in flight: the settler runs beside the traffic, nothing held back. */
        runsWithCallsInFlight: number;
    };
    settings: { batchSize: number; maximumRetryAttempts: number; maximumRecordAgeInSeconds: number; parallelizationFactor: number };
    /** The backfill of the `--seed-items` items, run before the workload; null without them. */
    backfill: BackfillReport | null;
    /** What the parity layer enforced (local/engine/parity.ts), or that it was off. */
    parity: string;
    /** Keys whose best-effort is above live at the end (strict mode's held slots), with how many. */
    heldSlots: Array<{ key: string; heldSlots: number }>;
    /** Keys whose eventual counter is not live at the end, with eventual - live. */
    drift: Array<{ key: string; drift: number }>;
    /**
     * Strict mode: Σ over the keys of best-effort - live (held slots, and the slots of creates in flight), each key as
     * last observed, at each observation (ms since the start) while the traffic ran, and once after the drain and the
     * settler's last runs. Null in utilization mode.
     */
    heldSlotsOverTime: Array<[number, number]> | null;
    /** Utilization mode: Σ over the keys of |best-effort - live|, the same way. Null in strict mode. */
    bestEffortDriftOverTime: Array<[number, number]> | null;
    /** The keys the chart shows, worst first. */
    chartedKeys: string[];
    /** True when Ctrl-C ended the workload: the figures cover what ran. */
    interrupted: boolean;
    /**
     * The mapping's stream reads that did not return a page: iterators the engine refused and that were taken
     * again after the last record read, and other read errors (retried at the next poll), with the last one.
     */
    streamReads: { iteratorsRenewed: number; errors: number; lastError: string | null };
}

type StreamHandler = (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse>;
type QueueHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

interface LoadedBundle<H> {
    handler: H;
    clients: { dynamodb: DynamoDBClient; sqs: import("@aws-sdk/client-sqs").SQSClient };
}

/**
 * Loads a bundle exactly as Lambda would: the function's environment in process.env, then the
 * module. The AWS SDK endpoints point at the local engine, so nothing can leave the machine.
 */
function loadBundle<H>(file: string, environment: Record<string, string>): LoadedBundle<H> {
    Object.assign(process.env, environment);
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a built bundle, loaded as Lambda loads it
    const mod = require(file) as LoadedBundle<H>;
    if (typeof mod.handler !== "function" || !mod.clients) {
        throw new Error(`${file} does not export handler and clients`);
    }
    return mod;
}

export async function runTwin(
    options: TwinOptions,
    log: (line: string) => void,
    progress: NodeJS.WriteStream | null,
    stop?: AbortSignal,
): Promise<TwinReport> {
    const engine: LocalEngine = await startEngine({ parity: options.parity });
    let sqsServer: LocalSqs | undefined;
    const stopSignals: Array<() => void> = [];
    stop?.addEventListener("abort", () => stopSignals.forEach((f) => f()));
    try {
        sqsServer = await startLocalSqs();
        // Every SDK client created from here on, the bundles' included, talks to the local engine only.
        Object.assign(process.env, {
            AWS_REGION: "us-east-1",
            AWS_ACCESS_KEY_ID: "hybridcounterlocal",
            AWS_SECRET_ACCESS_KEY: "hybridcounterlocal",
            AWS_ENDPOINT_URL: engine.endpoint,
            AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
            AWS_ENDPOINT_URL_DYNAMODB_STREAMS: engine.endpoint,
            AWS_ENDPOINT_URL_SQS: sqsServer.endpoint,
        });

        // 1. The component, under mocks: what `pulumi up` would create (its default placement: the counter items
        // in a counters table of their own, so the user's table and its stream hold only the user's items), its
        // tables created as declared: keys, stream, and the heal index where the counter items live.
        const admin = engine.dynamodb();
        // The component is deployed in the client's mode: its settler heals as that mode counts.
        const twin = await deployTwin(admin, {
            ...(options.mode === "strict" ? { counterMode: "strict" as const } : {}),
            ...(options.shards === undefined || options.shards === 1 ? {} : { counterShards: options.shards }),
        });
        const { deployment, settlerSpec } = twin;
        const { system, clientLayout: layout } = deployment;
        log(
            `component: ${deployment.resources.length} resources; table ${system.table.name} (${system.table.hashKey}, ${system.table.rangeKey}), stream ${system.table.streamViewType}; ` +
                `counters table ${layout.countersTableName}`,
        );
        log(
            `stream mapping: batch ${system.streamMapping.batchSize}, window ${system.streamMapping.maximumBatchingWindowInSeconds}s, ` +
                `parallelization ${system.streamMapping.parallelizationFactor}, retries ${system.streamMapping.maximumRetryAttempts}, ` +
                `max age ${system.streamMapping.maximumRecordAgeInSeconds}s, bisect ${system.streamMapping.bisectBatchOnFunctionError}, ` +
                `${system.streamMapping.filterPatterns.length} filter patterns`,
        );

        // 2. Items written before the counter was attached, and the backfill that counts them.
        const backfillReport =
            options.seedItems > 0
                ? await seedAndBackfill(admin, layout, { items: options.seedItems, keys: options.keys, mode: options.mode }, log)
                : undefined;

        // 3. The queues on the local SQS server, with the component's redrive policy (a short visibility
        // timeout, so a failed redrive is retried within the run); the client's options and the bundled
        // handlers' environment, pointing at the local fatal queue, checked to agree before anything starts;
        // the handlers' DynamoDB clients get the faults. The settler runs on the component's schedule,
        // compressed: 5 minutes become a second.
        const sqs = sqsServer.client();
        const fatalQueue = await sqsServer.createQueue(`${system.table.name}-fatal`);
        const firstDlq = await sqsServer.createQueue(`${system.table.name}-first`, {
            VisibilityTimeout: "2",
            RedrivePolicy: JSON.stringify({ deadLetterTargetArn: fatalQueue.arn, maxReceiveCount: system.maxReceiveCount }),
        });
        const apiDynamo = engine.dynamodb();
        const { clientOptions, environments } = twinFunctions(twin, { dynamodb: apiDynamo, mode: options.mode }, fatalQueue.url);
        const consumer = loadBundle<StreamHandler>(HybridCounterComponent.bundlePaths.streamConsumer, environments.consumer);
        const redrive = loadBundle<QueueHandler>(HybridCounterComponent.bundlePaths.redrive, environments.redrive);
        const queueCounts = { first: 0, redriven: 0 };
        const settler =
            environments.settler === undefined
                ? undefined
                : loadBundle<() => Promise<SettleReport>>(HybridCounterComponent.bundlePaths.settler, environments.settler);
        const settlerReports: SettleReport[] = [];
        const consumerMeter: CapacityMeter = meterWrites(consumer.clients.dynamodb);
        const redriveMeter: CapacityMeter = meterWrites(redrive.clients.dynamodb);
        const consumerFaults: FaultStats[] = [];
        if (options.faults > 0) {
            consumerFaults.push(
                injectFaults(consumer.clients.dynamodb, { rate: options.faults, random: seededRandom(options.seed * 7 + 1) }),
            );
            consumerFaults.push(
                injectFaults(redrive.clients.dynamodb, { rate: options.faults, random: seededRandom(options.seed * 7 + 2) }),
            );
        }
        // Lambda logs go to CloudWatch; locally they would drown the report (silence.ts).
        const silence = silencer();

        // 4. The API side: the client from the component's clientConfig output.
        const apiMeter = meterWrites(apiDynamo);
        const apiFaults =
            options.faults > 0 ? injectFaults(apiDynamo, { rate: options.faults, random: seededRandom(options.seed * 7 + 3) }) : undefined;
        // The client's deadline compressed with the settler's window, so that the heal's assumptions hold with the settler
        // running beside the calls (local/twin/settler.ts).
        const client = new HybridCounterClient({
            ...clientOptions,
            deadlineMs: COMPRESSED_CLIENT_DEADLINE_MS,
            ...(settlerSpec === undefined ? {} : { ledgerPeriodSeconds: settlerSpec.ledgerPeriodSeconds }),
        });
        if (settlerSpec !== undefined) {
            assertCompressionCovers(settlerSpec.quietWindowMs, COMPRESSED_CLIENT_DEADLINE_MS);
        }

        // Ground truth for lag: when the API call that wrote each record returned, and when its count committed.
        const lag = new LagMeter(layout);
        lag.watchCommits(consumer.clients.dynamodb);
        lag.watchCommits(redrive.clients.dynamodb);
        const emulator = new MappingEmulator({
            onRead: (record, at) => lag.read(record, at),
            streams: engine.streams(),
            streamArn: deployment.streamArn,
            settings: system.streamMapping,
            functionArn: `arn:aws:lambda:ddblocal:000000000000:function:${system.consumer.name}`,
            invoke: silence(async (event: DynamoDBStreamEvent) => {
                const response = await consumer.handler(event, lambdaContext(system.consumer.name, system.consumer.timeoutSeconds * 1000));
                lag.invoked(event, response);
                return response;
            }),
            onFailure: async (record) => {
                await sqs.send(new SendMessageCommand({ QueueUrl: firstDlq.url, MessageBody: JSON.stringify(record) }));
                queueCounts.first++;
            },
        });

        // The first DLQ's SQS mapping: receive, invoke, delete what succeeded. The server applies the
        // redrive policy (to the fatal queue after maxReceiveCount receives).
        const redrivePass = silence(async () => {
            const { deleted } = await pollQueueOnce(sqs, firstDlq, system.redriveBatchSize, (event) =>
                redrive.handler(event, lambdaContext(system.redrive.name, system.redrive.timeoutSeconds * 1000)),
            );
            queueCounts.redriven += deleted;
        });
        const queueDepth = async (url: string): Promise<number> => {
            const attributes = await sqs.send(
                new GetQueueAttributesCommand({
                    QueueUrl: url,
                    AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                }),
            );
            return (
                Number(attributes.Attributes?.ApproximateNumberOfMessages ?? 0) +
                Number(attributes.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
            );
        };

        const keys = Array.from({ length: options.keys }, (_, i) => `tenant-${String(i).padStart(3, "0")}`);
        const samples = new Map<string, Array<{ t: number; s: KeySnapshot }>>(keys.map((k) => [k, []]));
        const overcount = new Set<string>();
        const overcounts: TwinReport["overcounts"] = [];
        let deleteRaces = 0;
        const exceeded = new Set<string>();
        let observations = 0;
        const started = Date.now();
        let workloadDone = false;
        let interrupted = false;
        stopSignals.push(() => {
            interrupted = true;
        });

        const consuming = (async () => {
            // The function runs while the next page is read, as Lambda's poller does.
            while (!workloadDone) {
                const read = await emulator.poll();
                emulator.start();
                await redrivePass();
                if (read === 0) {
                    await new Promise((r) => setTimeout(r, 25));
                }
            }
            await emulator.settled();
        })();
        const calls = new CallsInFlight();
        // Each key's |best-effort - live| as last observed, and their sum over time.
        const offByKey = new Map<string, number>();
        const offOverTime: Array<[number, number]> = [];
        const recordOff = (key: string, s: KeySnapshot, at: number) => {
            offByKey.set(key, options.mode === "strict" ? s.bestEffort - s.live : Math.abs(s.bestEffort - s.live));
            offOverTime.push([at, [...offByKey.values()].reduce((a, b) => a + b, 0)]);
        };
        const observing = (async () => {
            for (let i = 0; !workloadDone; i++) {
                const key = keys[i % keys.length]!;
                // The snapshot reads best-effort, then the items: a delete in flight meanwhile may have decremented
                // after the one read and soft-deleted before the other (local/harness/calls.ts, window).
                const during = calls.window(key);
                const s = await snapshotKey(admin, layout.tableName, layout, key, layout.countersTableName, shardCount(layout));
                const slack = during().deletes;
                observations++;
                samples.get(key)!.push({ t: Date.now() - started, s });
                recordOff(key, s, Date.now() - started);
                if (options.mode === "utilization" && s.bestEffort > s.live) {
                    if (s.bestEffort > s.live + slack) {
                        overcount.add(key);
                        overcounts.push({
                            key,
                            atMs: Date.now() - started,
                            bestEffort: s.bestEffort,
                            live: s.live,
                            deletesInFlight: slack,
                        });
                    } else {
                        deleteRaces++;
                    }
                }
                if (options.limit !== undefined && s.live > options.limit) {
                    exceeded.add(key);
                }
                // About 20 observations a second: enough for the chart, light on the shared engine.
                await new Promise((r) => setTimeout(r, 50));
            }
        })();
        let runsWithCallsInFlight = 0;
        const settling =
            settler === undefined || settlerSpec === undefined
                ? Promise.resolve()
                : scheduleRuns(
                      settlerSpec.periodMs,
                      // Beside the API's calls, as the scheduled function runs in AWS: nothing waits for the keys to go quiet.
                      () => {
                          runsWithCallsInFlight += calls.inFlight > 0 ? 1 : 0;
                          return silence(settler.handler)();
                      },
                      () => workloadDone,
                      settlerReports,
                  );
        const deadline = options.durationSeconds > 0 ? started + options.durationSeconds * 1000 : Infinity;
        let last: WorkloadResult | undefined;
        const render = progressRenderer(progress, keys, samples, () => last, emulator, queueCounts, lag);
        const ticker = setInterval(render, 1000);
        let workload: WorkloadResult;
        try {
            workload = await runWorkload(
                calls.wrap(client),
                {
                    ops: options.durationSeconds > 0 ? Number.MAX_SAFE_INTEGER : options.ops,
                    keys,
                    concurrency: options.concurrency,
                    deleteRatio: options.deleteRatio,
                    limit: options.limit,
                    seed: options.seed,
                    hotKeyShare: 1,
                    stop: () => interrupted || Date.now() >= deadline,
                },
                (r) => {
                    last = r;
                    const e = r.events.at(-1);
                    if (e) {
                        lag.wrote(e);
                    }
                },
            );
        } finally {
            workloadDone = true;
        }
        const apiDone = Date.now();
        await Promise.all([consuming, observing, settling]);
        // Let the pipeline settle: the stream drains, the first DLQ is redriven (a failed message comes back
        // after its visibility timeout, or moves to the fatal queue), and what that writes drains too.
        const settleBy = Date.now() + 120_000;
        while (Date.now() < settleBy) {
            await emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
            await redrivePass();
            if ((await queueDepth(firstDlq.url)) === 0 && emulator.backlog === 0) {
                await emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
                break;
            }
            await new Promise((r) => setTimeout(r, 200));
        }
        // The settler's last runs: once every key has been quiet for the window, what is due is healed.
        if (settler !== undefined && settlerSpec !== undefined) {
            await new Promise((r) => setTimeout(r, settlerSpec.quietWindowMs + 10));
            for (let i = 0; i < 5; i++) {
                const report = await silence(settler.handler)();
                settlerReports.push(report);
                if (report.keysFromIndex === 0) {
                    break;
                }
            }
        }
        const fatalCount = await queueDepth(fatalQueue.url);
        const consumerDone = Date.now();
        clearInterval(ticker);
        render(true);
        // After the last redraw: a line printed between redraws would be overwritten by the next one.
        const st = emulator.stats;
        log(
            `mapping: ${st.invocations} invocations, ${st.recordsDelivered} records delivered, ${st.recordsFiltered} filtered out, ` +
                `${(st.pollMs / 1000).toFixed(1)} s reading the stream, ${(st.invokeMs / 1000).toFixed(1)} s in the function`,
        );

        // 5. The report.
        let live = 0;
        let eventual = 0;
        let bestEffort = 0;
        let exact = true;
        const bestEffortByKey: Record<string, number> = {};
        const liveByKey: Record<string, number> = {};
        const heldSlots: TwinReport["heldSlots"] = [];
        const drift: TwinReport["drift"] = [];
        for (const key of keys) {
            const s = await snapshotKey(admin, layout.tableName, layout, key, layout.countersTableName, shardCount(layout));
            bestEffortByKey[key] = s.bestEffort;
            liveByKey[key] = s.live;
            samples.get(key)!.push({ t: Date.now() - started, s });
            recordOff(key, s, Date.now() - started);
            live += s.live;
            eventual += s.eventual;
            bestEffort += s.bestEffort;
            exact &&= s.eventual === s.live && s.softDeleted === 0;
            if (s.bestEffort > s.live) {
                heldSlots.push({ key, heldSlots: s.bestEffort - s.live });
            }
            if (s.eventual !== s.live) {
                drift.push({ key, drift: s.eventual - s.live });
            }
        }
        const chartedKeys = worstKeys(keys, samples, options.chartKeys);
        const chartPath = path.resolve(options.chart);
        mkdirSync(path.dirname(chartPath), { recursive: true });
        writeFileSync(
            chartPath,
            chartSvg(
                `hybrid-counter twin (${options.mode}${options.limit === undefined ? "" : `, limit ${options.limit}`}, faults ${options.faults}): worst keys`,
                [
                    {
                        title:
                            options.mode === "strict"
                                ? "held slots: Σ best-effort - live over the keys, read while the traffic runs"
                                : "drift: Σ |best-effort - live| over the keys, read while the traffic runs",
                        series: [
                            {
                                name: options.mode === "strict" ? "held slots" : "drift",
                                color: "#9467bd",
                                points: offOverTime,
                            },
                        ],
                    },
                    ...chartedKeys.map((key): Panel => {
                        const points = samples.get(key)!;
                        return {
                            title: key,
                            series: [
                                { name: "true count (live)", color: "#222222", points: points.map((p) => [p.t, p.s.live] as const) },
                                { name: "best-effort", color: "#d62728", points: points.map((p) => [p.t, p.s.bestEffort] as const) },
                                { name: "eventual", color: "#1f77b4", points: points.map((p) => [p.t, p.s.eventual] as const) },
                            ],
                        };
                    }),
                ],
            ),
        );
        const consumerWcu = consumerMeter.billed + redriveMeter.billed;
        const round2 = (n: number) => Math.round(n * 100) / 100;
        const report: TwinReport = {
            ops: workload.ops,
            created: workload.created,
            deleted: workload.deleted,
            live,
            eventual,
            bestEffort,
            exact,
            overcountKeys: [...overcount].sort(),
            overcounts: overcounts.slice(0, API_ERRORS_LISTED),
            deleteRaces,
            limitExceededKeys: [...exceeded].sort(),
            apiErrors: workload.apiErrors.length,
            apiErrorList: workload.apiErrors.slice(0, API_ERRORS_LISTED),
            lagMs: lag.figures(),
            lagSplitMs: lag.split(emulator.stats),
            streamReads: { iteratorsRenewed: st.iteratorsRenewed, errors: st.readErrors, lastError: st.lastReadError ?? null },
            opsPerSec: round2(workload.ops / ((apiDone - started) / 1000)),
            consumerRecordsPerSec: round2(lag.counted / ((consumerDone - started) / 1000)),
            wcuPerOp: { api: round2(apiMeter.billed / workload.ops), consumer: round2(consumerWcu / workload.ops) },
            engineReportedWcuPerOp: {
                api: round2(apiMeter.reported / workload.ops),
                consumer: round2((consumerMeter.reported + redriveMeter.reported) / workload.ops),
            },
            dlq: { first: queueCounts.first, fatal: fatalCount, redriven: queueCounts.redriven },
            mode: options.mode,
            limit: options.limit ?? null,
            keys: options.keys,
            faultRate: options.faults,
            faultsInjected: {
                api: apiFaults ? Object.values(apiFaults.injected).reduce((a, b) => a + b, 0) : 0,
                consumer: consumerFaults.reduce((n, f) => n + Object.values(f.injected).reduce((a, b) => a + b, 0), 0),
            },
            observations,
            durationMs: consumerDone - started,
            chart: chartPath,
            backfill: backfillReport ?? null,
            bestEffortByKey,
            liveByKey,
            heals: {
                runs: settlerReports.length,
                healed: settlerReports.reduce((n, r) => n + r.healed, 0),
                corrected: settlerReports.reduce((n, r) => n + r.corrected, 0),
                drift: settlerReports.reduce((n, r) => n + r.drift, 0),
                raced: settlerReports.reduce((n, r) => n + r.raced, 0),
                skipped: settlerReports.reduce<Record<string, number>>((all, r) => {
                    for (const [reason, n] of Object.entries(r.skipped)) {
                        all[reason] = (all[reason] ?? 0) + (n ?? 0);
                    }
                    return all;
                }, {}),
                runsWithCallsInFlight,
            },
            parity: describeParity(engine.parity),
            settings: {
                batchSize: system.streamMapping.batchSize,
                maximumRetryAttempts: system.streamMapping.maximumRetryAttempts,
                maximumRecordAgeInSeconds: system.streamMapping.maximumRecordAgeInSeconds,
                parallelizationFactor: system.streamMapping.parallelizationFactor,
            },
            heldSlots,
            drift,
            heldSlotsOverTime: options.mode === "strict" ? offOverTime : null,
            bestEffortDriftOverTime: options.mode === "strict" ? null : offOverTime,
            chartedKeys,
            interrupted,
        };
        if (workload.apiErrors.length > 0) {
            log(`API errors: ${JSON.stringify(workload.apiErrors.slice(0, 5))}`);
        }
        admin.destroy();
        apiDynamo.destroy();
        sqs.destroy();
        return report;
    } finally {
        await sqsServer?.stop();
        await engine.stop();
    }
}

/**
 * The keys worth charting, worst first: those not exact at the end, then those whose eventual counter
 * lagged the true count the most during the run.
 */
export function worstKeys(
    keys: readonly string[],
    samples: ReadonlyMap<string, ReadonlyArray<{ t: number; s: KeySnapshot }>>,
    count: number,
): string[] {
    const score = (key: string) => {
        const points = samples.get(key) ?? [];
        const last = points.at(-1)?.s;
        const off = last ? Math.abs(last.eventual - last.live) + Math.max(0, last.bestEffort - last.live) : 0;
        const lag = points.reduce((m, p) => Math.max(m, Math.abs(p.s.live - p.s.eventual)), 0);
        return off * 1_000_000 + lag;
    };
    return [...keys].sort((a, b) => score(b) - score(a) || (a < b ? -1 : 1)).slice(0, count);
}

function progressRenderer(
    out: NodeJS.WriteStream | null,
    keys: readonly string[],
    samples: ReadonlyMap<string, Array<{ t: number; s: KeySnapshot }>>,
    workload: () => WorkloadResult | undefined,
    emulator: MappingEmulator,
    queueCounts: { first: number; redriven: number },
    lag: LagMeter,
): (final?: boolean) => void {
    let drawn = 0;
    const shown = keys.slice(0, 8);
    return (final = false) => {
        if (!out) {
            return;
        }
        const w = workload();
        const header =
            `ops ${w?.ops ?? 0} (created ${w?.created ?? 0}, deleted ${w?.deleted ?? 0}, API errors ${w?.apiErrors.length ?? 0}) | ` +
            `consumer: ${emulator.stats.invocations} invocations, backlog ${emulator.backlog}, lag p50 ${lag.figures().p50} ms | ` +
            `DLQ first ${queueCounts.first}, redriven ${queueCounts.redriven}`;
        if (!out.isTTY) {
            out.write(`${final ? "final " : ""}${header}\n`);
            return;
        }
        const rows = shown.map((key) => {
            const s = samples.get(key)?.at(-1)?.s;
            return `  ${key}  best-effort ${String(s?.bestEffort ?? 0).padStart(5)}  eventual ${String(s?.eventual ?? 0).padStart(5)}  live ${String(s?.live ?? 0).padStart(5)}`;
        });
        if (keys.length > shown.length) {
            rows.push(`  ... and ${keys.length - shown.length} more keys`);
        }
        const legend =
            "  best-effort: the API's counter (utilization: never above live; strict: reserved slots) | " +
            "eventual: the stream consumer's | live: items that exist (the truth)";
        const lines = [header, legend, ...rows];
        out.write(`${drawn > 0 ? `\x1b[${drawn}A` : ""}${lines.map((l) => `\x1b[2K${l}`).join("\n")}\n`);
        drawn = lines.length;
    };
}

async function main(): Promise<void> {
    let options: TwinOptions | "help";
    try {
        options = parseTwinArgs(process.argv.slice(2));
    } catch (error) {
        if (error instanceof UsageError) {
            process.stderr.write(`error: ${error.message}\n\n${USAGE}\n`);
            process.exit(2);
        }
        throw error;
    }
    if (options === "help") {
        process.stdout.write(`${USAGE}\n`);
        return;
    }
    const json = options.json;
    const log = (line: string) => (json ? process.stderr : process.stdout).write(`${line}\n`);
    const progress = options.json ? null : process.stdout;
    // The first Ctrl-C stops the workload: the pipeline drains, and the report and chart cover what ran.
    // A second one exits at once (the engine's exit hook kills DynamoDB Local).
    const stop = new AbortController();
    process.on("SIGINT", () => {
        if (stop.signal.aborted) {
            process.stderr.write("\ninterrupted again: stopping DynamoDB Local\n");
            process.exit(130);
        }
        process.stderr.write("\ninterrupted: draining, then the report (Ctrl-C again to quit at once)\n");
        stop.abort();
    });
    if (options.regions !== undefined) {
        const regional = await runRegionsTwin(
            { ...options, regions: options.regions, replicationDelayMs: options.replicationDelayMs ?? 100 },
            log,
            stop.signal,
        );
        if (options.json) {
            process.stdout.write(`${JSON.stringify(regional)}\n`);
        } else {
            printRegionsReport(regional, log);
        }
        return;
    }
    const report = await runTwin(options, log, progress, stop.signal);
    if (options.json) {
        process.stdout.write(`${JSON.stringify(report)}\n`);
        return;
    }
    log("");
    log(`exact (eventual == live for every key): ${report.exact}`);
    log(`totals: live ${report.live}, eventual ${report.eventual}, best-effort ${report.bestEffort}`);
    log(`API: ${report.opsPerSec} ops/s, ${report.apiErrors} errors surfaced, ${report.wcuPerOp.api} WCU/op`);
    log(
        `consumer: ${report.consumerRecordsPerSec} records/s, ${report.wcuPerOp.consumer} WCU per API op, lag p50 ${report.lagMs.p50} ms, p99 ${report.lagMs.p99} ms, max ${report.lagMs.max} ms`,
    );
    const split = report.lagSplitMs;
    log(
        `lag split: stream (DynamoDB Local + Lambda's poll cadence) p50 ${split.stream.p50} ms, p99 ${split.stream.p99} ms; ` +
            `pipeline (batching, invocation, commit) p50 ${split.pipeline.p50} ms, p99 ${split.pipeline.p99} ms; ` +
            `GetRecords mean ${split.engine.getRecordsMeanMs} ms, max ${split.engine.getRecordsMaxMs} ms, shards ${split.engine.shards}`,
    );
    log(`faults injected: API ${report.faultsInjected.api}, consumer ${report.faultsInjected.consumer}`);
    log(`DLQ: first ${report.dlq.first}, redriven ${report.dlq.redriven}, fatal ${report.dlq.fatal}`);
    log(
        `${report.mode === "utilization" ? `keys ever overcounted by best-effort: ${report.overcountKeys.length} (observations that met a delete between their reads: ${report.deleteRaces})` : `keys ever over the limit: ${report.limitExceededKeys.length}`}`,
    );
    log(
        `settler: ${report.heals.runs} runs, ${report.heals.healed} heals (${report.heals.corrected} corrected, drift ${report.heals.drift}), ` +
            `${report.heals.raced} lost a race, skipped ${JSON.stringify(report.heals.skipped)}`,
    );
    log(
        `best-effort == live for every key: ${Object.keys(report.liveByKey).every((k) => report.bestEffortByKey[k] === report.liveByKey[k])}`,
    );
    log(report.parity);
    for (const { key, heldSlots } of report.heldSlots) {
        log(`held slots: ${key} holds ${heldSlots} (best-effort above live)`);
    }
    for (const { key, drift } of report.drift) {
        log(`drift: ${key} eventual - live = ${drift}`);
    }
    log(`chart (${report.chartedKeys.join(", ")}): ${report.chart}`);
}

if (require.main === module) {
    main().then(
        () => process.exit(0),
        (error: unknown) => {
            process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
            process.exit(1);
        },
    );
}
