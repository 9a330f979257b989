/**
 * What the twin observes while the traffic runs: one key at a time, round robin, its counters and items
 * (local/harness/observe.ts), checked against the mode's bound with the slack the calls in flight during the reads
 * allow (local/harness/calls.ts), and kept for the chart; and the progress lines a person watches.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../../runtime/shared/config";
import type { CounterMode } from "../../runtime/client/client";
import { snapshotKey, type KeySnapshot } from "../harness/observe";
import type { CallsInFlight } from "../harness/calls";
import type { LagMeter } from "../harness/lag";
import type { WorkloadResult } from "../harness/workload";
import type { LocalPipeline } from "../deployment/pipeline";

export interface Overcount {
    key: string;
    atMs: number;
    bestEffort: number;
    live: number;
    deletesInFlight: number;
}

export class TwinObserver {
    readonly samples: Map<string, Array<{ t: number; s: KeySnapshot }>>;
    /** Utilization: keys whose best-effort an observation saw above live by more than the deletes in flight during it. */
    readonly overcountKeys = new Set<string>();
    readonly overcounts: Overcount[] = [];
    /** Observations that saw best-effort above live by no more than the deletes of the key in flight while they read. */
    deleteRaces = 0;
    /** Keys an observation saw with more live items than their limit. */
    readonly exceeded = new Set<string>();
    observations = 0;
    /** Each key's best-effort - live (strict) or |best-effort - live| (utilization) as last observed, and their sum over time. */
    private readonly offByKey = new Map<string, number>();
    readonly offOverTime: Array<[number, number]> = [];

    constructor(
        private readonly reader: DynamoDBClient,
        private readonly config: CounterConfig,
        readonly keys: readonly string[],
        private readonly mode: CounterMode,
        private readonly limit: number,
        private readonly started: number,
    ) {
        this.samples = new Map(keys.map((k) => [k, []]));
    }

    /** Observes one key at a time, round robin, about 20 a second, until `done()`. */
    async run(calls: CallsInFlight, done: () => boolean): Promise<void> {
        for (let i = 0; !done(); i++) {
            const key = this.keys[i % this.keys.length]!;
            // The snapshot reads best-effort, then the items: a delete in flight meanwhile may have decremented after
            // the one read and soft-deleted before the other (local/harness/calls.ts, window).
            const during = calls.window(key);
            const s = await snapshotKey(this.reader, this.config, key);
            const slack = during().deletes;
            this.observations++;
            this.record(key, s);
            if (this.mode === "utilization" && s.bestEffort > s.live) {
                if (s.bestEffort > s.live + slack) {
                    this.overcountKeys.add(key);
                    this.overcounts.push({
                        key,
                        atMs: Date.now() - this.started,
                        bestEffort: s.bestEffort,
                        live: s.live,
                        deletesInFlight: slack,
                    });
                } else {
                    this.deleteRaces++;
                }
            }
            if (s.live > this.limit) {
                this.exceeded.add(key);
            }
            await new Promise((r) => setTimeout(r, 50));
        }
    }

    /** Keeps a snapshot of `key` for the chart and the sum over time. */
    record(key: string, s: KeySnapshot): void {
        const at = Date.now() - this.started;
        this.samples.get(key)!.push({ t: at, s });
        this.offByKey.set(key, this.mode === "strict" ? s.bestEffort - s.live : Math.abs(s.bestEffort - s.live));
        this.offOverTime.push([at, [...this.offByKey.values()].reduce((a, b) => a + b, 0)]);
    }
}

/** Redraws the progress lines on a terminal (one line a second otherwise); nothing without `out`. */
export function progressRenderer(
    out: NodeJS.WriteStream | null,
    observer: TwinObserver,
    workload: () => WorkloadResult | undefined,
    pipeline: LocalPipeline,
    lag: LagMeter,
): (final?: boolean) => void {
    let drawn = 0;
    const shown = observer.keys.slice(0, 8);
    return (final = false) => {
        if (!out) {
            return;
        }
        const w = workload();
        const header =
            `ops ${w?.ops ?? 0} (created ${w?.created ?? 0}, deleted ${w?.deleted ?? 0}, API errors ${w?.apiErrors.length ?? 0}) | ` +
            `consumer: ${pipeline.emulator.stats.invocations} invocations, backlog ${pipeline.emulator.backlog}, lag p50 ${lag.figures().p50} ms | ` +
            `DLQ first ${pipeline.counts.toFirstDlq}, redriven ${pipeline.counts.redriven} | threshold events ${pipeline.thresholds?.received.length ?? 0}`;
        if (!out.isTTY) {
            out.write(`${final ? "final " : ""}${header}\n`);
            return;
        }
        const rows = shown.map((key) => {
            const s = observer.samples.get(key)?.at(-1)?.s;
            return `  ${key}  best-effort ${String(s?.bestEffort ?? 0).padStart(5)}  eventual ${String(s?.eventual ?? 0).padStart(5)}  live ${String(s?.live ?? 0).padStart(5)}`;
        });
        if (observer.keys.length > shown.length) {
            rows.push(`  ... and ${observer.keys.length - shown.length} more keys`);
        }
        const legend =
            "  best-effort: the API's counter (utilization: never above live; strict: reserved slots) | " +
            "eventual: the stream consumer's | live: items that exist (the truth)";
        const lines = [header, legend, ...rows];
        out.write(`${drawn > 0 ? `\x1b[${drawn}A` : ""}${lines.map((l) => `\x1b[2K${l}`).join("\n")}\n`);
        drawn = lines.length;
    };
}
