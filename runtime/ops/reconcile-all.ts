/**
 * Reconciling a set of keys, or every key that has something pending, with progress.
 *
 * Invariant: each key is settled by `reconcileKey`, whose every write is conditional on the item's
 * current state; a key is either fully handled or not started, so an interrupted run leaves nothing
 * half-done and running it again finishes the job. The pure planner picks the keys; the adapter runs
 * them one at a time and stops between keys when the signal is aborted. A key a sharded counter cannot hold
 * (runtime/shards/layout.ts, shardedKeyProblem: its items can never be counted) is not started and is reported
 * as refused, with why, instead of stopping the run.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterTableConfig } from "../shared/config";
import type { FatalQueue } from "../stream/fatal";
import { reconcileKey, type ReconcileResult } from "../heal/reconcile";
import { readTableStatus, type KeyStatus } from "./status";
import { shardCount, shardedKeyProblem } from "../shards/layout";

/** The keys reconciliation can change: those with pending creates or deletes. Pure. */
export function keysToReconcile(statuses: readonly KeyStatus[]): string[] {
    return statuses
        .filter((s) => s.pendingCreates + s.pendingDeletes > 0)
        .map((s) => s.key)
        .sort();
}

export interface ReconcileKeysOptions {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    readonly fatal: FatalQueue;
    /** Called after each key, with how many are done out of how many. */
    readonly onKey?: (result: ReconcileResult, done: number, total: number) => void;
    /** Stops between keys. */
    readonly signal?: AbortSignal;
    readonly timeoutMs?: number;
}

export interface ReconcileKeysResult {
    readonly results: ReconcileResult[];
    /** Keys not started because the run was interrupted. */
    readonly notStarted: string[];
    /** True when some key answered `incomplete`: run it again. */
    readonly incomplete: boolean;
    /** Keys a sharded counter cannot hold, not started (absent when none): their items must be fixed or removed. */
    readonly refused?: ReadonlyArray<{ readonly key: string; readonly problem: string }>;
}

/** Reconciles the given keys one at a time. */
export async function reconcileKeys(keys: readonly string[], options: ReconcileKeysOptions): Promise<ReconcileKeysResult> {
    const results: ReconcileResult[] = [];
    const refused: Array<{ key: string; problem: string }> = [];
    const end = (notStarted: string[]): ReconcileKeysResult => ({
        results,
        notStarted,
        incomplete: results.some((r) => r.incomplete),
        ...(refused.length > 0 ? { refused } : {}),
    });
    for (const [i, key] of keys.entries()) {
        if (options.signal?.aborted) {
            return end(keys.slice(i));
        }
        const problem = shardedKeyProblem(key, shardCount(options.config));
        if (problem !== undefined) {
            refused.push({ key, problem });
            continue;
        }
        const result = await reconcileKey(key, {
            config: options.config,
            dynamodb: options.dynamodb,
            fatal: options.fatal,
            timeoutMs: options.timeoutMs,
        });
        results.push(result);
        options.onKey?.(result, i + 1, keys.length);
    }
    return end([]);
}

/** Finds every key with pending items (a table Scan) and reconciles them. */
export async function reconcileAll(
    options: ReconcileKeysOptions & { onPlanned?: (keys: readonly string[]) => void },
): Promise<ReconcileKeysResult> {
    const table = await readTableStatus({ config: options.config, dynamodb: options.dynamodb, signal: options.signal });
    const keys = keysToReconcile(table.all);
    options.onPlanned?.(keys);
    return reconcileKeys(keys, options);
}
