/**
 * Reading resource properties that may be unknown.
 *
 * During `pulumi preview` the engine hands policies their properties wrapped in
 * `unknownCheckingProxy`: reading a value that is not known yet (an ARN, a name computed by the
 * provider, a policy document built from ARNs) throws `UnknownValueError`. Left uncaught, that error
 * turns the whole policy into an advisory "can't run during preview" note, and in a stack policy it
 * hides every other resource's result. The helpers below read one value at a time and turn an
 * unknown into the `UNKNOWN` marker, so each check can decide what an unknown value means.
 */

import { UnknownValueError } from "@pulumi/policy";

/** Marker for a value that is not known during preview. */
export const UNKNOWN: unique symbol = Symbol("unknown during preview");
export type Unknown = typeof UNKNOWN;

/** A read that may come back unknown. */
export type Maybe<T> = T | Unknown;

function isUnknownValueError(e: unknown): boolean {
    // `instanceof` fails when two copies of @pulumi/policy are loaded (the pack's and the caller's),
    // so the error's name is checked as well.
    return e instanceof UnknownValueError || (e instanceof Error && e.constructor.name === "UnknownValueError");
}

/** Runs `get` and returns its result, or `UNKNOWN` when it touched a value unknown during preview. */
export function read<T>(get: () => T): Maybe<T> {
    try {
        return get();
    } catch (e) {
        if (isUnknownValueError(e)) {
            return UNKNOWN;
        }
        throw e;
    }
}

/** True when a read came back unknown. */
export function isUnknown(value: unknown): value is Unknown {
    return value === UNKNOWN;
}

/** Renders a value for a violation message. */
export function show(value: unknown): string {
    if (value === UNKNOWN) {
        return "(unknown during preview)";
    }
    if (value === undefined) {
        return "unset";
    }
    return JSON.stringify(value);
}
