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
