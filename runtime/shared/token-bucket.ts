/**
 * A token bucket that is paid after the fact: a request waits until the balance is not negative, then
 * the capacity the response reports is spent. DynamoDB only says what a Scan page or a transaction cost
 * once it has run, so the bucket may go into debt by one request and the next one waits it off.
 *
 * Invariant: over any interval of length T from the start, the units spent are at most
 * `ratePerSecond * T + burst + (the largest single request)`.
 */

export interface Clock {
    now(): number;
    sleep(ms: number): Promise<void>;
}

export const realClock: Clock = {
    now: () => Date.now(),
    sleep: (ms) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
};

export class TokenBucket {
    private balance: number;
    private last: number;

    /** `ratePerSecond` Infinity disables the limit. `burst` defaults to one second of rate. */
    constructor(
        readonly ratePerSecond: number,
        private readonly clock: Clock = realClock,
        readonly burst: number = ratePerSecond,
    ) {
        if (!(ratePerSecond > 0)) {
            throw new RangeError(`ratePerSecond must be positive (got ${ratePerSecond})`);
        }
        this.balance = Number.isFinite(burst) ? burst : 0;
        this.last = clock.now();
    }

    /** Waits until the balance is not negative (at once when it is not). */
    async take(): Promise<void> {
        if (!Number.isFinite(this.ratePerSecond)) {
            return;
        }
        for (;;) {
            this.refill();
            if (this.balance >= 0) {
                return;
            }
            await this.clock.sleep(Math.ceil((-this.balance / this.ratePerSecond) * 1000));
        }
    }

    /** Records units consumed by a request. */
    spend(units: number): void {
        if (!Number.isFinite(this.ratePerSecond) || !(units > 0)) {
            return;
        }
        this.refill();
        this.balance -= units;
    }

    private refill(): void {
        const now = this.clock.now();
        this.balance = Math.min(this.burst, this.balance + ((now - this.last) / 1000) * this.ratePerSecond);
        this.last = now;
    }
}
