/**
 * Backfill's pure planner: which scanned items to count, the transactions that count them, what a
 * cancelled transaction means, and the checkpoint items. No I/O; see backfill.ts for the invariant.
 *
 * A sharded key (runtime/shards/layout.ts): a transaction holds the items of one key whose markers live in one
 * shard (`markerShard(id)`), so its `ADD eventual` goes to that shard's partial, beside the markers it counts. In
 * strict mode its best-effort units go to the items' home (`homeShard(id, token)`), so a transaction's items also
 * share one home; its best-effort write, and the epoch its flags carry, are that shard's. Shard count 1 puts
 * everything in the key's own partition, as an unsharded key.
 */
import type { AttributeValue, CancellationReason, TransactWriteItem, UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
import { markerKeyFits } from "../shared/key-limits";
import { COUNTER_ATTRIBUTES, ZERO_SEQ, bestEffortSortKey, eventualSortKey, markerSortKey, type CounterTableConfig } from "../shared/config";
import { bestEffortMarkNames, bestEffortMarkValues, bestEffortUpdate } from "../shared/best-effort-marks";
import { BACKFILL_LEDGER_ENTRY } from "../ledger/ledger";
import { isLive } from "../shared/selection";
import { regionalCounterPrefix } from "../regions/config";
import { regionAttributeOf } from "../regions/ownership";
import { homeShard, markerShard, shardCount, shardPartitionKey, shardedKeyProblem } from "../shards/layout";
import { DISARM_CLAUSE, disarmNames, disarmUpdates } from "../shards/quotas";
import { LEDGER_CLOCK_SKEW_MS } from "../shared/strict-ledger";
import { tokenTime } from "../shared/tokens";

/** A table config whose counters table is known (equal to `tableName` when the counters share it). */
export type BackfillConfig = CounterTableConfig & { readonly countersTableName: string };

export type BackfillMode = "utilization" | "strict";

/** DynamoDB's limit on actions in one TransactWriteItems. */
export const TRANSACTION_MAX_ACTIONS = 100;

/**
 * Markers per transaction: the rest of the 100 actions after the counters it moves and, strict over `shards` above 1,
 * the disarm of the key's other shards (runtime/shards/quotas.ts).
 */
export function markersPerTransaction(mode: BackfillMode, shards = 1): number {
    return TRANSACTION_MAX_ACTIONS - (mode === "strict" ? 2 + (shards - 1) : 1);
}

/**
 * Strict: whether an item carrying `token` is an item from before the counter, which no reservation of this counters
 * table backs (docs/adopting.md): its token is not a client token (no time in it: another program's), or was made
 * before `clientsSince`, the instant the strict clients of this counters table began, with the clock skew allowed
 * (counting an item of theirs twice holds a slot until a heal; not counting an older one would pass the limit).
 */
export function fromBeforeClients(token: string, clientsSince: number | undefined): boolean {
    const made = tokenTime(token);
    return made === undefined || (clientsSince !== undefined && made < clientsSince + LEDGER_CLOCK_SKEW_MS);
}

const A = COUNTER_ATTRIBUTES;
/** Attributes of the checkpoint items (bookkeeping, never read by anything but backfill). */
const CP = Object.freeze({
    segments: "hc_bf_segments",
    next: "hc_bf_next",
    done: "hc_bf_done",
    pages: "hc_bf_pages",
    scanned: "hc_bf_scanned",
    counted: "hc_bf_counted",
    alreadyCounted: "hc_bf_already",
    skipped: "hc_bf_skipped",
    updatedAt: "hc_bf_updated_at",
});

/** The marker of `id` under `counterKey`: in the key's shard `markerShard(id)`. */
export function markerKey(config: BackfillConfig, counterKey: string, id: string): Record<string, AttributeValue> {
    const partitionKey = shardPartitionKey(counterKey, markerShard(id, shardCount(config)));
    return { [config.partitionKey]: { S: partitionKey }, [config.sortKey]: { S: markerSortKey(config, id) } };
}

/** Only what membership depends on is read back from the Scan, whatever the items' size. */
export function scanProjection(config: BackfillConfig): { expression: string; names: Record<string, string> } {
    const attributes = [config.partitionKey, config.sortKey, config.deletedAttribute, config.tokenAttribute];
    if (config.selection?.kind === "attribute") {
        attributes.push(config.selection.name);
    }
    if (config.regions !== undefined) {
        // Regions: the stamp decides which region owns (and counts) the item (runtime/regions/ownership.ts).
        attributes.push(regionAttributeOf(config));
    }
    const unique = [...new Set(attributes)];
    const names = Object.fromEntries(unique.map((name, i) => [`#a${i}`, name]));
    return { expression: Object.keys(names).join(", "), names };
}

export interface Candidate {
    readonly counterKey: string;
    readonly id: string;
    /** The client token the scanned item carried, if any. */
    readonly life?: string;
    /**
     * Strict: the item's marker is already counted (by the consumer or a reconciliation) but holds no unit: the
     * transaction only flags it and adds its unit to best-effort; eventual already counts it.
     */
    readonly flagOnly?: boolean;
    /** Strict: an item carrying a token from before the counter (`fromBeforeClients`): it takes a unit as a token-less one. */
    readonly adopted?: boolean;
}

/**
 * The scanned items that are live under the selection (the ones backfill may count). A live item whose
 * marker key cannot fit (key-limits.ts), or whose key cannot be sharded under the shard count
 * (`shardedKeyProblem`), is never a candidate: it goes to `unmarkable`, when given.
 */
export function liveCandidates(
    items: ReadonlyArray<Record<string, AttributeValue>>,
    config: BackfillConfig,
    unmarkable?: Candidate[],
): Candidate[] {
    const candidates: Candidate[] = [];
    for (const item of items) {
        if (isLive(item, config)) {
            const life = item[config.tokenAttribute]?.S;
            const candidate = {
                counterKey: item[config.partitionKey]!.S!,
                id: item[config.sortKey]!.S!,
                ...(life === undefined ? {} : { life }),
            };
            if (markerKeyFits(config, candidate.id) && shardedKeyProblem(candidate.counterKey, shardCount(config)) === undefined) {
                candidates.push(candidate);
            } else {
                unmarkable?.push({ counterKey: candidate.counterKey, id: candidate.id });
            }
        }
    }
    return candidates;
}

/** Whether the transaction that carries `item` adds a unit of best-effort for it (strict mode). */
function takesUnit(item: Candidate, mode: BackfillMode): boolean {
    return mode === "strict" && (item.life === undefined || item.adopted === true);
}

/**
 * The shards a transaction of `items` (all of one key) writes: `marker`, where their markers and the eventual
 * partial they move live, and `home`, the best-effort item that takes their units (strict mode): the home of the
 * items that take one, else the marker shard. Throws when the items do not share them (planPage groups them so).
 */
export function chunkShards(config: BackfillConfig, items: readonly Candidate[], mode: BackfillMode): { marker: number; home: number } {
    const shards = shardCount(config);
    const marker = items.length === 0 ? 0 : markerShard(items[0]!.id, shards);
    const homes = new Set(items.filter((item) => takesUnit(item, mode)).map((item) => homeShard(item.id, item.life, shards)));
    if (items.some((item) => markerShard(item.id, shards) !== marker) || homes.size > 1) {
        throw new Error("a backfill transaction's items must share their marker shard and their units' home shard");
    }
    return { marker, home: [...homes][0] ?? marker };
}

export interface PagePlan {
    /**
     * Live selected items without a marker, grouped by counter key (and, for a sharded key, by marker shard and
     * units' home shard: `chunkShards`), in chunks that fit one transaction.
     */
    readonly chunks: ReadonlyArray<{ readonly counterKey: string; readonly items: readonly Candidate[] }>;
    /** Live selected items that already have a marker. */
    readonly alreadyCounted: number;
    /** Items that are not counted resources: other entities, counter items, soft-deleted items. */
    readonly skipped: number;
}

/**
 * Plans one scanned page. `marked` holds `${counterKey}\0${markerSortKey}` of the markers that exist, and
 * `unflagged` those of them that are counted and hold no best-effort unit.
 */
export function planPage(
    items: ReadonlyArray<Record<string, AttributeValue>>,
    config: BackfillConfig,
    marked: ReadonlySet<string>,
    mode: BackfillMode,
    unflagged: ReadonlySet<string> = new Set(),
    /** Strict: the instant the strict clients of this counters table began (`fromBeforeClients`). */
    clientsSince?: number,
): PagePlan {
    const candidates = liveCandidates(items, config).map((found) =>
        mode === "strict" && found.life !== undefined && fromBeforeClients(found.life, clientsSince) ? { ...found, adopted: true } : found,
    );
    const shards = shardCount(config);
    const groups = new Map<string, { counterKey: string; items: Candidate[] }>();
    let alreadyCounted = 0;
    for (const found of candidates) {
        const marker = `${found.counterKey}\u0000${markerSortKey(config, found.id)}`;
        let candidate: Candidate = found;
        if (marked.has(marker)) {
            alreadyCounted++;
            // Strict: an item no client reservation backs (no client token, or one from before the counter) that the
            // consumer or a reconciliation counted first still has no unit in best-effort: the backfill gives it one
            // (the settler's audit may reach a key first).
            if (!(takesUnit(found, mode) && unflagged.has(marker))) {
                continue;
            }
            candidate = { ...found, flagOnly: true };
        }
        // One group per (key, marker shard, units' home shard): the name ends with the two shard numbers, so it names
        // one key whatever the key holds.
        const shard = markerShard(candidate.id, shards);
        const home = takesUnit(candidate, mode) ? homeShard(candidate.id, candidate.life, shards) : shard;
        const name = `${candidate.counterKey}\u0000${shard}\u0000${home}`;
        const group = groups.get(name) ?? { counterKey: candidate.counterKey, items: [] };
        group.items.push(candidate);
        groups.set(name, group);
    }
    const size = markersPerTransaction(mode, shards);
    const chunks: Array<{ counterKey: string; items: Candidate[] }> = [];
    for (const { counterKey, items: group } of groups.values()) {
        for (let i = 0; i < group.length; i += size) {
            chunks.push({ counterKey, items: group.slice(i, i + size) });
        }
    }
    return { chunks, alreadyCounted, skipped: items.length - candidates.length };
}

/**
 * One transaction: the counters first (`ADD eventual :n` on the items' marker shard's partial, and in strict mode
 * `ADD best-effort :n` on their home shard's item, with its version bumped so a concurrent heal loses its race),
 * then one marker per item, each conditional on the item having no marker at all. The items share their shards
 * (`chunkShards`); the transaction spans two partitions of the counters table when those differ.
 */
export function backfillActions(
    config: BackfillConfig,
    counterKey: string,
    items: readonly Candidate[],
    mode: BackfillMode,
    /** The backfill's clock, written as the key's last best-effort write (the heal index's sort key). */
    now: number,
    /** Strict: the home shard's heal epoch as read before this transaction; its units are flagged with it, on that condition. */
    epoch = 0,
): TransactWriteItem[] {
    const table = config.countersTableName;
    const shards = chunkShards(config, items, mode);
    const eventualKey = shardPartitionKey(counterKey, shards.marker);
    const bestEffortKey = shardPartitionKey(counterKey, shards.home);
    const counterItem = (partitionKey: string, sk: string) => ({ [config.partitionKey]: { S: partitionKey }, [config.sortKey]: { S: sk } });
    const n = { N: String(items.filter((item) => item.flagOnly !== true).length) };
    let disarms = false;
    const actions: TransactWriteItem[] = [
        {
            Update: {
                TableName: table,
                Key: counterItem(eventualKey, eventualSortKey(config)),
                UpdateExpression: "ADD #count :n",
                ExpressionAttributeNames: { "#count": config.countAttribute },
                ExpressionAttributeValues: { ":n": n },
            },
        },
    ];
    if (mode === "strict") {
        // Best-effort already holds a unit for every item carrying the client's token (its reserve came first):
        // only the others are added. The write is a best-effort write like a client's (it bumps the version and sets
        // the last-write time, so a heal can prove the key quiet), and it puts the key on the heal index: the units
        // it adds can double-count items the consumer has not reached yet (best-effort-marks.ts).
        // Units added to a sharded key may lift the home above its stored quota, which the backfill cannot know (the
        // limit is the client's): the transaction disarms every shard of the key (runtime/shards/reservation.ts), the
        // home in its own update, the others after the markers (the cancellation reasons read the markers by position).
        const units = items.filter((item) => takesUnit(item, mode)).length;
        disarms = units > 0 && shardCount(config) > 1;
        actions.push({
            Update: {
                TableName: table,
                Key: counterItem(bestEffortKey, bestEffortSortKey(config)),
                // Its units move the entry of backfilled units (runtime/ledger/ledger.ts), which every heal folds.
                UpdateExpression: bestEffortUpdate(":n", true, true) + (disarms ? ` ${DISARM_CLAUSE}` : ""),
                // The flags below name the epoch read before: a heal that absorbed units since makes this fail.
                ConditionExpression: epoch === 0 ? "attribute_not_exists(#epoch)" : "#epoch = :epoch",
                ExpressionAttributeNames: {
                    "#count": config.countAttribute,
                    ...bestEffortMarkNames(true, BACKFILL_LEDGER_ENTRY),
                    "#epoch": A.epoch,
                    ...(disarms ? disarmNames() : {}),
                },
                ExpressionAttributeValues: {
                    ":n": { N: String(units) },
                    ...bestEffortMarkValues(bestEffortKey, now, true, config),
                    ...(epoch === 0 ? {} : { ":epoch": { N: String(epoch) } }),
                },
            },
        });
    }
    for (const item of items) {
        if (item.flagOnly === true) {
            actions.push({
                Update: {
                    TableName: table,
                    Key: markerKey(config, counterKey, item.id),
                    UpdateExpression: item.life === undefined ? "SET #be = :epoch" : "SET #be = :epoch, #beLife = :life",
                    ConditionExpression: "#state = :counted AND attribute_not_exists(#be)",
                    ExpressionAttributeNames: {
                        "#state": A.state,
                        "#be": A.beCounted,
                        ...(item.life === undefined ? {} : { "#beLife": A.beLife }),
                    },
                    ExpressionAttributeValues: {
                        ":counted": { S: "counted" },
                        ":epoch": { N: String(epoch) },
                        ...(item.life === undefined ? {} : { ":life": { S: item.life } }),
                    },
                },
            });
            continue;
        }
        const names: Record<string, string> = { "#state": A.state, "#seq": A.seq };
        const values: Record<string, AttributeValue> = { ":counted": { S: "counted" }, ":zero": { S: ZERO_SEQ } };
        const sets = ["#state = :counted", "#seq = :zero"];
        if (takesUnit(item, mode)) {
            names["#be"] = A.beCounted;
            values[":epoch"] = { N: String(epoch) };
            sets.push("#be = :epoch");
        }
        if (item.life !== undefined) {
            names["#life"] = A.life;
            values[":life"] = { S: item.life };
            sets.push("#life = :life");
            // The flag names the life it stands for: a delete of that life takes the unit by the flag, not by its token
            // (which no reservation backs); a later life of the id leaves it alone (runtime/client/client.ts).
            if (takesUnit(item, mode)) {
                names["#beLife"] = A.beLife;
                sets.push("#beLife = :life");
            }
        }
        actions.push({
            Update: {
                TableName: table,
                Key: markerKey(config, counterKey, item.id),
                UpdateExpression: `SET ${sets.join(", ")}`,
                ConditionExpression: "attribute_not_exists(#state)",
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: values,
            },
        });
    }
    if (disarms) {
        actions.push(...disarmUpdates(config, counterKey, shardCount(config), [shards.home]).map((update) => ({ Update: update })));
    }
    return actions;
}

export interface CancellationOutcome {
    /** Items whose marker exists (their condition failed): counted by someone else, or tombstoned. */
    readonly alreadyCounted: readonly Candidate[];
    /** Items to send again. */
    readonly remaining: readonly Candidate[];
    /** The cancellation was contention or throttling (back off), not only marker conditions. */
    readonly contention: boolean;
}

/** Reads a cancelled transaction's reasons (one per action, in order). */
export function cancellationOutcome(
    items: readonly Candidate[],
    reasons: readonly CancellationReason[],
    mode: BackfillMode,
): CancellationOutcome {
    const offset = mode === "strict" ? 2 : 1;
    const alreadyCounted: Candidate[] = [];
    const remaining: Candidate[] = [];
    items.forEach((item, i) => {
        (reasons[offset + i]?.Code === "ConditionalCheckFailed" ? alreadyCounted : remaining).push(item);
    });
    const contention =
        alreadyCounted.length === 0 ||
        reasons.some((r) => r.Code !== undefined && r.Code !== "None" && r.Code !== "ConditionalCheckFailed");
    return { alreadyCounted, remaining, contention };
}

// ---------------------------------------------------------------- checkpoints

export interface SegmentCheckpoint {
    readonly segment: number;
    readonly totalSegments: number;
    /** Where the segment's Scan resumes; absent at the start and once done. */
    readonly next?: Record<string, AttributeValue>;
    readonly done: boolean;
    /** Pages finished: a checkpoint only ever moves forward. */
    readonly pages: number;
    readonly scanned: number;
    readonly counted: number;
    readonly alreadyCounted: number;
    readonly skipped: number;
}

export function freshCheckpoint(segment: number, totalSegments: number): SegmentCheckpoint {
    return { segment, totalSegments, done: false, pages: 0, scanned: 0, counted: 0, alreadyCounted: 0, skipped: 0 };
}

/** Checkpoints of a run share one partition (one Query reads them all). */
export function checkpointPartition(config: BackfillConfig, runId: string): string {
    return `${regionalCounterPrefix(config)}backfill#${runId}`;
}

export function checkpointSortKey(config: BackfillConfig, runId: string, segment: number | ""): string {
    return `${regionalCounterPrefix(config)}backfill#${runId}#${segment}`;
}

export function checkpointUpdate(config: BackfillConfig, runId: string, c: SegmentCheckpoint, now: number): UpdateItemCommandInput {
    const values: Record<string, AttributeValue> = {
        ":segments": { N: String(c.totalSegments) },
        ":done": { BOOL: c.done },
        ":pages": { N: String(c.pages) },
        ":scanned": { N: String(c.scanned) },
        ":counted": { N: String(c.counted) },
        ":already": { N: String(c.alreadyCounted) },
        ":skipped": { N: String(c.skipped) },
        ":now": { N: String(now) },
    };
    const sets = [
        "#segments = :segments",
        "#done = :done",
        "#pages = :pages",
        "#scanned = :scanned",
        "#counted = :counted",
        "#already = :already",
        "#skipped = :skipped",
        "#updatedAt = :now",
    ];
    if (c.next !== undefined) {
        values[":next"] = { M: c.next };
        sets.push("#next = :next");
    }
    return {
        TableName: config.countersTableName,
        Key: {
            [config.partitionKey]: { S: checkpointPartition(config, runId) },
            [config.sortKey]: { S: checkpointSortKey(config, runId, c.segment) },
        },
        UpdateExpression: `SET ${sets.join(", ")}${c.next === undefined ? " REMOVE #next" : ""}`,
        ConditionExpression: "attribute_not_exists(#pages) OR #pages < :pages",
        ExpressionAttributeNames: {
            "#segments": CP.segments,
            "#done": CP.done,
            "#pages": CP.pages,
            "#scanned": CP.scanned,
            "#counted": CP.counted,
            "#already": CP.alreadyCounted,
            "#skipped": CP.skipped,
            "#updatedAt": CP.updatedAt,
            "#next": CP.next,
        },
        ExpressionAttributeValues: values,
    };
}

export function checkpointFromItem(item: Record<string, AttributeValue>, config: BackfillConfig): SegmentCheckpoint | undefined {
    const sk = item[config.sortKey]?.S ?? "";
    const segment = Number(sk.slice(sk.lastIndexOf("#") + 1));
    const num = (name: string) => Number(item[name]?.N ?? "0");
    if (!Number.isInteger(segment) || item[CP.segments]?.N === undefined) {
        return undefined;
    }
    return {
        segment,
        totalSegments: num(CP.segments),
        ...(item[CP.next]?.M ? { next: item[CP.next]!.M } : {}),
        done: item[CP.done]?.BOOL === true,
        pages: num(CP.pages),
        scanned: num(CP.scanned),
        counted: num(CP.counted),
        alreadyCounted: num(CP.alreadyCounted),
        skipped: num(CP.skipped),
    };
}

// ---------------------------------------------------------------- progress

/** Items per second and the time left, from what this call has done and the table's approximate size. */
export function estimate(
    scannedThisCall: number,
    scannedTotal: number,
    elapsedMs: number,
    approximateItems: number | undefined,
): { itemsPerSecond: number; etaSeconds: number | null } {
    const itemsPerSecond = elapsedMs > 0 ? (scannedThisCall / elapsedMs) * 1000 : 0;
    if (approximateItems === undefined || itemsPerSecond <= 0) {
        return { itemsPerSecond, etaSeconds: null };
    }
    return { itemsPerSecond, etaSeconds: Math.max(0, approximateItems - scannedTotal) / itemsPerSecond };
}
