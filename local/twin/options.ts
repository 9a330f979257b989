/** What every run of the twin takes, one region or several (twin.ts, regions.ts). */
import type { CounterMode } from "../../runtime/client/client";

/** The workload and the system it runs on. */
export interface TwinWorkloadOptions {
    readonly ops: number;
    readonly keys: number;
    readonly concurrency: number;
    readonly deleteRatio: number;
    readonly limit?: number;
    readonly mode: CounterMode;
    readonly faults: number;
    readonly seed: number;
    /** Seconds to keep the workload running; 0: run `ops` operations. Infinity with --watch. */
    readonly durationSeconds: number;
    /** False with --no-parity: DynamoDB Local without the parity layer (local/engine/parity.ts). */
    readonly parity?: boolean;
    /** Shards of each key's counting (the component's `counterShards`), when given. @default 1 */
    readonly shards?: number;
}

/** How many API errors the report lists (it counts them all). */
export const API_ERRORS_LISTED = 20;
