/**
 * The checker's clock: real time plus an offset that only grows. A settler run moves it past the quiet
 * window, as an hour of wall time would, so that the heals it allows run in a history of seconds.
 *
 * Every party reads time through `Date.now` (tokens, the client's deadlines and last-write times, the
 * heal's cutoff, the consumer's budget, backfill), so the whole system sees one clock. It is installed
 * for one history and restored after it; the scheduler decides what runs next, never this clock.
 */
export class VirtualTime {
    private offset = 0;
    private readonly real = Date.now;

    install(): void {
        const real = this.real;
        Date.now = () => real() + this.offset;
    }

    /** Moves the clock forward by `ms`. */
    advance(ms: number): void {
        this.offset += ms;
    }

    restore(): void {
        Date.now = this.real;
    }
}
