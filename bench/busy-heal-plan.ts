/**
 * The pure half of the busy-key heal scenario (`npm run bench -- --scenario busy-heal`): its flags, where its faults
 * land in a call, the mode's bound an observation checks, which of the settler's requests are the heals' own, and the
 * shape of its rows. No engine, no clock: bench/busy-heal.ts runs what this module plans, and
 * test/bench-busy-heal.test.ts checks both.
 *
 * Busy keys. Every key has WORKERS_PER_KEY callers of its own in a closed loop, so a key's writes follow each other by
 * a request's time, and the settler runs beside them on the component's schedule compressed by SETTLER_COMPRESSION
 * (local/twin/settler.ts). Nothing else is compressed: the ledger's period, the client's deadline and the heal's time
 * bounds are the deployed ones (runtime/heal/heal-window.ts).
 *
 * A key's history. Before the traffic starts each key holds HISTORY_ITEMS lives made two periods earlier (the process's
 * clock is moved ahead by two periods once they are written), as a key busy for hours holds: the heal counts such old
 * lives from the table, and takes the young ones (made during the run) from the ledger. So the drift a fault leaves
 * on an old life (a lost release, another writer's delete) is healed while the key is written, and the drift it leaves
 * on a young life waits until that life's period is old (at most two periods), as designed.
 */
import type { CounterMode } from "../runtime/client/client";
import type { CounterConfig } from "../runtime/shared/config";
import { parseShards, CeilingUsageError } from "./hot-key-ceiling-plan";
import { SETTLER_COMPRESSION } from "../local/twin/settler";

export { SETTLER_COMPRESSION as COMPRESSION };
/** Callers per key, each in a closed loop on its own key. */
export const WORKERS_PER_KEY = 2;
/** The keys each row writes. */
export const BUSY_KEYS: readonly string[] = ["busy-0", "busy-1", "busy-2"];
/** Old lives each key holds when the traffic starts. */
export const HISTORY_ITEMS = 40;
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
/** Another writer hard-deletes one live client item of a key this often. */
export const OTHER_DELETE_EVERY_MS = 1_000;
/** How often the row samples what the keys hold off their items while the traffic runs. */
export const SAMPLE_EVERY_MS = 10_000;

/** The shard counts a run measures when --shards is not given, one row per mode at each. */
export const BUSY_SHARDS: readonly number[] = [1, 4];
/** Seconds of traffic per row when --seconds is not given. */
export const DEFAULT_SECONDS = 60;

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

/** A bad value of one of the scenario's flags: one line naming the flag. */
export class BusyHealUsageError extends Error {}

export interface BusyHealOptions {
    /** The modes measured, each at every shard count. */
    readonly modes: readonly CounterMode[];
    /** Seconds of traffic per row. */
    readonly seconds: number;
    readonly shards: readonly number[];
    readonly seed: number;
}

/** `--seconds <n>`: seconds of traffic per row, 10 to 3600 (default 60). */
export function parseSeconds(raw: string | undefined): number {
    if (raw === undefined) {
        return DEFAULT_SECONDS;
    }
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < 10 || n > 3_600) {
        throw new BusyHealUsageError(`--seconds must be an integer from 10 to 3600 (got "${raw}")`);
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
    /** The user's table (items) or a best-effort item; "other" is any other item (eventual, limits). */
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
 * What happens to a request of a faulty call, by the client's order of writes (runtime/client/create.ts, delete.ts):
 * - "die": the process dies before sending it, and sends nothing after;
 * - "fail": it is answered with an HTTP 500 before reaching the table (local/engine/faults.ts's error), the call goes on;
 * - "send": it goes out.
 * A death leaves one unit of drift by construction (the returned `drift`), counted when it happens:
 * - strict create (reserve -> put): dies at its put, a reservation behind it: one held slot;
 * - utilization create (put -> +1): dies once its put succeeded (`faultAfter`): one item best-effort misses;
 * - utilization delete (claim -> -1 -> soft delete): dies at its soft delete, one unit low when its -1 landed after
 *   the claim;
 * - strict delete (soft delete -> release), "fail-release": its release fails once its soft delete succeeded (the
 *   release is sent once, never repeated: a repeat could free a slot still in use), one held slot.
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
 * items another writer deleted, which best-effort keeps until a heal).
 */
export function busyBoundHolds(mode: CounterMode, o: BusyObservation, limit: number): boolean {
    if (mode === "strict") {
        return o.clientLive <= o.bestEffort + o.creates && o.clientLive <= limit;
    }
    return o.bestEffort <= o.clientLive + o.deletes + o.otherDeletes;
}

/**
 * Which part of a settler run a request belongs to. A heal's own requests by what they touch: its shards (R and W),
 * the key's items (T), its listing (the mark read and removed), the tombstones it removes.
 */
export type SettlerPart = "index" | "audit" | HealPart;
export type HealPart = "heal shards" | "heal items" | "heal listing" | "heal tombstones";
export const HEAL_PARTS: readonly HealPart[] = ["heal shards", "heal items", "heal listing", "heal tombstones"];

/** A request as the settler sent it: the command's name and its input. */
export interface SettlerRequest {
    readonly command: string;
    readonly input: {
        readonly IndexName?: string;
        readonly KeyConditionExpression?: string;
        readonly Key?: Readonly<Record<string, { readonly S?: string }>>;
        readonly ExpressionAttributeValues?: Readonly<Record<string, { readonly S?: string }>>;
    };
}

/** The layout `settlerPart` reads requests by. */
export type SettlerLayout = Pick<CounterConfig, "partitionKey" | "sortKey" | "counterPrefix">;

/**
 * The part of a settler run (runtime/heal/settle.ts) a request belongs to: the heal index's query ("index"); the audit's
 * scan, its reads of the keys it looks at (a query of a key's counter items by prefix), its cursor and the stream
 * progress it expires (items under the counter prefix's own partitions) ("audit"); everything else is a heal's own
 * (runtime/heal/heal.ts), by what it touches (`HealPart`).
 */
export function settlerPart(request: SettlerRequest, config: SettlerLayout): SettlerPart {
    const { command, input } = request;
    if (command === "QueryCommand" && input.IndexName !== undefined) {
        return "index";
    }
    if (command === "ScanCommand" || (command === "QueryCommand" && (input.KeyConditionExpression ?? "").includes("begins_with"))) {
        return "audit";
    }
    const partition = input.Key?.[config.partitionKey]?.S ?? input.ExpressionAttributeValues?.[":pk"]?.S;
    if (partition !== undefined && partition.startsWith(config.counterPrefix)) {
        return "audit";
    }
    if (command === "DeleteItemCommand") {
        return "heal tombstones";
    }
    const sortKey = input.Key?.[config.sortKey]?.S ?? input.ExpressionAttributeValues?.[":sk"]?.S;
    if (sortKey === undefined) {
        return "heal items";
    }
    return sortKey.endsWith("best-effort") ? "heal shards" : "heal listing";
}

/** One row: a mode and a shard count. */
export interface BusyHealRow {
    readonly mode: CounterMode;
    readonly shards: number;
    readonly seconds: number;
    /** Settler runs, and those that started with API calls in flight. */
    readonly settlerRuns: number;
    readonly runsWithCallsInFlight: number;
    /** Keys the settler's runs healed (one heal of a key covers all its shards), and the units they moved. */
    readonly keysHealed: number;
    readonly healedDrift: number;
    /** Read and write units of the heals' own requests (`settlerPart`), per key healed. */
    readonly rcuPerKeyHealed: number;
    readonly wcuPerKeyHealed: number;
    /** The same, by what the requests touched (`HealPart`): [RCU, WCU] per key healed. */
    readonly perKeyHealed: Readonly<Record<HealPart, readonly [number, number]>>;
    /** Every request of the runs (the index, the audit, the heals), per key healed. */
    readonly runRcuPerKeyHealed: number;
    readonly runWcuPerKeyHealed: number;
    /** Units of drift the faults made, each counted when it happened, and the live items another writer deleted. */
    readonly driftMade: number;
    readonly otherDeletes: number;
    /** Strict: Σ over the keys of best-effort - live client items, every SAMPLE_EVERY_MS while the traffic ran. */
    readonly heldSlotsSamples: number[] | null;
    /** Utilization: Σ of live client items - best-effort, at the same instants. */
    readonly undercountSamples: number[] | null;
    /** The same sums once the traffic stopped and the stream drained (the other mode's null). */
    readonly heldSlotsEnd: number | null;
    readonly undercountEnd: number | null;
    /** Σ of best-effort above live client items (utilization: other writers' deletes not healed yet) at the end. */
    readonly overcountEnd: number | null;
    /** Observations at which the mode's bound failed (`busyBoundHolds`). */
    readonly boundViolations: number;
    /** Errors the client surfaced to callers whose process did not die. */
    readonly apiErrors: number;
    /** After the drain: eventual == live items, for every key. */
    readonly exact: boolean;
}

/** What a run of one row measured, before it is shaped as the row. */
export interface BusyMeasured {
    readonly seconds: number;
    /** The mode's figure (held slots or undercount) at each sample, and at the end with the overcount. */
    readonly samples: number[];
    readonly end: { readonly off: number; readonly over: number };
    readonly settler: { readonly runs: number; readonly runsWithCallsInFlight: number; readonly healed: number; readonly drift: number };
    /** Units of the heals' own requests (in all, and by part), and of every request of the runs. */
    readonly units: {
        readonly heal: { read: number; write: number };
        readonly parts: Readonly<Record<HealPart, { read: number; write: number }>>;
        readonly run: { read: number; write: number };
    };
    readonly driftMade: number;
    readonly otherDeletes: number;
    readonly boundViolations: number;
    readonly apiErrors: number;
    readonly exact: boolean;
}

/** The row of a mode and a shard count: units per key healed, and the other mode's fields null. */
export function busyHealRow(mode: CounterMode, shards: number, m: BusyMeasured): BusyHealRow {
    const per = (units: number) => (m.settler.healed === 0 ? 0 : Math.round((units / m.settler.healed) * 100) / 100);
    const strict = mode === "strict";
    return {
        mode,
        shards,
        seconds: m.seconds,
        settlerRuns: m.settler.runs,
        runsWithCallsInFlight: m.settler.runsWithCallsInFlight,
        keysHealed: m.settler.healed,
        healedDrift: m.settler.drift,
        rcuPerKeyHealed: per(m.units.heal.read),
        wcuPerKeyHealed: per(m.units.heal.write),
        perKeyHealed: Object.fromEntries(
            HEAL_PARTS.map((part) => [part, [per(m.units.parts[part].read), per(m.units.parts[part].write)] as const]),
        ) as Record<HealPart, readonly [number, number]>,
        runRcuPerKeyHealed: per(m.units.run.read),
        runWcuPerKeyHealed: per(m.units.run.write),
        driftMade: m.driftMade,
        otherDeletes: m.otherDeletes,
        heldSlotsSamples: strict ? m.samples : null,
        undercountSamples: strict ? null : m.samples,
        heldSlotsEnd: strict ? m.end.off : null,
        undercountEnd: strict ? null : m.end.off,
        overcountEnd: strict ? null : m.end.over,
        boundViolations: m.boundViolations,
        apiErrors: m.apiErrors,
        exact: m.exact,
    };
}

/** The rows for people: one line per row, then its samples. */
export function formatBusyHeal(rows: readonly BusyHealRow[]): string[] {
    const lines = [
        `Busy-key heal: ${BUSY_KEYS.length} keys written without pause, ${WORKERS_PER_KEY} callers each, each key holding ` +
            `${HISTORY_ITEMS} old lives at the start; the settler's schedule the component's ÷ ${SETTLER_COMPRESSION}, ` +
            "the ledger's period and the client's deadline as deployed",
        "mode         shards  seconds  runs (busy)  keys healed  units healed  RCU/WCU per key healed (whole run)  drift made (+other deletes)  held/under at end  over  bound violations  API errors  exact",
    ];
    for (const r of rows) {
        const end = r.heldSlotsEnd ?? r.undercountEnd ?? 0;
        lines.push(
            [
                r.mode.padEnd(12),
                String(r.shards).padEnd(7),
                String(r.seconds).padEnd(8),
                `${r.settlerRuns} (${r.runsWithCallsInFlight})`.padEnd(12),
                String(r.keysHealed).padEnd(12),
                String(r.healedDrift).padEnd(13),
                `${r.rcuPerKeyHealed}/${r.wcuPerKeyHealed} (${r.runRcuPerKeyHealed}/${r.runWcuPerKeyHealed})`.padEnd(35),
                `${r.driftMade} (+${r.otherDeletes})`.padEnd(28),
                String(end).padEnd(18),
                String(r.overcountEnd ?? "-").padEnd(5),
                String(r.boundViolations).padEnd(17),
                String(r.apiErrors).padEnd(11),
                String(r.exact),
            ].join(" "),
        );
    }
    for (const r of rows) {
        const samples = r.heldSlotsSamples ?? r.undercountSamples ?? [];
        lines.push(
            `  ${r.mode} ${r.shards} shard(s), ${r.heldSlotsSamples ? "held slots" : "undercount"} every ${SAMPLE_EVERY_MS / 1000} s: ${samples.join(" ")}`,
            `  ${r.mode} ${r.shards} shard(s), RCU/WCU per key healed by part: ` +
                HEAL_PARTS.map((part) => `${part.slice("heal ".length)} ${r.perKeyHealed[part].join("/")}`).join(", "),
        );
    }
    return lines;
}
