/**
 * The settler in the local twin and the busy-key bench: read from the component's recorded resources (its function's
 * environment and its schedule), invoked on the schedule compressed by a factor (the quiet window compressed by the
 * same factor, so the two keep their proportion).
 *
 * The settler runs beside the API's calls, nothing held back, so the heal's assumption A4 (runtime/heal/heal-window.ts:
 * Q > D + L + S) must hold in compressed time too. The harnesses give their clients COMPRESSED_CLIENT_DEADLINE_MS as
 * `deadlineMs` (D), and run every party on one host's clock with no request abandoned in flight (no request timeout),
 * so a write lands before its answer: L is the longest a request takes, budgeted at REQUEST_LIFETIME_BUDGET_MS, and S
 * is 0, budgeted at SKEW_BUDGET_MS. `assertCompressionCovers` checks Q > D + L + S for the compressed window.
 */
import type { RecordedResource } from "../deployment/pulumi-mocks";
import type { SettleReport } from "../../runtime/heal/settle";
import { SETTLER_ENV } from "../../runtime/heal/settler-config";
import { ledgerPeriodMs } from "../../runtime/ledger/ledger";
export interface TwinSettlerSpec {
    readonly environment: Record<string, string>;
    /** The schedule's period, compressed. */
    readonly periodMs: number;
    /** The quiet window, compressed. */
    readonly quietWindowMs: number;
    /**
     * The clients' ledger period for the compressed window (the client's `ledgerPeriodSeconds`): what the component's
     * clients derive from its `healQuietWindowSeconds`, compressed with it (runtime/ledger/ledger.ts).
     */
    readonly ledgerPeriodSeconds: number;
}

/** The settler's schedule and quiet window run this many times faster than the component declares them (600 s: 10 s). */
export const SETTLER_COMPRESSION = 60;
/** The `deadlineMs` of the harnesses' clients: their calls send no write later than this after their first. */
export const COMPRESSED_CLIENT_DEADLINE_MS = 4_000;
/** The request lifetime the compressed window covers: a request taking longer breaks the heal's assumption A2 here. */
export const REQUEST_LIFETIME_BUDGET_MS = 5_000;
/** The clock skew budget (every party reads one host's clock: the true skew is 0). */
export const SKEW_BUDGET_MS = 100;

/** Refuses a compressed window that does not cover D + L + S (the heal's A4), naming the figures. */
export function assertCompressionCovers(quietWindowMs: number, deadlineMs = COMPRESSED_CLIENT_DEADLINE_MS): void {
    const floor = deadlineMs + REQUEST_LIFETIME_BUDGET_MS + SKEW_BUDGET_MS;
    if (!(quietWindowMs > floor)) {
        throw new Error(
            `the compressed quiet window (${quietWindowMs} ms) does not cover the deadline ${deadlineMs} ms + request lifetime ` +
                `${REQUEST_LIFETIME_BUDGET_MS} ms + skew ${SKEW_BUDGET_MS} ms = ${floor} ms`,
        );
    }
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
    // The settler checks its window against the real request lifetime and skew (heal-window.ts), which no compressed
    // window covers: the harness checks the compressed ones instead (assertCompressionCovers).
    delete environment[SETTLER_ENV.clientDeadlineMs];
    return {
        environment,
        periodMs: (rateMinutes(rule.inputs.scheduleExpression as string) * 60_000) / compression,
        quietWindowMs,
        ledgerPeriodSeconds: ledgerPeriodMs(quietWindowMs / 1000) / 1000,
    };
}

/**
 * The pause after a run that took `tookMs`: to the end of its period, none when the run outlasted it (EventBridge
 * would have invoked the next one meanwhile). The API's calls go on during a run, so back-to-back runs stop nothing.
 */
export function pauseAfterRun(periodMs: number, tookMs: number): number {
    return Math.max(periodMs - tookMs, 0);
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
