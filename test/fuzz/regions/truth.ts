/**
 * One key's truth in a multi-region history, read between two releases (one observation), and the model's checks on
 * it (docs/design/global-tables.md). With no replication every region's replica is the one table, so one read of the
 * user's partition and one of the counters' partition show every region's state at once.
 *
 * The model, per key k and member region R (q_R = baseQuota(L, R): the limit split over the sorted members):
 * - E_R, at every observation: eventual_R(k) == R's markers of k in state "counted";
 * - eventual, once every region's stream has drained: eventual_R(k) == the live selected items of k R owns, and so
 *   the sum over regions == the live items of k (no item counted twice, none left out);
 * - strict, at every observation: the live client items of k <= L (summed over regions), each region's best-effort
 *   <= q_R (a region admits within its base quota, not the whole limit), and the client items R owns <= R's
 *   best-effort (every live life holds a unit in its owner's best-effort: B);
 * - best-effort, after each region's final heal (every key quiet for the window): best-effort_R == the live client
 *   items R owns.
 */
import type { AttributeValue, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { queryPartition } from "../../../runtime/heal/partition";
import { ownerOf } from "../../../runtime/regions/ownership";
import { baseQuota } from "../../../runtime/regions/quotas";
import {
    bestEffortSortKey,
    COUNTER_ATTRIBUTES,
    countersTable,
    eventualSortKey,
    MARKER_STATE,
    markerId,
    type HandlerConfig,
    type RegionsConfig,
} from "../../../runtime/shared/config";
import { isLive, isSelected, isSoftDeleted } from "../../../runtime/shared/selection";
import type { Mode } from "../history";

/** A region's view of one key. */
export interface RegionTruth {
    readonly bestEffort: number;
    readonly eventual: number;
    /** R's markers of the key in state "counted". */
    readonly counted: number;
    /** Live selected items R owns. */
    readonly live: number;
    /** Of those, the ones the client wrote (carrying its token). */
    readonly clientLive: number;
}

export interface KeyTruth {
    /** Live selected items of the key, every owner's. */
    readonly live: number;
    /** Of those, the client's. */
    readonly clientLive: number;
    readonly softDeleted: number;
    readonly regions: ReadonlyMap<string, RegionTruth>;
}

/** Reads one key's truth in every region: `configs` is each member region's configuration, by region. */
export async function readKeyTruth(
    reader: DynamoDBClient,
    configs: ReadonlyMap<string, HandlerConfig & { readonly regions: RegionsConfig }>,
    key: string,
): Promise<KeyTruth> {
    const any = configs.values().next().value!;
    const [items, counters] = await Promise.all([
        queryPartition(reader, { tableName: any.tableName, partitionKey: any.partitionKey, key }),
        queryPartition(reader, { tableName: countersTable(any), partitionKey: any.partitionKey, key }),
    ]);
    // Selection with regions includes ownership (runtime/shared/selection.ts): the table's truth is the selection's
    // without it, and the owner is read from the image.
    const plain: HandlerConfig = { ...any, regions: undefined };
    const owned = new Map<string, { live: number; clientLive: number }>([...configs.keys()].map((r) => [r, { live: 0, clientLive: 0 }]));
    let live = 0;
    let clientLive = 0;
    let softDeleted = 0;
    for (const item of items) {
        if (isLive(item, plain)) {
            const mine = owned.get(ownerOf(item, any.regions, any.regionAttribute))!;
            const client = item[any.tokenAttribute]?.S !== undefined;
            live++;
            mine.live++;
            clientLive += client ? 1 : 0;
            mine.clientLive += client ? 1 : 0;
        } else if (isSelected(item, plain) && isSoftDeleted(item, plain)) {
            softDeleted++;
        }
    }
    const count = (sortKey: string) => Number(counters.find((c) => c[any.sortKey]?.S === sortKey)?.[any.countAttribute]?.N ?? 0);
    const regions = new Map<string, RegionTruth>();
    for (const [region, config] of configs) {
        regions.set(region, {
            bestEffort: count(bestEffortSortKey(config)),
            eventual: count(eventualSortKey(config)),
            counted: counters.filter((c) => counted(config, c)).length,
            ...owned.get(region)!,
        });
    }
    return { live, clientLive, softDeleted, regions };
}

function counted(config: HandlerConfig, item: Record<string, AttributeValue>): boolean {
    return markerId(config, item[config.sortKey]?.S ?? "") !== undefined && item[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.counted;
}

/** The model's checks at an observation (see the top): E_R always, strict's bounds in strict mode. */
export function observationProblems(truth: KeyTruth, mode: Mode, limit: number, regions: RegionsConfig): string[] {
    const problems: string[] = [];
    for (const [region, r] of truth.regions) {
        if (r.eventual !== r.counted) {
            problems.push(`${region} eventual ${r.eventual} != ${r.counted} items ${region} counted`);
        }
        if (mode === "strict") {
            const quota = baseQuota(limit, regions, region);
            if (r.bestEffort > quota) {
                problems.push(`${region} best-effort ${r.bestEffort} > its base quota ${quota} of limit ${limit}`);
            }
            if (r.clientLive > r.bestEffort) {
                problems.push(`${region} owns ${r.clientLive} live client items > its best-effort ${r.bestEffort}`);
            }
        }
    }
    if (mode === "strict" && truth.clientLive > limit) {
        problems.push(`strict bound broken: ${truth.clientLive} client-written live items > limit ${limit} over every region`);
    }
    return problems;
}

/** The checks once every region's stream has drained: each region's eventual is what it owns, and they sum to the table. */
export function drainedProblems(truth: KeyTruth): string[] {
    const problems: string[] = [];
    let sum = 0;
    for (const [region, r] of truth.regions) {
        sum += r.eventual;
        if (r.eventual !== r.live) {
            problems.push(`${region} eventual ${r.eventual} != ${r.live} live items ${region} owns`);
        }
    }
    if (sum !== truth.live) {
        problems.push(`eventual ${sum} summed over regions != live ${truth.live}`);
    }
    return problems;
}

/** The check after each region's final heal: its best-effort is the live client items it owns. */
export function healedProblem(region: string, r: RegionTruth): string | undefined {
    return r.bestEffort === r.clientLive ? undefined : `${region} best-effort ${r.bestEffort} != ${r.clientLive} live client items it owns`;
}
