/**
 * Healing's cost and effect, measured on DynamoDB Local as ratios within one run (part of `npm run bench`):
 *
 * - RCU and WCU the settler consumes per key healed (summed from ReturnConsumedCapacity);
 * - the API's throughput with the settler running beside it, against without it (same seed, same faults,
 *   a fresh engine each);
 * - the drift |best-effort - live| summed over the keys, when the traffic stops and once a quiet window
 *   later (after one settler run), with the settler against without it.
 *
 * The traffic is the model client of the counting model (local/harness/model-client.ts): calls that stall past
 * their deadline abandon their second write, so best-effort drifts and healing has work to do. The quiet
 * window and the deadline are compressed (seconds instead of minutes); keys take traffic in turns.
 */
import { startEngine } from "../local/engine/engine";
import { keyState, runHealRace, type HealRaceOptions } from "../local/harness/heal-race";
import type { ModelMode } from "../local/harness/model-client";
import { deployLocally } from "../local/deployment/deployment";
import { settle } from "../runtime/heal/settle";

export interface HealBenchOptions {
    readonly ops: number;
    readonly concurrency: number;
    readonly faults: number;
    readonly seed: number;
}

export interface HealBenchRow {
    readonly mode: ModelMode;
    readonly opsPerSecWithout: number;
    readonly opsPerSecWith: number;
    /** Throughput with the settler running ÷ without. */
    readonly throughputRatio: number;
    readonly keysHealed: number;
    /**
     * What a heal that healed consumed, per key healed: its best-effort read and partition read (and in strict
     * mode the markers, when a flag can count), the conditional write and the index entry's removal.
     */
    readonly rcuPerKeyHealed: number;
    readonly wcuPerKeyHealed: number;
    /** Heals that found nothing to write (a key still busy, a lost race), and what they read and wrote per key healed. */
    readonly checks: number;
    readonly checkRcuPerKeyHealed: number;
    readonly checkWcuPerKeyHealed: number;
    /** What the settler runs consumed in all, per key healed: the heal index, and settling the items no consumer counted here. */
    readonly runRcuPerKeyHealed: number;
    readonly runWcuPerKeyHealed: number;
    /** Σ|best-effort - live| over the keys when the traffic stops. */
    readonly driftAtEndWithout: number;
    readonly driftAtEndWith: number;
    /** The same, a quiet window later and after one settler run (with) or none (without). */
    readonly driftAfterWindowWithout: number;
    readonly driftAfterWindowWith: number;
}

const DEADLINE_MS = 300;
const QUIET_MS = 3_000;
const KEYS = Array.from({ length: 9 }, (_, i) => `k${i}`);

async function measure(mode: ModelMode, settler: boolean, options: HealBenchOptions) {
    const engine = await startEngine();
    try {
        const admin = engine.dynamodb();
        // The tables the component deploys (its default placement: the counters in a table of their own).
        const { clientLayout: config } = await deployLocally(admin, `heal-bench-${mode}-${settler ? "with" : "without"}`);
        const race: HealRaceOptions = {
            config,
            client: () => engine.dynamodb(),
            mode,
            ops: options.ops,
            keys: KEYS,
            rotateMs: 2_000,
            activeKeys: 3,
            idsPerKey: 12,
            concurrency: options.concurrency,
            ...(mode === "strict" ? { limit: 8 } : {}),
            deleteRatio: 0.4,
            faultRate: options.faults,
            stallRate: 0.02,
            deadlineMs: DEADLINE_MS,
            quietWindowMs: QUIET_MS,
            settler,
            observe: false,
            seed: options.seed,
        };
        const result = await runHealRace(race);
        const drift = async () => {
            let sum = 0;
            for (const key of KEYS) {
                const s = await keyState(admin, config, key);
                sum += Math.abs(s.bestEffort - s.live);
            }
            return sum;
        };
        const driftAtEnd = await drift();
        await new Promise((r) => setTimeout(r, QUIET_MS + 10));
        const runs = [...result.settlerRuns];
        if (settler) {
            runs.push(
                await settle({
                    config,
                    dynamodb: engine.dynamodb(),
                    mode,
                    quietWindowMs: QUIET_MS,
                    fatal: { park: async () => true },
                    auditSegments: 0,
                }),
            );
        }
        return {
            opsPerSec: (result.ops / result.trafficMs) * 1000,
            driftAtEnd,
            driftAfterWindow: await drift(),
            healed: runs.reduce((n, r) => n + r.healed, 0),
            rcu: runs.reduce((n, r) => n + r.heal.healed.readUnits, 0),
            wcu: runs.reduce((n, r) => n + r.heal.healed.writeUnits, 0),
            checks: runs.reduce((n, r) => n + r.heal.checks.count, 0),
            checkRcu: runs.reduce((n, r) => n + r.heal.checks.readUnits, 0),
            checkWcu: runs.reduce((n, r) => n + r.heal.checks.writeUnits, 0),
            runRcu: runs.reduce((n, r) => n + r.readUnits, 0),
            runWcu: runs.reduce((n, r) => n + r.writeUnits, 0),
        };
    } finally {
        await engine.stop();
    }
}

const r2 = (n: number) => Math.round(n * 100) / 100;

export async function runHealBench(options: HealBenchOptions, log: (line: string) => void): Promise<HealBenchRow[]> {
    const rows: HealBenchRow[] = [];
    for (const mode of ["strict", "utilization"] as const) {
        const without = await measure(mode, false, options);
        const withSettler = await measure(mode, true, options);
        rows.push({
            mode,
            opsPerSecWithout: r2(without.opsPerSec),
            opsPerSecWith: r2(withSettler.opsPerSec),
            throughputRatio: r2(withSettler.opsPerSec / without.opsPerSec),
            keysHealed: withSettler.healed,
            rcuPerKeyHealed: withSettler.healed === 0 ? 0 : r2(withSettler.rcu / withSettler.healed),
            wcuPerKeyHealed: withSettler.healed === 0 ? 0 : r2(withSettler.wcu / withSettler.healed),
            checks: withSettler.checks,
            checkRcuPerKeyHealed: withSettler.healed === 0 ? 0 : r2(withSettler.checkRcu / withSettler.healed),
            checkWcuPerKeyHealed: withSettler.healed === 0 ? 0 : r2(withSettler.checkWcu / withSettler.healed),
            runRcuPerKeyHealed: withSettler.healed === 0 ? 0 : r2(withSettler.runRcu / withSettler.healed),
            runWcuPerKeyHealed: withSettler.healed === 0 ? 0 : r2(withSettler.runWcu / withSettler.healed),
            driftAtEndWithout: without.driftAtEnd,
            driftAtEndWith: withSettler.driftAtEnd,
            driftAfterWindowWithout: without.driftAfterWindow,
            driftAfterWindowWith: withSettler.driftAfterWindow,
        });
        log(`  healing ${mode.padEnd(11)} done: throughput with/without settler ${rows.at(-1)!.throughputRatio}`);
    }
    return rows;
}

/** The rows as the bench prints them. */
export function healBenchLines(rows: readonly HealBenchRow[], options: HealBenchOptions): string[] {
    const lines = [
        `Healing: ${options.ops} operations per run, 9 keys taking traffic 3 at a time, ${(options.faults * 100).toFixed(1)}% faults,`,
        `2% of calls stalled past a ${DEADLINE_MS} ms deadline, quiet window ${QUIET_MS} ms (compressed)`,
        "mode         ops/s with÷without settler  keys healed  RCU/key  WCU/key  checks (RCU/key)  drift at end without/with  after a window without/with",
    ];
    for (const r of rows) {
        lines.push(
            `${r.mode.padEnd(12)} ${`${r.throughputRatio} (${r.opsPerSecWith}/${r.opsPerSecWithout})`.padEnd(27)} ${String(r.keysHealed).padEnd(12)} ${String(r.rcuPerKeyHealed).padEnd(8)} ${String(r.wcuPerKeyHealed).padEnd(8)} ${`${r.checks} (${r.checkRcuPerKeyHealed})`.padEnd(17)} ${`${r.driftAtEndWithout}/${r.driftAtEndWith}`.padEnd(26)} ${r.driftAfterWindowWithout}/${r.driftAfterWindowWith}`,
        );
    }
    return lines;
}

// `npx tsx bench/heal.ts [--ops N] [--faults R]`: the healing section alone (npm run bench runs it after the approaches).
if (require.main === module) {
    const arg = (name: string, fallback: number) => {
        const i = process.argv.indexOf(`--${name}`);
        return i >= 0 ? Number(process.argv[i + 1]) : fallback;
    };
    const options = { ops: arg("ops", 1_500), concurrency: arg("concurrency", 8), faults: arg("faults", 0.05), seed: arg("seed", 1) };
    runHealBench(options, (line) => process.stderr.write(`${line}\n`)).then(
        (rows) => {
            for (const line of healBenchLines(rows, options)) {
                process.stdout.write(`${line}\n`);
            }
            process.exit(0);
        },
        (error: unknown) => {
            process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
            process.exit(1);
        },
    );
}
