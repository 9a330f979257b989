/**
 * The local twin over several regions (`npm start -- --regions N`): N DynamoDB Local engines play N regions of a
 * global table (the first the home), kept in step by the replicator (local/regions/replicator.ts), last-writer-wins,
 * after `--replication-delay-ms`, with the counters table's TTL run on every replica (local/regions/ttl-sweep.ts).
 * Each region runs what its own HybridCounterComponent deploys (local/regions/deployment.ts: `regions.current` = that
 * region): the consumer bundle behind the mapping emulator with its region's settings, the redrive, the settler on its
 * compressed schedule (local/deployment/pipeline.ts), and a workload on a client built from its `clientConfig` output,
 * with faults in the API and the consumers. Every key's limit is stored once (the item every region shares) before the
 * workload, whose creates are tryCreate without a limit.
 *
 * Pass: once replication and every stream have drained, the replicas are the same in every region, each region's
 * eventual counter of each key equals the live items of the key it owns (exact in every region), no API error, and in
 * strict mode no key ever observed above its limit (the sum over regions of the live items each region owns, read in
 * each region's own replica, where its writes are at once).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HybridCounterClient, type CounterMode } from "../../runtime/client/client";
import type { SettleReport } from "../../runtime/heal/settle";
import { EXPIRES_ATTRIBUTE } from "../../runtime/limits/usage";
import { startLocalSqs, type LocalSqs } from "../aws/sqs";
import { describeParity } from "../engine/parity";
import { startEngine, type LocalEngine } from "../engine/engine";
import { injectFaults, seededRandom, type FaultStats } from "../engine/faults";
import { startPipeline, type LocalPipeline } from "../deployment/pipeline";
import { runWorkload, type WorkloadResult } from "../harness/workload";
import {
    createRegionTables,
    deployRegions,
    regionAsDeployment,
    USER_TABLE,
    type RegionalConfig,
    type RegionDeployment,
    type RegionsDeployment,
} from "../regions/deployment";
import { convergedFigures, ownedLive } from "../regions/figures";
import { Replicator, type RegionReplicationStats } from "../regions/replicator";
import { TtlSweep } from "../regions/ttl-sweep";
import { scheduleRuns, SETTLER_COMPRESSION, settlerPeriodMs } from "./settler";
import { API_ERRORS_LISTED, twinKeys, type TwinWorkloadOptions } from "./options";
import { silencer } from "./silence";

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
    /** Live items the region owns that carry the counted flag. */
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
    /** Items the counters table's TTL deleted in this region's replica (the deletes then replicate). */
    ttlDeleted: number;
    replication: RegionReplicationStats;
}

export interface RegionsTwinReport {
    regions: number;
    home: string;
    replicationDelayMs: number;
    mode: CounterMode;
    /** Every key's stored limit. */
    limit: number;
    keys: number;
    faultRate: number;
    ops: number;
    created: number;
    deleted: number;
    live: number;
    eventual: number;
    bestEffort: number;
    /** Exact in every region: each region's eventual equals the live items it owns, for every key. */
    exact: boolean;
    /** Every engine holds the same items in both tables once replication drained. */
    converged: boolean;
    /** Soft-deleted items left at the end: tombstones the settlers remove once no put attempt of their life can land. */
    tombstones: number;
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
    readonly config: RegionalConfig;
    readonly pipeline: LocalPipeline;
    readonly settlerReports: SettleReport[];
    readonly ttl: TtlSweep;
    readonly faults: { api?: FaultStats; consumer: FaultStats[] };
    workload?: WorkloadResult;
}

interface RegionsSystem {
    readonly deployment: RegionsDeployment;
    readonly engines: LocalEngine[];
    readonly replicator: Replicator;
    readonly runs: RegionRun[];
}

export async function runRegionsTwin(
    options: RegionsTwinOptions,
    log: (line: string) => void,
    stop?: AbortSignal,
): Promise<RegionsTwinReport> {
    const deployment = await deployRegions(options.regions, {
        ...(options.mode === "strict" ? { counterMode: "strict" as const } : {}),
        ...(options.shards === undefined || options.shards === 1 ? {} : { counterShards: options.shards }),
    });
    const engines: LocalEngine[] = [];
    let sqs: LocalSqs | undefined;
    let system: RegionsSystem | undefined;
    try {
        for (let i = 0; i < options.regions; i++) {
            engines.push(await startEngine({ parity: options.parity }));
        }
        sqs = await startLocalSqs();
        system = await startRegions(deployment, engines, sqs, options);
        log(
            `${options.regions} regions (home ${deployment.home}), replication delay ${options.replicationDelayMs} ms; counters table ${system.runs[0]!.config.countersTableName}`,
        );
        const keys = twinKeys(options.keys);
        await storeLimits(system, keys, options.limit);
        const started = Date.now();
        const traffic = await driveRegions(system, keys, options, stop);
        log(`workload done in ${Date.now() - started} ms; draining replication and the streams`);
        await drainRegions(system);
        for (const run of system.runs) {
            if (run.pipeline.settler !== undefined) {
                run.settlerReports.push(await run.pipeline.settler());
            }
        }
        await drainRegions(system);
        return await regionsReport(system, keys, options, { ...traffic, started });
    } finally {
        for (const run of system?.runs ?? []) {
            run.pipeline.close();
            run.admin.destroy();
        }
        await system?.replicator.stop();
        await sqs?.stop();
        await Promise.all(engines.map((e) => e.stop()));
    }
}

/** Every region's tables, the replicator, and each region's pipeline, client and TTL. */
async function startRegions(
    deployment: RegionsDeployment,
    engines: LocalEngine[],
    sqs: LocalSqs,
    options: RegionsTwinOptions,
): Promise<RegionsSystem> {
    const streamArns: string[] = [];
    for (const engine of engines) {
        const admin = engine.dynamodb({ direct: true });
        streamArns.push(await createRegionTables(admin, deployment));
        admin.destroy();
    }
    const countersTableName = deployment.regions[0]!.system.countersTableName;
    const replicator = await Replicator.start({
        engines: deployment.regions.map((r, i) => ({
            region: r.region,
            dynamodb: engines[i]!.dynamodb({ direct: true }),
            streams: engines[i]!.streams(),
        })),
        tables: [USER_TABLE, countersTableName],
        delayMs: options.replicationDelayMs,
    });
    // Lambda logs go to CloudWatch; locally they would drown the report (silence.ts).
    const silence = silencer();
    const runs: RegionRun[] = [];
    for (const [i, region] of deployment.regions.entries()) {
        const engine = engines[i]!;
        const admin = engine.dynamodb({ direct: true });
        const local = regionAsDeployment(region, streamArns[i]!, admin);
        const pipeline = await startPipeline(local, {
            sqs,
            streams: engine.streams(),
            functions: { kind: "bundles", dynamodbEndpoint: engine.endpoint },
            prefix: region.name,
            around: (invocation) => silence(invocation)(),
        });
        const apiDynamo = engine.dynamodb();
        const seed = options.seed * 101 + i * 7;
        const faults: RegionRun["faults"] = { consumer: [] };
        if (options.faults > 0) {
            faults.consumer.push(injectFaults(pipeline.clients.consumer, { rate: options.faults, random: seededRandom(seed + 1) }));
            faults.consumer.push(injectFaults(pipeline.clients.redrive, { rate: options.faults, random: seededRandom(seed + 2) }));
            faults.api = injectFaults(apiDynamo, { rate: options.faults, random: seededRandom(seed + 3) });
        }
        const ttl = new TtlSweep({ dynamodb: admin, table: countersTableName, attribute: EXPIRES_ATTRIBUTE });
        const client = new HybridCounterClient({ ...region.clientConfig, dynamodb: apiDynamo });
        runs.push({ deployment: region, engine, admin, client, config: local.clientLayout, pipeline, settlerReports: [], ttl, faults });
    }
    return { deployment, engines, replicator, runs };
}

/** Stores every key's limit in the home region (one item every region shares) and waits until it reached every region. */
async function storeLimits(system: RegionsSystem, keys: readonly string[], limit: number): Promise<void> {
    const home = system.runs[0]!;
    const operator = new HybridCounterClient({ ...home.deployment.clientConfig, dynamodb: home.admin });
    for (const key of keys) {
        await operator.setLimit(key, limit);
    }
    await system.replicator.drain();
}

/** The traffic: every region's workload, with its mapping, redrive, settler and TTL beside it, and the limit observed. */
async function driveRegions(system: RegionsSystem, keys: readonly string[], options: RegionsTwinOptions, stop?: AbortSignal) {
    const { runs } = system;
    let done = false;
    let interrupted = false;
    stop?.addEventListener("abort", () => (interrupted = true));
    const background = runs.flatMap((run) => {
        const periodMs = settlerPeriodMs(run.deployment.system, SETTLER_COMPRESSION);
        const settler = run.pipeline.settler;
        return [
            run.pipeline.runUntil(() => done),
            sweepTtl(run.ttl, () => done),
            settler === undefined || periodMs === undefined
                ? Promise.resolve()
                : scheduleRuns(periodMs, settler, () => done, run.settlerReports),
        ];
    });
    // Strict: the key's live items, as the regions' clients made them, never above the limit.
    const exceeded = new Set<string>();
    let observations = 0;
    const observing = (async () => {
        for (let i = 0; !done && options.mode === "strict"; i++) {
            const key = keys[i % keys.length]!;
            let live = 0;
            for (const run of runs) {
                live += await ownedLive(run.admin, run.config, run.deployment.region, key);
            }
            observations++;
            if (live > options.limit) {
                exceeded.add(key);
            }
            await new Promise((r) => setTimeout(r, 50));
        }
    })();
    const deadline = options.durationSeconds > 0 ? Date.now() + options.durationSeconds * 1000 : Infinity;
    const share = (total: number, i: number) => Math.floor(total / runs.length) + (i < total % runs.length ? 1 : 0);
    // One list of live items for every region's callers: a delete picks any region's item, so that deletes made
    // outside the owning region are part of the run.
    const live = new Map<string, string[]>();
    try {
        await Promise.all(
            runs.map(async (run, i) => {
                run.workload = await runWorkload(run.client, {
                    live,
                    ops: options.durationSeconds > 0 ? Number.MAX_SAFE_INTEGER : Math.max(1, share(options.ops, i)),
                    keys,
                    concurrency: Math.max(1, share(options.concurrency, i)),
                    deleteRatio: options.deleteRatio,
                    limit: "stored",
                    seed: options.seed * 101 + i * 7,
                    hotKeyShare: 1,
                    stop: () => interrupted || Date.now() >= deadline,
                });
            }),
        );
    } finally {
        done = true;
    }
    await Promise.all([...background, observing]);
    return { exceeded, observations, interrupted };
}

/** The replica's TTL, a pass a second, until `done()`. */
async function sweepTtl(ttl: TtlSweep, done: () => boolean): Promise<void> {
    while (!done()) {
        await ttl.sweep();
        for (let waited = 0; waited < 1_000 && !done(); waited += 50) {
            await new Promise((r) => setTimeout(r, 50));
        }
    }
}

/** Replication, every region's stream and first DLQ, until a whole round changes nothing. */
async function drainRegions(system: RegionsSystem): Promise<void> {
    const { runs, replicator } = system;
    const by = Date.now() + 180_000;
    for (;;) {
        await replicator.drain();
        for (const run of runs) {
            await run.pipeline.drain();
        }
        const invocations = runs.map((r) => r.pipeline.emulator.stats.invocations);
        const applied = runs.map((r) => replicator.regionStats(r.deployment.region).applied);
        await replicator.drain();
        for (const run of runs) {
            await run.pipeline.drain();
        }
        const still = runs.every(
            (r, i) =>
                r.pipeline.emulator.stats.invocations === invocations[i] &&
                replicator.regionStats(r.deployment.region).applied === applied[i],
        );
        if (still && replicator.backlog === 0) {
            return;
        }
        if (Date.now() > by) {
            throw new Error("replication and the streams did not drain within 180 s");
        }
    }
}

async function regionsReport(
    system: RegionsSystem,
    keys: readonly string[],
    options: RegionsTwinOptions,
    traffic: { exceeded: Set<string>; observations: number; interrupted: boolean; started: number },
): Promise<RegionsTwinReport> {
    const { runs, replicator, deployment } = system;
    const figures = await convergedFigures(new Map(runs.map((r) => [r.deployment.region, r.admin])), runs[0]!.config, keys);
    for (const [key, live] of Object.entries(figures.liveByKey)) {
        if (live > options.limit) {
            traffic.exceeded.add(key);
        }
    }
    const injected = (s: FaultStats | undefined) => (s === undefined ? 0 : Object.values(s.injected).reduce((a, b) => a + b, 0));
    const perRegion: RegionReport[] = [];
    for (const run of runs) {
        const w = run.workload!;
        const f = figures.perRegion[run.deployment.region]!;
        const st = run.pipeline.emulator.stats;
        perRegion.push({
            region: run.deployment.region,
            role: run.deployment.region === deployment.home ? "home" : "member",
            writes: w.ops,
            created: w.created,
            deleted: w.deleted,
            ...f,
            apiErrors: w.apiErrors.length,
            faultsInjected: { api: injected(run.faults.api), consumer: run.faults.consumer.reduce((n, s) => n + injected(s), 0) },
            consumer: { invocations: st.invocations, recordsDelivered: st.recordsDelivered, recordsFiltered: st.recordsFiltered },
            dlq: {
                first: run.pipeline.counts.toFirstDlq,
                fatal: await run.pipeline.depth(run.pipeline.queues.fatal),
                redriven: run.pipeline.counts.redriven,
            },
            settlerRuns: run.settlerReports.length,
            ttlDeleted: run.ttl.deleted,
            replication: replicator.regionStats(run.deployment.region),
        });
    }
    const apiErrorList = runs.flatMap((r) => r.workload!.apiErrors.map((e) => ({ region: r.deployment.region, ...e })));
    const total = (f: (r: RegionReport) => number) => perRegion.reduce((n, r) => n + f(r), 0);
    return {
        regions: options.regions,
        home: deployment.home,
        replicationDelayMs: options.replicationDelayMs,
        mode: options.mode,
        limit: options.limit,
        keys: options.keys,
        faultRate: options.faults,
        ops: total((r) => r.writes),
        created: total((r) => r.created),
        deleted: total((r) => r.deleted),
        live: figures.live,
        eventual: total((r) => r.eventual),
        bestEffort: total((r) => r.bestEffort),
        exact: figures.converged && perRegion.every((r) => r.exact),
        converged: figures.converged,
        tombstones: figures.softDeleted,
        limitExceededKeys: [...traffic.exceeded].sort(),
        apiErrors: apiErrorList.length,
        apiErrorList: apiErrorList.slice(0, API_ERRORS_LISTED),
        observations: traffic.observations,
        perRegion,
        liveByKey: figures.liveByKey,
        parity: describeParity(system.engines[0]!.parity),
        durationMs: Date.now() - traffic.started,
        interrupted: traffic.interrupted,
    };
}

/** The report for a person: the pass figures first, then each region's. */
export function printRegionsReport(report: RegionsTwinReport, log: (line: string) => void): void {
    log("");
    log(
        `${report.regions} regions (home ${report.home}), ${report.mode}, limit ${report.limit}, replication delay ${report.replicationDelayMs} ms, faults ${report.faultRate}`,
    );
    log(`exact in every region: ${report.exact}; replicas converged: ${report.converged}; tombstones left: ${report.tombstones}`);
    log(`totals: ops ${report.ops}, live ${report.live}, eventual ${report.eventual}, best-effort ${report.bestEffort}`);
    log(`API errors: ${report.apiErrors}; keys over the limit: ${report.limitExceededKeys.length} (${report.observations} observations)`);
    for (const r of report.perRegion) {
        log(
            `  ${r.region} (${r.role}): ${r.writes} ops, owns ${r.owned} live, eventual ${r.eventual}, best-effort ${r.bestEffort}, ` +
                `counted ${r.counted}, exact ${r.exact}; consumer ${r.consumer.invocations} invocations ` +
                `(${r.consumer.recordsDelivered} delivered, ${r.consumer.recordsFiltered} filtered out); TTL deleted ${r.ttlDeleted}; ` +
                `replication: sent ${r.replication.sent}, applied ${r.replication.applied}, lost ${r.replication.lost}`,
        );
    }
    log(report.parity);
}
