/**
 * The client's own retry loop, on top of the SDK's: used only for writes that are safe to repeat
 * (recognised by their token, or moving a counter in its mode's safe direction).
 */

const BACKOFF_BASE_MS = 10;
const BACKOFF_CAP_MS = 400;

/** Calls `fn` up to `attempts` times while `retryable` says its error is worth another try. */
export async function withRetries<T>(fn: () => Promise<T>, retryable: (error: unknown) => boolean, attempts: number): Promise<T> {
    for (let attempt = 1; ; attempt++) {
        try {
            return await fn();
        } catch (error) {
            if (attempt >= attempts || !retryable(error)) {
                throw error;
            }
            const delay = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt) * Math.random();
            await new Promise((r) => setTimeout(r, delay));
        }
    }
}
