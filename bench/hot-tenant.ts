/**
 * The hot-tenant scenario of the benchmark: one counter key driven past what one DynamoDB partition
 * serves (1,000 WCU/s), with the parity layer (local/engine/parity.ts) throttling it as DynamoDB would.
 *
 * Every write of a tenant lands on its partition: the resource items, the best-effort counter (API)
 * and the consumer's transactions (2 WCU per KB per item). The scenario drives one key with
 * resource items of a realistic size, runs the consumer beside the API, and reports what throttling
 * does to the counter: API errors surfaced, best-effort drift (utilization undercounts) and held
 * slots (strict), lag, and the share of requests throttled.
 *
 * It compares the component's two placements of the counter items, each deployed as every harness
 * deploys the component (local/deployment/deployment.ts: its tables, its client config, its consumer's
 * environment, refused when they disagree):
 * - "tenant-partition": beside the tenant's items (`counterPlacement: "same-table"`);
 * - "own-table": in the counters table the component creates by default (`counterPlacement: "separate"`),
 *   whose partitions the parity layer meters apart from the tenant's.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { assertHarnessAgrees, deployLocally, type LocalDeployment } from "../local/deployment/deployment";
import { LOCAL_FIRST_DLQ, localConsumerEnvironment, startPipeline } from "../local/deployment/pipeline";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { LagMeter } from "../local/harness/lag";
import { snapshotKey } from "../local/harness/observe";
import { describeParity } from "../local/engine/parity";
import { runWorkload } from "../local/harness/workload";
import { HybridCounterClient, type CounterMode, type HybridCounterClientOptions } from "../runtime/client/client";
import { handlerConfigFromEnv, type HandlerConfig } from "../runtime/shared/config";

export type CounterPlacement = "tenant-partition" | "own-table";
export const PLACEMENTS: readonly CounterPlacement[] = ["tenant-partition", "own-table"];

export interface HotTenantOptions {
    readonly ops: number;
    readonly concurrency: number;
    /** Bytes of payload per resource item: large enough that one key passes 1,000 WCU/s at DynamoDB Local's pace. @default 16384 */
    readonly itemBytes: number;
    readonly seed: number;
    /** False: DynamoDB Local without the parity layer, to compare. */
    readonly parity: boolean;
    readonly placements: readonly CounterPlacement[];
}

export interface HotTenantRow {
    placement: CounterPlacement;
    mode: CounterMode;
    ops: number;
    opsPerSec: number;
    /** Errors the client surfaced to the API's callers. */
    apiErrors: number;
    /** Creates refused as "unavailable" (strict: the slot could not be reserved). */
    unavailable: number;
    /** Utilization: live - best-effort at the end (best-effort increments lost to throttling). */
    bestEffortUndercount: number;
    /** Strict: best-effort - live at the end (slots reserved for writes that did not happen). */
    heldSlots: number;
    /** The eventual counter equals the live items once the stream has drained. */
    eventualExact: boolean;
    lagMs: { p50: number; p99: number; max: number };
    /** Write units per second served on the tenant's partition (its items, and its counters when beside them). */
    tenantWcuPerSec: number;
    /** Share of the requests (SDK attempts) the parity layer throttled, all partitions. */
    throttledShare: number;
    /** Throttled requests on the tenant's partition, and on its counters' partition when apart. */
    throttledOnTenant: number;
    throttledOnCounters: number;
    /** Batches the consumer gave back for redelivery. */
    consumerRetries: number;
    dlq: number;
    parity: string;
}

const TENANT = "hot-tenant";
/** A limit no run reaches: strict mode is measured for its held slots, not for its refusals. */
const STRICT_LIMIT = 1_000_000;

/** The component's `counterPlacement` each placement of the scenario deploys. */
export const COMPONENT_PLACEMENT = {
    "tenant-partition": "same-table",
    "own-table": "separate",
} as const satisfies Record<CounterPlacement, "same-table" | "separate">;

/** What one run starts: the component deployed in the placement, the client's options and the consumer's configuration. */
export interface HotTenantSystem {
    readonly deployment: LocalDeployment;
    readonly clientOptions: HybridCounterClientOptions;
    readonly consumerConfig: HandlerConfig;
}

/**
 * Deploys the component in `placement` on the engine and builds the pair the run starts: the client from its
 * `clientConfig`, the consumer from its environment as the pipeline runs it (`localConsumerEnvironment`: the
 * local fatal queue's name in place of the URL). Throws HarnessMismatchError, naming the fields, when they
 * would count in different places.
 */
export async function deployHotTenant(
    admin: DynamoDBClient,
    placement: CounterPlacement,
    client: Pick<HybridCounterClientOptions, "dynamodb" | "mode">,
): Promise<HotTenantSystem> {
    const deployment = await deployLocally(admin, `hot-tenant-${placement}`, { counterPlacement: COMPONENT_PLACEMENT[placement] });
    const clientOptions: HybridCounterClientOptions = { ...deployment.clientConfig, ...client };
    const consumerEnvironment = localConsumerEnvironment(deployment);
    assertHarnessAgrees(clientOptions, { consumer: consumerEnvironment });
    return { deployment, clientOptions, consumerConfig: handlerConfigFromEnv(consumerEnvironment) };
}

async function runOne(
    engine: LocalEngine,
    placement: CounterPlacement,
    mode: CounterMode,
    options: HotTenantOptions,
): Promise<HotTenantRow> {
    const admin = engine.dynamodb();
    const api = engine.dynamodb();
    const { deployment, clientOptions } = await deployHotTenant(admin, placement, { dynamodb: api, mode });
    const { clientLayout: layout } = deployment;
    const { tableName, countersTableName } = layout;
    const consumerDynamo = engine.dynamodb();
    const streams = engine.streams();
    const lag = new LagMeter(layout);
    lag.watchCommits(consumerDynamo);
    let consumerRetries = 0;
    const { emulator, queues } = startPipeline(
        deployment,
        { dynamodb: consumerDynamo, streams },
        {
            functionName: "bench",
            onRead: (record, at) => lag.read(record, at),
            onInvoked: (event, response) => {
                consumerRetries += response.batchItemFailures.length > 0 ? 1 : 0;
                lag.invoked(event, response);
            },
        },
    );
    const client = new HybridCounterClient(clientOptions);
    const payload = "x".repeat(options.itemBytes);
    // The workload's items carry a one-byte payload; a tenant's real items are larger.
    const target = {
        create: (key: string, id: string) => client.create(key, id, { payload }),
        tryCreate: (key: string, id: string, limit: number) => client.tryCreate(key, id, limit, { payload }),
        delete: (key: string, id: string) => client.delete(key, id),
    };
    const before = snapshotStats(engine);

    const started = Date.now();
    let done = false;
    const consuming = (async () => {
        while (!done) {
            const read = await emulator.poll();
            const invoked = await emulator.deliver();
            if (read === 0 && invoked === 0) {
                await new Promise((r) => setTimeout(r, 25));
            }
        }
    })();
    const result = await runWorkload(
        target,
        {
            ops: options.ops,
            keys: [TENANT],
            concurrency: options.concurrency,
            deleteRatio: 0.3,
            limit: mode === "strict" ? STRICT_LIMIT : undefined,
            seed: options.seed,
        },
        (r) => {
            const e = r.events.at(-1);
            if (e) {
                lag.wrote(e);
            }
        },
    );
    const apiSeconds = (Date.now() - started) / 1000;
    done = true;
    await consuming;
    await emulator.drain({ idlePolls: 3, pollIntervalMs: 50 });

    const s = await snapshotKey(admin, tableName, layout, TENANT, countersTableName);
    const after = snapshotStats(engine);
    const sumOn = (map: Map<string, number> | undefined, prefix: string) =>
        [...(map ?? new Map<string, number>())].filter(([k]) => k.startsWith(prefix)).reduce((n, [, v]) => n + v, 0);
    const seconds = (Date.now() - started) / 1000;
    const throttledOn = (prefix: string) =>
        [...(engine.parity?.stats.throttledByKey ?? new Map<string, number>())]
            .filter(([k]) => k.startsWith(prefix))
            .reduce((n, [, v]) => n + v, 0);
    for (const c of [admin, api, consumerDynamo, streams]) {
        c.destroy();
    }
    const requests = after.requests - before.requests;
    const r3 = (n: number) => Math.round(n * 1000) / 1000;
    return {
        placement,
        mode,
        ops: result.ops,
        opsPerSec: Math.round((result.ops / apiSeconds) * 10) / 10,
        apiErrors: result.apiErrors.length,
        unavailable: result.unavailable,
        bestEffortUndercount: Math.max(0, s.live - s.bestEffort),
        heldSlots: Math.max(0, s.bestEffort - s.live),
        eventualExact: s.eventual === s.live,
        lagMs: lag.figures(),
        tenantWcuPerSec: Math.round(sumOn(engine.parity?.stats.writeUnitsByKey, `${tableName}/`) / seconds),
        throttledShare: requests === 0 ? 0 : r3((after.throttled - before.throttled) / requests),
        throttledOnTenant: throttledOn(`${tableName}/`),
        // Beside the tenant's items, the counters' throttles are the tenant's.
        throttledOnCounters: countersTableName === tableName ? 0 : throttledOn(`${countersTableName}/`),
        consumerRetries,
        dlq: queues.sent.get(LOCAL_FIRST_DLQ) ?? 0,
        parity: describeParity(engine.parity),
    };
}

function snapshotStats(engine: LocalEngine): { requests: number; throttled: number } {
    const stats = engine.parity?.stats;
    if (!stats) {
        return { requests: 0, throttled: 0 };
    }
    return { requests: stats.requests, throttled: stats.throttled.reads + stats.throttled.writes + stats.throttled.transactions };
}

/** Runs every placement in both modes, each on a fresh engine. */
export async function runHotTenant(options: HotTenantOptions, log: (line: string) => void): Promise<HotTenantRow[]> {
    const rows: HotTenantRow[] = [];
    for (const placement of options.placements) {
        for (const mode of ["utilization", "strict"] as const) {
            const engine = await startEngine({ parity: options.parity ? undefined : false });
            try {
                const row = await runOne(engine, placement, mode, options);
                rows.push(row);
                log(
                    `  hot tenant ${placement.padEnd(16)} ${mode.padEnd(11)} done: ${(row.throttledShare * 100).toFixed(1)}% of requests throttled`,
                );
            } finally {
                await engine.stop();
            }
        }
    }
    return rows;
}

/** The scenario's table, for the benchmark's human output. */
export function formatHotTenant(rows: readonly HotTenantRow[], options: HotTenantOptions): string[] {
    const header = [
        "counters",
        "mode",
        "ops/s",
        "API errors",
        "unavailable",
        "be under",
        "held slots",
        "exact",
        "lag p50/p99 ms",
        "tenant WCU/s",
        "throttled",
        "on tenant/counters",
        "DLQ",
    ];
    const lines = rows.map((r) => [
        r.placement,
        r.mode,
        r.opsPerSec.toFixed(1),
        String(r.apiErrors),
        String(r.unavailable),
        String(r.bestEffortUndercount),
        String(r.heldSlots),
        String(r.eventualExact),
        `${r.lagMs.p50}/${r.lagMs.p99}`,
        String(r.tenantWcuPerSec),
        `${(r.throttledShare * 100).toFixed(1)}%`,
        `${r.throttledOnTenant}/${r.throttledOnCounters}`,
        String(r.dlq),
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
    const fmt = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ");
    return [
        `Hot tenant: ${options.ops} operations on one key (30% deletes), concurrency ${options.concurrency}, items of ${options.itemBytes} bytes, consumer running beside the API`,
        fmt(header),
        widths.map((w) => "-".repeat(w)).join("  "),
        ...lines.map(fmt),
        '"API errors": errors surfaced to callers; "unavailable": strict creates refused because no slot could be reserved;',
        '"be under": best-effort below live (utilization); ' +
            '"held slots": best-effort above live (strict); "throttled": share of SDK attempts the parity layer throttled.',
        options.parity
            ? '"own-table" keeps the counter items in the counters table the component deploys by default, metered on its own partitions.'
            : "The parity layer was off (--no-parity): DynamoDB Local never throttles, so every row shows no throttling.",
    ];
}
