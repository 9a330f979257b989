/**
 * The settler function's configuration: what the component sets in its environment on top of the
 * handlers' shared variables (see config.ts), and how the handler reads it back. Pure.
 */
import { ConfigurationError, handlerConfigFromEnv, type HandlerConfig } from "../shared/config";
import type { HealMode } from "./heal";
import {
    CLOCK_SKEW_MS,
    MAX_CLIENT_DEADLINE_MS,
    MIN_CLIENT_DEADLINE_MS,
    REQUEST_LIFETIME_MS,
    quietWindowFloorMs,
    windowCovers,
} from "./heal-window";

export const SETTLER_ENV = Object.freeze({
    countersTableName: "HYBRID_COUNTER_COUNTERS_TABLE_NAME",
    mode: "HYBRID_COUNTER_MODE",
    quietWindowMs: "HYBRID_COUNTER_HEAL_QUIET_WINDOW_MS",
    keyBudget: "HYBRID_COUNTER_SETTLER_KEY_BUDGET",
    /** The largest `deadlineMs` of the API's clients (the component's `clientDeadlineMs`): the window must cover it. */
    clientDeadlineMs: "HYBRID_COUNTER_CLIENT_DEADLINE_MS",
} as const);

export interface SettlerConfig extends HandlerConfig {
    readonly mode: HealMode;
    readonly quietWindowMs: number;
    readonly keyBudget: number;
    /** The largest client deadline the window was checked against (heal-window.ts), when the environment names it. */
    readonly clientDeadlineMs?: number;
}

export function settlerEnvironment(
    config: Pick<SettlerConfig, "mode" | "quietWindowMs" | "keyBudget" | "countersTableName" | "clientDeadlineMs">,
): Record<string, string> {
    return {
        ...(config.countersTableName === undefined ? {} : { [SETTLER_ENV.countersTableName]: config.countersTableName }),
        [SETTLER_ENV.mode]: config.mode,
        [SETTLER_ENV.quietWindowMs]: String(config.quietWindowMs),
        [SETTLER_ENV.keyBudget]: String(config.keyBudget),
        ...(config.clientDeadlineMs === undefined ? {} : { [SETTLER_ENV.clientDeadlineMs]: String(config.clientDeadlineMs) }),
    };
}

/** Reads the settler's configuration; throws ConfigurationError naming each missing or bad variable. */
export function settlerConfigFromEnv(env: Readonly<Record<string, string | undefined>>): SettlerConfig {
    const problems: string[] = [];
    let base: HandlerConfig | undefined;
    try {
        base = handlerConfigFromEnv(env);
    } catch (error) {
        if (!(error instanceof ConfigurationError)) {
            throw error;
        }
        problems.push(...error.problems);
    }
    const mode = env[SETTLER_ENV.mode];
    if (mode !== "strict" && mode !== "utilization") {
        problems.push(`[${SETTLER_ENV.mode}] must be "strict" or "utilization"`);
    }
    const positive = (name: string): number => {
        const value = Number(env[name]);
        if (!Number.isInteger(value) || value <= 0) {
            problems.push(`[${name}] must be a positive integer`);
        }
        return value;
    };
    const quietWindowMs = positive(SETTLER_ENV.quietWindowMs);
    const keyBudget = positive(SETTLER_ENV.keyBudget);
    // Heal assumption A4 (heal.ts, heal-window.ts): the window must outlast the clients' last writes.
    const deadlineText = env[SETTLER_ENV.clientDeadlineMs];
    const clientDeadlineMs = deadlineText === undefined || deadlineText.length === 0 ? undefined : Number(deadlineText);
    if (clientDeadlineMs !== undefined) {
        if (!Number.isInteger(clientDeadlineMs) || clientDeadlineMs < MIN_CLIENT_DEADLINE_MS || clientDeadlineMs > MAX_CLIENT_DEADLINE_MS) {
            problems.push(
                `[${SETTLER_ENV.clientDeadlineMs}] must be an integer from ${MIN_CLIENT_DEADLINE_MS} to ${MAX_CLIENT_DEADLINE_MS}`,
            );
        } else if (Number.isInteger(quietWindowMs) && quietWindowMs > 0 && !windowCovers(quietWindowMs, clientDeadlineMs)) {
            problems.push(
                `[${SETTLER_ENV.quietWindowMs}] must be above [${SETTLER_ENV.clientDeadlineMs}] + ${REQUEST_LIFETIME_MS / 1000} s request lifetime + ${CLOCK_SKEW_MS / 1000} s clock skew (${quietWindowFloorMs(clientDeadlineMs)} ms)`,
            );
        }
    }
    if (problems.length > 0 || base === undefined) {
        throw new ConfigurationError(problems);
    }
    const countersTableName = env[SETTLER_ENV.countersTableName] || undefined;
    return {
        ...base,
        ...(countersTableName === undefined ? {} : { countersTableName }),
        mode: mode as HealMode,
        quietWindowMs,
        keyBudget,
        ...(clientDeadlineMs === undefined ? {} : { clientDeadlineMs }),
    };
}
