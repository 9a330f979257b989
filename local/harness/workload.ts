/**
 * A workload generator that drives HybridCounterClient the way an API would: concurrent creates
 * (through tryCreate when a limit is set) and deletes of live items, over several keys, seeded.
 */
import type { HybridCounterClient } from "../../runtime/client/client";
import { InvalidArgumentError } from "../../runtime/shared/errors";
import { seededRandom } from "../engine/faults";

export interface WorkloadOptions {
    readonly ops: number;
    readonly keys: readonly string[];
    readonly concurrency: number;
    /** Share of operations that delete a live item (when the key has one). */
    readonly deleteRatio: number;
    /**
     * Creates through tryCreate under this limit, or under each key's stored limit ("stored": tryCreate without one);
     * undefined: plain create.
     */
    readonly limit?: number | "stored";
    readonly seed: number;
    /** Key choice skew: 0 uniform; 1 puts about half the traffic on the first key. @default 0 */
    readonly hotKeyShare?: number;
    /** Stops issuing operations once it returns true (for runs bounded by time). */
    readonly stop?: () => boolean;
    /**
     * Awaited by a worker before each operation, before `stop` is asked: an offered rate (a slot per call)
     * that ends with `stop`, without calls already waiting for their slot running past it.
     */
    readonly pace?: () => Promise<void>;
    /**
     * The live ids per key the workload creates into and deletes from: pass one map to several workloads (one per
     * region of a multi-region run) and each deletes items the others created too. @default a map of its own
     */
    readonly live?: Map<string, string[]>;
}

export interface WorkloadResult {
    ops: number;
    created: number;
    deleted: number;
    limitRejected: number;
    existsRejected: number;
    unavailable: number;
    /** Errors the client surfaced to the caller, other than InvalidArgumentError. */
    apiErrors: Array<{ operation: string; error: string }>;
    validationErrors: number;
    /** Time of every counted create/delete per key (ms since epoch), in order: the ground-truth timeline. */
    readonly events: Array<{ key: string; id: string; at: number; delta: 1 | -1 }>;
}

/** What the workload calls: HybridCounterClient, or a baseline counter with the same shape. */
export type WorkloadTarget = Pick<HybridCounterClient, "create" | "delete" | "tryCreate">;

export async function runWorkload(
    client: WorkloadTarget,
    options: WorkloadOptions,
    onProgress?: (result: WorkloadResult) => void,
): Promise<WorkloadResult> {
    const random = seededRandom(options.seed);
    const live = options.live ?? new Map<string, string[]>();
    for (const key of options.keys) {
        if (!live.has(key)) {
            live.set(key, []);
        }
    }
    const result: WorkloadResult = {
        ops: 0,
        created: 0,
        deleted: 0,
        limitRejected: 0,
        existsRejected: 0,
        unavailable: 0,
        apiErrors: [],
        validationErrors: 0,
        events: [],
    };
    let issued = 0;
    let nextId = 0;
    const pickKey = (): string => {
        const hot = options.hotKeyShare ?? 0;
        if (hot > 0 && random() < hot / 2) {
            return options.keys[0]!;
        }
        return options.keys[Math.floor(random() * options.keys.length)]!;
    };
    const worker = async (): Promise<void> => {
        while (issued < options.ops) {
            if (options.pace !== undefined) {
                await options.pace();
                // Other workers issued while this one waited for its slot.
                if (issued >= options.ops) {
                    break;
                }
            }
            if (options.stop?.() ?? false) {
                break;
            }
            issued++;
            const key = pickKey();
            const ids = live.get(key)!;
            if (ids.length > 0 && random() < options.deleteRatio) {
                // Take the id out before the call so no two workers delete the same item.
                await deleteOne(client, key, ids.splice(Math.floor(random() * ids.length), 1)[0]!, result);
            } else {
                await createOne(client, key, `item-${options.seed}-${nextId++}`, ids, options.limit, result);
            }
            result.ops++;
            onProgress?.(result);
        }
    };
    await Promise.all(Array.from({ length: options.concurrency }, worker));
    return result;
}

/** Counts an error the client surfaced to the caller (InvalidArgumentError apart). */
function surfaced(result: WorkloadResult, operation: "create" | "delete", error: unknown): void {
    if (error instanceof InvalidArgumentError) {
        result.validationErrors++;
    } else {
        result.apiErrors.push({ operation, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
    }
}

async function deleteOne(client: WorkloadTarget, key: string, id: string, result: WorkloadResult): Promise<void> {
    try {
        const { deleted } = await client.delete(key, id);
        if (deleted) {
            result.deleted++;
            result.events.push({ key, id, at: Date.now(), delta: -1 });
        }
    } catch (error) {
        surfaced(result, "delete", error);
    }
}

/** A create (tryCreate when the workload runs under a limit); a created id joins the key's live ids. */
async function createOne(
    client: WorkloadTarget,
    key: string,
    id: string,
    ids: string[],
    limit: WorkloadOptions["limit"],
    result: WorkloadResult,
): Promise<void> {
    try {
        const outcome =
            limit === undefined
                ? { ...(await client.create(key, id, { payload: "x" })), reason: "exists" as const }
                : await client.tryCreate(key, id, limit === "stored" ? undefined : limit, { payload: "x" });
        if (outcome.created) {
            ids.push(id);
            result.created++;
            result.events.push({ key, id, at: Date.now(), delta: 1 });
        } else if (outcome.reason === "limit") {
            result.limitRejected++;
        } else if (outcome.reason === "exists") {
            result.existsRejected++;
        } else {
            result.unavailable++;
        }
    } catch (error) {
        surfaced(result, "create", error);
    }
}
