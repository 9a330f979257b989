/**
 * The settler in the local twin: read from the component's recorded resources (its function's environment
 * and its schedule), its bundle loaded as Lambda loads it, invoked on the schedule compressed by a factor
 * (the quiet window compressed by the same factor, so the two keep their proportion).
 */
import type { RecordedResource } from "../deployment/pulumi-mocks";
import type { SettleReport } from "../../runtime/heal/settle";
import { SETTLER_ENV } from "../../runtime/heal/settler-config";
export interface TwinSettlerSpec {
    readonly environment: Record<string, string>;
    /** The schedule's period, compressed. */
    readonly periodMs: number;
    /** The quiet window, compressed. */
    readonly quietWindowMs: number;
}

/** Minutes of a `rate(<n> <unit>)` expression. */
function rateMinutes(expression: string): number {
    const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
    if (!match) {
        throw new Error(`the settler's schedule ${JSON.stringify(expression)} is not a rate() expression`);
    }
    const unit = match[2]!.replace(/s$/, "");
    return Number(match[1]) * (unit === "minute" ? 1 : unit === "hour" ? 60 : 1_440);
}

/** The settler as the component declared it, its schedule and quiet window divided by `compression`. */
export function twinSettlerSpec(resources: readonly RecordedResource[], name: string, compression: number): TwinSettlerSpec | undefined {
    const fn = resources.find((r) => r.type === "aws:lambda/function:Function" && r.name === `${name}-settler`);
    const rule = resources.find((r) => r.type === "aws:cloudwatch/eventRule:EventRule" && r.name === `${name}-settler-schedule`);
    if (fn === undefined || rule === undefined) {
        return undefined;
    }
    const environment = { ...(fn.inputs.environment.variables as Record<string, string>) };
    const quietWindowMs = Math.max(1, Math.round(Number(environment[SETTLER_ENV.quietWindowMs]) / compression));
    environment[SETTLER_ENV.quietWindowMs] = String(quietWindowMs);
    // A compressed window cannot cover a real client deadline plus request lifetime: the settler would refuse it.
    delete environment[SETTLER_ENV.clientDeadlineMs];
    return { environment, periodMs: (rateMinutes(rule.inputs.scheduleExpression as string) * 60_000) / compression, quietWindowMs };
}

/**
 * The pause after a run that took `tookMs`: to the end of its period, and never shorter than the run itself. The twin's
 * runs hold the API's calls back (local/harness/calls.ts): runs back to back, as a run longer than the period would
 * have them, would stop the workload, and this way it has the engine at least half the time.
 */
export function pauseAfterRun(periodMs: number, tookMs: number): number {
    return Math.max(periodMs - tookMs, tookMs);
}

/** Invokes `run` every `periodMs` (pausing as `pauseAfterRun` says) until `stop()`; returns every run's report. */
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
