/**
 * The component's `clientConfig` output: everything an API needs to build a `HybridCounterClient`, in a shape every
 * language can read (the selection flat). `{ ...clientConfig, dynamodb }` is a complete HybridCounterClientOptions:
 * the mode, the ledger period, the shards and the regions travel in it, so the client and the functions the component
 * deploys run one configuration (runtime/client/options.ts refuses a client option that contradicts it).
 */
import { flatSelection, type CounterConfig } from "../runtime/shared/config";
import type { CountedItems, CounterModeArg } from "./args";
import type { RegionsSetting } from "./regions";

/**
 * What an API program needs to build a `HybridCounterClient`: `{ tableName, countersTableName, ...layout,
 * counterMode, healQuietWindowSeconds }`, with the selection flat (`countedItems` and its parameters).
 */
export interface HybridCounterClientConfig {
    /** Name of the user's table: the resource items. */
    readonly tableName: string;
    /** Name of the table the counter items live in (the user's table in the same-table placement). */
    readonly countersTableName: string;
    /** Partition key attribute: the counter key. */
    readonly partitionKey: string;
    /** Sort key attribute: a resource's id. */
    readonly sortKey: string;
    /** Soft-delete flag. */
    readonly deletedAttribute: string;
    /** The client's write token attribute. */
    readonly tokenAttribute: string;
    /** Sort-key prefix of the counter items. */
    readonly counterPrefix: string;
    /** Attribute holding a counter's value. */
    readonly countAttribute: string;
    /** Which items count. */
    readonly countedItems: CountedItems;
    /** With `countedItems: "sortKeyPrefix"`: the prefix. */
    readonly countedSortKeyPrefix?: string;
    /** With `countedItems: "attribute"`: the attribute's name. */
    readonly countedAttributeName?: string;
    /** With `countedItems: "attribute"`: the attribute's value. */
    readonly countedAttributeValue?: string;
    /** The counter's mode (the `counterMode` arg): a client built with another mode is refused. */
    readonly counterMode: CounterModeArg;
    /**
     * The ledger period (s): a client whose `deadlineMs` it does not cover is refused (deadline + 300 s request
     * lifetime + 2 x 60 s clock skew must stay below it; runtime/heal/heal-window.ts).
     */
    readonly healQuietWindowSeconds: number;
    /** The partitions of the counters table each key's best-effort spreads over, when above 1 (the `counterShards` arg). */
    readonly counterShards?: number;
    /**
     * With the `regions` arg: the region this deployment counts for and every member with its role (the client stamps
     * the items it creates with `current`, and `count()` sums every member's counters).
     */
    readonly regions?: RegionsSetting;
    /** With the `regions` arg: the attribute that stamps an item with its creating region. */
    readonly regionAttribute?: string;
}

/** The `clientConfig` of a counter's configuration (the one its functions' environments are built from). */
export function hybridCounterClientConfig(config: CounterConfig, regions?: RegionsSetting): HybridCounterClientConfig {
    return {
        tableName: config.tableName,
        countersTableName: config.countersTableName,
        partitionKey: config.partitionKey,
        sortKey: config.sortKey,
        deletedAttribute: config.deletedAttribute,
        tokenAttribute: config.tokenAttribute,
        counterPrefix: config.counterPrefix,
        countAttribute: config.countAttribute,
        ...(flatSelection(config.selection) as { countedItems: CountedItems }),
        counterMode: config.mode,
        healQuietWindowSeconds: Math.round(config.periodMs / 1000),
        ...(config.counterShards === undefined || config.counterShards === 1 ? {} : { counterShards: config.counterShards }),
        ...(regions === undefined ? {} : { regions }),
        ...(config.regionAttribute === undefined ? {} : { regionAttribute: config.regionAttribute }),
    };
}
