/**
 * The backfill function's environment: the counter's configuration (the same variables as every function's) and the
 * run's settings. Pure (no SDK), so the component builds the environment the handler reads.
 */
import { ConfigurationError, counterConfigFromEnv, counterEnvironment, type CounterConfig } from "../shared/config";

export const BACKFILL_ENV = Object.freeze({
    segments: "HYBRID_COUNTER_BACKFILL_SEGMENTS",
    readUnitsPerSecond: "HYBRID_COUNTER_BACKFILL_READ_UNITS",
    writeUnitsPerSecond: "HYBRID_COUNTER_BACKFILL_WRITE_UNITS",
    capacityShare: "HYBRID_COUNTER_BACKFILL_CAPACITY_SHARE",
} as const);

export interface BackfillSettings {
    readonly segments: number;
    readonly readUnitsPerSecond?: number;
    readonly writeUnitsPerSecond?: number;
    readonly capacityShare?: number;
}

export function backfillEnvironment(config: CounterConfig, settings: BackfillSettings): Record<string, string> {
    const optional = (name: string, value: number | undefined) => (value === undefined ? {} : { [name]: String(value) });
    return {
        ...counterEnvironment(config),
        [BACKFILL_ENV.segments]: String(settings.segments),
        ...optional(BACKFILL_ENV.readUnitsPerSecond, settings.readUnitsPerSecond),
        ...optional(BACKFILL_ENV.writeUnitsPerSecond, settings.writeUnitsPerSecond),
        ...optional(BACKFILL_ENV.capacityShare, settings.capacityShare),
    };
}

/** Reads the backfill function's configuration; throws ConfigurationError naming each bad variable. */
export function backfillFromEnv(env: Readonly<Record<string, string | undefined>>): { config: CounterConfig; settings: BackfillSettings } {
    const problems: string[] = [];
    let config: CounterConfig | undefined;
    try {
        config = counterConfigFromEnv(env);
    } catch (error) {
        problems.push(...(error as ConfigurationError).problems);
    }
    const number = (name: string): number | undefined => {
        const raw = env[name];
        if (raw === undefined || raw === "") {
            return undefined;
        }
        const value = Number(raw);
        if (!Number.isFinite(value) || value <= 0) {
            problems.push(`[${name}] must be a positive number`);
        }
        return value;
    };
    const settings: BackfillSettings = {
        segments: number(BACKFILL_ENV.segments) ?? 4,
        readUnitsPerSecond: number(BACKFILL_ENV.readUnitsPerSecond),
        writeUnitsPerSecond: number(BACKFILL_ENV.writeUnitsPerSecond),
        capacityShare: number(BACKFILL_ENV.capacityShare),
    };
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return { config: config!, settings };
}
