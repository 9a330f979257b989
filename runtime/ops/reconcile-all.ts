/**
 * Reconciling a set of keys, or every key a reconcile can change, with progress.
 *
 * Invariant: each key is reconciled by `reconcileKey` (reconcile.ts), whose only count write is conditional on the
 * eventual item it read twice; a key is either handled whole or not started, so an interrupted run leaves nothing
 * half-done and running it again finishes the job. The pure planner (status.ts `keysToReconcile`) picks the keys; this
 * runs them one at a time and stops between keys when the signal is aborted. A key no counter can hold (its name
 * breaks runtime/shared/keys.ts `keyProblem`) is not started and is reported as refused.
 *
 * Like reconcileKey, it is for keys whose writes have stopped long enough for the stream to drain: a record written
 * before a key's reads and not yet applied is applied again on top of the count the reconcile sets.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { keyProblem } from "../shared/keys";
import { reconcileKey, type ReconcileResult } from "./reconcile";
import { keysToReconcile } from "./status";
import { readTableStatus } from "./status-read";

export interface ReconcileKeysOptions {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
    /** Called after each key, with how many are done out of how many. */
    readonly onKey?: (result: ReconcileResult, done: number, total: number) => void;
    /** Stops between keys. */
    readonly signal?: AbortSignal;
    /** reconcileKey's reads before it answers "busy". */
    readonly attempts?: number;
}

export interface ReconcileKeysResult {
    readonly results: ReconcileResult[];
    /** Keys not started because the run was interrupted. */
    readonly notStarted: string[];
    /** True when some key ended "pending" (items flagged: run it again once counted) or "busy" (written meanwhile). */
    readonly incomplete: boolean;
    /** Keys no counter can hold, not started (absent when none). */
    readonly refused?: ReadonlyArray<{ readonly key: string; readonly problem: string }>;
}

/** Reconciles the given keys one at a time. */
export async function reconcileKeys(keys: readonly string[], options: ReconcileKeysOptions): Promise<ReconcileKeysResult> {
    const results: ReconcileResult[] = [];
    const refused: Array<{ key: string; problem: string }> = [];
    const end = (notStarted: string[]): ReconcileKeysResult => ({
        results,
        notStarted,
        incomplete: results.some((r) => r.outcome === "pending" || r.outcome === "busy"),
        ...(refused.length > 0 ? { refused } : {}),
    });
    for (const [i, key] of keys.entries()) {
        if (options.signal?.aborted) {
            return end(keys.slice(i));
        }
        const problem = keyProblem(key);
        if (problem !== undefined) {
            refused.push({ key, problem });
            continue;
        }
        const result = await reconcileKey(key, {
            config: options.config,
            dynamodb: options.dynamodb,
            ...(options.attempts === undefined ? {} : { attempts: options.attempts }),
        });
        results.push(result);
        options.onKey?.(result, i + 1, keys.length);
    }
    return end([]);
}

/** Finds every key a reconcile can change (a table Scan, status.ts `keysToReconcile`) and reconciles them. */
export async function reconcileAll(
    options: ReconcileKeysOptions & { onPlanned?: (keys: readonly string[]) => void },
): Promise<ReconcileKeysResult> {
    const table = await readTableStatus({
        config: options.config,
        dynamodb: options.dynamodb,
        ...(options.signal ? { signal: options.signal } : {}),
    });
    const keys = keysToReconcile(table.all);
    options.onPlanned?.(keys);
    return reconcileKeys(keys, options);
}
