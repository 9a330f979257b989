/**
 * The contract, as the checker holds the system to it: which items count, what each counter must be, and the
 * bookkeeping of what other parties did that the bounds allow for. Written from the README's Guarantees and
 * docs/design/core.md, not from the runtime's code: the predicates here are the checker's own.
 *
 * - An item **counts** when it is a resource the selection names (the client's token, the sort-key prefix, or the
 *   status attribute), not soft-deleted (`deleted` true), and flagged with the counter's generation.
 * - **Eventual**, at every observation, equals the sum of the deltas (`counts(new) - counts(old)`) of the key's records
 *   up to each stream shard's mark on its eventual item: every record applied exactly once, none passed.
 * - **Best-effort, utilization**: at most the key's live client lives (items carrying a token a client put wrote), plus
 *   the client lives other writers ended that no heal has taken out yet (`Allowance`). Per shard too, by each id's
 *   home shard.
 * - **Best-effort, strict**: at least the key's client-owned live items, per key and per shard; right after a tryCreate
 *   reserved under a limit, the key's sum is at most the highest limit in force during the call, on a key only the
 *   client's tryCreate calls wrote (a plain `create` reserves without a limit).
 *
 * A *client-owned* life is an item whose token a client put wrote and that no other writer has written since: another
 * writer's delete, TTL delete, flip out of the selection, or token rewrite ends it as the client's (the README: strict's
 * bound is for keys written through the client).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { homeShard } from "../../runtime/shards/layout";
import { tokenTime } from "../../runtime/shared/tokens";
import { ACTIVE, STATUS_ATTRIBUTE } from "./history";
import type { FuzzSystem, Item, KeyState } from "./system";

type Image = Record<string, AttributeValue | { readonly [type: string]: unknown }>;

function text(image: Image | undefined, name: string): string | undefined {
    const value = image?.[name] as { S?: unknown } | undefined;
    return typeof value?.S === "string" ? value.S : undefined;
}

/** A resource the selection names (counter items never). */
export function selected(image: Image | undefined, system: FuzzSystem): boolean {
    const { config } = system;
    const sortKey = text(image, config.sortKey);
    if (image === undefined || sortKey === undefined || sortKey.startsWith(config.counterPrefix)) {
        return false;
    }
    switch (config.selection.kind) {
        case "client":
            return text(image, config.tokenAttribute) !== undefined;
        case "sortKeyPrefix":
            return sortKey.startsWith(config.selection.prefix);
        case "attribute":
            return text(image, STATUS_ATTRIBUTE) === ACTIVE;
    }
}

/** Selected and not soft-deleted. */
export function live(image: Image | undefined, system: FuzzSystem): boolean {
    return selected(image, system) && (image![system.config.deletedAttribute] as { BOOL?: unknown } | undefined)?.BOOL !== true;
}

/** Live and flagged with the counter's generation. */
export function counts(image: Image | undefined, system: FuzzSystem): boolean {
    return live(image, system) && text(image, "hc_counted") === system.generation;
}

/** What one stream record moves eventual by. */
export function delta(record: DynamoDBRecord, system: FuzzSystem): number {
    const images = record.dynamodb as { NewImage?: Image; OldImage?: Image } | undefined;
    return (counts(images?.NewImage, system) ? 1 : 0) - (counts(images?.OldImage, system) ? 1 : 0);
}

export function tokenOf(item: Item | undefined, system: FuzzSystem): string | undefined {
    return text(item, system.config.tokenAttribute);
}

export function idOf(item: Item, system: FuzzSystem): string {
    return text(item, system.config.sortKey)!;
}

/** The units a best-effort item holds. */
export function units(item: Item | undefined, system: FuzzSystem): number {
    return Number(item?.[system.config.countAttribute]?.N ?? 0);
}

/** The lives a client put wrote, and those another writer has written since. */
export class Ownership {
    private readonly put = new Set<string>();
    private readonly touched = new Set<string>();

    clientPut(token: string): void {
        this.put.add(token);
    }

    /** Another writer wrote the item holding `token`: it is no longer the client's. */
    othersWrote(token: string): void {
        this.touched.add(token);
    }

    /** Whether a client put wrote `token` (whatever happened to its item since). */
    everPut(token: string | undefined): boolean {
        return token !== undefined && this.put.has(token);
    }

    owned(token: string | undefined): boolean {
        return token !== undefined && this.put.has(token) && !this.touched.has(token);
    }

    /**
     * Per best-effort shard, the key's live items that best-effort answers for: strict, the client-owned ones (its
     * bound is for keys the client alone writes); utilization, every live item carrying a token a client put wrote,
     * whoever wrote the item since (a heal counts those).
     */
    liveLives(state: KeyState, system: FuzzSystem): number[] {
        return this.liveIds(state, system).map((ids) => ids.length);
    }

    /** The ids `liveLives` counts, per shard. */
    liveIds(state: KeyState, system: FuzzSystem): string[][] {
        const perShard = Array.from({ length: system.shards }, (): string[] => []);
        const mine = (token: string | undefined) => (system.config.mode === "strict" ? this.owned(token) : this.everPut(token));
        for (const item of state.items) {
            if (live(item, system) && mine(tokenOf(item, system))) {
                perShard[homeShard(idOf(item, system), system.shards)]!.push(idOf(item, system));
            }
        }
        return perShard;
    }
}

/** A client life another writer ended, whose unit utilization's best-effort may still hold. */
interface Ended {
    readonly token: string;
    readonly shard: number;
    /** The request index it ended at. */
    readonly at: number;
    /** The ledger period of its token. */
    readonly period: number;
}

/**
 * The client lives other writers ended, per key: utilization's best-effort may hold each one's unit until a heal of its
 * shard reads the table after it ended, at a time the life is old for the ledger (heal.ts takes young lives from their
 * entry, old ones from the table). A heal's time is the clock at its first read of the key (its shards' in utilization,
 * its items' in strict), which the heal plans by: a life old then is old for the heal, and one young then keeps its
 * entry's units however late the heal reads the items.
 */
export class Allowance {
    private readonly ended = new Map<string, Ended[]>();

    constructor(private readonly periodMs: number) {}

    end(key: string, token: string, shard: number, at: number): void {
        const period = Math.floor((tokenTime(token) ?? 0) / this.periodMs);
        this.ended.set(key, [...(this.ended.get(key) ?? []), { token, shard, at, period }]);
    }

    /** A heal of `key`'s `shard` wrote, having read the items at request `readAt`, virtual time `readTime`. */
    healed(key: string, shard: number, readAt: number, readTime: number): void {
        const nowPeriod = Math.floor(readTime / this.periodMs);
        this.ended.set(
            key,
            (this.ended.get(key) ?? []).filter((e) => !(e.shard === shard && e.at < readAt && e.period < nowPeriod - 1)),
        );
    }

    of(key: string, shard?: number): number {
        return (this.ended.get(key) ?? []).filter((e) => shard === undefined || e.shard === shard).length;
    }
}

/** The bound problems of one observation of a key (empty: the bound holds). */
export function boundProblems(
    state: KeyState,
    system: FuzzSystem,
    owned: readonly number[],
    allowance: { readonly over: (shard?: number) => number; readonly under: (shard?: number) => number },
): string[] {
    const problems: string[] = [];
    const shardUnits = state.shards.map((item) => units(item, system));
    const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);
    const check = (be: number, own: number, shard: number | undefined, where: string) => {
        const over = allowance.over(shard);
        if (system.config.mode === "utilization" && be > own + over) {
            problems.push(
                `${where}best-effort ${be} > ${own} live client lives + ${over} ended by other writers (utilization may only undercount)`,
            );
        }
        const under = allowance.under(shard);
        if (system.config.mode === "strict" && be < own - under) {
            const excused = under > 0 ? ` - ${under} brought back after other writers ended them` : "";
            problems.push(`${where}best-effort ${be} < ${own} client-owned live items${excused} (strict must hold a slot for each)`);
        }
    };
    check(sum(shardUnits), sum(owned), undefined, "");
    if (system.shards > 1) {
        shardUnits.forEach((be, shard) => check(be, owned[shard]!, shard, `shard ${shard}: `));
    }
    return problems;
}
