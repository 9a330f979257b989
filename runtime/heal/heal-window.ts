/**
 * The heal's quiet window and the client deadline it must cover (assumption A4 at the top of heal.ts).
 *
 * Bound kept here: a heal of key k trusts that every write of every call that touched k has landed or
 * will never land once the best-effort item has been left alone for the quiet window Q. A call sends no
 * write later than its deadline D after it began (A1); a sent request takes effect within the request
 * lifetime L = 300 s or never (A2: AWS refuses a SigV4 request more than five minutes after it was signed);
 * the clocks of the API hosts and the settler differ by at most S = 60 s (A3). So the heal is safe when
 *
 *     Q > D + L + S
 *
 * `quietWindowFloorMs(D)` is the right-hand side. The component refuses a window at or below the floor of
 * the largest deadline its clients may use (`clientDeadlineMs`), the settler refuses to start with such a
 * window when its environment names that deadline, and the client refuses (at construction) a `deadlineMs`
 * the deployed window does not cover (`healQuietWindowSeconds` in the component's clientConfig).
 */

/** L: the longest a sent request can take to take effect (the SigV4 signature's five minutes). */
export const REQUEST_LIFETIME_MS = 300_000;
/** S: the clock skew budget between API hosts and the settler. */
export const CLOCK_SKEW_MS = 60_000;
/** The range of the client's `deadlineMs` option. */
export const MIN_CLIENT_DEADLINE_MS = 100;
export const MAX_CLIENT_DEADLINE_MS = 60_000;

/** D + L + S: a quiet window must be strictly longer than this for a client deadline of `deadlineMs`. */
export function quietWindowFloorMs(deadlineMs: number): number {
    return deadlineMs + REQUEST_LIFETIME_MS + CLOCK_SKEW_MS;
}

/** Whether a quiet window of `windowMs` covers calls with a deadline of `deadlineMs`. */
export function windowCovers(windowMs: number, deadlineMs: number): boolean {
    return windowMs > quietWindowFloorMs(deadlineMs);
}

/** The shortest whole-second quiet window that covers a client deadline of `deadlineMs`. */
export function smallestQuietWindowSeconds(deadlineMs: number): number {
    return Math.floor(quietWindowFloorMs(deadlineMs) / 1000) + 1;
}

/** The largest whole-millisecond client deadline a quiet window of `windowMs` covers (may be below the client's minimum). */
export function largestCoveredDeadlineMs(windowMs: number): number {
    return windowMs - REQUEST_LIFETIME_MS - CLOCK_SKEW_MS - 1;
}
