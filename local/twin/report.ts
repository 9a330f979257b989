/** The twin's report: what it measured, its chart, and the lines a person reads. */
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { CounterMode } from "../../runtime/client/client";
import type { BackfillReport } from "../../runtime/backfill/backfill";
import type { KeySnapshot } from "../harness/observe";
import type { LagFigures, LagSplit } from "../harness/lag";
import type { Crossing, ThresholdFigures } from "../harness/replay";
import type { HealFigures } from "./settler";
import type { Overcount } from "./observer";
import { chartSvg, type Mark, type Panel } from "./chart";

export interface TwinReport {
    ops: number;
    created: number;
    deleted: number;
    live: number;
    eventual: number;
    bestEffort: number;
    /** Every key's eventual counter equals its live items, and its counted items (live and flagged). */
    exact: boolean;
    /** Utilization: keys whose best-effort an observation saw above live by more than the deletes in flight during it. */
    overcountKeys: string[];
    /** The first of those observations: what it read, and the deletes of its key in flight while it read. */
    overcounts: Overcount[];
    /**
     * Utilization: observations that saw best-effort above live by no more than the deletes of the key in flight while
     * they read (a delete decrements, then soft-deletes: the observation read best-effort before the one and the items
     * after the other). Not an overcount (local/harness/calls.ts); counted to show how often the reads met a delete.
     */
    deleteRaces: number;
    /** Keys an observation saw with more live items than their limit (strict: never; utilization: racing creates). */
    limitExceededKeys: string[];
    apiErrors: number;
    /** The first API_ERRORS_LISTED of them: the call, and the error's name and message. */
    apiErrorList: Array<{ operation: string; error: string }>;
    /** From the API call's return to the write that applied its record to the eventual counter: the lag a user sees. */
    lagMs: LagFigures;
    /**
     * The same lag split where the mapping read the record: stream (DynamoDB Local's stream and Lambda's polling
     * cadence) and pipeline (batching, invocation, the consumer's writes).
     */
    lagSplitMs: LagSplit;
    opsPerSec: number;
    consumerRecordsPerSec: number;
    wcuPerOp: { api: number; consumer: number };
    engineReportedWcuPerOp: { api: number; consumer: number };
    dlq: { first: number; fatal: number; redriven: number };
    mode: CounterMode;
    /** Every key's stored limit. */
    limit: number;
    keys: number;
    faultRate: number;
    faultsInjected: { api: number; consumer: number };
    observations: number;
    durationMs: number;
    chart: string;
    /** Each key's best-effort and live count at the end. */
    bestEffortByKey: Record<string, number>;
    liveByKey: Record<string, number>;
    /** Soft-deleted items left at the end: tombstones the settler removes once no put attempt of their life can land. */
    tombstones: number;
    /** The settler on the component's schedule, compressed: its runs and what they healed. */
    heals: HealFigures;
    /**
     * Threshold events: what the topic's subscriber received, against the crossings of every key's eventual count
     * replayed from the table's stream (local/harness/replay.ts).
     */
    thresholds: ThresholdFigures;
    /** Usage history: (key, day) pairs replayed from the stream, and whether `client.usage` equals every one. */
    usage: { days: number; exact: boolean };
    settings: {
        batchSize: number;
        maximumRetryAttempts: number;
        maximumRecordAgeInSeconds: number;
        parallelizationFactor: number;
        tumblingWindowInSeconds: number;
    };
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
     * last observed, at each observation (ms since the start) while the traffic ran, and once after the drain. Null in
     * utilization mode.
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

/** The keys' figures at the end, from one snapshot each. */
export function endFigures(keys: readonly string[], last: ReadonlyMap<string, KeySnapshot>) {
    const sum = (pick: (s: KeySnapshot) => number) => keys.reduce((n, k) => n + pick(last.get(k)!), 0);
    return {
        live: sum((s) => s.live),
        eventual: sum((s) => s.eventual),
        bestEffort: sum((s) => s.bestEffort),
        tombstones: sum((s) => s.softDeleted),
        exact: keys.every((k) => last.get(k)!.eventual === last.get(k)!.live && last.get(k)!.counted === last.get(k)!.live),
        bestEffortByKey: Object.fromEntries(keys.map((k) => [k, last.get(k)!.bestEffort])),
        liveByKey: Object.fromEntries(keys.map((k) => [k, last.get(k)!.live])),
        heldSlots: keys
            .filter((k) => last.get(k)!.bestEffort > last.get(k)!.live)
            .map((key) => ({ key, heldSlots: last.get(key)!.bestEffort - last.get(key)!.live })),
        drift: keys
            .filter((k) => last.get(k)!.eventual !== last.get(k)!.live)
            .map((key) => ({ key, drift: last.get(key)!.eventual - last.get(key)!.live })),
    };
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

/** A crossing as a chart mark: its threshold and direction, at its record's time. */
export function crossingMark(crossing: Crossing, started: number): Mark {
    return {
        x: crossing.time - started,
        label: `${Math.round(crossing.threshold * 100)}%${crossing.direction === "up" ? "↑" : "↓"}`,
        color: crossing.direction === "up" ? "#e377c2" : "#17becf",
    };
}

export interface ChartInput {
    readonly file: string;
    readonly title: string;
    readonly mode: CounterMode;
    readonly offOverTime: ReadonlyArray<[number, number]>;
    readonly keys: readonly string[];
    readonly samples: ReadonlyMap<string, ReadonlyArray<{ t: number; s: KeySnapshot }>>;
    readonly crossings: ReadonlyMap<string, readonly Crossing[]>;
    readonly started: number;
}

/** Writes the chart: the sum of the keys' distance from live over time, then one panel per key, crossings marked. */
export function writeChart(input: ChartInput): string {
    const strict = input.mode === "strict";
    const panels: Panel[] = [
        {
            title: strict
                ? "held slots: Σ best-effort - live over the keys, read while the traffic runs"
                : "drift: Σ |best-effort - live| over the keys, read while the traffic runs",
            series: [{ name: strict ? "held slots" : "drift", color: "#9467bd", points: input.offOverTime }],
        },
        ...input.keys.map((key): Panel => {
            const points = input.samples.get(key) ?? [];
            return {
                title: `${key} (threshold crossings of the eventual count marked)`,
                series: [
                    { name: "true count (live)", color: "#222222", points: points.map((p) => [p.t, p.s.live] as const) },
                    { name: "best-effort", color: "#d62728", points: points.map((p) => [p.t, p.s.bestEffort] as const) },
                    { name: "eventual", color: "#1f77b4", points: points.map((p) => [p.t, p.s.eventual] as const) },
                ],
                marks: (input.crossings.get(key) ?? []).map((c) => crossingMark(c, input.started)),
            };
        }),
    ];
    const file = path.resolve(input.file);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, chartSvg(input.title, panels));
    return file;
}

/** The report for a person. */
export function printTwinReport(report: TwinReport, log: (line: string) => void): void {
    log("");
    log(`exact (eventual == live for every key): ${report.exact}`);
    log(`totals: live ${report.live}, eventual ${report.eventual}, best-effort ${report.bestEffort}, tombstones ${report.tombstones}`);
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
    const t = report.thresholds;
    log(
        `threshold events: ${t.events} received for ${t.crossings} crossings of the limit ${report.limit}; missed ${t.missed}, duplicates ${t.duplicates}, unmatched ${t.unmatched}`,
    );
    log(`usage: ${report.usage.days} key-days, exact ${report.usage.exact}`);
    log(
        report.mode === "utilization"
            ? `keys ever overcounted by best-effort: ${report.overcountKeys.length} (observations that met a delete between their reads: ${report.deleteRaces})`
            : `keys ever over the limit: ${report.limitExceededKeys.length}`,
    );
    const h = report.heals;
    log(
        `settler: ${h.runs} runs (${h.runsWithCallsInFlight} beside calls in flight), ${h.healed} heals (${h.corrected} corrected, drift ${h.drift}), ${h.raced} met writes on every attempt, ${h.removed} tombstones removed`,
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
