/**
 * The backfill function's environment: the layout, where the counter items live, which items count,
 * and the run's settings. Pure (no SDK), so the component builds the same environment the handler reads.
 */
import {
    ConfigurationError,
    ENV,
    counterShardsProblems,
    layoutProblems,
    layoutWithDefaults,
    regionAttributeProblems,
    type CounterTableConfig,
    type RegionsConfig,
} from "../shared/config";
import { parseRegions, regionsJson } from "../regions/config";
import { CLIENT_SELECTION, type ItemSelection } from "../shared/selection";

export const BACKFILL_ENV = Object.freeze({
    /** The counters table (equal to the table name when the counters share it). */
    countersTableName: "HYBRID_COUNTER_COUNTERS_TABLE_NAME",
    /** The item selection, as JSON. */
    selection: "HYBRID_COUNTER_SELECTION",
    mode: "HYBRID_COUNTER_BACKFILL_MODE",
    segments: "HYBRID_COUNTER_BACKFILL_SEGMENTS",
    readUnitsPerSecond: "HYBRID_COUNTER_BACKFILL_READ_UNITS",
    writeUnitsPerSecond: "HYBRID_COUNTER_BACKFILL_WRITE_UNITS",
    capacityShare: "HYBRID_COUNTER_BACKFILL_CAPACITY_SHARE",
} as const);

export interface BackfillSettings {
    readonly mode: "utilization" | "strict";
    readonly segments: number;
    readonly readUnitsPerSecond?: number;
    readonly writeUnitsPerSecond?: number;
    readonly capacityShare?: number;
}

export function backfillEnvironment(config: CounterTableConfig, settings: BackfillSettings): Record<string, string> {
    const optional = (name: string, value: number | undefined) => (value === undefined ? {} : { [name]: String(value) });
    return {
        [ENV.tableName]: config.tableName,
        [ENV.partitionKey]: config.partitionKey,
        [ENV.sortKey]: config.sortKey,
        [ENV.deletedAttribute]: config.deletedAttribute,
        [ENV.tokenAttribute]: config.tokenAttribute,
        [ENV.counterPrefix]: config.counterPrefix,
        [ENV.countAttribute]: config.countAttribute,
        [BACKFILL_ENV.countersTableName]: config.countersTableName ?? config.tableName,
        [BACKFILL_ENV.selection]: JSON.stringify(config.selection ?? CLIENT_SELECTION),
        [BACKFILL_ENV.mode]: settings.mode,
        [BACKFILL_ENV.segments]: String(settings.segments),
        ...optional(BACKFILL_ENV.readUnitsPerSecond, settings.readUnitsPerSecond),
        ...optional(BACKFILL_ENV.writeUnitsPerSecond, settings.writeUnitsPerSecond),
        ...optional(BACKFILL_ENV.capacityShare, settings.capacityShare),
        // Shard count 1 (an unsharded key) sets nothing, as the other functions' environments.
        ...((config.counterShards ?? 1) === 1 ? {} : { [ENV.counterShards]: String(config.counterShards) }),
        // Regions (runtime/regions/): the backfill counts the items its region owns, into its region's counter items.
        ...(config.regions === undefined ? {} : { [ENV.regions]: regionsJson(config.regions) }),
        ...(config.regionAttribute === undefined ? {} : { [ENV.regionAttribute]: config.regionAttribute }),
    };
}

/** Reads the backfill function's configuration; throws ConfigurationError naming each bad variable. */
export function backfillFromEnv(env: Readonly<Record<string, string | undefined>>): {
    config: CounterTableConfig;
    settings: BackfillSettings;
} {
    const problems: string[] = [];
    const tableName = env[ENV.tableName];
    if (!tableName) {
        problems.push(`[${ENV.tableName}] must be set`);
    }
    let selection: ItemSelection | undefined;
    const rawSelection = env[BACKFILL_ENV.selection];
    if (rawSelection) {
        try {
            selection = JSON.parse(rawSelection) as ItemSelection;
        } catch {
            problems.push(`[${BACKFILL_ENV.selection}] must be JSON`);
        }
    }
    const layout = layoutWithDefaults({
        partitionKey: env[ENV.partitionKey] || undefined,
        sortKey: env[ENV.sortKey] || undefined,
        deletedAttribute: env[ENV.deletedAttribute] || undefined,
        tokenAttribute: env[ENV.tokenAttribute] || undefined,
        counterPrefix: env[ENV.counterPrefix] || undefined,
        countAttribute: env[ENV.countAttribute] || undefined,
    });
    problems.push(...layoutProblems(layout));
    const number = (name: string): number | undefined => {
        const raw = env[name];
        if (raw === undefined || raw === "") {
            return undefined;
        }
        const value = Number(raw);
        if (!Number.isFinite(value)) {
            problems.push(`[${name}] must be a number`);
        }
        return value;
    };
    const mode = env[BACKFILL_ENV.mode] || "utilization";
    if (mode !== "utilization" && mode !== "strict") {
        problems.push(`[${BACKFILL_ENV.mode}] must be utilization or strict`);
    }
    const settings: BackfillSettings = {
        mode: mode as BackfillSettings["mode"],
        segments: number(BACKFILL_ENV.segments) ?? 4,
        readUnitsPerSecond: number(BACKFILL_ENV.readUnitsPerSecond),
        writeUnitsPerSecond: number(BACKFILL_ENV.writeUnitsPerSecond),
        capacityShare: number(BACKFILL_ENV.capacityShare),
    };
    const countersTableName = env[BACKFILL_ENV.countersTableName] || tableName!;
    const shardsText = env[ENV.counterShards];
    const counterShards = shardsText === undefined || shardsText === "" ? 1 : Number(shardsText);
    problems.push(
        ...counterShardsProblems(counterShards, tableName, countersTableName).map((p) =>
            p.replace("[counterShards]", `[${ENV.counterShards}]`),
        ),
    );
    const regionAttribute = env[ENV.regionAttribute] || undefined;
    problems.push(
        ...regionAttributeProblems(layout, regionAttribute).map((p) => p.replace("[regionAttribute]", `[${ENV.regionAttribute}]`)),
    );
    let regions: RegionsConfig | undefined;
    const regionsText = env[ENV.regions] || undefined;
    if (regionsText !== undefined) {
        try {
            regions = parseRegions(regionsText, ENV.regions, {
                tableName,
                countersTableName: env[BACKFILL_ENV.countersTableName] || undefined,
            });
        } catch (error) {
            problems.push(...(error as ConfigurationError).problems);
        }
    }
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return {
        config: {
            ...layout,
            ...(selection === undefined ? {} : { selection }),
            tableName: tableName!,
            countersTableName,
            ...(counterShards === 1 ? {} : { counterShards }),
            ...(regions === undefined ? {} : { regions }),
            ...(regionAttribute === undefined ? {} : { regionAttribute }),
        },
        settings,
    };
}
