/**
 * Histories for the model-based checker: what the API's callers, the pipeline, the settler, the backfill and other
 * writers do, generated from a seed. A history is plain data, so a failing one can be printed, shrunk and replayed.
 *
 * Swarm testing: each seed draws its own profile first (mode, selection, shards, how long it runs, whether settings
 * change inside it, its fault profile), then its events under that profile:
 * - short histories run seconds of virtual time; long ones move the clock by minutes to hours between events
 *   (`advance`), over days: hundreds of ledger periods, settler pauses, a settler on a daily schedule;
 * - settings change inside a history: a key's stored limit lowered and raised, the default limit changed, calls with
 *   a limit of their own, the settler paused and resumed;
 * - faults: an independent rate per request, and bursts in which every attempt of a run of requests is refused.
 * Few keys and few ids per key, so ids collide and are reused.
 */
import { seededRandom, type FaultKind } from "../../local/engine/faults";

export type Mode = "utilization" | "strict";
export type SelectionKind = "client" | "prefix" | "attribute";
export type ClientCall = "create" | "tryCreate" | "delete" | "count";

export type FuzzEvent =
    /** `late`: the call's first put attempt is held past the call and lands later (at `land`, or at the drain). */
    | { readonly op: "create"; readonly key: string; readonly id: string; readonly late?: true }
    /** `limit`: a limit of the call's own; absent: the key's stored limit (or the default). */
    | { readonly op: "tryCreate"; readonly key: string; readonly id: string; readonly late?: true; readonly limit?: number }
    | { readonly op: "delete"; readonly key: string; readonly id: string }
    | { readonly op: "count"; readonly key: string }
    /** A call with one bad argument: InvalidArgumentError naming `field`, and nothing written. */
    | { readonly op: "invalid"; readonly call: ClientCall; readonly key: string; readonly field: "key" | "id" | "limit" | "attributes" }
    /** Every held put attempt reaches DynamoDB now. */
    | { readonly op: "land" }
    /**
     * One delivery of up to `max` records of a stream shard from its checkpoint, `overlap` records before it (a
     * redelivery). `crash` "before" fails it unrun; "after" runs it and loses its answer. `twice`: delivered to two
     * invocations at once (at-least-once delivery).
     */
    | {
          readonly op: "consume";
          readonly max: number;
          readonly overlap: number;
          readonly crash: "none" | "before" | "after";
          readonly twice?: true;
      }
    /** One redrive invocation over the first DLQ. */
    | { readonly op: "redrive" }
    /** One settler run (skipped while the settler is paused), healing at most `keyBudget` listed keys. */
    | { readonly op: "settle"; readonly keyBudget: number }
    /** One backfill() call of run `runId`, `pageSize` items a page. */
    | { readonly op: "backfill"; readonly runId: string; readonly pageSize: number }
    /** Another service's plain PutItem of a selected id (no client token, no flag). */
    | { readonly op: "otherPut"; readonly key: string; readonly id: string }
    /** Another service's DeleteItem of an id, whoever wrote it. */
    | { readonly op: "otherDelete"; readonly key: string; readonly id: string }
    /** Another service's UpdateItem of `status` (attribute histories): moves an item in or out of the selection. */
    | { readonly op: "otherFlip"; readonly key: string; readonly id: string; readonly status: "active" | "archived" }
    /** Another service's UpdateItem rewriting the client token of an item that has one. */
    | { readonly op: "otherRetoken"; readonly key: string; readonly id: string }
    /** Another service's UpdateItem growing an item to near DynamoDB's 400 KB: a delete's writes no longer fit on it. */
    | { readonly op: "otherGrow"; readonly key: string; readonly id: string }
    /** The table's TTL deleting an item (client histories). */
    | { readonly op: "ttlDelete"; readonly key: string; readonly id: string }
    /** The virtual clock moves by `ms` (long histories): calls in flight outlive their deadline across a long move. */
    | { readonly op: "advance"; readonly ms: number }
    /** A key's stored limit (null: removed), or the counter's default. */
    | { readonly op: "setLimit"; readonly key: string; readonly limit: number | null }
    | { readonly op: "setDefault"; readonly limit: number | null }
    /** The settler switched off, and on again. */
    | { readonly op: "pause" }
    | { readonly op: "resume" }
    /** The next `requests` requests released all meet `kind`: every attempt of a write refused. */
    | { readonly op: "burst"; readonly requests: number; readonly kind: FaultKind };

export interface Profile {
    /** Long histories move the clock by minutes to hours between events. */
    readonly horizon: "short" | "long";
    /** Limits and the settler change inside the history. */
    readonly settings: boolean;
    /** Runs of requests that all fail. */
    readonly bursts: boolean;
    /** The settler runs often, and its requests meet faults often: heals race calls, each other and lost answers. */
    readonly healing: boolean;
}

export interface Preexisting {
    readonly key: string;
    readonly id: string;
    /** Attribute histories: the status it has. */
    readonly status?: "active" | "archived";
}

export interface History {
    readonly seed: number;
    readonly mode: Mode;
    readonly selection: SelectionKind;
    readonly placement: "separate" | "same-table";
    readonly counterShards: number;
    readonly faultRate: number;
    readonly concurrency: number;
    readonly profile: Profile;
    /** Stored limits set before the events (a key absent runs under the default, or none). */
    readonly limits: Readonly<Record<string, number>>;
    readonly defaultLimit?: number;
    /** Items the table held before the counter was attached (prefix and attribute histories). */
    readonly preexisting: readonly Preexisting[];
    readonly events: readonly FuzzEvent[];
    /** The most virtual ms a released request takes. @default 20 */
    readonly latencyMs?: number;
}

/** The attribute an "attribute" history selects on, and the value that counts. */
export const STATUS_ATTRIBUTE = "status";
export const ACTIVE = "active";
/** The sort-key prefix a "prefix" history selects: every id the generator makes begins with it. */
export const ID_PREFIX = "i";

export interface GenerateOptions {
    readonly ops: number;
    readonly mode?: Mode;
    readonly selection?: SelectionKind;
    readonly counterShards?: number;
    readonly faultRate?: number;
    readonly horizon?: "short" | "long";
}

const HOUR = 3_600_000;

/** The history of `seed` (see the top). */
export function generateHistory(seed: number, options: GenerateOptions): History {
    const random = seededRandom(seed);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    const mode: Mode = options.mode ?? (random() < 0.5 ? "strict" : "utilization");
    const selection: SelectionKind = options.selection ?? pick(["client", "client", "prefix", "attribute"] as const);
    const counterShards = options.counterShards ?? pick([1, 1, 3, 8]);
    const profile: Profile = {
        horizon: options.horizon ?? (random() < 0.35 ? "long" : "short"),
        settings: random() < 0.5,
        bursts: random() < 0.4,
        healing: random() < 0.35,
    };
    const faultRate = options.faultRate ?? pick([0, 0.02, 0.05, 0.1, 0.2]);
    const keys = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => `k${i}`);
    const ids = Array.from({ length: 3 + Math.floor(random() * 4) }, (_, i) => `${ID_PREFIX}${i}`);
    const limits: Record<string, number> = {};
    for (const key of keys) {
        if (random() < 0.7) {
            limits[key] = 1 + Math.floor(random() * ids.length);
        }
    }
    const preexisting: Preexisting[] = [];
    if (selection !== "client") {
        for (const key of keys) {
            for (const id of ids) {
                if (random() < 0.3) {
                    preexisting.push({ key, id, ...(selection === "attribute" ? { status: random() < 0.7 ? "active" : "archived" } : {}) });
                }
            }
        }
    }
    const events = Array.from({ length: options.ops }, () => drawEvent(random, pick, { keys, ids, selection, profile, mode }));
    return {
        seed,
        mode,
        selection,
        placement: counterShards > 1 || random() < 0.7 ? "separate" : "same-table",
        counterShards,
        faultRate,
        concurrency: 2 + Math.floor(random() * 4),
        profile,
        limits,
        ...(profile.settings && random() < 0.5 ? { defaultLimit: 1 + Math.floor(random() * ids.length) } : {}),
        preexisting,
        events,
    };
}

interface Shape {
    readonly keys: readonly string[];
    readonly ids: readonly string[];
    readonly selection: SelectionKind;
    readonly profile: Profile;
    readonly mode: Mode;
}

function drawEvent(random: () => number, pick: <T>(values: readonly T[]) => T, shape: Shape): FuzzEvent {
    const key = pick(shape.keys);
    const id = pick(shape.ids);
    const roll = random();
    const late = random() < 0.04 ? ({ late: true } as const) : {};
    // Strict histories keep k0 for tryCreate alone: a plain create reserves without a limit, and the admission check
    // (the key's sum within its limit) is about the keys only limited calls write.
    if (roll < 0.16 && !(shape.mode === "strict" && key === "k0")) {
        return { op: "create", key, id, ...late };
    }
    if (roll < 0.34) {
        return {
            op: "tryCreate",
            key,
            id,
            ...late,
            ...(shape.profile.settings && random() < 0.2 ? { limit: Math.floor(random() * shape.ids.length) } : {}),
        };
    }
    if (roll < 0.52) {
        return { op: "delete", key, id };
    }
    if (roll < 0.55) {
        return { op: "count", key };
    }
    if (shape.profile.healing && random() < 0.12) {
        return { op: "settle", keyBudget: pick([1, 2, 50]) };
    }
    if (roll < 0.66) {
        return {
            op: "consume",
            max: 1 + Math.floor(random() * 12),
            overlap: random() < 0.2 ? Math.floor(random() * 4) : 0,
            crash: pick(["none", "none", "none", "before", "after"] as const),
            ...(random() < 0.1 ? { twice: true as const } : {}),
        };
    }
    if (roll < 0.7) {
        return { op: "settle", keyBudget: pick([1, 2, 50]) };
    }
    if (roll < 0.72) {
        return { op: "redrive" };
    }
    if (roll < 0.73) {
        return { op: "backfill", runId: pick(["a", "b"]), pageSize: 1 + Math.floor(random() * 4) };
    }
    if (roll < 0.8) {
        return otherWrite(random, pick, shape, key, id);
    }
    if (roll < 0.82) {
        return { op: "land" };
    }
    if (roll < 0.83) {
        return {
            op: "invalid",
            call: pick(["create", "tryCreate", "delete", "count"] as const),
            key,
            field: pick(["key", "id", "limit", "attributes"] as const),
        };
    }
    return changeOf(random, pick, shape, key);
}

function otherWrite(random: () => number, pick: <T>(values: readonly T[]) => T, shape: Shape, key: string, id: string): FuzzEvent {
    if (random() < 0.08) {
        return { op: "otherGrow", key, id };
    }
    if (shape.selection === "client") {
        return random() < 0.6 ? { op: "ttlDelete", key, id } : { op: "otherRetoken", key, id };
    }
    const roll = random();
    if (roll < 0.4) {
        return { op: "otherPut", key, id };
    }
    if (roll < 0.7) {
        return { op: "otherDelete", key, id };
    }
    if (roll < 0.85 && shape.selection === "attribute") {
        return { op: "otherFlip", key, id, status: pick(["active", "archived"] as const) };
    }
    return { op: "otherRetoken", key, id };
}

/** What changes the time and the settings: the profile says which may happen. */
function changeOf(random: () => number, pick: <T>(values: readonly T[]) => T, shape: Shape, key: string): FuzzEvent {
    const roll = random();
    if (shape.profile.horizon === "long" && roll < 0.45) {
        return { op: "advance", ms: pick([60_000, 10 * 60_000, HOUR, 6 * HOUR, 24 * HOUR]) };
    }
    if (shape.profile.settings && roll < 0.7) {
        if (random() < 0.75) {
            return { op: "setLimit", key, limit: random() < 0.15 ? null : Math.floor(random() * (shape.ids.length + 1)) };
        }
        return { op: "setDefault", limit: random() < 0.3 ? null : Math.floor(random() * (shape.ids.length + 1)) };
    }
    if (shape.profile.settings && roll < 0.8) {
        return random() < 0.5 ? { op: "pause" } : { op: "resume" };
    }
    if (shape.profile.bursts) {
        return {
            op: "burst",
            requests: 2 + Math.floor(random() * 12),
            kind: pick(["throttle", "500-before", "500-after", "conflict"] as const),
        };
    }
    return { op: "count", key };
}

/** The keys a history touches. */
export function historyKeys(history: History): string[] {
    const keys = new Set<string>([...Object.keys(history.limits), ...history.preexisting.map((p) => p.key)]);
    for (const event of history.events) {
        if ("key" in event && typeof event.key === "string" && event.key.length > 0) {
            keys.add(event.key);
        }
    }
    return [...keys].sort();
}
