/**
 * The hot-tenant scenario of the benchmark: one counter key driven past what one DynamoDB partition
 * serves (1,000 WCU/s), with the parity layer (local/engine/parity.ts) throttling it as DynamoDB would.
 *
 * Every write of a tenant lands on its partition: the resource items, the best-effort counter (API)
 * and the consumer's write of the eventual counter (one per batch). The scenario drives one key with
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
import type { LocalEngine } from "../local/engine/engine";
import { snapshotKey } from "../local/harness/observe";
import { describeParity } from "../local/engine/parity";
import { runWorkload } from "../local/harness/workload";
import type { CounterMode, HybridCounterClient } from "../runtime/client/client";
import { startBenchSystem, withServers, type BenchServers } from "./system";
import type { CounterPlacement } from "./options";

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
    /** Batches the mapping sent to the first DLQ. */
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

let runs = 0;

/** The client's calls with items of `bytes` bytes of payload: the workload's carry one byte, a tenant's real items more. */
function withPayload(client: HybridCounterClient, bytes: number) {
    const payload = "x".repeat(bytes);
    return {
        create: (key: string, id: string) => client.create(key, id, { payload }),
        tryCreate: (key: string, id: string, limit?: number) => client.tryCreate(key, id, limit, { payload }),
        delete: (key: string, id: string) => client.delete(key, id),
    };
}

async function runOne(
    servers: BenchServers,
    placement: CounterPlacement,
    mode: CounterMode,
    options: HotTenantOptions,
): Promise<HotTenantRow> {
    const { engine } = servers;
    let consumerRetries = 0;
    const system = await startBenchSystem(servers, `hot-tenant-${++runs}`, {
        args: { counterPlacement: COMPONENT_PLACEMENT[placement], counterMode: mode },
        onInvoked: (_event, response) => (consumerRetries += response.batchItemFailures.length > 0 ? 1 : 0),
    });
    try {
        const { deployment, pipeline, lag } = system;
        const { tableName, countersTableName } = deployment.clientLayout;
        const target = withPayload(system.client, options.itemBytes);
        const before = snapshotStats(engine);
        const started = Date.now();
        let done = false;
        const consuming = pipeline.runUntil(() => done);
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
        ).finally(() => (done = true));
        const apiSeconds = (Date.now() - started) / 1000;
        await consuming;
        await pipeline.drain();
        const s = await snapshotKey(system.admin, deployment.clientLayout, TENANT);
        const after = snapshotStats(engine);
        const seconds = (Date.now() - started) / 1000;
        const sumOn = (map: Map<string, number> | undefined, prefix: string) =>
            [...(map ?? new Map<string, number>())].filter(([k]) => k.startsWith(prefix)).reduce((n, [, v]) => n + v, 0);
        const throttledOn = (prefix: string) => sumOn(engine.parity?.stats.throttledByKey, prefix);
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
            dlq: pipeline.counts.toFirstDlq,
            parity: describeParity(engine.parity),
        };
    } finally {
        system.close();
    }
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
            const row = await withServers({ parity: options.parity ? undefined : false }, (servers) =>
                runOne(servers, placement, mode, options),
            );
            rows.push(row);
            log(
                `  hot tenant ${placement.padEnd(16)} ${mode.padEnd(11)} done: ${(row.throttledShare * 100).toFixed(1)}% of requests throttled`,
            );
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
