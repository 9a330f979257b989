/**
 * Histories for the model-based checker: what the API's callers and the pipeline do, generated from a
 * seed. A history is plain data, so a failing one can be printed, shrunk and replayed.
 *
 * Few keys and few ids per key, so ids collide (concurrent creates and deletes of one id) and are
 * reused (a create after a delete of the same id). The scheduler (scheduler.ts) decides, from the
 * same seed, how the events' requests interleave and which of them meet an injected fault.
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
    | { readonly op: "reconcile"; readonly key: string };

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
}

export interface GenerateOptions {
    readonly seed: number;
    readonly ops: number;
    readonly mode?: Mode;
    readonly faultRate?: number;
}

/** Builds a history from a seed: same seed, same history. */
export function generateHistory(options: GenerateOptions): History {
    const random = seededRandom(options.seed);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
    const mode: Mode = options.mode ?? (random() < 0.5 ? "utilization" : "strict");
    const keys = Array.from({ length: int(1, 3) }, (_, i) => `k${i}`);
    const ids = Array.from({ length: int(3, 6) }, (_, i) => `i${i}`);
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
    return {
        seed: options.seed,
        mode,
        placement: random() < 0.5 ? "separate" : "same-table",
        faultRate: options.faultRate ?? pick([0.05, 0.1, 0.2]),
        concurrency: int(1, 4),
        limits,
        events,
    };
}

/** Keys a history touches, sorted. */
export function historyKeys(history: History): string[] {
    return Object.keys(history.limits).sort();
}
