/**
 * The counter a command runs on: its tables, layout, mode, period, shards, regions and queues, from `--config` JSON
 * and the flags (flags win; a flag that contradicts the counter's mode or period is refused). Pure apart from reading
 * the file, which is injected.
 *
 * The JSON is the component's `clientConfig` output itself, or the whole `pulumi stack output --json` with
 * `clientConfig`, `fatalDlqUrl` and `firstDlqUrl`. Every problem is a UsageError naming the flag (or the config field).
 */
import {
    COUNTER_MODES,
    DEFAULT_PERIOD_SECONDS,
    counterShardsProblems,
    layoutProblems,
    layoutWithDefaults,
    thresholdsProblems,
    type CounterConfig,
    type CounterMode,
    type CounterTableLayout,
    type FlatSelection,
    type ItemSelection,
} from "../runtime/shared/config";
import { UsageError } from "./errors";
import { checkQueueRegions, resolveRegions } from "./regions";

export interface GlobalFlags {
    config?: string;
    table?: string;
    countersTable?: string;
    counterShards?: string;
    mode?: string;
    quietWindowSeconds?: string;
    countedItems?: string;
    countedSortKeyPrefix?: string;
    countedAttributeName?: string;
    countedAttributeValue?: string;
    partitionKey?: string;
    sortKey?: string;
    deletedAttribute?: string;
    tokenAttribute?: string;
    counterPrefix?: string;
    countAttribute?: string;
    fatalQueueUrl?: string;
    firstDlqUrl?: string;
    endpoint?: string;
    sqsEndpoint?: string;
    region?: string;
    profile?: string;
    json?: boolean;
    verbose?: boolean;
}

export interface CounterTarget {
    readonly config: CounterConfig;
    /** Whether the mode was given (`--mode`, or counterMode in --config); otherwise it is the default, utilization. */
    readonly modeGiven: boolean;
    readonly fatalQueueUrl?: string;
    readonly firstDlqUrl?: string;
    /** The functions' settings from `--config` (the component's outputs), which a replay applies records with. */
    readonly thresholds?: readonly number[];
    readonly usageRetentionDays?: number;
}

type StringLayoutField = Exclude<keyof CounterTableLayout, "selection">;

const LAYOUT_FLAGS: Record<StringLayoutField | keyof FlatSelection, string> = {
    partitionKey: "--partition-key",
    sortKey: "--sort-key",
    deletedAttribute: "--deleted-attribute",
    tokenAttribute: "--token-attribute",
    counterPrefix: "--counter-prefix",
    countAttribute: "--count-attribute",
    countedItems: "--counted-items",
    countedSortKeyPrefix: "--counted-sort-key-prefix",
    countedAttributeName: "--counted-attribute-name",
    countedAttributeValue: "--counted-attribute-value",
};

const SELECTION_FLAGS = ["countedItems", "countedSortKeyPrefix", "countedAttributeName", "countedAttributeValue"] as const;

/** The `--config` JSON: the clientConfig fields, and the whole outputs (for the queues). */
function readConfig(
    flags: GlobalFlags,
    readText: (source: string) => string,
): { fromFile: Record<string, unknown>; outputs: Record<string, unknown> } {
    if (flags.config === undefined) {
        return { fromFile: {}, outputs: {} };
    }
    let text: string;
    try {
        text = readText(flags.config);
    } catch (error) {
        throw new UsageError(
            `--config: cannot read ${flags.config} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
        );
    }
    let parsed: unknown;
    try {
        parsed = JSON.parse(text);
    } catch (error) {
        throw new UsageError(`--config: ${flags.config === "-" ? "stdin" : flags.config} is not JSON (${(error as Error).message})`);
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new UsageError("--config: must be a JSON object (the clientConfig output)");
    }
    const outputs = parsed as Record<string, unknown>;
    const nested = outputs.clientConfig;
    return { fromFile: nested !== null && typeof nested === "object" ? (nested as Record<string, unknown>) : outputs, outputs };
}

function text(value: unknown, name: string): string | undefined {
    if (value === undefined) {
        return undefined;
    }
    if (typeof value !== "string") {
        throw new UsageError(`--config: [${name}] must be a string`);
    }
    return value;
}

/** The layout from the flags and the file: the flat fields, or the file's `selection` object when no flag names one. */
function layoutOf(flags: GlobalFlags, fromFile: Record<string, unknown>): CounterTableLayout {
    const given: Partial<Record<StringLayoutField | keyof FlatSelection, string>> & { selection?: ItemSelection } = {};
    for (const field of Object.keys(LAYOUT_FLAGS) as Array<StringLayoutField | keyof FlatSelection>) {
        const value = flags[field] ?? text(fromFile[field], field);
        if (value !== undefined) {
            given[field] = value;
        }
    }
    const selectionGiven = SELECTION_FLAGS.some((field) => given[field] !== undefined);
    if (!selectionGiven && fromFile.selection !== undefined) {
        given.selection = fromFile.selection as ItemSelection;
    }
    const layout = layoutWithDefaults(given);
    const problems = layoutProblems(layout);
    if (problems.length > 0) {
        const field = /^\[(\w+)\]/.exec(problems[0]!)?.[1] as StringLayoutField | keyof FlatSelection | undefined;
        // The field's flag when it was given, or when there is no config to name.
        const named = field !== undefined && field in LAYOUT_FLAGS && (flags[field] !== undefined || flags.config === undefined);
        const flag = named ? LAYOUT_FLAGS[field!] : "--config";
        throw new UsageError(`${flag}: ${flag === "--config" ? problems[0]! : problems[0]!.replace(/^\[\w+\] /, "")}`);
    }
    return layout;
}

/** The mode: `--mode` and counterMode in --config name one, or neither does (the default, utilization). */
function modeOf(flags: GlobalFlags, fromFile: Record<string, unknown>): { mode: CounterMode; given: boolean } {
    const configured = fromFile.counterMode;
    if (configured !== undefined && !COUNTER_MODES.includes(configured as CounterMode)) {
        throw new UsageError(`--config: [counterMode] must be "utilization" or "strict" (got ${JSON.stringify(configured)})`);
    }
    if (flags.mode !== undefined && !COUNTER_MODES.includes(flags.mode as CounterMode)) {
        throw new UsageError(`--mode must be utilization or strict (got "${flags.mode}")`);
    }
    if (flags.mode !== undefined && configured !== undefined && flags.mode !== configured) {
        throw new UsageError(
            `--mode: the counter's mode is ${String(configured)} (counterMode in --config), not ${flags.mode}: it runs in one mode, and a heal ` +
                "in the other would break its bound; drop --mode",
        );
    }
    const mode = (flags.mode ?? configured) as CounterMode | undefined;
    return { mode: mode ?? "utilization", given: mode !== undefined };
}

/** The ledger period in seconds: `--quiet-window-seconds` and healQuietWindowSeconds in --config, or the default. */
function periodOf(flags: GlobalFlags, fromFile: Record<string, unknown>): number {
    const configured = fromFile.healQuietWindowSeconds;
    if (
        configured !== undefined &&
        (typeof configured !== "number" || !Number.isInteger(configured) || configured < 1 || configured > 86_400)
    ) {
        throw new UsageError(`--config: [healQuietWindowSeconds] must be an integer from 1 to 86400 (got ${JSON.stringify(configured)})`);
    }
    let given: number | undefined;
    if (flags.quietWindowSeconds !== undefined) {
        given = Number(flags.quietWindowSeconds);
        if (!/^\d+$/.test(flags.quietWindowSeconds) || given < 1 || given > 86_400) {
            throw new UsageError(`--quiet-window-seconds must be an integer from 1 to 86400 (got "${flags.quietWindowSeconds}")`);
        }
        if (configured !== undefined && given !== configured) {
            throw new UsageError(
                `--quiet-window-seconds: the counter's period is ${String(configured)} s (healQuietWindowSeconds in --config), not ${given}: drop the flag`,
            );
        }
    }
    return given ?? (configured as number | undefined) ?? DEFAULT_PERIOD_SECONDS;
}

function shardsOf(flags: GlobalFlags, fromFile: Record<string, unknown>, tableName: string, countersTableName: string): number {
    let counterShards: unknown = fromFile.counterShards;
    if (flags.counterShards !== undefined) {
        counterShards = /^\d+$/.test(flags.counterShards) ? Number(flags.counterShards) : flags.counterShards;
    }
    const problems = counterShardsProblems(counterShards, tableName, countersTableName);
    if (problems.length > 0) {
        const flag = flags.counterShards !== undefined ? "--counter-shards" : "--config";
        throw new UsageError(`${flag}: ${problems[0]!.replace(/^\[\w+\] /, "")}`);
    }
    return (counterShards as number | undefined) ?? 1;
}

/** The counter and its queues from `--config` and the flags (see the header). */
export function resolveTarget(flags: GlobalFlags, readText: (source: string) => string): CounterTarget {
    const { fromFile, outputs } = readConfig(flags, readText);
    const tableName = flags.table ?? text(fromFile.tableName, "tableName");
    if (tableName === undefined || tableName.length === 0) {
        throw new UsageError("--table or --config is required: which table holds the counter?");
    }
    const layout = layoutOf(flags, fromFile);
    // Without a counters table of its own, the counter items live in the user's table (the same-table placement).
    const countersTableName = flags.countersTable ?? text(fromFile.countersTableName, "countersTableName") ?? tableName;
    const shards = shardsOf(flags, fromFile, tableName, countersTableName);
    const { mode, given } = modeOf(flags, fromFile);
    const periodSeconds = periodOf(flags, fromFile);
    // A multi-region counter (cli/regions.ts): the command runs as --region, else the configuration's current region.
    const { regions, regionAttribute } = resolveRegions(fromFile, flags.region, {
        tableName,
        countersTableName,
        attributes: {
            partitionKey: layout.partitionKey,
            sortKey: layout.sortKey,
            deletedAttribute: layout.deletedAttribute,
            tokenAttribute: layout.tokenAttribute,
        },
    });
    const fatalQueueUrl = flags.fatalQueueUrl ?? text(outputs.fatalDlqUrl, "fatalDlqUrl");
    const firstDlqUrl = flags.firstDlqUrl ?? text(outputs.firstDlqUrl, "firstDlqUrl");
    if (regions !== undefined) {
        checkQueueRegions(regions.current, [
            { url: fatalQueueUrl, name: flags.fatalQueueUrl === undefined ? "--config: [fatalDlqUrl]" : "--fatal-queue-url" },
            { url: firstDlqUrl, name: flags.firstDlqUrl === undefined ? "--config: [firstDlqUrl]" : "--first-dlq-url" },
        ]);
    }
    return {
        config: {
            ...layout,
            tableName,
            countersTableName,
            mode,
            periodMs: periodSeconds * 1000,
            ...(shards === 1 ? {} : { counterShards: shards }),
            ...(regions === undefined ? {} : { regions }),
            ...(regionAttribute === undefined ? {} : { regionAttribute }),
        },
        modeGiven: given,
        ...(fatalQueueUrl === undefined ? {} : { fatalQueueUrl }),
        ...(firstDlqUrl === undefined ? {} : { firstDlqUrl }),
        ...handlerSettingsOf(outputs),
    };
}

/** The `thresholds` and `usageRetentionDays` outputs, when `--config` has them. */
function handlerSettingsOf(outputs: Record<string, unknown>): { thresholds?: readonly number[]; usageRetentionDays?: number } {
    const { thresholds, usageRetentionDays } = outputs;
    if (thresholds !== undefined) {
        const problems = thresholdsProblems(thresholds);
        if (problems.length > 0) {
            throw new UsageError(`--config: ${problems[0]!}`);
        }
    }
    if (usageRetentionDays !== undefined && !(Number.isInteger(usageRetentionDays) && (usageRetentionDays as number) >= 1)) {
        throw new UsageError(`--config: [usageRetentionDays] must be a positive integer (got ${JSON.stringify(usageRetentionDays)})`);
    }
    return {
        ...(thresholds === undefined ? {} : { thresholds: [...(thresholds as number[])].sort((a, b) => a - b) }),
        ...(usageRetentionDays === undefined ? {} : { usageRetentionDays: usageRetentionDays as number }),
    };
}
