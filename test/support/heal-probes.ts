/**
 * What the heal and ledger tests read of a key, with the fixture's reader (no fault, no gate): a best-effort shard as
 * stored, its ledger entries, the key's heal-index mark, and the mode's bound on one observation.
 */
import { GetItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { bestEffortKey, eventualKey, numberOf } from "../../runtime/shared/keys";
import { entriesOf, periodOf } from "../../runtime/ledger/ledger";
import { HEAL_DUE } from "../../runtime/heal/index-marks";
import type { CounterFixture } from "./counter-fixture";
import type { KeyObservation } from "../../local/harness/observe";

/** A best-effort shard as stored (undefined: never written). */
export async function bestEffortItem(f: CounterFixture, key: string, shard = 0): Promise<Record<string, AttributeValue> | undefined> {
    const response = await f.reader.send(
        new GetItemCommand({ TableName: f.config.countersTableName, Key: bestEffortKey(f.config, key, shard), ConsistentRead: true }),
    );
    return response.Item;
}

/** An item of the user's table as stored (undefined: none). */
export async function itemOf(f: CounterFixture, key: string, id: string): Promise<Record<string, AttributeValue> | undefined> {
    const response = await f.reader.send(
        new GetItemCommand({
            TableName: f.config.tableName,
            Key: { [f.config.partitionKey]: { S: key }, [f.config.sortKey]: { S: id } },
            ConsistentRead: true,
        }),
    );
    return response.Item;
}

/** A best-effort shard's count and its ledger entries, by period. */
export async function ledgerOf(
    f: CounterFixture,
    key: string,
    shard = 0,
): Promise<{ count: number; entries: Record<number, number>; gen: number }> {
    const item = await bestEffortItem(f, key, shard);
    return { count: numberOf(item, f.config.countAttribute), entries: Object.fromEntries(entriesOf(item)), gen: numberOf(item, "hc_g") };
}

/** When the key is listed on the heal index (undefined: not listed). */
export async function listedAt(f: CounterFixture, key: string): Promise<number | undefined> {
    const response = await f.reader.send(
        new GetItemCommand({ TableName: f.config.countersTableName, Key: eventualKey(f.config, key), ConsistentRead: true }),
    );
    const due = response.Item?.[HEAL_DUE];
    return due === undefined ? undefined : Number(due.N);
}

/** The ledger period the fixture's clock is in now. */
export function periodNow(f: CounterFixture): number {
    return periodOf(Date.now(), f.config.periodMs);
}

/** Moves the fixture's clock to the start of period `period` plus `plusMs`. */
export function clockTo(f: CounterFixture, period: number, plusMs = 0): void {
    f.clock.advance(period * f.config.periodMs + plusMs - Date.now());
}

/**
 * The mode's bound on one observation of a key (none when it holds): utilization, best-effort at most the live client
 * lives; strict, at least them (and at most `limit`, when given); per shard as well as over the key.
 */
export function boundProblem(mode: CounterFixture["config"]["mode"], s: KeyObservation, limit?: number): string | undefined {
    const problems: string[] = [];
    const shards = s.shards.length > 1 ? s.shards.map((shard, i) => ({ ...shard, name: `shard ${i}` })) : [];
    for (const part of [{ bestEffort: s.bestEffort, live: s.clientLive, name: "key" }, ...shards]) {
        if (mode === "utilization" && part.bestEffort > part.live) {
            problems.push(`${part.name}: best-effort ${part.bestEffort} > live ${part.live}`);
        }
        if (mode === "strict" && part.bestEffort < part.live) {
            problems.push(`${part.name}: best-effort ${part.bestEffort} < live ${part.live}`);
        }
    }
    if (limit !== undefined && s.clientLive > limit) {
        problems.push(`live ${s.clientLive} > limit ${limit}`);
    }
    return problems.length === 0 ? undefined : problems.join("; ");
}

/** The mode's bound on an observation of `key` made now (see boundProblem). */
export async function boundBroken(f: CounterFixture, key: string, limit?: number): Promise<string | undefined> {
    return boundProblem(f.config.mode, await f.snapshot(key), limit);
}
