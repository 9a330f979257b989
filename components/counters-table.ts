/**
 * The counters table: where the counter items (best-effort, eventual, one marker per resource item and
 * the bookkeeping of settling and backfill) live when the placement is "separate", beside the user's
 * table, so that the user's queries, exports and item collections never see them, and the user's stream
 * carries only the user's items.
 *
 * Same key attribute names as the user's table (both S), on-demand, point-in-time recovery, encryption
 * at rest, TTL on the markers' tombstones (`hc_expires_at`), and no stream: nothing consumes its changes.
 * Its sparse GSI "heal-index" lists the best-effort items due a heal (only they carry `hc_heal`); the
 * settler reads it instead of scanning.
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
import { COUNTER_ATTRIBUTES, HEAL_INDEX_NAME } from "../runtime/shared/config";
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
        attributes: [
            { name: args.partitionKey, type: "S" },
            { name: args.sortKey, type: "S" },
            { name: COUNTER_ATTRIBUTES.healShard, type: "S" },
            { name: COUNTER_ATTRIBUTES.dueAt, type: "N" },
        ],
        hashKey: args.partitionKey,
        rangeKey: args.sortKey,
        globalSecondaryIndexes: [healIndex()],
        billingMode: "PAY_PER_REQUEST",
        pointInTimeRecovery: { enabled: true },
        serverSideEncryption: { enabled: true, ...(args.kmsKeyArn !== undefined ? { kmsKeyArn: args.kmsKeyArn } : {}) },
        ttl: { attributeName: COUNTER_ATTRIBUTES.expiresAt, enabled: true },
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

/** The sparse heal index: best-effort items due a heal, by shard, oldest first write since their last heal first. */
export function healIndex(): aws.types.input.dynamodb.TableGlobalSecondaryIndex {
    return {
        name: HEAL_INDEX_NAME,
        hashKey: COUNTER_ATTRIBUTES.healShard,
        rangeKey: COUNTER_ATTRIBUTES.dueAt,
        projectionType: "KEYS_ONLY",
    };
}
