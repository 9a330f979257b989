/**
 * The component's args with their defaults filled in, once, for every part of the component (component.ts and the
 * modules it calls), and the counter's configuration every function's environment and `clientConfig` are built from.
 * Pure: no resource is created here.
 */
import type * as pulumi from "@pulumi/pulumi";
import type { CounterConfig, CounterTableLayout } from "../runtime/shared/config";
import type { HybridCounterComponentArgs } from "./args";
import { HYBRID_COUNTER_DEFAULTS as D } from "./defaults";
import { DEFAULT_REGION_ATTRIBUTE, isHome, regionsSetting, type RegionsSetting } from "./regions";

/** The plain settings of a valid set of args, defaults filled in. */
export interface ResolvedArgs {
    readonly tags?: pulumi.Input<Record<string, pulumi.Input<string>>>;
    readonly tracing: boolean;
    readonly lambdaRuntime: string;
    readonly architecture: string;
    readonly metricsNamespace: string;
    readonly logRetentionInDays: number;
    readonly redriveTimeout: number;
    readonly mode: "strict" | "utilization";
    /** The ledger period (s): `healQuietWindowSeconds`. */
    readonly periodSeconds: number;
    /** The shard count, absent for one shard (every environment and `clientConfig` then say nothing of shards). */
    readonly counterShards?: number;
    /** The multi-region setting, with every role spelled out; absent for one region. */
    readonly regions?: RegionsSetting;
    /** The stamp's attribute, with `regions` only. */
    readonly regionAttribute?: string;
    /** Does this deployment create the counters table and run the backfill (always, for one region)? */
    readonly home: boolean;
    readonly sameTable: boolean;
    readonly thresholds: number[];
    readonly usageRetentionDays: number;
    readonly settlerEnabled: boolean;
}

/** The settings of `args` (validated first: see validation.ts). */
export function resolveArgs(args: HybridCounterComponentArgs): ResolvedArgs {
    const counterShards = args.counterShards ?? D.counterShards;
    const regions = args.regions === undefined ? undefined : regionsSetting(args.regions);
    return {
        tags: args.tags,
        tracing: args.tracing ?? D.tracing,
        lambdaRuntime: args.lambdaRuntime ?? D.lambdaRuntime,
        architecture: args.architecture ?? D.architecture,
        metricsNamespace: args.metricsNamespace ?? D.metricsNamespace,
        logRetentionInDays: args.logRetentionInDays ?? D.logRetentionInDays,
        redriveTimeout: args.redriveTimeout ?? D.redriveTimeout,
        mode: args.counterMode ?? D.counterMode,
        periodSeconds: args.healQuietWindowSeconds ?? D.healQuietWindowSeconds,
        ...(counterShards === 1 ? {} : { counterShards }),
        ...(regions === undefined ? {} : { regions, regionAttribute: args.regionAttribute ?? DEFAULT_REGION_ATTRIBUTE }),
        home: regions === undefined || isHome(regions),
        sameTable: (args.counterPlacement ?? D.counterPlacement) === "same-table",
        thresholds: [...(args.thresholds ?? D.thresholds)],
        usageRetentionDays: args.usageRetentionDays ?? D.usageRetentionDays,
        settlerEnabled: args.settlerEnabled ?? D.settlerEnabled,
    };
}

/** The counter's configuration: the layout, the two tables, the mode, the ledger period, the shards and the regions. */
export function counterConfigOf(r: ResolvedArgs, layout: CounterTableLayout, tableName: string, countersTableName: string): CounterConfig {
    return {
        ...layout,
        tableName,
        countersTableName,
        mode: r.mode,
        periodMs: r.periodSeconds * 1000,
        ...(r.counterShards === undefined ? {} : { counterShards: r.counterShards }),
        ...(r.regions === undefined ? {} : { regions: r.regions, regionAttribute: r.regionAttribute }),
    };
}
