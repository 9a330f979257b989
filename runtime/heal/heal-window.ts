/**
 * The time bounds the ledger and the tombstones rest on, and the period they impose.
 *
 * Assumptions (stated once, relied on by runtime/ledger/ledger.ts, runtime/heal/ and runtime/stream/):
 * - A1, a client deadline D: no write of an API call is sent more than `deadlineMs` after the call began.
 * - A2, a request's lifetime L = 300 s: AWS refuses a SigV4-signed request more than five minutes after it was
 *   signed, so a sent request takes effect within L or never.
 * - A3, clock skew S = 60 s between any two of the API hosts, the functions and the settler.
 * So every write of a call takes effect by D + L after the call began, as measured by any clock within S.
 *
 * The ledger's period P must exceed D + L + 2S: a create's writes land in its period's entry before any reader whose
 * clock is up to S ahead sees that period two periods old and removes its entry. `periodFloorMs(D)` is that bound.
 * The component refuses a `healQuietWindowSeconds` (the period) at or below it for its `clientDeadlineMs`, and the
 * client refuses a `deadlineMs` the deployed period does not cover.
 */

/** L: the longest a sent request can take to take effect (the SigV4 signature's five minutes). */
export const REQUEST_LIFETIME_MS = 300_000;
/** S: the clock skew budget between API hosts, the functions and the settler. */
export const CLOCK_SKEW_MS = 60_000;
/** The range of the client's `deadlineMs` option. */
export const MIN_CLIENT_DEADLINE_MS = 100;
export const MAX_CLIENT_DEADLINE_MS = 60_000;

/** D + L + 2S: a period must be strictly longer than this for a client deadline of `deadlineMs`. */
export function periodFloorMs(deadlineMs: number): number {
    return deadlineMs + REQUEST_LIFETIME_MS + 2 * CLOCK_SKEW_MS;
}

/** Whether a period of `periodMs` covers calls with a deadline of `deadlineMs`. */
export function periodCovers(periodMs: number, deadlineMs: number): boolean {
    return periodMs > periodFloorMs(deadlineMs);
}

/** The shortest whole-second period that covers a client deadline of `deadlineMs`. */
export function smallestPeriodSeconds(deadlineMs: number): number {
    return Math.floor(periodFloorMs(deadlineMs) / 1000) + 1;
}

/** D + L + S: after this long no write of a call can land, by any clock (a delete's claim is over). */
export function settledAfterMs(deadlineMs: number): number {
    return deadlineMs + REQUEST_LIFETIME_MS + CLOCK_SKEW_MS;
}

/**
 * D + L + 2S: after this long past a tombstone's time (its life's token, or its delete token) no put attempt it keeps
 * out can land, by any clock. The attempt may be of an earlier life of the id, made on another host: that life began
 * before the tombstone's in real time, so its token reads at most S later than the tombstone's time, and its writes
 * land by D + L + S after its token.
 */
export function tombstoneSettledAfterMs(deadlineMs: number): number {
    return deadlineMs + REQUEST_LIFETIME_MS + 2 * CLOCK_SKEW_MS;
}
