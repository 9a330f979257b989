/**
 * What a counter is configured with, shared by the API's client, the handlers, the CLI and the Pulumi component
 * (which writes it into the functions' environment and its `clientConfig` output). Pure: no AWS SDK, no Pulumi.
 *
 * One configuration, one meaning: the mode, the ledger period, the shard count and the regions travel together in
 * `clientConfig`, so a client and the handlers it pairs with can never disagree about them.
 */
import { ConfigurationError } from "./errors";

export { ConfigurationError } from "./errors";
import { parseRegions, regionsJson, regionsProblems, type RegionsConfig } from "../regions/config";

export type { RegionsConfig, RegionMember } from "../regions/config";

/**
 * Which items of a key are counted resources (selection.ts applies it).
 * - `client` (default): items carrying the client's token attribute, i.e. written through the client.
 * - `sortKeyPrefix`: every item whose sort key begins with `prefix`, whoever wrote it.
 * - `attribute`: every item whose attribute `name` is the string `value`, whoever wrote it.
 */
export type ItemSelection =
    | { readonly kind: "client" }
    | { readonly kind: "sortKeyPrefix"; readonly prefix: string }
    | { readonly kind: "attribute"; readonly name: string; readonly value: string };

export const SELECTION_KINDS = ["client", "sortKeyPrefix", "attribute"] as const;

/** The two modes: best-effort a lower bound of the live items (utilization), or a reserved upper bound (strict). */
export type CounterMode = "utilization" | "strict";
export const COUNTER_MODES: readonly CounterMode[] = ["utilization", "strict"];

/** Attribute names and reserved values of the table the counter lives in. */
export interface CounterTableLayout {
    /** Partition key attribute (type S). The counter key is the resource item's partition key. */
    readonly partitionKey: string;
    /** Sort key attribute (type S). A resource's id is its sort key. */
    readonly sortKey: string;
    /** Soft-delete flag (BOOL true) the client sets; the consumer or the settler removes the item afterwards. */
    readonly deletedAttribute: string;
    /** The client's token of an item's life (a UUIDv7); `<tokenAttribute>_delete` holds a delete's token. */
    readonly tokenAttribute: string;
    /** Sort-key prefix reserved for the counter's own items. Resource ids must not start with it. */
    readonly counterPrefix: string;
    /** Numeric attribute that holds a counter item's value. */
    readonly countAttribute: string;
    /** Which items of a key count. @default { kind: "client" } */
    readonly selection: ItemSelection;
}

export const DEFAULT_LAYOUT: CounterTableLayout = Object.freeze({
    partitionKey: "pk",
    sortKey: "sk",
    deletedAttribute: "deleted",
    tokenAttribute: "counter_token",
    counterPrefix: "#counter#",
    countAttribute: "count",
    selection: Object.freeze({ kind: "client" }),
});

/** The most partitions one key's best-effort may spread over. */
export const COUNTER_SHARDS_MAX = 16;

/** The ledger period when none is configured (the component's `healQuietWindowSeconds` default). */
export const DEFAULT_PERIOD_SECONDS = 600;

/** A whole counter: the tables, the layout, the mode, the ledger period, shards and regions. */
export interface CounterConfig extends CounterTableLayout {
    /** The user's table: the resource items, and the stream the consumer reads. */
    readonly tableName: string;
    /** The table of the counter items: a table of its own, or `tableName` again (the same-table placement). */
    readonly countersTableName: string;
    /** The mode every client and the settler use. @default "utilization" */
    readonly mode: CounterMode;
    /**
     * The ledger period (ms): a life's best-effort is kept in its period's ledger entry until the heal counts it from
     * the table, one to two periods later (runtime/ledger/ledger.ts). The component's `healQuietWindowSeconds`.
     */
    readonly periodMs: number;
    /** Partitions of every key's best-effort (runtime/shards/layout.ts). @default 1 */
    readonly counterShards?: number;
    /** The regions of a counter on a global table (runtime/regions/). Absent: one region. */
    readonly regions?: RegionsConfig;
    /** The region stamp's attribute. @default "hc_region" */
    readonly regionAttribute?: string;
}

/** The attribute a delete's claim and a soft delete store their token in: `<tokenAttribute>_delete`. */
export function deleteTokenAttribute(layout: Pick<CounterTableLayout, "tokenAttribute">): string {
    return `${layout.tokenAttribute}_delete`;
}

/** The table the counter items of `config` live in. */
export function countersTable(config: Pick<CounterConfig, "countersTableName">): string {
    return config.countersTableName;
}

/** The flat form of a selection (component args, environment, `clientConfig`). */
export interface FlatSelection {
    readonly countedItems?: string;
    readonly countedSortKeyPrefix?: string;
    readonly countedAttributeName?: string;
    readonly countedAttributeValue?: string;
}

/** Builds the selection a flat description names (not validated: see selectionProblems). */
export function selectionFromFlat(flat: FlatSelection): ItemSelection {
    switch (flat.countedItems) {
        case undefined:
        case "client":
            return { kind: "client" };
        case "sortKeyPrefix":
            return { kind: "sortKeyPrefix", prefix: flat.countedSortKeyPrefix ?? "" };
        case "attribute":
            return { kind: "attribute", name: flat.countedAttributeName ?? "", value: flat.countedAttributeValue ?? "" };
        default:
            return { kind: flat.countedItems } as unknown as ItemSelection;
    }
}

/** The flat form of a selection. */
export function flatSelection(selection: ItemSelection): FlatSelection {
    switch (selection.kind) {
        case "client":
            return { countedItems: "client" };
        case "sortKeyPrefix":
            return { countedItems: "sortKeyPrefix", countedSortKeyPrefix: selection.prefix };
        case "attribute":
            return { countedItems: "attribute", countedAttributeName: selection.name, countedAttributeValue: selection.value };
    }
}

/** The layout fields of `source` (args, options, `clientConfig`), defaults filled in; not validated. */
export function layoutWithDefaults(source: Partial<CounterTableLayout> & FlatSelection): CounterTableLayout {
    return {
        partitionKey: source.partitionKey ?? DEFAULT_LAYOUT.partitionKey,
        sortKey: source.sortKey ?? DEFAULT_LAYOUT.sortKey,
        deletedAttribute: source.deletedAttribute ?? DEFAULT_LAYOUT.deletedAttribute,
        tokenAttribute: source.tokenAttribute ?? DEFAULT_LAYOUT.tokenAttribute,
        counterPrefix: source.counterPrefix ?? DEFAULT_LAYOUT.counterPrefix,
        countAttribute: source.countAttribute ?? DEFAULT_LAYOUT.countAttribute,
        selection: source.selection ?? (source.countedItems !== undefined ? selectionFromFlat(source) : DEFAULT_LAYOUT.selection),
    };
}

const ATTRIBUTE_NAME_MAX_BYTES = 255;

/** Problems with a layout, each naming its field: names valid and distinct, the selection complete. */
export function layoutProblems(layout: CounterTableLayout): string[] {
    const problems: string[] = [];
    const names: Array<keyof CounterTableLayout> = ["partitionKey", "sortKey", "deletedAttribute", "tokenAttribute", "countAttribute"];
    for (const field of names) {
        const value = layout[field];
        if (typeof value !== "string" || value.length === 0) {
            problems.push(`[${field}] must be a non-empty string`);
        } else if (Buffer.byteLength(value, "utf8") > ATTRIBUTE_NAME_MAX_BYTES - 7) {
            problems.push(`[${field}] must be at most ${ATTRIBUTE_NAME_MAX_BYTES - 7} bytes`);
        }
    }
    const seen = new Map<string, string>();
    for (const field of ["partitionKey", "sortKey", "deletedAttribute", "tokenAttribute"] as const) {
        const value = layout[field];
        const earlier = seen.get(value);
        if (earlier !== undefined) {
            problems.push(`[${field}] must differ from [${earlier}] (both are "${value}")`);
        }
        seen.set(value, field);
    }
    if (typeof layout.counterPrefix !== "string" || layout.counterPrefix.length === 0) {
        problems.push("[counterPrefix] must be a non-empty string");
    } else if (Buffer.byteLength(layout.counterPrefix, "utf8") > 64) {
        problems.push("[counterPrefix] must be at most 64 bytes");
    }
    return [...problems, ...selectionProblems(layout)];
}

/** Problems with the layout's selection, named by the flat fields. */
export function selectionProblems(layout: CounterTableLayout): string[] {
    const selection = layout.selection as ItemSelection | undefined;
    switch (selection?.kind) {
        case "client":
            return [];
        case "sortKeyPrefix":
            if (typeof selection.prefix !== "string" || selection.prefix.length === 0 || Buffer.byteLength(selection.prefix) > 1024) {
                return ['[countedSortKeyPrefix] must be a non-empty string of at most 1024 bytes when [countedItems] is "sortKeyPrefix"'];
            }
            return selection.prefix.startsWith(layout.counterPrefix) || layout.counterPrefix.startsWith(selection.prefix)
                ? [`[countedSortKeyPrefix] must not overlap [counterPrefix] "${layout.counterPrefix}": counter items never count`]
                : [];
        case "attribute": {
            const problems: string[] = [];
            const reserved = [layout.partitionKey, layout.sortKey, layout.deletedAttribute, layout.tokenAttribute, COUNTED_ATTRIBUTE];
            if (typeof selection.name !== "string" || selection.name.length === 0 || Buffer.byteLength(selection.name) > 255) {
                problems.push('[countedAttributeName] must be an attribute name of 1 to 255 bytes when [countedItems] is "attribute"');
            } else if (reserved.includes(selection.name)) {
                problems.push(`[countedAttributeName] must not be a key or one of the counter's own attributes (got "${selection.name}")`);
            }
            if (typeof selection.value !== "string" || selection.value.length === 0) {
                problems.push('[countedAttributeValue] must be a non-empty string when [countedItems] is "attribute"');
            }
            return problems;
        }
        default:
            return [`[countedItems] must be ${SELECTION_KINDS.map((k) => `"${k}"`).join(", ")}`];
    }
}

/** Problems with a shard count: an integer from 1 to 16, above 1 only with a counters table of its own. */
export function counterShardsProblems(counterShards: unknown, tableName?: string, countersTableName?: string): string[] {
    if (counterShards === undefined) {
        return [];
    }
    if (typeof counterShards !== "number" || !Number.isInteger(counterShards) || counterShards < 1 || counterShards > COUNTER_SHARDS_MAX) {
        return [`[counterShards] must be an integer from 1 to ${COUNTER_SHARDS_MAX} (got ${JSON.stringify(counterShards)})`];
    }
    if (counterShards > 1 && tableName !== undefined && countersTableName === tableName) {
        return ["[counterShards] above 1 needs a counters table of its own: a key's shards are partition keys of the counters table"];
    }
    return [];
}

/**
 * The attribute that marks an item as counted by this counter: set by the client on every item it creates, and by
 * the consumer and the backfill on every other selected item (runtime/shared/selection.ts). Its value is the
 * counter's generation (`countingGeneration`), so a counter attached to a table another counter counted recounts it.
 */
export const COUNTED_ATTRIBUTE = "hc_counted";

/** The counter's generation: the value of COUNTED_ATTRIBUTE, derived from the counters table's name. */
export function countingGeneration(config: Pick<CounterConfig, "countersTableName">): string {
    return `g${fnv1a(config.countersTableName).toString(36)}`;
}

/** 32-bit FNV-1a of a string's UTF-8 bytes: shard homes, heal-index shards, generations. */
export function fnv1a(value: string): number {
    let hash = 0x811c9dc5;
    for (const byte of Buffer.from(value, "utf8")) {
        hash ^= byte;
        hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return hash >>> 0;
}

/** Environment variable names the functions read their configuration from. */
export const ENV = Object.freeze({
    tableName: "HYBRID_COUNTER_TABLE_NAME",
    countersTableName: "HYBRID_COUNTER_COUNTERS_TABLE_NAME",
    partitionKey: "HYBRID_COUNTER_PARTITION_KEY",
    sortKey: "HYBRID_COUNTER_SORT_KEY",
    deletedAttribute: "HYBRID_COUNTER_DELETED_ATTRIBUTE",
    tokenAttribute: "HYBRID_COUNTER_TOKEN_ATTRIBUTE",
    counterPrefix: "HYBRID_COUNTER_PREFIX",
    countAttribute: "HYBRID_COUNTER_COUNT_ATTRIBUTE",
    countedItems: "HYBRID_COUNTER_COUNTED_ITEMS",
    countedSortKeyPrefix: "HYBRID_COUNTER_COUNTED_SORT_KEY_PREFIX",
    countedAttributeName: "HYBRID_COUNTER_COUNTED_ATTRIBUTE_NAME",
    countedAttributeValue: "HYBRID_COUNTER_COUNTED_ATTRIBUTE_VALUE",
    counterMode: "HYBRID_COUNTER_MODE",
    healQuietWindowSeconds: "HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS",
    counterShards: "HYBRID_COUNTER_COUNTER_SHARDS",
    regions: "HYBRID_COUNTER_REGIONS",
    regionAttribute: "HYBRID_COUNTER_REGION_ATTRIBUTE",
    fatalQueueUrl: "HYBRID_COUNTER_FATAL_QUEUE_URL",
    metricsNamespace: "HYBRID_COUNTER_METRICS_NAMESPACE",
    thresholds: "HYBRID_COUNTER_THRESHOLDS",
    thresholdTopicArn: "HYBRID_COUNTER_THRESHOLD_TOPIC_ARN",
    usageRetentionDays: "HYBRID_COUNTER_USAGE_RETENTION_DAYS",
} as const);

export const DEFAULT_METRICS_NAMESPACE = "HybridCounter";

/** Days of usage history kept when none is configured. */
export const DEFAULT_USAGE_RETENTION_DAYS = 90;

/** The fractions of a key's limit whose crossing is announced when none are configured. */
export const DEFAULT_THRESHOLDS: readonly number[] = Object.freeze([0.8, 1]);

/** Everything the functions need, as read from their environment. */
export interface HandlerConfig extends CounterConfig {
    readonly fatalQueueUrl: string;
    readonly metricsNamespace: string;
    /** Fractions of a key's limit whose crossings are announced (runtime/limits/thresholds.ts). */
    readonly thresholds: readonly number[];
    /** Where threshold events go; none: they are not sent (the count and usage are kept all the same). */
    readonly thresholdTopicArn?: string;
    /** Days a day of usage history is kept (runtime/limits/usage.ts). */
    readonly usageRetentionDays: number;
}

/** The environment the functions and an API need (read back by counterConfigFromEnv). */
export function counterEnvironment(config: CounterConfig): Record<string, string> {
    const selection = flatSelection(config.selection);
    const env: Record<string, string> = {
        [ENV.tableName]: config.tableName,
        [ENV.countersTableName]: config.countersTableName,
        [ENV.partitionKey]: config.partitionKey,
        [ENV.sortKey]: config.sortKey,
        [ENV.deletedAttribute]: config.deletedAttribute,
        [ENV.tokenAttribute]: config.tokenAttribute,
        [ENV.counterPrefix]: config.counterPrefix,
        [ENV.countAttribute]: config.countAttribute,
        [ENV.countedItems]: selection.countedItems ?? "client",
        [ENV.counterMode]: config.mode,
        [ENV.healQuietWindowSeconds]: String(Math.round(config.periodMs / 1000)),
    };
    const optional: Array<[string, string | undefined]> = [
        [ENV.countedSortKeyPrefix, selection.countedSortKeyPrefix],
        [ENV.countedAttributeName, selection.countedAttributeName],
        [ENV.countedAttributeValue, selection.countedAttributeValue],
        [ENV.counterShards, (config.counterShards ?? 1) === 1 ? undefined : String(config.counterShards)],
        [ENV.regions, config.regions === undefined ? undefined : regionsJson(config.regions)],
        [ENV.regionAttribute, config.regionAttribute],
    ];
    for (const [name, value] of optional) {
        if (value !== undefined) {
            env[name] = value;
        }
    }
    return env;
}

/** The environment of a function, as the component sets it. */
export function handlerEnvironment(config: HandlerConfig): Record<string, string> {
    return {
        ...counterEnvironment(config),
        [ENV.fatalQueueUrl]: config.fatalQueueUrl,
        [ENV.metricsNamespace]: config.metricsNamespace,
        [ENV.thresholds]: config.thresholds.join(","),
        [ENV.usageRetentionDays]: String(config.usageRetentionDays),
        ...(config.thresholdTopicArn === undefined ? {} : { [ENV.thresholdTopicArn]: config.thresholdTopicArn }),
    };
}

type Env = Readonly<Record<string, string | undefined>>;

/** A counter's configuration from an environment (counterEnvironment's); throws ConfigurationError naming each variable. */
export function counterConfigFromEnv(env: Env): CounterConfig {
    const problems: string[] = [];
    const config = readCounterConfig(env, problems);
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return config;
}

/** A function's configuration from its environment; throws ConfigurationError naming each missing or bad variable. */
export function handlerConfigFromEnv(env: Env): HandlerConfig {
    const problems: string[] = [];
    const config = readCounterConfig(env, problems);
    const fatalQueueUrl = env[ENV.fatalQueueUrl] ?? "";
    if (fatalQueueUrl.length === 0) {
        problems.push(`[${ENV.fatalQueueUrl}] must be set`);
    }
    const thresholds = parseThresholds(env[ENV.thresholds], problems);
    const retention = positiveInteger(env[ENV.usageRetentionDays], ENV.usageRetentionDays, problems) ?? DEFAULT_USAGE_RETENTION_DAYS;
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    const topic = env[ENV.thresholdTopicArn];
    return {
        ...config,
        fatalQueueUrl,
        metricsNamespace: env[ENV.metricsNamespace] || DEFAULT_METRICS_NAMESPACE,
        thresholds,
        usageRetentionDays: retention,
        ...(topic === undefined || topic.length === 0 ? {} : { thresholdTopicArn: topic }),
    };
}

/** Problems with threshold fractions: each above 0 and at most 1, none twice. */
export function thresholdsProblems(thresholds: unknown, field = "thresholds"): string[] {
    if (!Array.isArray(thresholds) || thresholds.some((t) => typeof t !== "number" || !(t > 0 && t <= 1))) {
        return [`[${field}] must be fractions of the limit, each above 0 and at most 1 (got ${JSON.stringify(thresholds)})`];
    }
    return new Set(thresholds).size === thresholds.length ? [] : [`[${field}] must not name a fraction twice`];
}

function parseThresholds(text: string | undefined, problems: string[]): readonly number[] {
    if (text === undefined || text.length === 0) {
        return DEFAULT_THRESHOLDS;
    }
    const values = text.split(",").map(Number);
    const found = thresholdsProblems(values, ENV.thresholds);
    problems.push(...found);
    return found.length === 0 ? [...values].sort((a, b) => a - b) : DEFAULT_THRESHOLDS;
}

function positiveInteger(text: string | undefined, name: string, problems: string[]): number | undefined {
    if (text === undefined || text.length === 0) {
        return undefined;
    }
    const value = Number(text);
    if (!Number.isInteger(value) || value <= 0) {
        problems.push(`[${name}] must be a positive integer (got "${text}")`);
        return undefined;
    }
    return value;
}

function readCounterConfig(env: Env, problems: string[]): CounterConfig {
    const tableName = env[ENV.tableName] ?? "";
    if (tableName.length === 0) {
        problems.push(`[${ENV.tableName}] must be set`);
    }
    const layout = layoutWithDefaults({
        partitionKey: env[ENV.partitionKey] || undefined,
        sortKey: env[ENV.sortKey] || undefined,
        deletedAttribute: env[ENV.deletedAttribute] || undefined,
        tokenAttribute: env[ENV.tokenAttribute] || undefined,
        counterPrefix: env[ENV.counterPrefix] || undefined,
        countAttribute: env[ENV.countAttribute] || undefined,
        countedItems: env[ENV.countedItems] || undefined,
        countedSortKeyPrefix: env[ENV.countedSortKeyPrefix],
        countedAttributeName: env[ENV.countedAttributeName],
        countedAttributeValue: env[ENV.countedAttributeValue],
    });
    const countersTableName = env[ENV.countersTableName] || tableName;
    const mode = (env[ENV.counterMode] || "utilization") as CounterMode;
    if (!COUNTER_MODES.includes(mode)) {
        problems.push(`[${ENV.counterMode}] must be "utilization" or "strict" (got "${mode}")`);
    }
    const periodSeconds = positiveInteger(env[ENV.healQuietWindowSeconds], ENV.healQuietWindowSeconds, problems);
    const counterShards = positiveInteger(env[ENV.counterShards], ENV.counterShards, problems) ?? 1;
    const regionAttribute = env[ENV.regionAttribute] || undefined;
    let regions: RegionsConfig | undefined;
    if (env[ENV.regions]) {
        try {
            regions = parseRegions(env[ENV.regions]!, ENV.regions, { tableName, countersTableName });
        } catch (error) {
            problems.push(...(error as ConfigurationError).problems);
        }
    }
    const named = [
        ...layoutProblems(layout),
        ...counterShardsProblems(counterShards, tableName, countersTableName),
        ...regionsProblems(undefined, regionAttribute, {
            attributes: {
                partitionKey: layout.partitionKey,
                sortKey: layout.sortKey,
                deletedAttribute: layout.deletedAttribute,
                tokenAttribute: layout.tokenAttribute,
            },
        }),
    ];
    problems.push(
        ...named.map((p) => p.replace(/\[(\w+)\]/g, (whole, f: string) => (f in ENV ? `[${ENV[f as keyof typeof ENV]}]` : whole))),
    );
    return {
        ...layout,
        tableName,
        countersTableName,
        mode,
        periodMs: (periodSeconds ?? DEFAULT_PERIOD_SECONDS) * 1000,
        ...(counterShards === 1 ? {} : { counterShards }),
        ...(regions === undefined ? {} : { regions }),
        ...(regionAttribute === undefined ? {} : { regionAttribute }),
    };
}

/** The fields of the component's `clientConfig` output, which the client's options take as they are. */
export interface ClientConfigFields extends CounterTableLayout {
    readonly tableName: string;
    readonly countersTableName: string;
    readonly counterMode: CounterMode;
    readonly healQuietWindowSeconds: number;
    readonly counterShards?: number;
    readonly regions?: RegionsConfig;
    readonly regionAttribute?: string;
}

/** The `clientConfig` fields of a counter (what the component outputs). */
export function clientConfigOf(config: CounterConfig): ClientConfigFields {
    return {
        ...layoutWithDefaults(config),
        tableName: config.tableName,
        countersTableName: config.countersTableName,
        counterMode: config.mode,
        healQuietWindowSeconds: Math.round(config.periodMs / 1000),
        ...(config.counterShards === undefined || config.counterShards === 1 ? {} : { counterShards: config.counterShards }),
        ...(config.regions === undefined ? {} : { regions: config.regions }),
        ...(config.regionAttribute === undefined ? {} : { regionAttribute: config.regionAttribute }),
    };
}

/** The environment an API's function is given (the component's `apiEnvironment` output): the counter's. */
export const clientEnvironment = counterEnvironment;

/**
 * Reads the environment set from the component's `apiEnvironment` output back into client options:
 * `new HybridCounterClient({ ...clientConfigFromEnv(process.env), dynamodb })`. Throws ConfigurationError naming each
 * missing or bad variable.
 */
export function clientConfigFromEnv(env: Readonly<Record<string, string | undefined>>): ClientConfigFields {
    return clientConfigOf(counterConfigFromEnv(env));
}
