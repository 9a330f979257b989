/**
 * The local twin over several regions (`npm start -- --regions N`): N DynamoDB Local engines play N regions of a
 * global table (the first the home), kept in step by the replicator (local/regions/replicator.ts), last-writer-wins,
 * after `--replication-delay-ms`. Each region runs what its own HybridCounterComponent deploys (local/regions/
 * deployment.ts: `regions.current` = that region): the consumer bundle behind the mapping emulator with its region's
 * filter patterns, the redrive, the settler on its compressed schedule, and a workload on a client built from its
 * `clientConfig` output, with faults in the API and the consumers.
 *
 * Pass: once replication and every stream have drained, the replicas are the same in every region, each region's
 * eventual counter of each key equals the live items of the key it owns (exact in every region), no item is counted
 * by two regions (`doubleCounted` 0), no API error, and in strict mode no key ever observed above its limit (the sum
 * over regions of the live items each region owns, read in each region's own replica, where its writes are at once).
 */
import { silencer } from "./silence";
import { DescribeTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { GetQueueAttributesCommand, SendMessageCommand } from "@aws-sdk/client-sqs";
import type { DynamoDBStreamEvent } from "aws-lambda";
import { HybridCounterComponent } from "../../components/component";
import { HybridCounterClient } from "../../runtime/client/client";
import type { SettleReport } from "../../runtime/heal/settle";
import type { RegionsConfig } from "../../runtime/regions/config";
import { ENV, type CounterTableConfig } from "../../runtime/shared/config";
import { lambdaContext } from "../aws/lambda-context";
import { MappingEmulator } from "../aws/mapping-emulator";
import { pollQueueOnce, startLocalSqs, type LocalQueue, type LocalSqs } from "../aws/sqs";
import { describeParity } from "../engine/parity";
import { startEngine, type LocalEngine } from "../engine/engine";
import { injectFaults, seededRandom, type FaultStats } from "../engine/faults";
import { runWorkload, type WorkloadResult } from "../harness/workload";
import { assertRegionAgrees, createRegionTables, deployRegions, USER_TABLE, type RegionDeployment } from "../regions/deployment";
import { loadRegionBundle, type QueueHandler, type StreamHandler } from "../regions/bundles";
import { convergedFigures, ownedLive } from "../regions/figures";
import { Replicator, type RegionReplicationStats } from "../regions/replicator";
import { COMPRESSED_CLIENT_DEADLINE_MS, SETTLER_COMPRESSION, assertCompressionCovers, scheduleRuns } from "./settler";
import { API_ERRORS_LISTED, type TwinWorkloadOptions } from "./options";
import type { CounterMode } from "../../runtime/client/client";

/** The twin's options (local/twin/twin.ts) that a run over several regions takes. */
export interface RegionsTwinOptions extends TwinWorkloadOptions {
    readonly regions: number;
    /** How long the replicator waits before applying a region's write to the others. */
    readonly replicationDelayMs: number;
}

export interface RegionReport {
    region: string;
    role: "home" | "member";
    /** Operations the region's API ran (creates, deletes, refusals). */
    writes: number;
    created: number;
    deleted: number;
    /** Deletes the region's API made of lives another region owns (the client's ForeignDeletes metric). */
    foreignDeletes: number;
    /** Items the region's markers count. */
    counted: number;
    bestEffort: number;
    eventual: number;
    /** Live items the region owns: what its eventual must equal. */
    owned: number;
    exact: boolean;
    apiErrors: number;
    faultsInjected: { api: number; consumer: number };
    consumer: { invocations: number; recordsDelivered: number; recordsFiltered: number };
    dlq: { first: number; fatal: number; redriven: number };
    settlerRuns: number;
    replication: RegionReplicationStats;
}

export interface RegionsTwinReport {
    regions: number;
    home: string;
    replicationDelayMs: number;
    mode: CounterMode;
    limit: number | null;
    keys: number;
    faultRate: number;
    ops: number;
    created: number;
    deleted: number;
    live: number;
    eventual: number;
    bestEffort: number;
    /** Exact in every region: each region's eventual equals the live items it owns, for every key; none soft-deleted left. */
    exact: boolean;
    /** Every engine holds the same items in both tables once replication drained. */
    converged: boolean;
    /** Items counted by more than one region's eventual once everything drained (0 is the pass). */
    doubleCounted: number;
    limitExceededKeys: string[];
    apiErrors: number;
    apiErrorList: Array<{ region: string; operation: string; error: string }>;
    observations: number;
    perRegion: RegionReport[];
    liveByKey: Record<string, number>;
    parity: string;
    durationMs: number;
    interrupted: boolean;
}

interface RegionRun {
    readonly deployment: RegionDeployment;
    readonly engine: LocalEngine;
    readonly admin: DynamoDBClient;
    readonly client: HybridCounterClient;
    readonly layout: CounterTableConfig & { readonly regions: RegionsConfig };
    readonly emulator: MappingEmulator;
    readonly redrivePass: () => Promise<void>;
    readonly settler: (() => Promise<SettleReport>) | undefined;
    readonly settlerReports: SettleReport[];
    readonly queues: { first: LocalQueue; fatal: LocalQueue };
    readonly queueCounts: { first: number; redriven: number };
    readonly faults: { api?: FaultStats; consumer: FaultStats[] };
    /** The client's own metrics, as its EMF lines report them (ForeignDeletes: deletes of lives another region owns). */
    readonly clientMetrics: Map<string, number>;
    workload?: WorkloadResult;
}

export async function runRegionsTwin(
    options: RegionsTwinOptions,
    log: (line: string) => void,
    stop?: AbortSignal,
): Promise<RegionsTwinReport> {
    const deployment = await deployRegions(
        options.regions,
        {
            ...(options.mode === "strict" ? { counterMode: "strict" as const } : {}),
            ...(options.shards === undefined || options.shards === 1 ? {} : { counterShards: options.shards }),
        },
        SETTLER_COMPRESSION,
    );
    const engines: LocalEngine[] = [];
    let sqsServer: LocalSqs | undefined;
    let replicator: Replicator | undefined;
    try {
        for (let i = 0; i < options.regions; i++) {
            engines.push(await startEngine({ parity: options.parity }));
        }
        sqsServer = await startLocalSqs();
        Object.assign(process.env, {
            AWS_ACCESS_KEY_ID: "hybridcounterlocal",
            AWS_SECRET_ACCESS_KEY: "hybridcounterlocal",
            AWS_ENDPOINT_URL_SQS: sqsServer.endpoint,
        });
        const countersTableName = deployment.regions[0]!.system.countersTableName;
        for (const engine of engines) {
            const admin = engine.dynamodb({ direct: true });
            await createRegionTables(admin, deployment);
            admin.destroy();
        }
        replicator = await Replicator.start({
            engines: deployment.regions.map((r, i) => ({
                region: r.region,
                dynamodb: engines[i]!.dynamodb({ direct: true }),
                streams: engines[i]!.streams(),
            })),
            tables: [USER_TABLE, countersTableName],
            delayMs: options.replicationDelayMs,
        });
        log(
            `${options.regions} regions (home ${deployment.home}), replication delay ${options.replicationDelayMs} ms; ` +
                `counters table ${countersTableName}`,
        );
        const sqs = sqsServer.client();
        // Lambda logs go to CloudWatch; locally they would drown the report (silence.ts).
        const silence = silencer();
        const runs: RegionRun[] = [];
        for (const [i, region] of deployment.regions.entries()) {
            const engine = engines[i]!;
            const { system, settlerSpec } = region;
            const fatal = await sqsServer.createQueue(`${region.name}-fatal`);
            const first = await sqsServer.createQueue(`${region.name}-first`, {
                VisibilityTimeout: "2",
                RedrivePolicy: JSON.stringify({ deadLetterTargetArn: fatal.arn, maxReceiveCount: system.maxReceiveCount }),
            });
            const toFatal = { [ENV.fatalQueueUrl]: fatal.url, AWS_REGION: region.region };
            const environments = {
                consumer: { ...system.consumer.environment, ...toFatal },
                redrive: { ...system.redrive.environment, ...toFatal },
                ...(settlerSpec === undefined ? {} : { settler: { ...settlerSpec.environment, ...toFatal } }),
            };
            const apiDynamo = engine.dynamodb();
            const clientOptions = { ...region.clientConfig, dynamodb: apiDynamo, mode: options.mode };
            const layout = assertRegionAgrees(region, clientOptions, environments) as CounterTableConfig & {
                readonly regions: RegionsConfig;
            };
            const consumer = loadRegionBundle<StreamHandler>(
                HybridCounterComponent.bundlePaths.streamConsumer,
                environments.consumer,
                engine,
            );
            const redrive = loadRegionBundle<QueueHandler>(HybridCounterComponent.bundlePaths.redrive, environments.redrive, engine);
            const settler =
                environments.settler === undefined
                    ? undefined
                    : loadRegionBundle<() => Promise<SettleReport>>(
                          HybridCounterComponent.bundlePaths.settler,
                          environments.settler,
                          engine,
                      );
            const seed = options.seed * 101 + i * 7;
            const faults: RegionRun["faults"] = { consumer: [] };
            if (options.faults > 0) {
                faults.consumer.push(injectFaults(consumer.clients.dynamodb, { rate: options.faults, random: seededRandom(seed + 1) }));
                faults.consumer.push(injectFaults(redrive.clients.dynamodb, { rate: options.faults, random: seededRandom(seed + 2) }));
                faults.api = injectFaults(apiDynamo, { rate: options.faults, random: seededRandom(seed + 3) });
            }
            if (settlerSpec !== undefined) {
                assertCompressionCovers(settlerSpec.quietWindowMs, COMPRESSED_CLIENT_DEADLINE_MS);
            }
            // The client's EMF lines, added up: what its metrics would show in CloudWatch.
            const clientMetrics = new Map<string, number>();
            const client = new HybridCounterClient({
                ...clientOptions,
                metrics: {
                    namespace: "HybridCounterTwin",
                    sink: (line) => {
                        for (const [name, value] of Object.entries(JSON.parse(line) as Record<string, unknown>)) {
                            if (typeof value === "number" && name !== "_aws") {
                                clientMetrics.set(name, (clientMetrics.get(name) ?? 0) + value);
                            }
                        }
                    },
                },
                deadlineMs: COMPRESSED_CLIENT_DEADLINE_MS,
                ...(settlerSpec === undefined ? {} : { ledgerPeriodSeconds: settlerSpec.ledgerPeriodSeconds }),
            });
            const streamArn = (await engine.dynamodb({ direct: true }).send(new DescribeTableCommand({ TableName: system.table.name })))
                .Table?.LatestStreamArn;
            if (streamArn === undefined) {
                throw new Error(`${system.table.name} has no stream in ${region.region}`);
            }
            const queueCounts = { first: 0, redriven: 0 };
            const emulator = new MappingEmulator({
                streams: engine.streams(),
                streamArn,
                settings: system.streamMapping,
                functionArn: `arn:aws:lambda:${region.region}:000000000000:function:${system.consumer.name}`,
                invoke: silence((event: DynamoDBStreamEvent) =>
                    consumer.handler(event, lambdaContext(system.consumer.name, system.consumer.timeoutSeconds * 1000)),
                ),
                onFailure: async (record) => {
                    await sqs.send(new SendMessageCommand({ QueueUrl: first.url, MessageBody: JSON.stringify(record) }));
                    queueCounts.first++;
                },
            });
            const redrivePass = silence(async () => {
                const { deleted } = await pollQueueOnce(sqs, first, system.redriveBatchSize, (event) =>
                    redrive.handler(event, lambdaContext(system.redrive.name, system.redrive.timeoutSeconds * 1000)),
                );
                queueCounts.redriven += deleted;
            });
            runs.push({
                deployment: region,
                engine,
                admin: engine.dynamodb({ direct: true }),
                client,
                layout,
                emulator,
                redrivePass,
                settler: settler === undefined ? undefined : silence(settler.handler),
                settlerReports: [],
                queues: { first, fatal },
                queueCounts,
                faults,
                clientMetrics,
            });
        }
        const queueDepth = async (queue: LocalQueue): Promise<number> => {
            const a = await sqs.send(
                new GetQueueAttributesCommand({
                    QueueUrl: queue.url,
                    AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
                }),
            );
            return (
                Number(a.Attributes?.ApproximateNumberOfMessages ?? 0) + Number(a.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
            );
        };

        const keys = Array.from({ length: options.keys }, (_, i) => `tenant-${String(i).padStart(3, "0")}`);
        const started = Date.now();
        let workloadDone = false;
        let interrupted = false;
        stop?.addEventListener("abort", () => (interrupted = true));
        const consuming = runs.map(async (run) => {
            while (!workloadDone) {
                const read = await run.emulator.poll();
                run.emulator.start();
                await run.redrivePass();
                if (read === 0) {
                    await new Promise((r) => setTimeout(r, 25));
                }
            }
            await run.emulator.settled();
        });
        const settling = runs.map((run) =>
            run.settler === undefined || run.deployment.settlerSpec === undefined
                ? Promise.resolve()
                : scheduleRuns(run.deployment.settlerSpec.periodMs, run.settler, () => workloadDone, run.settlerReports),
        );
        // Strict: the key's live items, as the regions' clients made them, never above the limit.
        const exceeded = new Set<string>();
        let observations = 0;
        const observing = (async () => {
            for (let i = 0; !workloadDone && options.limit !== undefined; i++) {
                const key = keys[i % keys.length]!;
                let live = 0;
                for (const run of runs) {
                    live += await ownedLive(run.admin, run.layout, run.deployment.region, key);
                }
                observations++;
                if (live > options.limit) {
                    exceeded.add(key);
                }
                await new Promise((r) => setTimeout(r, 50));
            }
        })();
        const deadline = options.durationSeconds > 0 ? started + options.durationSeconds * 1000 : Infinity;
        const share = (total: number, i: number) => Math.floor(total / runs.length) + (i < total % runs.length ? 1 : 0);
        // One list of live items for every region's callers: a delete picks any region's item, so that deletes made
        // outside the owning region (which move no unit, and leave the owner's unit to its heal) are part of the run.
        const sharedLive = new Map<string, string[]>();
        try {
            await Promise.all(
                runs.map(async (run, i) => {
                    run.workload = await runWorkload(run.client, {
                        live: sharedLive,
                        ops: options.durationSeconds > 0 ? Number.MAX_SAFE_INTEGER : Math.max(1, share(options.ops, i)),
                        keys,
                        concurrency: Math.max(1, share(options.concurrency, i)),
                        deleteRatio: options.deleteRatio,
                        limit: options.limit,
                        seed: options.seed * 101 + i * 7,
                        hotKeyShare: 1,
                        stop: () => interrupted || Date.now() >= deadline,
                    });
                }),
            );
        } finally {
            workloadDone = true;
        }
        await Promise.all([...consuming, ...settling, observing]);
        log(`workload done in ${Date.now() - started} ms; draining replication and the streams`);

        // Drain: replication, every region's stream and first DLQ, until a whole round changes nothing; then the
        // settlers' last runs once the keys have been quiet for the window, and drain what they wrote.
        const drainAll = async () => {
            const settleBy = Date.now() + 180_000;
            for (;;) {
                await replicator!.drain();
                for (const run of runs) {
                    await run.emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
                    await run.redrivePass();
                }
                const depths = await Promise.all(runs.map((r) => queueDepth(r.queues.first)));
                if (replicator!.backlog === 0 && depths.every((d) => d === 0) && runs.every((r) => r.emulator.backlog === 0)) {
                    // One more round: it must find nothing to replicate and nothing to deliver.
                    const before = runs.map((r) => r.emulator.stats.invocations);
                    const applied = runs.map((r) => replicator!.regionStats(r.deployment.region).applied);
                    await replicator!.drain();
                    for (const run of runs) {
                        await run.emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });
                    }
                    if (
                        runs.every((r, i) => r.emulator.stats.invocations === before[i]) &&
                        runs.every((r, i) => replicator!.regionStats(r.deployment.region).applied === applied[i])
                    ) {
                        return;
                    }
                }
                if (Date.now() > settleBy) {
                    throw new Error("replication and the streams did not drain within 180 s");
                }
                await new Promise((r) => setTimeout(r, 200));
            }
        };
        await drainAll();
        const quietMs = Math.max(...runs.map((r) => r.deployment.settlerSpec?.quietWindowMs ?? 0));
        await new Promise((r) => setTimeout(r, quietMs + 10));
        for (const run of runs) {
            for (let i = 0; run.settler !== undefined && i < 5; i++) {
                const report = await run.settler();
                run.settlerReports.push(report);
                if (report.keysFromIndex === 0) {
                    break;
                }
            }
        }
        await drainAll();

        const figures = await convergedFigures(new Map(runs.map((r) => [r.deployment.region, r.admin])), runs[0]!.layout, keys);
        for (const [key, live] of Object.entries(figures.liveByKey)) {
            if (options.limit !== undefined && live > options.limit) {
                exceeded.add(key);
            }
        }
        const perRegion: RegionReport[] = [];
        for (const run of runs) {
            const w = run.workload!;
            const f = figures.perRegion[run.deployment.region]!;
            const sum = (s: FaultStats | undefined) => (s === undefined ? 0 : Object.values(s.injected).reduce((a, b) => a + b, 0));
            perRegion.push({
                region: run.deployment.region,
                role: run.deployment.region === deployment.home ? "home" : "member",
                writes: w.ops,
                created: w.created,
                deleted: w.deleted,
                foreignDeletes: run.clientMetrics.get("ForeignDeletes") ?? 0,
                counted: f.counted,
                bestEffort: f.bestEffort,
                eventual: f.eventual,
                owned: f.owned,
                exact: f.exact,
                apiErrors: w.apiErrors.length,
                faultsInjected: { api: sum(run.faults.api), consumer: run.faults.consumer.reduce((n, s) => n + sum(s), 0) },
                consumer: {
                    invocations: run.emulator.stats.invocations,
                    recordsDelivered: run.emulator.stats.recordsDelivered,
                    recordsFiltered: run.emulator.stats.recordsFiltered,
                },
                dlq: { first: run.queueCounts.first, fatal: await queueDepth(run.queues.fatal), redriven: run.queueCounts.redriven },
                settlerRuns: run.settlerReports.length,
                replication: replicator.regionStats(run.deployment.region),
            });
        }
        const apiErrorList = runs.flatMap((r) => r.workload!.apiErrors.map((e) => ({ region: r.deployment.region, ...e })));
        const total = (f: (r: RegionReport) => number) => perRegion.reduce((n, r) => n + f(r), 0);
        const report: RegionsTwinReport = {
            regions: options.regions,
            home: deployment.home,
            replicationDelayMs: options.replicationDelayMs,
            mode: options.mode,
            limit: options.limit ?? null,
            keys: options.keys,
            faultRate: options.faults,
            ops: total((r) => r.writes),
            created: total((r) => r.created),
            deleted: total((r) => r.deleted),
            live: figures.live,
            eventual: total((r) => r.eventual),
            bestEffort: total((r) => r.bestEffort),
            exact: figures.converged && figures.softDeleted === 0 && perRegion.every((r) => r.exact),
            converged: figures.converged,
            doubleCounted: figures.doubleCounted,
            limitExceededKeys: [...exceeded].sort(),
            apiErrors: apiErrorList.length,
            apiErrorList: apiErrorList.slice(0, API_ERRORS_LISTED),
            observations,
            perRegion,
            liveByKey: figures.liveByKey,
            parity: describeParity(engines[0]!.parity),
            durationMs: Date.now() - started,
            interrupted,
        };
        for (const run of runs) {
            run.admin.destroy();
        }
        sqs.destroy();
        return report;
    } finally {
        await replicator?.stop();
        await sqsServer?.stop();
        await Promise.all(engines.map((e) => e.stop()));
    }
}

/** The report for a person: the pass figures first, then each region's. */
export function printRegionsReport(report: RegionsTwinReport, log: (line: string) => void): void {
    log("");
    log(
        `${report.regions} regions (home ${report.home}), ${report.mode}${report.limit === null ? "" : `, limit ${report.limit}`}, ` +
            `replication delay ${report.replicationDelayMs} ms, faults ${report.faultRate}`,
    );
    log(`exact in every region: ${report.exact}; replicas converged: ${report.converged}; doubleCounted: ${report.doubleCounted}`);
    log(`totals: ops ${report.ops}, live ${report.live}, eventual ${report.eventual}, best-effort ${report.bestEffort}`);
    log(`API errors: ${report.apiErrors}; keys over the limit: ${report.limitExceededKeys.length} (${report.observations} observations)`);
    for (const r of report.perRegion) {
        log(
            `  ${r.region} (${r.role}): ${r.writes} ops, owns ${r.owned} live, eventual ${r.eventual}, best-effort ${r.bestEffort}, ` +
                `counted ${r.counted}, exact ${r.exact}; consumer ${r.consumer.invocations} invocations ` +
                `(${r.consumer.recordsDelivered} delivered, ${r.consumer.recordsFiltered} filtered out); ` +
                `replication: sent ${r.replication.sent}, applied ${r.replication.applied}, lost ${r.replication.lost}`,
        );
    }
    log(report.parity);
}
