/**
 * Histories for the model-based checker: what the API's callers and the pipeline do, generated from a
 * seed. A history is plain data, so a failing one can be printed, shrunk and replayed.
 *
 * Few keys and few ids per key, so ids collide (concurrent creates and deletes of one id) and are
 * reused (a create after a delete of the same id). The scheduler (scheduler.ts) decides, from the
 * same seed, how the events' requests interleave and which of them meet an injected fault.
 *
 * A history counts the client's items (selection "client"), every item whose sort key begins with "i"
 * (selection "prefix", ids being "i0".."i5") or every item whose `status` is "active" (selection
 * "attribute"), chosen from the seed. Only prefix and attribute histories have other writers (plain
 * PutItem and DeleteItem with no client token; in attribute histories also UpdateItem moving an item, the
 * client's included, in and out of the selection) and items that were in the table before the counter
 * was attached. Client histories have TTL-style deletes instead: the table's TTL hard-deletes a client
 * item. Every kind runs backfills and settler runs (heals on a clock moved past the quiet window).
 *
 * A history spreads its keys' counting over `counterShards` partitions (1, 3 or 8; runtime/shards/layout.ts), drawn
 * from a source of its own so that every other draw of a seed stays what it was before shards existed. Above one
 * shard the counters live in a table of their own (the placement is forced to "separate"), and some consumer
 * invocations split their batch into two groups by item id, run at once: two stream shards carrying one key's items,
 * as split-for-heat spreading a hot partition does.
 */
import { seededRandom } from "../../local/engine/faults";
import { DEFAULT_LAYOUT } from "../../runtime/shared/config";
import { markerIdMaxBytes } from "../../runtime/shared/key-limits";
import { addPaths } from "./paths";

export type Mode = "utilization" | "strict";

export type ClientCall = "create" | "tryCreate" | "delete" | "count";

export type FuzzEvent =
    /**
     * `late`: the call's first put attempt is held: the call hears a timeout (as when the SDK gives up on an
     * attempt) and goes on, while the very request waits to land at the next `land` event (a signed request
     * lives five minutes), before the next settler run, or at the drain: after the call's repeat, a delete
     * and the consumer's removal may all have happened.
     */
    | { readonly op: "create"; readonly key: string; readonly id: string; readonly late?: true; readonly big?: true }
    /**
     * `limit`: the limit the call runs under (a tenant that moved plans: paths.ts); absent: the key's in `limits`.
     * `big` (also on create): the item is as large as the client accepts (big-items.ts).
     */
    | {
          readonly op: "tryCreate";
          readonly key: string;
          readonly id: string;
          readonly late?: true;
          readonly limit?: number;
          readonly big?: true;
      }
    /** Every held put attempt reaches DynamoDB now (see `late`). */
    | { readonly op: "land" }
    | { readonly op: "delete"; readonly key: string; readonly id: string }
    | { readonly op: "count"; readonly key: string }
    /**
     * A call with one bad argument: it must throw InvalidArgumentError naming `field`, and write nothing. `tooBig` (a
     * create's or tryCreate's "attributes"): attributes one byte past the largest item the client accepts (big-items.ts).
     */
    | {
          readonly op: "invalid";
          readonly call: ClientCall;
          readonly key: string;
          readonly field: "key" | "id" | "limit" | "attributes";
          readonly tooBig?: true;
      }
    /**
     * One consumer invocation of up to `max` records from the checkpoint, starting `overlap` records
     * before it (a redelivery of records already counted). `crash`: "after" runs the invocation and
     * loses its answer (the batch is retried); "before" fails it without running.
     */
    | {
          readonly op: "consume";
          readonly max: number;
          readonly overlap: number;
          readonly crash: "none" | "before" | "after";
          /**
           * Sharded histories: the batch is split into two groups by item id (each id's records stay in one group, in
           * order) and the consumer is invoked on both at once (mapping.ts); their failures are checkpointed as one batch's.
           */
          readonly split?: true;
      }
    /** One redrive invocation over every message in the first dead-letter queue. */
    | { readonly op: "redrive" }
    /** reconcileKey on one key, beside everything else. */
    | { readonly op: "reconcile"; readonly key: string }
    /**
     * Another service's plain PutItem of a selected id: no client token, no deleted flag (prefix and attribute histories).
     * `big`: the item is as large as DynamoDB accepts (big-items.ts).
     */
    | { readonly op: "otherPut"; readonly key: string; readonly id: string; readonly big?: true }
    /** Another service's plain DeleteItem of an id: a hard delete, whoever wrote the item (prefix and attribute histories). */
    | { readonly op: "otherDelete"; readonly key: string; readonly id: string }
    /** Another service's UpdateItem of `status` (attribute histories only): moves an item in ("active") or out of the selection. */
    | { readonly op: "otherFlip"; readonly key: string; readonly id: string; readonly status: "active" | "archived" }
    /**
     * Another service's UpdateItem of the client token attribute of a live client item (any selection): the item's home
     * shard moves by `shift` (runtime/shards/layout.ts; paths.ts, retoken.ts). An item without a token is left alone.
     */
    | { readonly op: "otherRetoken"; readonly key: string; readonly id: string; readonly shift: number }
    /** The table's TTL deleting an item (client histories): a hard delete nobody calls, of the client's own item. */
    | { readonly op: "ttlDelete"; readonly key: string; readonly id: string }
    /**
     * One settler run (heal index, audit, reconcile) with `keyBudget` keys from the index and an audit of
     * `auditSegments` segments (0: none). The clock first moves past the quiet window, and calls may start while it
     * runs. It starts when no API call is in flight, or, `busy`, at once: the calls in flight then outlive their
     * deadline across the move, as a call whose host stalls does, and their requests still waiting reach DynamoDB more
     * than a request's lifetime after they were signed and are refused (the heal's assumptions A1 and A2 hold as
     * AWS makes them hold, not because the keys went quiet).
     */
    | { readonly op: "settle"; readonly keyBudget: number; readonly auditSegments: number; readonly busy?: boolean }
    /**
     * One backfill() call of run `runId` (a run resumes from its checkpoints; a completed one reads only
     * them), one segment, `pageSize` items per Scan page so that its requests interleave with the rest.
     */
    | { readonly op: "backfill"; readonly runId: string; readonly pageSize: number };

/** Which items a history counts: the client's (the default selection), every id under the prefix "i", or every item whose status is "active". */
export type SelectionKind = "client" | "prefix" | "attribute";

/** The attribute an "attribute" history selects on, and the value that counts. */
export const STATUS_ATTRIBUTE = "status";
export const ACTIVE = "active";

/** The sort-key prefix a "prefix" history selects: every id the generator makes begins with it. */
export const ID_PREFIX = "i";

/** An id exactly as long as the marker's sort key allows (selected by the prefix): it must count like any other. */
export const LONGEST_ID = ID_PREFIX + "x".repeat(markerIdMaxBytes(DEFAULT_LAYOUT) - ID_PREFIX.length);

export interface History {
    /** Seeds the scheduler's interleaving and fault decisions. */
    readonly seed: number;
    readonly mode: Mode;
    /** Where the counter items live: a counters table of their own (the component's default) or the user's table. */
    readonly placement: "separate" | "same-table";
    /** Probability that one released request meets an injected fault. */
    readonly faultRate: number;
    /** How many events may run at once. */
    readonly concurrency: number;
    /** The limit tryCreate enforces, per key, unless a call names its own (a plan change: paths.ts). */
    readonly limits: Readonly<Record<string, number>>;
    readonly events: readonly FuzzEvent[];
    /** Absent in histories saved before selections existed: "client". */
    readonly selection?: SelectionKind;
    /**
     * Items (no client token) the table held before the counter was attached: the stream mapping starts
     * after their records, as a mapping created on a table in use does, so only a backfill counts them.
     */
    readonly preexisting?: ReadonlyArray<{ readonly key: string; readonly id: string }>;
    /** Shards of every key's counting (runtime/shards/layout.ts); absent in histories saved before shards existed: 1. */
    readonly counterShards?: number;
    /**
     * The most virtual milliseconds a released request takes (at least 1); absent: 20. A history that reuses one id
     * thousands of times (paths.ts) takes fewer, so that its lives all fit in a young life's window.
     */
    readonly latencyMs?: number;
}

/** The shard counts a history draws from: one (today's layout), a count that is not a power of two, and a power of two. */
export const FUZZ_COUNTER_SHARDS = [1, 3, 8] as const;

export interface GenerateOptions {
    readonly seed: number;
    readonly ops: number;
    readonly mode?: Mode;
    readonly faultRate?: number;
    readonly selection?: SelectionKind;
    /** Forces the shard count (default: drawn from FUZZ_COUNTER_SHARDS by the seed). */
    readonly counterShards?: number;
}

/** Builds a history from a seed: same seed, same history. */
export function generateHistory(options: GenerateOptions): History {
    const random = seededRandom(options.seed);
    // The selection, the pre-existing items and a client history's backfills come from a second source,
    // so that the client histories' other events stay what they were before these existed.
    const extra = seededRandom((options.seed ^ 0x2545f491) >>> 0);
    const roll = extra();
    const selection: SelectionKind = options.selection ?? (roll < 0.5 ? "client" : roll < 0.75 ? "prefix" : "attribute");
    const others = selection !== "client";
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
    const mode: Mode = options.mode ?? (random() < 0.5 ? "utilization" : "strict");
    const keys = Array.from({ length: int(1, 3) }, (_, i) => `k${i}`);
    const ids = Array.from({ length: int(3, 6) }, (_, i) => `${ID_PREFIX}${i}`);
    const limits = Object.fromEntries(keys.map((key) => [key, pick([0, 1, 2, 3, 5, 8])]));
    // strict mode keeps its bound only for keys written through tryCreate: create() reserves without a limit.
    const table: Array<[number, () => FuzzEvent]> = [
        [mode === "utilization" ? 14 : 0, () => ({ op: "create", key: pick(keys), id: pick(ids) })],
        [mode === "utilization" ? 16 : 30, () => ({ op: "tryCreate", key: pick(keys), id: pick(ids) })],
        [26, () => ({ op: "delete", key: pick(keys), id: pick(ids) })],
        [8, () => ({ op: "count", key: pick(keys) })],
        [
            16,
            () => ({
                op: "consume",
                max: int(1, 25),
                overlap: random() < 0.25 ? int(1, 6) : 0,
                crash: random() < 0.1 ? "after" : random() < 0.1 ? "before" : "none",
            }),
        ],
        [3, () => ({ op: "redrive" })],
        [3, () => ({ op: "reconcile", key: pick(keys) })],
        [others ? 8 : 0, () => ({ op: "otherPut", key: pick(keys), id: pick(ids) })],
        [others ? 6 : 0, () => ({ op: "otherDelete", key: pick(keys), id: pick(ids) })],
        [others ? 2 : 0, () => backfillEvent(random)],
        [
            2,
            () => {
                const call = pick<ClientCall>(
                    mode === "utilization" ? ["create", "tryCreate", "delete", "count"] : ["tryCreate", "delete", "count"],
                );
                const fields: Array<"key" | "id" | "limit" | "attributes"> =
                    call === "count"
                        ? ["key"]
                        : call === "delete"
                          ? ["key", "id"]
                          : call === "create"
                            ? ["key", "id", "attributes"]
                            : ["key", "id", "limit", "attributes"];
                return { op: "invalid", call, key: pick(keys), field: pick(fields) };
            },
        ],
    ];
    const total = table.reduce((sum, [weight]) => sum + weight, 0);
    const events: FuzzEvent[] = [];
    for (let i = 0; i < options.ops; i++) {
        let roll = random() * total;
        for (const [weight, make] of table) {
            roll -= weight;
            if (roll < 0) {
                events.push(make());
                break;
            }
        }
    }
    if (selection === "client") {
        // About one event in fifty becomes a backfill: over items that all came through the stream, it must change nothing.
        for (let i = 0; i < events.length; i++) {
            if (extra() < 0.02) {
                events[i] = backfillEvent(extra);
            }
        }
    }
    // The parties added later come from a third source, replacing events, so that the histories above keep their shape.
    const later = seededRandom((options.seed ^ 0x68e31da4) >>> 0);
    const pickLater = <T>(values: readonly T[]): T => values[Math.floor(later() * values.length)]!;
    for (let i = 0; i < events.length; i++) {
        const r = later();
        if (r < 0.03) {
            // A budget of 1 with several keys leaves a backlog in the heal index; an audit of 1 or 2 segments walks the table.
            events[i] = { op: "settle", keyBudget: pickLater([1, 2, 200]), auditSegments: pickLater([0, 1, 2]) };
        } else if (r < 0.07 && selection === "client") {
            events[i] = { op: "ttlDelete", key: pickLater(keys), id: pickLater(ids) };
        } else if (r < 0.13 && selection === "attribute") {
            events[i] = { op: "otherFlip", key: pickLater(keys), id: pickLater(ids), status: later() < 0.5 ? ACTIVE : "archived" };
        } else if (r > 0.96) {
            // Ids at the key-size limit: the event keeps its kind and takes the longest id a marker can hold.
            const event = events[i]!;
            if ("id" in event) {
                events[i] = { ...event, id: LONGEST_ID };
            }
        }
    }
    // Settler runs that start while calls are in flight, from a source of their own (the histories above keep their shape).
    const busy = seededRandom((options.seed ^ 0x2b5e1c07) >>> 0);
    for (let i = 0; i < events.length; i++) {
        const event = events[i]!;
        if (event.op === "settle" && busy() < 0.5) {
            events[i] = { ...event, busy: true };
        }
    }
    // Late put attempts come from a fourth source, so that the histories above keep their shape but for them.
    const late = seededRandom((options.seed ^ 0x1b873593) >>> 0);
    for (let i = 0; i < events.length; i++) {
        const event = events[i]!;
        const r = late();
        if ((event.op === "create" || event.op === "tryCreate") && r < 0.15) {
            events[i] = { ...event, late: true };
        } else if (r > 0.97 && event.op !== "settle") {
            events[i] = { op: "land" };
        }
    }
    // The shard count and the split consumer invocations come from a fifth source: the draws above stay what they were.
    const sharding = seededRandom((options.seed ^ 0x7f4a7c15) >>> 0);
    const drawn = FUZZ_COUNTER_SHARDS[Math.floor(sharding() * FUZZ_COUNTER_SHARDS.length)]!;
    const counterShards = options.counterShards ?? drawn;
    for (let i = 0; i < events.length; i++) {
        const event = events[i]!;
        if (sharding() < 0.35 && event.op === "consume" && counterShards > 1) {
            events[i] = { ...event, split: true };
        }
    }
    const preexisting: Array<{ key: string; id: string }> = [];
    if (others) {
        for (const key of keys) {
            for (const id of ids) {
                if (extra() < 0.25) {
                    preexisting.push({ key, id });
                }
            }
        }
    }
    const generated: History = {
        seed: options.seed,
        selection,
        preexisting,
        mode,
        // A key's shards are partition keys of the counters table: above one shard it must be a table of its own.
        placement: random() < 0.5 || counterShards > 1 ? "separate" : "same-table",
        faultRate: options.faultRate ?? pick([0.05, 0.1, 0.2]),
        concurrency: int(1, 4),
        limits,
        events,
        ...(counterShards === 1 ? {} : { counterShards }),
    };
    // Plan changes, keys adopted at their limit, token rewrites and one id reused: from draws of their own (paths.ts).
    return addPaths(generated, ids);
}

function backfillEvent(random: () => number): FuzzEvent {
    return { op: "backfill", runId: random() < 0.5 ? "a" : "b", pageSize: 2 + Math.floor(random() * 4) };
}

/** Keys a history touches, sorted. */
export function historyKeys(history: History): string[] {
    return Object.keys(history.limits).sort();
}
