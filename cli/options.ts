/** Parsing of the numeric and choice flags the commands share: each bad value is a UsageError naming its flag. */
import { UsageError } from "./context";

export function integerFlag(flag: string, value: string | undefined, min: number, max: number): number | undefined {
    if (value === undefined) {
        return undefined;
    }
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < min || n > max) {
        throw new UsageError(`${flag} must be an integer from ${min} to ${max} (got "${value}")`);
    }
    return n;
}

export function numberFlag(flag: string, value: string | undefined, min: number, max: number): number | undefined {
    if (value === undefined) {
        return undefined;
    }
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n) || n <= min || n > max) {
        throw new UsageError(`${flag} must be a number above ${min} and at most ${max} (got "${value}")`);
    }
    return n;
}

export function modeFlag(value: string | undefined): "utilization" | "strict" {
    if (value !== "utilization" && value !== "strict") {
        throw new UsageError(`--mode must be utilization or strict (got ${value === undefined ? "nothing" : `"${value}"`})`);
    }
    return value;
}

/** A point in time: ISO 8601 text (`2026-01-15T09:00:00Z`) or milliseconds since the epoch. */
export function timeFlag(flag: string, value: string | undefined): number | undefined {
    if (value === undefined) {
        return undefined;
    }
    const ms = /^\d+$/.test(value.trim()) ? Number(value) : /^\d{4}-\d{2}-\d{2}/.test(value.trim()) ? Date.parse(value) : NaN;
    if (!Number.isSafeInteger(ms) || ms < 0) {
        throw new UsageError(`${flag} must be an ISO 8601 time (2026-01-15T09:00:00Z) or milliseconds since the epoch (got "${value}")`);
    }
    return ms;
}
