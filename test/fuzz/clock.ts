/**
 * The checker's clock: virtual time, which moves only when the schedule moves it. It starts at the same instant for
 * every history and never reads the wall clock, so a seed sees the same times on a quiet machine and a busy one.
 *
 * It moves in three ways, all decided by the schedule (scheduler.ts): each released request takes a latency drawn from
 * the seed; a settler run moves it past the quiet window, as an hour of wall time would, so that the heals it allows
 * run in a history of seconds; and when nothing else can run, it jumps to the earliest timer.
 *
 * Every party reads time through `Date.now` (tokens, the client's deadlines and last-write times, the heal's cutoff,
 * the consumer's budget, backfill), which `install` replaces for one history, so the whole system sees one clock.
 * Every party that waits does so through `sleep` here: the runtime's backoffs (runtime/shared/pauses.ts, installed by
 * the run), the SDK's retry backoff (adapter.ts `fuzzRetries`) and backfill's rate limiter (its `clock`). A sleep
 * resumes only when the schedule fires its timer, never by itself.
 */

/** The instant every history starts at (2026-01-01T00:00:00Z). */
export const VIRTUAL_EPOCH_MS = Date.UTC(2026, 0, 1);

interface Timer {
    readonly at: number;
    readonly order: number;
    readonly resume: () => void;
}

export class VirtualTime {
    private offset = 0;
    private readonly real = Date.now;
    private readonly timers: Timer[] = [];
    private made = 0;

    /** The virtual time, epoch ms. */
    now(): number {
        return VIRTUAL_EPOCH_MS + this.offset;
    }

    install(): void {
        Date.now = () => this.now();
    }

    restore(): void {
        Date.now = this.real;
    }

    /** Moves the clock forward by `ms`. */
    advance(ms: number): void {
        this.offset += Math.max(0, ms);
    }

    /** Resolves once the schedule has fired the timer this sets `ms` from now. */
    sleep(ms: number): Promise<void> {
        const at = this.now() + Math.max(0, Number.isFinite(ms) ? ms : 0);
        return new Promise<void>((resume) => {
            this.timers.push({ at, order: this.made++, resume });
        });
    }

    /** Timers set and not fired yet. */
    get sleeping(): number {
        return this.timers.length;
    }

    /** Fires the earliest timer that is due (ties in the order they were set); false when none is. */
    fireDue(): boolean {
        const next = this.earliest();
        if (next === undefined || this.timers[next]!.at > this.now()) {
            return false;
        }
        this.timers.splice(next, 1)[0]!.resume();
        return true;
    }

    /** Moves the clock to the earliest timer and fires it; false when no timer is set. */
    fireNext(): boolean {
        const next = this.earliest();
        if (next === undefined) {
            return false;
        }
        this.advance(this.timers[next]!.at - this.now());
        return this.fireDue();
    }

    private earliest(): number | undefined {
        let best: number | undefined;
        this.timers.forEach((timer, i) => {
            const current = best === undefined ? undefined : this.timers[best]!;
            if (current === undefined || timer.at < current.at || (timer.at === current.at && timer.order < current.order)) {
                best = i;
            }
        });
        return best;
    }
}
