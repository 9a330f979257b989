/**
 * Histories for the model-based checker: what the API's callers and the pipeline do, generated from a
 * seed. A history is plain data, so a failing one can be printed, shrunk and replayed.
 *
 * Few keys and few ids per key, so ids collide (concurrent creates and deletes of one id) and are
 * reused (a create after a delete of the same id). The scheduler (scheduler.ts) decides, from the
 * same seed, how the events' requests interleave and which of them meet an injected fault.
 *
 * A history counts the client's items (selection "client") or every item whose sort key begins with
 * "i" (selection "prefix", ids being "i0".."i5"), chosen from the seed. Only a prefix history has other
 * writers (plain PutItem and DeleteItem of selected ids, with no client token) and items that were in
 * the table before the counter was attached; both kinds run backfills.
 */
import { seededRandom } from "../../local/faults";

export type Mode = "utilization" | "strict";

export type ClientCall = "create" | "tryCreate" | "delete" | "count";

export type FuzzEvent =
    | { readonly op: "create"; readonly key: string; readonly id: string }
    | { readonly op: "tryCreate"; readonly key: string; readonly id: string }
    | { readonly op: "delete"; readonly key: string; readonly id: string }
    | { readonly op: "count"; readonly key: string }
    /** A call with one bad argument: it must throw InvalidArgumentError naming `field`, and write nothing. */
    | { readonly op: "invalid"; readonly call: ClientCall; readonly key: string; readonly field: "key" | "id" | "limit" | "attributes" }
    /**
     * One consumer invocation of up to `max` records from the checkpoint, starting `overlap` records
     * before it (a redelivery of records already counted). `crash`: "after" runs the invocation and
     * loses its answer (the batch is retried); "before" fails it without running.
     */
    | { readonly op: "consume"; readonly max: number; readonly overlap: number; readonly crash: "none" | "before" | "after" }
    /** One redrive invocation over every message in the first dead-letter queue. */
    | { readonly op: "redrive" }
    /** reconcileKey on one key, beside everything else. */
    | { readonly op: "reconcile"; readonly key: string }
    /** Another service's plain PutItem of a selected id: no client token, no deleted flag (prefix histories only). */
    | { readonly op: "otherPut"; readonly key: string; readonly id: string }
    /** Another service's plain DeleteItem of an id: a hard delete, whoever wrote the item (prefix histories only). */
    | { readonly op: "otherDelete"; readonly key: string; readonly id: string }
    /**
     * One backfill() call of run `runId` (a run resumes from its checkpoints; a completed one reads only
     * them), one segment, `pageSize` items per Scan page so that its requests interleave with the rest.
     */
    | { readonly op: "backfill"; readonly runId: string; readonly pageSize: number };

/** Which items a history counts: the client's (the default selection) or every id under the prefix "i". */
export type SelectionKind = "client" | "prefix";

/** The sort-key prefix a "prefix" history selects: every id the generator makes begins with it. */
export const ID_PREFIX = "i";

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
    /** The limit tryCreate enforces, per key (one per key, as an API would). */
    readonly limits: Readonly<Record<string, number>>;
    readonly events: readonly FuzzEvent[];
    /** Absent in histories saved before selections existed: "client". */
    readonly selection?: SelectionKind;
    /**
     * Items (no client token) the table held before the counter was attached: the stream mapping starts
     * after their records, as a mapping created on a table in use does, so only a backfill counts them.
     */
    readonly preexisting?: ReadonlyArray<{ readonly key: string; readonly id: string }>;
}

export interface GenerateOptions {
    readonly seed: number;
    readonly ops: number;
    readonly mode?: Mode;
    readonly faultRate?: number;
    readonly selection?: SelectionKind;
}

/** Builds a history from a seed: same seed, same history. */
export function generateHistory(options: GenerateOptions): History {
    const random = seededRandom(options.seed);
    // The selection, the pre-existing items and a client history's backfills come from a second source,
    // so that the client histories' other events stay what they were before these existed.
    const extra = seededRandom((options.seed ^ 0x2545f491) >>> 0);
    const selection: SelectionKind = options.selection ?? (extra() < 0.5 ? "client" : "prefix");
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
        [selection === "prefix" ? 8 : 0, () => ({ op: "otherPut", key: pick(keys), id: pick(ids) })],
        [selection === "prefix" ? 6 : 0, () => ({ op: "otherDelete", key: pick(keys), id: pick(ids) })],
        [selection === "prefix" ? 2 : 0, () => backfillEvent(random)],
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
    const preexisting: Array<{ key: string; id: string }> = [];
    if (selection === "prefix") {
        for (const key of keys) {
            for (const id of ids) {
                if (extra() < 0.25) {
                    preexisting.push({ key, id });
                }
            }
        }
    }
    return {
        seed: options.seed,
        selection,
        preexisting,
        mode,
        placement: random() < 0.5 ? "separate" : "same-table",
        faultRate: options.faultRate ?? pick([0.05, 0.1, 0.2]),
        concurrency: int(1, 4),
        limits,
        events,
    };
}

function backfillEvent(random: () => number): FuzzEvent {
    return { op: "backfill", runId: random() < 0.5 ? "a" : "b", pageSize: 2 + Math.floor(random() * 4) };
}

/** Keys a history touches, sorted. */
export function historyKeys(history: History): string[] {
    return Object.keys(history.limits).sort();
}
