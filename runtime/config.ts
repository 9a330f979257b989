/**
 * The table layout the counter works on, shared by the API-side client, the stream consumer,
 * the redrive handler and the Pulumi component (which passes it to the Lambdas as environment).
 *
 * This module is pure: no AWS SDK, no Pulumi. The component imports it so that the environment
 * variable names and defaults are defined exactly once.
 */

/** Attribute names and reserved values of the table the counter lives in. */
export interface CounterTableLayout {
    /** Partition key attribute (type S). The counter key is the resource item's partition key. */
    readonly partitionKey: string;
    /** Sort key attribute (type S). A resource's id is its sort key. */
    readonly sortKey: string;
    /** Idempotency flag the consumer flips from false to true when it counts a creation. */
    readonly processedAttribute: string;
    /** Soft-delete flag the API sets; the consumer hard-deletes the item when it counts the deletion. */
    readonly deletedAttribute: string;
    /** Per-write token that lets the client recognise its own write after an SDK retry. */
    readonly tokenAttribute: string;
    /**
     * Sort-key prefix reserved for the counter items. Resource ids must not start with it.
     * The best-effort item is `${counterPrefix}best-effort`, the eventual item `${counterPrefix}eventual`.
     */
    readonly counterPrefix: string;
    /** Numeric attribute that holds a counter item's value. */
    readonly countAttribute: string;
}

/** A layout plus the table it applies to. */
export interface CounterTableConfig extends CounterTableLayout {
    readonly tableName: string;
    /**
     * The table the counter items (best-effort, eventual, markers, bookkeeping) live in: a separate
     * counters table with the same key attribute names, or `tableName` itself ("same-table" placement).
     * Absent: the counter items live in `tableName`.
     */
    readonly countersTableName?: string;
}

/** The table the counter items of `config` live in. */
export function countersTable(config: CounterTableConfig): string {
    return config.countersTableName ?? config.tableName;
}

/** Attribute names on counter items (best-effort and markers). */
export const COUNTER_ATTRIBUTES = Object.freeze({
    /** marker: "counted" | "uncounted" */
    state: "hc_state",
    /** marker: sequence number of the last stream record applied, 40-digit zero-padded S; ZERO_SEQ for non-stream writes */
    seq: "hc_seq",
    /** marker: BOOL true when best-effort accounts for this item (set by backfill in strict mode) */
    beCounted: "hc_be",
    /** marker tombstone TTL (epoch seconds): now + 48 h, only on "uncounted" */
    expiresAt: "hc_expires_at",
    /** best-effort: N, +1 on every client write */
    version: "hc_version",
    /** best-effort: N, epoch ms of the last client write */
    writtenAt: "hc_written_at",
    /** best-effort: S, present while a heal is due (sparse GSI "heal-index": pk hc_heal, sk hc_written_at) */
    healShard: "hc_heal",
    /** marker: the client token (tokenAttribute) of the item life the last applied image showed, when it had one */
    life: "hc_life",
} as const);

export const ZERO_SEQ = "0".repeat(40);

/** Left-pads a stream sequence number to 40 digits, so that string order is numeric order. */
export function paddedSequence(sequenceNumber: string): string {
    return sequenceNumber.padStart(40, "0");
}

/** Shards of the sparse GSI "heal-index": a key's shard is `String(fnv1a(key) % HEAL_SHARDS)`. */
export const HEAL_SHARDS = 16;

/** Name of the sparse GSI on the counters table that lists the best-effort items due a heal. */
export const HEAL_INDEX_NAME = "heal-index";

/** 32-bit FNV-1a of the key's UTF-8 bytes. */
export function fnv1a(value: string): number {
    let hash = 0x811c9dc5;
    for (const byte of Buffer.from(value, "utf8")) {
        hash ^= byte;
        hash = Math.imul(hash, 0x01000193) >>> 0;
    }
    return hash >>> 0;
}

/** The heal-index shard (the value of `hc_heal`) a counter key's best-effort item is written with. */
export function healShard(key: string): string {
    return String(fnv1a(key) % HEAL_SHARDS);
}

/** Sort key of the marker of resource item `id` in the counters table. */
export function markerSortKey(layout: CounterTableLayout, id: string): string {
    return `${layout.counterPrefix}item#${id}`;
}

/** Sort key of the settler's audit cursor in the counters table (stored under the counter key of the same name). */
export function settlerCursorSortKey(layout: CounterTableLayout): string {
    return `${layout.counterPrefix}settler#cursor`;
}

export const DEFAULT_LAYOUT: CounterTableLayout = Object.freeze({
    partitionKey: "pk",
    sortKey: "sk",
    processedAttribute: "counter_processed",
    deletedAttribute: "deleted",
    tokenAttribute: "counter_token",
    counterPrefix: "#counter#",
    countAttribute: "count",
});

/** Sort key of the best-effort counter item: written only by the API-side client. */
export function bestEffortSortKey(layout: CounterTableLayout): string {
    return `${layout.counterPrefix}best-effort`;
}

/** Sort key of the eventual counter item: written only by the consumer's transactions. */
export function eventualSortKey(layout: CounterTableLayout): string {
    return `${layout.counterPrefix}eventual`;
}

/** Environment variable names the Lambdas read their configuration from. */
export const ENV = Object.freeze({
    tableName: "HYBRID_COUNTER_TABLE_NAME",
    partitionKey: "HYBRID_COUNTER_PARTITION_KEY",
    sortKey: "HYBRID_COUNTER_SORT_KEY",
    processedAttribute: "HYBRID_COUNTER_PROCESSED_ATTRIBUTE",
    deletedAttribute: "HYBRID_COUNTER_DELETED_ATTRIBUTE",
    tokenAttribute: "HYBRID_COUNTER_TOKEN_ATTRIBUTE",
    counterPrefix: "HYBRID_COUNTER_PREFIX",
    countAttribute: "HYBRID_COUNTER_COUNT_ATTRIBUTE",
    /** URL of the fatal queue: poison records and unrecoverable batches go there, in full. */
    fatalQueueUrl: "HYBRID_COUNTER_FATAL_QUEUE_URL",
    /** Namespace of the CloudWatch EMF metrics. */
    metricsNamespace: "HYBRID_COUNTER_METRICS_NAMESPACE",
} as const);

export const DEFAULT_METRICS_NAMESPACE = "HybridCounter";

/** Everything the Lambda handlers need, as read from their environment. */
export interface HandlerConfig extends CounterTableConfig {
    readonly fatalQueueUrl: string;
    readonly metricsNamespace: string;
}

/** Raised when configuration (environment or options) is missing or invalid. */
export class ConfigurationError extends Error {
    constructor(readonly problems: readonly string[]) {
        super(`invalid hybrid-counter configuration: ${problems.join("; ")}`);
        this.name = "ConfigurationError";
    }
}

const ATTRIBUTE_NAME_MAX_BYTES = 255;

/**
 * Checks a layout: every name non-empty, within DynamoDB's 255-byte attribute name limit, and the
 * five attribute names distinct. Returns the problems, each naming its field.
 */
export function layoutProblems(layout: CounterTableLayout): string[] {
    const problems: string[] = [];
    const names: Array<keyof CounterTableLayout> = [
        "partitionKey",
        "sortKey",
        "processedAttribute",
        "deletedAttribute",
        "tokenAttribute",
        "countAttribute",
    ];
    for (const field of names) {
        const value = layout[field];
        if (typeof value !== "string" || value.length === 0) {
            problems.push(`[${field}] must be a non-empty string`);
        } else if (Buffer.byteLength(value, "utf8") > ATTRIBUTE_NAME_MAX_BYTES) {
            problems.push(`[${field}] must be at most ${ATTRIBUTE_NAME_MAX_BYTES} bytes`);
        }
    }
    const itemAttributes: Array<keyof CounterTableLayout> = [
        "partitionKey",
        "sortKey",
        "processedAttribute",
        "deletedAttribute",
        "tokenAttribute",
    ];
    const seen = new Map<string, string>();
    for (const field of itemAttributes) {
        const value = layout[field];
        const earlier = seen.get(value);
        if (earlier !== undefined) {
            problems.push(`[${field}] must differ from [${earlier}] (both are "${value}")`);
        } else {
            seen.set(value, field);
        }
    }
    if (typeof layout.counterPrefix !== "string" || layout.counterPrefix.length === 0) {
        problems.push("[counterPrefix] must be a non-empty string");
    } else if (Buffer.byteLength(layout.counterPrefix, "utf8") > 64) {
        problems.push("[counterPrefix] must be at most 64 bytes");
    }
    return problems;
}

/**
 * Picks the layout fields out of `source` (component args, client options), with defaults for the
 * missing ones. Not validated: see layoutProblems and resolveLayout.
 */
export function layoutWithDefaults(source: Partial<CounterTableLayout>): CounterTableLayout {
    return {
        partitionKey: source.partitionKey ?? DEFAULT_LAYOUT.partitionKey,
        sortKey: source.sortKey ?? DEFAULT_LAYOUT.sortKey,
        processedAttribute: source.processedAttribute ?? DEFAULT_LAYOUT.processedAttribute,
        deletedAttribute: source.deletedAttribute ?? DEFAULT_LAYOUT.deletedAttribute,
        tokenAttribute: source.tokenAttribute ?? DEFAULT_LAYOUT.tokenAttribute,
        counterPrefix: source.counterPrefix ?? DEFAULT_LAYOUT.counterPrefix,
        countAttribute: source.countAttribute ?? DEFAULT_LAYOUT.countAttribute,
    };
}

/** Fills defaults into a partial layout and validates it; throws ConfigurationError naming each bad field. */
export function resolveLayout(partial: Partial<CounterTableLayout> = {}): CounterTableLayout {
    const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, ...stripUndefined(partial) };
    const problems = layoutProblems(layout);
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return layout;
}

/** The environment a Lambda handler needs, as the component sets it. */
export function handlerEnvironment(config: HandlerConfig): Record<string, string> {
    return {
        [ENV.tableName]: config.tableName,
        [ENV.partitionKey]: config.partitionKey,
        [ENV.sortKey]: config.sortKey,
        [ENV.processedAttribute]: config.processedAttribute,
        [ENV.deletedAttribute]: config.deletedAttribute,
        [ENV.tokenAttribute]: config.tokenAttribute,
        [ENV.counterPrefix]: config.counterPrefix,
        [ENV.countAttribute]: config.countAttribute,
        [ENV.fatalQueueUrl]: config.fatalQueueUrl,
        [ENV.metricsNamespace]: config.metricsNamespace,
    };
}

/** Reads a handler's configuration from its environment; throws ConfigurationError naming each missing variable. */
export function handlerConfigFromEnv(env: Readonly<Record<string, string | undefined>>): HandlerConfig {
    const problems: string[] = [];
    const required = (name: string): string => {
        const value = env[name];
        if (value === undefined || value.length === 0) {
            problems.push(`[${name}] must be set`);
            return "";
        }
        return value;
    };
    const tableName = required(ENV.tableName);
    const fatalQueueUrl = required(ENV.fatalQueueUrl);
    const partial: Partial<CounterTableLayout> = {
        partitionKey: env[ENV.partitionKey] || undefined,
        sortKey: env[ENV.sortKey] || undefined,
        processedAttribute: env[ENV.processedAttribute] || undefined,
        deletedAttribute: env[ENV.deletedAttribute] || undefined,
        tokenAttribute: env[ENV.tokenAttribute] || undefined,
        counterPrefix: env[ENV.counterPrefix] || undefined,
        countAttribute: env[ENV.countAttribute] || undefined,
    };
    const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, ...stripUndefined(partial) };
    problems.push(...layoutProblems(layout));
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return {
        ...layout,
        tableName,
        fatalQueueUrl,
        metricsNamespace: env[ENV.metricsNamespace] || DEFAULT_METRICS_NAMESPACE,
    };
}

function stripUndefined<T extends object>(value: Partial<T>): Partial<T> {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
