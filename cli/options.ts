/** Parsing of the flags the commands share: each bad value is a UsageError naming its flag, before anything is read. */
import { keyProblem } from "../runtime/shared/keys";
import { UsageError } from "./errors";

export function integerFlag(flag: string, value: string | undefined, min: number, max: number): number | undefined {
    if (value === undefined) {
        return undefined;
    }
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
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

/** A counter key given as `flag`: what the client would accept. */
export function keyFlag(flag: string, value: string): string {
    const problem = keyProblem(value);
    if (problem !== undefined) {
        throw new UsageError(`${flag} ${problem}`);
    }
    return value;
}

/** A limit: a non-negative integer, or `none` (null: no limit of its own). */
export function limitFlag(value: string): number | null {
    if (value === "none") {
        return null;
    }
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) {
        throw new UsageError(`--limit must be a non-negative integer, or none to remove the limit (got "${value}")`);
    }
    return n;
}
