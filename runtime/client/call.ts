/**
 * What one client call works with: the writers, the configuration, and the call's record of whether its best-effort
 * writes may have left the count off its items ("drift"). A drifting call lists its key on the heal index once, when
 * it ends; a call that keeps best-effort exact writes nothing more.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { tokenTime } from "../shared/tokens";
import { periodOf } from "../ledger/ledger";
import { homeShard, shardCount } from "../shards/layout";
import type { BestEffortFailure, BestEffortWriter } from "./units";
import type { ResourceWriter } from "./puts";

/** The writers and settings every call shares. */
export interface ClientParts {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
    readonly attempts: number;
    readonly puts: ResourceWriter;
    readonly units: BestEffortWriter;
    readonly deadlineMs: number;
    readonly onFailure: (failure: BestEffortFailure) => void;
    /** Counts an "unavailable" answer (metrics). */
    readonly unavailable: () => void;
}

/** One call: its parts, and whether it drifted. */
export class Call {
    private drift = false;

    constructor(
        readonly parts: ClientParts,
        readonly key: string,
    ) {}

    /** Says the call's best-effort writes may not match the item writes it committed. */
    drifted(drift: boolean): void {
        this.drift ||= drift;
    }

    get hasDrifted(): boolean {
        return this.drift;
    }

    /** The shard an item's unit lives in. */
    shardOf(id: string): number {
        return homeShard(id, shardCount(this.parts.config));
    }

    /** The ledger period of a life's token (undefined: not a client token). */
    periodOf(token: string | null | undefined): number | undefined {
        const time = tokenTime(token ?? undefined);
        return time === undefined ? undefined : periodOf(time, this.parts.config.periodMs);
    }
}

/** Runs `body` as one call on `key`; a drifting call lists the key on the heal index when it ends, thrown or not. */
export async function runCall<T>(parts: ClientParts, key: string, body: (call: Call) => Promise<T>): Promise<T> {
    const call = new Call(parts, key);
    try {
        return await body(call);
    } finally {
        if (call.hasDrifted) {
            await parts.units.markDue(key);
        }
    }
}
