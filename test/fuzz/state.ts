/**
 * What a run knows besides the tables: the parties' tasks and what each did, the contract's bookkeeping (model.ts), the
 * limits in force, and what the run has found wrong. Shared by the loop (run.ts), the parties (parties.ts), the
 * accounting of each released request (account.ts) and the end (liveness.ts).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { HybridCounterClient } from "../../runtime/client/client";
import type { FatalMessage } from "../../runtime/stream/fatal";
import type { ThresholdEvent } from "../../runtime/limits/thresholds";
import { seededRandom } from "../../local/engine/faults";
import type { FuzzEvent, History } from "./history";
import type { StreamMapping, Consumer } from "./mapping";
import { Allowance, Ownership } from "./model";
import type { Scheduler } from "./scheduler";
import type { FuzzSystem } from "./system";
import type { Trace } from "./trace";

export type TaskKind = "call" | "other" | "consumer" | "redrive" | "settle" | "backfill" | "admin" | "drain";

export interface TaskInfo {
    readonly kind: TaskKind;
    readonly event?: FuzzEvent;
    requests: number;
    /** Requests that met a fault (injected, or refused as expired). */
    faults: number;
    /** A client put of this call applied; a soft delete of this call applied. */
    putApplied: boolean;
    softDeleted: boolean;
    /** A strict tryCreate without a limit of its own: the limits in force while it ran (undefined: none). */
    inForce?: Array<number | undefined>;
}

/** The DynamoDB clients of the parties, each gated by the scheduler. */
export interface Parties {
    readonly api: DynamoDBClient;
    readonly pipeline: DynamoDBClient;
    readonly other: DynamoDBClient;
    readonly backfill: DynamoDBClient;
    readonly settler: DynamoDBClient;
}

export interface Handlers {
    /** Two consumer instances, each with what it remembers of its shards' frontiers. */
    readonly consumers: readonly [Consumer, Consumer];
    readonly redrive: Parameters<StreamMapping["redrive"]>[0];
}

export class RunState {
    readonly violations: string[] = [];
    /** Released requests so far. */
    index = 0;
    faults = 0;
    readonly tasks = new Map<number, TaskInfo>();
    readonly ownership = new Ownership();
    readonly allowance: Allowance;
    /** Strict: client lives brought back by a late put attempt after another writer ended them (no slot held). */
    readonly resurrections: Allowance;
    /** Keys other writers, the backfill or the consumer's flags put items of in: strict's admission check skips them. */
    readonly keysWithOthers = new Set<string>();
    /** Keys a plain `create` (strict: a reservation without a limit) wrote. */
    readonly plainCreates = new Set<string>();
    /** Per settler task and key: the request index and virtual time of its last read of the key's items. */
    readonly healReads = new Map<string, { at: number; time: number }>();
    /** Per settler task and key: the clock at its heal attempt's first read, and whether the second read came. */
    readonly healAttempts = new Map<string, { time: number; second: boolean }>();
    readonly storedLimits = new Map<string, number>();
    defaultLimit: number | undefined;
    /** The highest mark seen per key and eventual mark attribute (a mark is removed once stale). */
    readonly seenMarks = new Map<string, Map<string, string>>();
    readonly reconciled = new Set<string>();
    readonly sent: ThresholdEvent[] = [];
    readonly fatal: FatalMessage[] = [];
    settlerPaused = false;
    faultRate: number;
    /** Threshold sends that fail: a share drawn per history, none once the traffic stops. */
    sendFailRate: number;
    burst: { left: number; kind: NonNullable<Extract<FuzzEvent, { op: "burst" }>["kind"]> } | undefined;
    rewrites = 0;
    /** Hears each released request's trace line. */
    onTrace: ((line: string) => void) | undefined;
    /** Calls whose first put attempt is held past the call (history.ts, `late`). */
    readonly lateTasks = new Set<number>();
    /** Draws whether a threshold send fails. */
    readonly sendRandom: () => number;
    readonly stats = {
        settles: 0,
        healed: 0,
        backfills: 0,
        backfillFlagged: 0,
        otherWritesFailed: 0,
        held: 0,
        observations: 0,
        expired: 0,
        admissions: 0,
        healWrites: 0,
        healWritesLost: 0,
        /** Client lives a late put attempt brought back after another writer ended them (account.ts). */
        resurrected: 0,
    };

    constructor(
        readonly history: History,
        readonly system: FuzzSystem,
        readonly scheduler: Scheduler,
        readonly reader: DynamoDBClient,
        readonly streams: DynamoDBStreamsClient,
        readonly trace: Trace,
        readonly keys: readonly string[],
    ) {
        this.allowance = new Allowance(system.config.periodMs);
        this.resurrections = new Allowance(system.config.periodMs);
        this.faultRate = history.faultRate;
        this.sendFailRate = history.faultRate;
        for (const [key, limit] of Object.entries(history.limits)) {
            this.storedLimits.set(key, limit);
        }
        this.defaultLimit = history.defaultLimit;
        this.sendRandom = seededRandom((history.seed ^ 0x2545f491) >>> 0);
        for (const { key } of history.preexisting) {
            this.keysWithOthers.add(key);
        }
    }

    /** The limit a call without one runs under for `key`, now. */
    limitInForce(key: string): number | undefined {
        return this.storedLimits.get(key) ?? this.defaultLimit;
    }

    task(id: number): TaskInfo | undefined {
        return this.tasks.get(id);
    }

    violation(message: string): void {
        this.violations.push(message);
    }
}

/** What the parts of a run share. */
export interface Run {
    readonly state: RunState;
    /** Requests released and not yet accounted for. */
    readonly released: import("./scheduler").Released[];
    readonly parties: Parties;
    /** The Streams client the consumer and the redrive re-read records through. */
    readonly handlerStreams: DynamoDBStreamsClient;
    readonly handlers: Handlers;
    readonly client: HybridCounterClient;
    readonly mapping: StreamMapping;
    readonly sleep: (ms: number) => Promise<void>;
}
