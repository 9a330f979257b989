/**
 * The pure half of the busy-key heal scenario (`npm run bench -- --scenario busy-heal`): its flags, its compressed
 * time, where a faulty call dies or loses its release, the bound it checks at every observation, when a heal counts
 * as landing on a busy key, and the shape of its rows. No engine, no clock: `bench/busy-heal.ts` runs what this module
 * plans, and test/bench-busy-heal.test.ts checks both.
 *
 * Compressed time. The component's quiet window (600 s) and its settler's schedule are divided by COMPRESSION, and
 * the client's deadline is CLIENT_DEADLINE_MS, as the local twin runs them (local/twin/settler.ts, which says why the
 * compressed window still covers the heal's Q > D + L + S, runtime/heal/heal-window.ts). The run measures the longest
 * request (L) and prints it against its budget; `assertCompressionCovers` refuses a window that does not cover
 * D + L + S before anything runs.
 *
 * Busy keys. Every key has WORKERS_PER_KEY callers of its own in a closed loop, so a key's writes follow each other
 * by a request's time (milliseconds); the run measures the longest gap between two writes of a key and prints it
 * against a hundredth of the window, with the longest time a key had no call in flight (`longestIdle`): the traffic's
 * own pause, without the engine's answer time. A heal counts as landing on a busy key (`healsOnBusyKeys`) when its settler run
 * started and ended while every key had been written within the last window at every instant (`busyThroughout`).
 * The settler's report counts heals per best-effort item (one per shard of a sharded key), and so does this figure.
 */
import type { CounterMode } from "../runtime/client/client";
import { COMPRESSED_CLIENT_DEADLINE_MS, SETTLER_COMPRESSION } from "../local/twin/settler";
import { parseShards, CeilingUsageError } from "./hot-key-ceiling-plan";

/**
 * The compressed times, shared with the local twin (local/twin/settler.ts): the component's window and schedule ÷
 * COMPRESSION, the client's deadline, the request lifetime and skew budgets the window covers.
 */
export {
    SETTLER_COMPRESSION as COMPRESSION,
    COMPRESSED_CLIENT_DEADLINE_MS as CLIENT_DEADLINE_MS,
    REQUEST_LIFETIME_BUDGET_MS,
    SKEW_BUDGET_MS as SKEW_MS,
    assertCompressionCovers,
} from "../local/twin/settler";
/** Callers per key, each in a closed loop on its own key. */
export const WORKERS_PER_KEY = 2;
/** The keys each row writes. */
export const BUSY_KEYS: readonly string[] = ["busy-0", "busy-1", "busy-2"];
/** Strict rows create through tryCreate under this limit: far above what a key holds, so refusals never stop its writes. */
export const STRICT_LIMIT = 1_000;
/** Share of calls that delete one of the key's live items (when it has one). */
export const DELETE_RATIO = 0.5;
/**
 * Every this many creates of a caller (and utilization deletes), one dies between its writes: its second create first,
 * so that every run, however slow, has its faults.
 */
export const DIE_EVERY = 100;
/** Every this many strict deletes of a caller, its first one included, one loses its release (an HTTP 500 before the table). */
export const FAILED_RELEASE_EVERY = 50;

/** The fault the `index`-th (from 0) create or delete of a caller carries. */
export function scheduledFault(mode: CounterMode, operation: "create" | "delete", index: number): CallFault {
    if (operation === "create") {
        return index % DIE_EVERY === 1 ? "die" : undefined;
    }
    if (mode === "strict") {
        return index % FAILED_RELEASE_EVERY === 0 ? "fail-release" : undefined;
    }
    return index % DIE_EVERY === 0 ? "die" : undefined;
}
/** Another writer hard-deletes one live client item of a key this often. */
export const OTHER_DELETE_EVERY_MS = 1_000;

/** The modes and shard counts a run measures, one row each. */
export const BUSY_MODES: readonly CounterMode[] = ["utilization", "strict"];
export const BUSY_SHARDS: readonly number[] = [1, 4];

/** A bad value of one of the scenario's flags: one line naming the flag. */
export class BusyHealUsageError extends Error {}

export interface BusyHealOptions {
    /** Quiet windows of traffic per row. */
    readonly windows: number;
    readonly shards: readonly number[];
    readonly seed: number;
}

/** `--windows <n>`: quiet windows of traffic per row, 1 to 1000 (default 10). */
export function parseWindows(raw: string | undefined): number {
    if (raw === undefined) {
        return 10;
    }
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < 1 || n > 1_000) {
        throw new BusyHealUsageError(`--windows must be an integer from 1 to 1000 (got "${raw}")`);
    }
    return n;
}

/** `--shards <list>` for this scenario: as the hot-key ceiling's, with 1 and 4 by default. */
export function parseBusyShards(raw: string | undefined): number[] {
    try {
        return parseShards(raw ?? BUSY_SHARDS.join(","));
    } catch (error) {
        throw error instanceof CeilingUsageError ? new BusyHealUsageError(error.message) : error;
    }
}

/** What one request of a call is, as a fault decides on it. */
export interface RequestShape {
    /** The user's table (items) or a best-effort item; "other" is any other item (markers, eventual). */
    readonly target: "items" | "best-effort" | "other";
    readonly write: boolean;
    /** A write that takes a unit off a count: a release, a decrement. */
    readonly lowers: boolean;
}

/** The fault a call carries, drawn when it starts. */
export type CallFault = "die" | "fail-release" | undefined;

/** A call's progress, as its requests answer: what the fault rules look at. */
export interface CallProgress {
    readonly mode: CounterMode;
    readonly operation: "create" | "delete";
    readonly fault: CallFault;
    /** Writes of the user's items that succeeded, and best-effort writes that lowered the count since the last of them. */
    readonly itemWrites: number;
    readonly bestEffortSinceItem: number;
    /** True once the call's process died: nothing more of it is sent. */
    readonly dead: boolean;
}

/**
 * What happens to a request of a faulty call, by the client's order of writes (runtime/client/client.ts):
 * - "die": the process dies before sending it, and sends nothing after;
 * - "fail": it is answered with an HTTP 500 before reaching the table (local/engine/faults.ts's error), the call goes on;
 * - "send": it goes out.
 * A death leaves one unit of drift by construction (the returned `drift`), counted when it happens:
 * - strict create (reserve -> put): dies at its put, a reservation behind it: one held slot;
 * - utilization create (put -> increment): dies once its put succeeded (`afterAnswer`): one item best-effort misses;
 * - utilization delete (claim -> decrement -> soft delete): dies at its soft delete, one unit low when a decrement
 *   landed after the claim;
 * - strict delete (touch -> soft delete -> release), "fail-release": its release fails once its soft delete succeeded
 *   (the release is sent once, never repeated: a repeat could free a slot still in use), one held slot.
 */
export function faultBefore(call: CallProgress, request: RequestShape): { action: "send" | "die" | "fail"; drift: number } {
    if (call.dead) {
        return { action: "die", drift: 0 };
    }
    if (!request.write) {
        return { action: "send", drift: 0 };
    }
    if (call.fault === "die" && request.target === "items") {
        if (call.mode === "strict" && call.operation === "create") {
            return { action: "die", drift: 1 };
        }
        if (call.mode === "utilization" && call.operation === "delete" && call.itemWrites >= 1) {
            return { action: "die", drift: call.bestEffortSinceItem > 0 ? 1 : 0 };
        }
    }
    if (call.fault === "fail-release" && request.target === "best-effort" && request.lowers && call.itemWrites >= 1) {
        return { action: "fail", drift: 1 };
    }
    return { action: "send", drift: 0 };
}

/** After a request of a faulty call succeeded: whether the call dies now, and the drift that leaves. */
export function faultAfter(call: CallProgress, request: RequestShape): { dies: boolean; drift: number } {
    const dies =
        !call.dead &&
        call.fault === "die" &&
        call.mode === "utilization" &&
        call.operation === "create" &&
        request.write &&
        request.target === "items";
    return { dies, drift: dies ? 1 : 0 };
}

/** One observation of a key: best-effort read first, its live client items after, and what raced the reads. */
export interface BusyObservation {
    readonly bestEffort: number;
    readonly clientLive: number;
    /** Calls of the key in flight at some instant of the reads (local/harness/calls.ts, `window`). */
    readonly creates: number;
    readonly deletes: number;
    /** Client items of the key another writer has started to hard-delete so far: best-effort keeps their units. */
    readonly otherDeletes: number;
}

/**
 * The mode's bound on one observation. Strict: live client items <= best-effort (+ the creates that raced the reads)
 * and <= the limit. Utilization: best-effort <= live client items (+ the deletes that raced the reads, + the units of
 * items another writer deleted, which best-effort keeps until a heal: docs/guarantees.md, the checker's bound).
 */
export function busyBoundHolds(mode: CounterMode, o: BusyObservation, limit: number): boolean {
    if (mode === "strict") {
        return o.clientLive <= o.bestEffort + o.creates && o.clientLive <= limit;
    }
    return o.bestEffort <= o.clientLive + o.deletes + o.otherDeletes;
}

/**
 * Whether a key written at `writes` (ascending instants) had been written within `windowMs` at every instant from
 * `from` to `to`: a write at or before `from` no older than the window, and no gap of a window or more up to `to`.
 */
export function busyThroughout(writes: readonly number[], from: number, to: number, windowMs: number): boolean {
    let last: number | undefined;
    for (const at of writes) {
        if (at > to) {
            break;
        }
        if (at > from && (last === undefined || at - last >= windowMs)) {
            return false;
        }
        if (at <= from || last !== undefined) {
            last = at;
        }
        if (at <= from && from - at >= windowMs) {
            last = undefined;
        }
    }
    return last !== undefined && to - last < windowMs;
}

/** The longest gap between two writes of a key from `from` on. */
export function longestGap(writes: readonly number[], from: number): number {
    let longest = 0;
    let last: number | undefined;
    for (const at of writes) {
        if (at < from) {
            continue;
        }
        if (last !== undefined) {
            longest = Math.max(longest, at - last);
        }
        last = at;
    }
    return longest;
}

/**
 * The longest time from `from` to `to` during which a key had no call in flight: `flights` are [started, ended] of
 * its calls, in the order they started (one not ended ends at Infinity). This is the traffic's own pause: the time
 * between two writes' answers (`longestGap`) also holds the engine's answer time, which one process serving every
 * party (the traffic, the consumer, the settler) stretches where DynamoDB would not.
 */
export function longestIdle(flights: ReadonlyArray<readonly [number, number]>, from: number, to: number): number {
    let longest = 0;
    let busyUntil = from;
    for (const [sent, answered] of flights) {
        if (sent >= to) {
            break;
        }
        if (sent > busyUntil) {
            longest = Math.max(longest, sent - busyUntil);
        }
        busyUntil = Math.max(busyUntil, answered);
    }
    return Math.max(longest, to - Math.min(busyUntil, to));
}

/** One row: a mode and a shard count. The field of the other mode's name is null. */
export interface BusyHealRow {
    readonly mode: CounterMode;
    readonly shards: number;
    readonly windows: number;
    /** Strict: Σ over the keys of |best-effort - live client items| at the end of each window, read while traffic runs. */
    readonly heldSlotsByWindow: number[] | null;
    /** Utilization: the same sum. */
    readonly driftByWindow: number[] | null;
    /** Units of drift the faults made, each counted when it happened. */
    readonly driftMade: number;
    /** Heals (per best-effort item) of settler runs during which every key had been written within the last window. */
    readonly healsOnBusyKeys: number;
    /** The same sum once the traffic stopped and the stream drained, before the keys were quiet for a window. */
    readonly heldSlotsEnd: number | null;
    readonly driftEnd: number | null;
    /** Observations at which the mode's bound failed (`busyBoundHolds`). */
    readonly boundViolations: number;
    /** Errors the client surfaced to callers whose process did not die. */
    readonly apiErrors: number;
    /** After the drain: eventual == live items and no soft-deleted item left, for every key. */
    readonly exact: boolean;
}

/** The figures a run measured for one row, in the row's shape. */
export function busyHealRow(
    mode: CounterMode,
    shards: number,
    measured: {
        byWindow: number[];
        driftMade: number;
        healsOnBusyKeys: number;
        end: number;
        boundViolations: number;
        apiErrors: number;
        exact: boolean;
    },
): BusyHealRow {
    const strict = mode === "strict";
    return {
        mode,
        shards,
        windows: measured.byWindow.length,
        heldSlotsByWindow: strict ? measured.byWindow : null,
        driftByWindow: strict ? null : measured.byWindow,
        driftMade: measured.driftMade,
        healsOnBusyKeys: measured.healsOnBusyKeys,
        heldSlotsEnd: strict ? measured.end : null,
        driftEnd: strict ? null : measured.end,
        boundViolations: measured.boundViolations,
        apiErrors: measured.apiErrors,
        exact: measured.exact,
    };
}

/** The rows for people: one line per row, then its series. */
export function formatBusyHeal(rows: readonly BusyHealRow[]): string[] {
    const lines = [
        `Busy-key heal: ${BUSY_KEYS.length} keys written without pause, ${WORKERS_PER_KEY} callers each; the quiet window and the ` +
            `settler's schedule the component's ÷ ${SETTLER_COMPRESSION}, the client's deadline ${COMPRESSED_CLIENT_DEADLINE_MS} ms`,
        "mode         shards  windows  drift made  heals on busy keys  at the end  bound violations  API errors  exact",
    ];
    for (const r of rows) {
        const end = r.heldSlotsEnd ?? r.driftEnd ?? 0;
        lines.push(
            `${r.mode.padEnd(12)} ${String(r.shards).padEnd(7)} ${String(r.windows).padEnd(8)} ${String(r.driftMade).padEnd(11)} ` +
                `${String(r.healsOnBusyKeys).padEnd(19)} ${String(end).padEnd(11)} ${String(r.boundViolations).padEnd(17)} ` +
                `${String(r.apiErrors).padEnd(11)} ${r.exact}`,
        );
    }
    for (const r of rows) {
        const series = r.heldSlotsByWindow ?? r.driftByWindow ?? [];
        lines.push(`  ${r.mode} ${r.shards} shard(s), ${r.heldSlotsByWindow ? "held slots" : "drift"} by window: ${series.join(" ")}`);
    }
    return lines;
}
