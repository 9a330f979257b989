/**
 * The settler in the local twin: read from the component's recorded resources (its function's environment
 * and its schedule), its bundle loaded as Lambda loads it, invoked on the schedule compressed by a factor
 * (the quiet window compressed by the same factor, so the two keep their proportion).
 */
import type { RecordedResource } from "../deployment/pulumi-mocks";
import type { SettleReport } from "../../runtime/heal/settle";
import { SETTLER_ENV } from "../../runtime/heal/settler-config";
import type { HybridCounterClient } from "../../runtime/client/client";

type ApiCalls = Pick<HybridCounterClient, "create" | "delete" | "tryCreate">;

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

/** Invokes `run` every `periodMs` until `stop()`; returns every run's report. */
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
        const wait = periodMs - (Date.now() - started);
        for (let waited = 0; waited < wait && !stop(); waited += 50) {
            await new Promise((r) => setTimeout(r, Math.min(50, wait - waited)));
        }
    }
}

/**
 * The API calls in flight, so that the twin starts a settler run only between calls. The settler's quiet window is
 * compressed (by SETTLER_COMPRESSION) far below the client's deadline, so the heal's assumption that no write of a
 * call is still in flight once the key has been quiet for the window (runtime/heal/heal.ts, A1-A4) would otherwise rest on
 * this machine's speed. A run that starts with no call in flight reads every finished call's writes; a call that starts
 * after the run read a key either bumps its version first or makes a token younger than the run's clock.
 */
export class CallsInFlight {
    private count = 0;
    private waiters: Array<() => void> = [];

    /** The client, its calls counted. */
    wrap(client: ApiCalls): ApiCalls {
        const track = <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
            (async (...args: A): Promise<R> => {
                this.count++;
                try {
                    return await call(...args);
                } finally {
                    this.count--;
                    if (this.count === 0) {
                        this.waiters.splice(0).forEach((resolve) => resolve());
                    }
                }
            }) as (...args: A) => Promise<R>;
        return {
            create: track(client.create.bind(client)),
            delete: track(client.delete.bind(client)),
            tryCreate: track(client.tryCreate.bind(client)),
        };
    }

    /** Resolves when no call is in flight, or when `stop()` turns true (checked every 50 ms). */
    async idle(stop: () => boolean): Promise<boolean> {
        while (this.count > 0 && !stop()) {
            await Promise.race([new Promise<void>((resolve) => this.waiters.push(resolve)), new Promise((r) => setTimeout(r, 50))]);
        }
        return this.count === 0;
    }
}
