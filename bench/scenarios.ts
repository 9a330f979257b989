/**
 * The benchmark's scenarios, run as the options say (bench/run.ts parses them first, and loads this module only then:
 * it loads the component and the local system, which takes seconds), and their reports.
 */
import { writeFileSync } from "node:fs";
import { runApproaches, type ApproachesReport } from "./approaches";
import { benchBackfill, describeBackfillRow, type BackfillBenchRow } from "./backfill";
import { runBusyHeal } from "./busy-heal";
import { formatBusyHeal, type BusyHealRow } from "./busy-heal-plan";
import { formatHotKeyCeiling, runHotKeyCeiling, type HotKeyCeilingOptions } from "./hot-key-ceiling";
import { ceilingChartSvg } from "./hot-key-ceiling-plan";
import { formatHotTenant, runHotTenant, type HotTenantRow } from "./hot-tenant";
import type { Options } from "./options";
import { approachesLines, engineNotes } from "./report";

/** What `npm run bench` reports; a scenario that did not run is null. */
export interface BenchReport {
    readonly ops: number;
    readonly concurrency: number;
    readonly faultRate: number;
    readonly parity: boolean;
    readonly modes: string[];
    readonly rows: ApproachesReport["rows"] | null;
    readonly streamNoise: ApproachesReport["streamNoise"];
    readonly hotTenant: HotTenantRow[] | null;
    readonly backfill: BackfillBenchRow | null;
    readonly healing: BusyHealRow[] | null;
}

/** Runs the scenarios `options` names, in order, logging progress. */
export async function runBench(options: Options, log: (line: string) => void): Promise<BenchReport> {
    const approaches = options.scenarios.approaches
        ? await runApproaches(
              {
                  ...options,
                  workloads: [
                      ...(options.workloads.includes("hot-key") ? [{ name: "hot key", keys: ["hot"] }] : []),
                      ...(options.workloads.includes("many-keys")
                          ? [{ name: `${options.manyKeys} keys`, keys: Array.from({ length: options.manyKeys }, (_, i) => `k${i}`) }]
                          : []),
                  ],
              },
              log,
          )
        : null;
    const hotTenant = options.scenarios.hotTenant ? await runHotTenant(options, log) : null;
    const backfill = options.scenarios.backfill
        ? await benchBackfill({ items: options.backfillItems, keys: 50, segments: 4, seed: options.seed, parity: options.parity })
        : null;
    const healing = options.scenarios.healing ? (await runBusyHeal(options.busy, log)).rows : null;
    return {
        ops: options.ops,
        concurrency: options.concurrency,
        faultRate: options.faults,
        parity: options.parity,
        modes: options.modes,
        rows: approaches?.rows ?? null,
        streamNoise: approaches?.streamNoise ?? null,
        hotTenant,
        backfill,
        healing,
    };
}

/** The report for people. */
export function reportLines(report: BenchReport, options: Options): string[] {
    const lines: string[] = [];
    if (report.rows !== null) {
        lines.push(
            "",
            ...approachesLines({ rows: report.rows, streamNoise: report.streamNoise }, options),
            "",
            ...engineNotes(options.parity),
        );
    }
    if (report.hotTenant !== null) {
        lines.push("", ...formatHotTenant(report.hotTenant, options));
    }
    if (report.backfill !== null) {
        lines.push("", ...describeBackfillRow(report.backfill));
    }
    if (report.healing !== null) {
        lines.push("", ...formatBusyHeal(report.healing));
    }
    return lines;
}

/** The hot-key ceiling alone: its progress, its chart when asked, its report. */
export async function runCeiling(
    ceiling: HotKeyCeilingOptions,
    json: boolean,
    log: (line: string) => void,
    print: (line: string) => void,
): Promise<void> {
    const started = Date.now();
    log(
        `hot-key ceiling: ${ceiling.partitionWcu} WCU/s per partition, shards ${ceiling.shards.join(", ")}, ` +
            `${ceiling.stepSeconds} s per step, at most ${ceiling.maxSteps} steps per search`,
    );
    const report = await runHotKeyCeiling(ceiling, log);
    log(`hot-key ceiling done in ${Math.round((Date.now() - started) / 1000)} s`);
    if (ceiling.chart !== undefined) {
        writeFileSync(ceiling.chart, ceilingChartSvg(report));
        log(`chart: ${ceiling.chart}`);
    }
    if (json) {
        print(JSON.stringify(report));
    } else {
        formatHotKeyCeiling(report).forEach(print);
    }
}
