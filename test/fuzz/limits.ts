/**
 * Limits that change during a history (a tenant moving plans: paths.ts), and the strict bound each call is held to.
 *
 * The contract: a tryCreate under L admits only while the key's live client-counted items are below L. The model checks
 * it where it can be seen exactly, at the admission itself: strict mode keeps `live client-counted items <=
 * best-effort` (run.ts checks it at every observation), and a reservation under L is admitted only when the key's
 * best-effort sum was below L at its commit (one item's `count < L`; a shard's stored quota under L, whose quotas sum to
 * L and whose other shards are within theirs; a rearm conditional on every shard's count as read:
 * runtime/shards/reservation.ts). So after a tryCreate's best-effort increment under L is served, the observation taken
 * before any other request is released must find the sum at most L, whatever limits other calls ran under and
 * whatever a backfill, a heal or another writer did before. A strict backfill's units are added without the limit, but
 * then no reservation passes until deletes bring the sum below it: the check allows them nothing. Strict histories
 * have no create() (it reserves without a limit). Why it is sound: the observation follows the increment's commit with
 * nothing released between, and every writer that may put the sum above L (backfill, heal) makes the next admission
 * find it (a condition on the one item, or a disarmed key's serializable read).
 *
 * The bounds at every observation (others.ts) hold live client items to the limit; with plans changing, to the highest
 * limit a call of the key ran under so far (`LimitsInForce.ceiling`): items admitted under a higher plan stay when
 * it is lowered (they are not the client's to refuse), and the admission check above is what holds a lowered limit.
 */
import type { Truth } from "./adapter";
import type { FuzzEvent, History, Mode } from "./history";

/** The limit a tryCreate call runs under: its own (a plan change), else the key's. */
export function callLimit(history: History, event: Extract<FuzzEvent, { op: "tryCreate" }>): number {
    return event.limit ?? history.limits[event.key]!;
}

/** Per key, the highest limit any call of it has run under so far. */
export class LimitsInForce {
    private readonly ceilings = new Map<string, number>();

    constructor(private readonly history: History) {}

    /** A tryCreate call starts: its limit is now one the key's items may have been admitted under. */
    begin(event: FuzzEvent): void {
        if (event.op === "tryCreate") {
            this.ceilings.set(event.key, Math.max(this.ceiling(event.key), callLimit(this.history, event)));
        }
    }

    /** The highest limit a call of `key` ran under (the key's own limit before any call). */
    ceiling(key: string): number {
        return this.ceilings.get(key) ?? this.history.limits[key] ?? Infinity;
    }
}

/**
 * Strict: the problem with a served best-effort increment of a tryCreate under `limit` (see the top of this module),
 * given the key's truth right after it; undefined when it holds.
 */
export function admissionProblem(mode: Mode, limit: number, delta: number, truth: Truth): string | undefined {
    if (mode !== "strict" || delta <= 0 || truth.bestEffort <= limit) {
        return undefined;
    }
    return `admitted under limit ${limit} with best-effort ${truth.bestEffort} after it (shards ${truth.shardBestEffort.join(", ")}): it was at ${truth.bestEffort - delta}, not below the limit`;
}
