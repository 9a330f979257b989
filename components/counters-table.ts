/**
 * The counters table: where the counter items (each key's best-effort and eventual items, its stored limit, its
 * days of usage, each stream shard's progress, and the settler's and the backfill's bookkeeping) live when the
 * placement is "separate", beside the user's table, so that the user's queries, exports and item collections never
 * see them, and the user's stream carries only the user's items (docs/design/core.md, "The items").
 *
 * Same key attribute names as the user's table (both S), on-demand, point-in-time recovery, encryption at rest, and
 * no stream: nothing consumes its changes. What the counter items need of a table, in either placement:
 * - the heal index (runtime/heal/index-marks.ts): a sparse GSI "heal-index" on `hc_heal` (S) and `hc_due` (N),
 *   keys only; only eventual items listed for a heal carry them, and the settler reads it instead of scanning;
 * - TTL on `hc_expires` (runtime/limits/usage.ts): days of usage and stream shards' progress items expire.
 *
 * In a multi-region counter (docs/design/global-tables.md) the home region's component creates it as a global table
 * (version 2019.11.21, multi-region eventual consistency) with a replica in every other member region: each region
 * writes only the counter items under its own region, so last-writer-wins never chooses between two regions' writes.
 * A replicated table needs DynamoDB Streams with new and old images (AWS, global tables requirements; the provider
 * refuses `replicas` without them) and on-demand or autoscaled capacity, which on-demand already is; its GSI and TTL
 * apply to every replica. Each replica keeps point-in-time recovery and the table's tags. Nothing consumes its stream.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HEAL_DUE, HEAL_INDEX_NAME, HEAL_PARTITION } from "../runtime/heal/index-marks";
import { EXPIRES_ATTRIBUTE } from "../runtime/limits/usage";
import { CounterPlacement } from "./args";

export { CounterPlacement };

export const COUNTER_PLACEMENTS: readonly CounterPlacement[] = Object.values(CounterPlacement);

export interface CountersTableArgs {
    readonly partitionKey: pulumi.Input<string>;
    readonly sortKey: pulumi.Input<string>;
    readonly kmsKeyArn?: pulumi.Input<string>;
    readonly deletionProtection: boolean;
    readonly tags?: pulumi.Input<Record<string, pulumi.Input<string>>>;
    /** The other member regions of a multi-region counter, each given a replica. @default [] (one region, no stream) */
    readonly replicaRegions?: readonly string[];
}

/** The settings of the counters table, as a pure function of the layout (tested on their own). */
export function countersTableArgs(args: CountersTableArgs): aws.dynamodb.TableArgs {
    return {
        attributes: [{ name: args.partitionKey, type: "S" }, { name: args.sortKey, type: "S" }, ...healIndexAttributes()],
        hashKey: args.partitionKey,
        rangeKey: args.sortKey,
        globalSecondaryIndexes: [healIndex()],
        billingMode: "PAY_PER_REQUEST",
        pointInTimeRecovery: { enabled: true },
        serverSideEncryption: { enabled: true, ...(args.kmsKeyArn !== undefined ? { kmsKeyArn: args.kmsKeyArn } : {}) },
        ttl: counterItemsTtl(),
        deletionProtectionEnabled: args.deletionProtection,
        tags: args.tags,
        ...replication(args.replicaRegions ?? []),
    };
}

/** A global table's settings: a stream with both images, and a replica in each other region. */
function replication(regions: readonly string[]): Partial<aws.dynamodb.TableArgs> {
    if (regions.length === 0) {
        return {};
    }
    return {
        streamEnabled: true,
        streamViewType: "NEW_AND_OLD_IMAGES",
        replicas: regions.map((regionName) => ({ regionName, pointInTimeRecovery: true, propagateTags: true })),
    };
}

/** Creates the counters table `${name}-counters` as a child of `parent`. */
export function createCountersTable(name: string, args: CountersTableArgs, parent: pulumi.Resource): aws.dynamodb.Table {
    return new aws.dynamodb.Table(`${name}-counters`, countersTableArgs(args), { parent });
}

/** The attribute definitions of the heal index's keys. */
export function healIndexAttributes(): Array<{ name: string; type: string }> {
    return [
        { name: HEAL_PARTITION, type: "S" },
        { name: HEAL_DUE, type: "N" },
    ];
}

/** The sparse heal index: the keys listed for a heal, by index shard, the oldest listing first. */
export function healIndex(): aws.types.input.dynamodb.TableGlobalSecondaryIndex {
    return {
        name: HEAL_INDEX_NAME,
        hashKey: HEAL_PARTITION,
        rangeKey: HEAL_DUE,
        projectionType: "KEYS_ONLY",
    };
}

/** TTL on the counter items' expiry: days of usage and stream shards' progress go by themselves. */
export function counterItemsTtl(): aws.types.input.dynamodb.TableTtl {
    return { attributeName: EXPIRES_ATTRIBUTE, enabled: true };
}

/** A global secondary index as a table's outputs describe it (`hashKey`/`rangeKey`, or `keySchemas`). */
export interface DescribedIndex {
    readonly name?: string;
    readonly hashKey?: string;
    readonly rangeKey?: string;
    readonly keySchemas?: ReadonlyArray<{ readonly attributeName?: string; readonly keyType?: string }>;
}

/** Does a table with these indexes and attribute definitions carry the heal index the settler queries? */
export function hasHealIndex(
    indexes: readonly DescribedIndex[] | undefined,
    attributes: ReadonlyArray<{ readonly name: string; readonly type: string }> | undefined,
): boolean {
    const index = (indexes ?? []).find((i) => i.name === HEAL_INDEX_NAME);
    if (index === undefined) {
        return false;
    }
    const keyOf = (keyType: "HASH" | "RANGE") => index.keySchemas?.find((k) => k.keyType === keyType)?.attributeName;
    const hash = index.hashKey || keyOf("HASH");
    const range = index.rangeKey || keyOf("RANGE");
    const typeOf = (name: string) => attributes?.find((a) => a.name === name)?.type;
    // Attribute definitions a table does not show are taken as right: only a type that is shown and wrong refuses.
    const typed = (name: string, type: string) => attributes === undefined || typeOf(name) === undefined || typeOf(name) === type;
    return hash === HEAL_PARTITION && range === HEAL_DUE && typed(HEAL_PARTITION, "S") && typed(HEAL_DUE, "N");
}
