/**
 * What the component asks of a table it attaches to (`table` or `tableArn`), checked once the table's outputs
 * resolve (at preview for a table declared with literal settings in the same program). Pure.
 */
import { HEAL_DUE, HEAL_INDEX_NAME, HEAL_PARTITION } from "../runtime/heal/index-marks";
import { hasHealIndex, type DescribedIndex } from "./counters-table";
import { HYBRID_COUNTER_DEFAULTS as D } from "./defaults";
import { GLOBAL_TABLES_DESIGN, replicatedTableProblems, type RegionsSetting } from "./regions";

/** The settings of a table the user attaches, as resolved from its outputs. */
export interface AttachedTableSettings {
    readonly streamEnabled: boolean | undefined;
    readonly streamViewType: string | undefined;
    readonly hashKey: string | undefined;
    readonly rangeKey: string | undefined;
    /** The table's attribute definitions, when known (the keys' types are checked). */
    readonly attributes?: ReadonlyArray<{ readonly name: string; readonly type: string }>;
    /** The regions of the table's replicas (`replicas[].regionName`), when known: a table with any is refused without `regions`. */
    readonly replicaRegions?: readonly string[];
    /** The regions of the replicas whose `consistencyMode` is "STRONG" (multi-region strong consistency). */
    readonly strongReplicaRegions?: readonly string[];
    /** The table's global secondary indexes, when known: the same-table placement needs the heal index. */
    readonly globalSecondaryIndexes?: readonly DescribedIndex[];
}

/** What the args say of the attached table: the keys they give, and whether the counter items live in it. */
export interface AttachedTableExpectations {
    readonly partitionKey?: string;
    readonly sortKey?: string;
    /** The same-table placement: the counter items, and so the heal index, live in the user's table. */
    readonly sameTable?: boolean;
}

/**
 * Problems with an attached table: its stream, its keys, its replicas (a global table is refused without `regions`,
 * and with it must have replicas in exactly the member regions: components/regions/; one with multi-region strong
 * consistency is refused either way), and, in the same-table placement, the heal index. The keys are compared only
 * with the ones the args give: otherwise the table's own keys become the layout's.
 */
export function attachedTableProblems(table: AttachedTableSettings, given: AttachedTableExpectations, regions?: RegionsSetting): string[] {
    const problems: string[] = [];
    if (table.streamEnabled !== true || table.streamViewType !== D.streamViewType) {
        problems.push(
            `[table] must have streamEnabled: true and streamViewType: "${D.streamViewType}" ` +
                `(found streamEnabled: ${String(table.streamEnabled ?? false)}, streamViewType: ${JSON.stringify(table.streamViewType ?? "")})`,
        );
    }
    if (!table.hashKey) {
        problems.push("[table] must have a hash key");
    } else if (given.partitionKey !== undefined && table.hashKey !== given.partitionKey) {
        problems.push(`[table] must have hashKey "${given.partitionKey}" ([partitionKey]); found ${JSON.stringify(table.hashKey)}`);
    }
    if (!table.rangeKey) {
        problems.push("[table] must have a range key: a resource's id is its sort key; found none");
    } else if (given.sortKey !== undefined && table.rangeKey !== given.sortKey) {
        problems.push(`[table] must have rangeKey "${given.sortKey}" ([sortKey]); found ${JSON.stringify(table.rangeKey)}`);
    }
    for (const key of [table.hashKey, table.rangeKey]) {
        const type = table.attributes?.find((attribute) => attribute.name === key)?.type;
        if (key && type !== undefined && type !== "S") {
            problems.push(`[table] must have a string (S) key "${key}"; found type ${type}`);
        }
    }
    problems.push(...strongConsistencyProblems(table.strongReplicaRegions ?? []));
    problems.push(...replicatedTableProblems(table.replicaRegions, regions));
    if (given.sameTable === true && !hasHealIndex(table.globalSecondaryIndexes, table.attributes)) {
        const names = (table.globalSecondaryIndexes ?? []).map((i) => JSON.stringify(i.name ?? ""));
        problems.push(
            `[table] must have the heal index in the same-table placement: a global secondary index "${HEAL_INDEX_NAME}" with hash key ` +
                `"${HEAL_PARTITION}" (S) and range key "${HEAL_DUE}" (N), where the settler finds the keys listed for a heal ` +
                `(found ${names.length === 0 ? "no index" : `the indexes ${names.join(", ")}`}); add it to the table, or use [counterPlacement] "separate"`,
        );
    }
    return problems;
}

/**
 * The refusal of a table whose replicas use multi-region strong consistency (MRSC): such a table refuses
 * transactions, which the API's client uses for a strict key's caps, and a conditional write made in one region
 * fails when another region writes the same item at once, so the counter's writes would fail rather than count.
 */
function strongConsistencyProblems(strongRegions: readonly string[]): string[] {
    if (strongRegions.length === 0) {
        return [];
    }
    return [
        `[table] must not use multi-region strong consistency (replicas with consistencyMode "STRONG" in ` +
            `${strongRegions.map((r) => `"${r}"`).join(", ")}): such a table refuses transactions, and conditional writes made in ` +
            `two regions at once conflict; use multi-region eventual consistency with [regions] (see ${GLOBAL_TABLES_DESIGN})`,
    ];
}
