/**
 * The settler in the local twin: the component's function (local/deployment/pipeline.ts builds it), invoked on the
 * component's schedule compressed by a factor, beside the API's calls, nothing held back.
 *
 * Only the schedule is compressed: a run of a minute sees the settler run beside the traffic as often as a run of an
 * hour would. The ledger's period (`healQuietWindowSeconds`) is not: the client refuses a deadline it does not cover
 * and the heal's time bounds are the deployed ones (runtime/heal/heal-window.ts), so every party runs them as deployed.
 */
import type { SettleReport } from "../../runtime/heal/settle";
import type { DeployedSystem } from "../deployment/system";

/** The settler's schedule runs this many times faster than the component declares it (5 minutes: 5 s). */
export const SETTLER_COMPRESSION = 60;

/** Minutes of a `rate(<n> <unit>)` expression. */
export function rateMinutes(expression: string): number {
    const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
    if (!match) {
        throw new Error(`the settler's schedule ${JSON.stringify(expression)} is not a rate() expression`);
    }
    const unit = match[2]!.replace(/s$/, "");
    return Number(match[1]) * (unit === "minute" ? 1 : unit === "hour" ? 60 : 1_440);
}

/** The period of the settler's schedule divided by `compression` (ms); undefined when the component deploys no settler. */
export function settlerPeriodMs(system: Pick<DeployedSystem, "settler">, compression: number): number | undefined {
    return system.settler === undefined ? undefined : (rateMinutes(system.settler.scheduleExpression) * 60_000) / compression;
}

/**
 * The pause after a run that took `tookMs`: to the end of its period, none when the run outlasted it (EventBridge
 * would have invoked the next one meanwhile). The API's calls go on during a run, so back-to-back runs stop nothing.
 */
export function pauseAfterRun(periodMs: number, tookMs: number): number {
    return Math.max(periodMs - tookMs, 0);
}

/** Invokes `run` every `periodMs` (pausing as `pauseAfterRun` says) until `stop()`; pushes every run's report. */
export async function scheduleRuns(
    periodMs: number,
    run: () => Promise<SettleReport>,
    stop: () => boolean,
    reports: SettleReport[],
): Promise<void> {
    while (!stop()) {
        const started = Date.now();
        try {
            reports.push(await run());
        } catch {
            // A failed run: Lambda would record an error (and the alarm fire); the next run goes on.
        }
        const wait = pauseAfterRun(periodMs, Date.now() - started);
        for (let waited = 0; waited < wait && !stop(); waited += 50) {
            await new Promise((r) => setTimeout(r, Math.min(50, wait - waited)));
        }
    }
}

/** The settler's runs added up, as the twin reports them. */
export interface HealFigures {
    runs: number;
    healed: number;
    corrected: number;
    drift: number;
    raced: number;
    removed: number;
    audited: number;
    failedKeys: number;
    /** Runs that started while API calls were in flight: the settler runs beside the traffic, nothing held back. */
    runsWithCallsInFlight: number;
}

export function healFigures(reports: readonly SettleReport[], runsWithCallsInFlight: number): HealFigures {
    const sum = (pick: (r: SettleReport) => number) => reports.reduce((n, r) => n + pick(r), 0);
    return {
        runs: reports.length,
        healed: sum((r) => r.healed),
        corrected: sum((r) => r.corrected),
        drift: sum((r) => r.drift),
        raced: sum((r) => r.raced),
        removed: sum((r) => r.removed),
        audited: sum((r) => r.audited),
        failedKeys: sum((r) => r.failedKeys.length),
        runsWithCallsInFlight,
    };
}
