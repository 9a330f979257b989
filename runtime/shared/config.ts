/**
 * The table layout the counter works on, shared by the API-side client, the stream consumer,
 * the redrive handler and the Pulumi component (which passes it to the Lambdas as environment).
 *
 * This module is pure: no AWS SDK, no Pulumi. The component imports it so that the environment
 * variable names and defaults are defined exactly once.
 */
import { ConfigurationError } from "./errors";
import { removedEnvProblems, removedFieldProblems } from "./removed-fields";
import { parseRegions, regionalCounterPrefix, regionsJson, regionsProblems, type RegionsConfig } from "../regions/config";

export type { RegionsConfig, RegionMember } from "../regions/config";

/**
 * Which items of a key are counted resources (see selection.ts, which applies it).
 * - `client` (default): items carrying the client's token attribute, i.e. written through the client.
 * - `sortKeyPrefix`: every item whose sort key begins with `prefix`, whoever wrote it.
 * - `attribute`: every item whose attribute `name` is the string `value`, whoever wrote it.
 */
export type ItemSelection =
    | { readonly kind: "client" }
    | { readonly kind: "sortKeyPrefix"; readonly prefix: string }
    | { readonly kind: "attribute"; readonly name: string; readonly value: string };

/** The kinds of selection, as the component's `countedItems` arg spells them. */
export const SELECTION_KINDS = ["client", "sortKeyPrefix", "attribute"] as const;

/** Attribute names and reserved values of the table the counter lives in. */
export interface CounterTableLayout {
    /** Partition key attribute (type S). The counter key is the resource item's partition key. */
    readonly partitionKey: string;
    /** Sort key attribute (type S). A resource's id is its sort key. */
    readonly sortKey: string;
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
    /** Which items of a key count. @default { kind: "client" } */
    readonly selection: ItemSelection;
}

/** A layout plus the tables it applies to. */
export interface CounterTableConfig extends CounterTableLayout {
    /** The user's table: the resource items, and the stream the consumer reads. */
    readonly tableName: string;
    /**
     * The table the counter items (best-effort, eventual, markers, bookkeeping) live in: a table of their
     * own beside the user's (placement "separate"), or the user's table itself (placement "same-table").
     * Absent means the user's table.
     */
    readonly countersTableName?: string;
    /**
     * How many partitions of the counters table each key's counting spreads over (runtime/shards/layout.ts).
     * @default 1 (one best-effort item, one eventual item and the markers under the key itself)
     */
    readonly counterShards?: number;
    /**
     * The regions the counter counts in, on a global table (runtime/regions/): which one this process runs in, and
     * every member with the home. Absent: one region, every key and attribute as without regions.
     */
    readonly regions?: RegionsConfig;
    /** The attribute the client stamps its region on every item it creates with. Only read with `regions`. @default "hc_region" */
    readonly regionAttribute?: string;
}

/** The configuration fields counter-item keys depend on: the prefix, and the region this process writes as. */
export interface CounterKeyScope {
    readonly counterPrefix: string;
    readonly regions?: RegionsConfig;
}

/** The table the counter items of `config` live in. */
export function countersTable(config: Pick<CounterTableConfig, "tableName" | "countersTableName">): string {
    return config.countersTableName ?? config.tableName;
}

/** Attribute names on counter items (never on the user's items). */
export const COUNTER_ATTRIBUTES = Object.freeze({
    /** marker: "counted" | "uncounted" */
    state: "hc_state",
    /** marker: sequence number of the last stream record applied, 40-digit zero-padded S; ZERO_SEQ for non-stream writes */
    seq: "hc_seq",
    /**
     * marker: present when best-effort holds a unit for this item that no client token accounts for (set by a
     * strict backfill): N, the heal epoch the unit was added in (BOOL true on markers written before epochs, epoch 0)
     */
    beCounted: "hc_be",
    /** The life (token) whose unit a strict backfill flagged with hc_be, when the item carried one. */
    beLife: "hc_be_life",
    /**
     * best-effort: N, the heal epoch: +1 by every heal that lowers the count (it absorbed units). A backfill's unit is
     * given back by a client delete only in the epoch it was added in (runtime/shared/strict-ledger.ts).
     */
    epoch: "hc_epoch",
    /** best-effort: N, the healer's clock (epoch ms) when the current epoch opened */
    epochAt: "hc_epoch_at",
    /** marker tombstone TTL (epoch seconds): now + 48 h, only on "uncounted" */
    expiresAt: "hc_expires_at",
    /** best-effort: N, +1 on every client write */
    version: "hc_version",
    /** best-effort: N, epoch ms of the last client write */
    writtenAt: "hc_written_at",
    /**
     * best-effort: N, +1 with hc_version by every writer that keeps the ledger of recent lives (runtime/ledger/); a heal
     * of a key that is not quiet needs it equal to hc_version (no write of an earlier version since the last re-base)
     */
    ledgerVersion: "hc_lv",
    /** best-effort: N, epoch ms: every ledger entry before it was folded by a heal (runtime/ledger/ledger.ts) */
    folded: "hc_folded",
    /** best-effort: S, present while a heal is due (sparse GSI "heal-index": pk hc_heal, sk hc_due_at) */
    healShard: "hc_heal",
    /** best-effort: N, epoch ms of the first client write since the last heal (the heal index's sort key; best-effort-marks.ts) */
    dueAt: "hc_due_at",
    /** best-effort: N, +1 on every heal-index mark: a heal's write is conditional on it, so no heal wipes a mark it did not read */
    marks: "hc_marks",
    /** marker: the client token of the item life the last applied image showed, when it had one */
    life: "hc_life",
    /**
     * marker: hc_seq of the stream record that wrote hc_life (absent when a backfill wrote it): a record before
     * an INSERT of that life showed it in the table already, so the INSERT is a late put (runtime/stream/markers.ts)
     */
    lifeSeq: "hc_life_seq",
    /**
     * marker, strict mode: S, the greatest client token (UUIDv7 text, which sorts by time) of a life whose slot a
     * delete gave back through the marker: a life at or below it gets no release (runtime/shared/strict-ledger.ts)
     */
    released: "hc_released",
    /**
     * marker, strict mode: S, the greatest client token of a life whose creating call was about to repeat a put that
     * may have committed: a delete of a life at or below it takes its release through the marker (strict-ledger.ts)
     */
    pending: "hc_pending",
    /**
     * marker, strict mode, written by earlier versions only: the prefix of `hc_repeated_<token>` ("pending" or
     * "released"), one per life. Read for the life being deleted or created, and removed once no attempt of its life
     * can land (runtime/shared/strict-ledger.ts, `prunableLegacyMarks`)
     */
    repeatedPrefix: "hc_repeated_",
    /**
     * best-effort of a sharded key's shard, strict mode: N, the limit the stored quotas were set for (the key is
     * "armed" under it: runtime/shards/quotas.ts). Set on every shard together by a client's rearm; removed from every
     * shard by whoever may lift a shard above its quota (a strict backfill adding units, a heal raising a shard).
     */
    quotaLimit: "hc_limit",
    /** best-effort of a sharded key's shard, strict mode: N, the shard's quota under `hc_limit`; written and removed with it */
    quota: "hc_quota",
} as const);

/** Marker states. */
export const MARKER_STATE = Object.freeze({ counted: "counted", uncounted: "uncounted" } as const);

/** The width stream sequence numbers are padded to, so that string order is numeric order. */
export const SEQUENCE_DIGITS = 40;

/** The hc_seq of a marker written by anything but the stream: every stream record is later. */
export const ZERO_SEQ = "0".repeat(SEQUENCE_DIGITS);

/** Left-pads a stream sequence number (decimal digits) to SEQUENCE_DIGITS, so that strings compare as numbers. */
export function paddedSequence(sequenceNumber: string): string {
    if (!/^\d+$/.test(sequenceNumber) || sequenceNumber.length > SEQUENCE_DIGITS) {
        throw new RangeError(`a stream sequence number must be 1 to ${SEQUENCE_DIGITS} decimal digits (got "${sequenceNumber}")`);
    }
    return sequenceNumber.padStart(SEQUENCE_DIGITS, "0");
}

/** Shards of the sparse heal index: the healShard value is String(fnv1a(key) % HEAL_SHARDS). */
export const HEAL_SHARDS = 16;

/** How long an "uncounted" marker outlives its last record: 48 hours, twice the stream's 24-hour retention. */
export const TOMBSTONE_TTL_SECONDS = 48 * 60 * 60;

/** Sort key of the marker of resource item `id`. */
export function markerSortKey(layout: CounterKeyScope, id: string): string {
    return `${regionalCounterPrefix(layout)}item#${id}`;
}

/** The id a marker sort key belongs to, or undefined for any other sort key. */
export function markerId(layout: CounterKeyScope, sortKey: string): string | undefined {
    const prefix = `${regionalCounterPrefix(layout)}item#`;
    return sortKey.startsWith(prefix) ? sortKey.slice(prefix.length) : undefined;
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

/** Sort key of the best-effort counter item: written only by the API-side client. */
export function bestEffortSortKey(layout: CounterKeyScope): string {
    return `${regionalCounterPrefix(layout)}best-effort`;
}

/** Sort key of the eventual counter item: written only by the consumer's transactions. */
export function eventualSortKey(layout: CounterKeyScope): string {
    return `${regionalCounterPrefix(layout)}eventual`;
}

/** Environment variable names the Lambdas read their configuration from. */
export const ENV = Object.freeze({
    tableName: "HYBRID_COUNTER_TABLE_NAME",
    countersTableName: "HYBRID_COUNTER_COUNTERS_TABLE_NAME",
    partitionKey: "HYBRID_COUNTER_PARTITION_KEY",
    sortKey: "HYBRID_COUNTER_SORT_KEY",
    deletedAttribute: "HYBRID_COUNTER_DELETED_ATTRIBUTE",
    tokenAttribute: "HYBRID_COUNTER_TOKEN_ATTRIBUTE",
    counterPrefix: "HYBRID_COUNTER_PREFIX",
    countAttribute: "HYBRID_COUNTER_COUNT_ATTRIBUTE",
    /** The selection's kind ("client", "sortKeyPrefix" or "attribute") and its parameters. */
    countedItems: "HYBRID_COUNTER_COUNTED_ITEMS",
    countedSortKeyPrefix: "HYBRID_COUNTER_COUNTED_SORT_KEY_PREFIX",
    countedAttributeName: "HYBRID_COUNTER_COUNTED_ATTRIBUTE_NAME",
    countedAttributeValue: "HYBRID_COUNTER_COUNTED_ATTRIBUTE_VALUE",
    /** The settler's quiet window (s), when the component deploys one: the client checks its deadline against it. */
    healQuietWindowSeconds: "HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS",
    /** The shard count of every key's counting, when above 1 (runtime/shards/layout.ts). */
    counterShards: "HYBRID_COUNTER_COUNTER_SHARDS",
    /** The regions setting as JSON (runtime/regions/), when the counter counts per region. */
    regions: "HYBRID_COUNTER_REGIONS",
    /** The region stamp's attribute name, when not the default. */
    regionAttribute: "HYBRID_COUNTER_REGION_ATTRIBUTE",
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

/** Raised when configuration (environment or options) is missing or invalid: defined with the other errors. */
export { ConfigurationError } from "./errors";

const ATTRIBUTE_NAME_MAX_BYTES = 255;

/**
 * Checks a layout: every name non-empty, within DynamoDB's 255-byte attribute name limit, the item
 * attribute names distinct, and the selection complete. Returns the problems, each naming its field.
 */
export function layoutProblems(layout: CounterTableLayout): string[] {
    const problems: string[] = [];
    const names: Array<keyof CounterTableLayout> = ["partitionKey", "sortKey", "deletedAttribute", "tokenAttribute", "countAttribute"];
    for (const field of names) {
        const value = layout[field];
        if (typeof value !== "string" || value.length === 0) {
            problems.push(`[${field}] must be a non-empty string`);
        } else if (Buffer.byteLength(value, "utf8") > ATTRIBUTE_NAME_MAX_BYTES) {
            problems.push(`[${field}] must be at most ${ATTRIBUTE_NAME_MAX_BYTES} bytes`);
        }
    }
    const itemAttributes: Array<keyof CounterTableLayout> = ["partitionKey", "sortKey", "deletedAttribute", "tokenAttribute"];
    const seen = new Map<string, string>();
    for (const field of itemAttributes) {
        const value = layout[field] as string;
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
    problems.push(...selectionProblems(layout));
    return problems;
}

/**
 * Problems with the region stamp's attribute name (`[regionAttribute]`): a valid name, distinct from the keys, the
 * deleted flag, the token (and its delete token) and an attribute selection's attribute.
 */
export function regionAttributeProblems(layout: CounterTableLayout, regionAttribute: unknown): string[] {
    const attributes: Record<string, string | undefined> = {
        partitionKey: layout.partitionKey,
        sortKey: layout.sortKey,
        deletedAttribute: layout.deletedAttribute,
        tokenAttribute: layout.tokenAttribute,
        "tokenAttribute's delete token": `${layout.tokenAttribute}_delete`,
        ...(layout.selection?.kind === "attribute" ? { countedAttributeName: layout.selection.name } : {}),
    };
    return regionsProblems(undefined, regionAttribute, { attributes });
}

/** The most shards a key's counting may spread over (runtime/shards/layout.ts re-exports it). */
export const COUNTER_SHARDS_MAX = 16;

/**
 * Problems with a shard count, named `[counterShards]`: an integer from 1 to COUNTER_SHARDS_MAX, above 1 only
 * with a counters table of its own (a shard's partition key is not the user's to share).
 */
export function counterShardsProblems(counterShards: unknown, tableName?: string, countersTableName?: string): string[] {
    if (counterShards === undefined) {
        return [];
    }
    if (typeof counterShards !== "number" || !Number.isInteger(counterShards) || counterShards < 1 || counterShards > COUNTER_SHARDS_MAX) {
        return [`[counterShards] must be an integer from 1 to ${COUNTER_SHARDS_MAX} (got ${JSON.stringify(counterShards)})`];
    }
    if (counterShards > 1 && tableName !== undefined && (countersTableName === undefined || countersTableName === tableName)) {
        return ["[counterShards] above 1 needs a counters table of its own: a key's shards are partition keys of the counters table"];
    }
    return [];
}

/** Problems with the layout's selection, named by the component's flat args. */
export function selectionProblems(layout: CounterTableLayout): string[] {
    const selection = layout.selection as ItemSelection | undefined;
    if (selection === undefined || selection === null || typeof selection !== "object") {
        return ["[countedItems] must be set"];
    }
    switch (selection.kind) {
        case "client":
            return [];
        case "sortKeyPrefix": {
            const prefix = selection.prefix;
            if (typeof prefix !== "string" || prefix.length === 0) {
                return ['[countedSortKeyPrefix] must be a non-empty string when [countedItems] is "sortKeyPrefix"'];
            }
            if (Buffer.byteLength(prefix, "utf8") > 1024) {
                return ["[countedSortKeyPrefix] must be at most 1024 bytes"];
            }
            if (typeof layout.counterPrefix === "string" && layout.counterPrefix.length > 0 && prefix.startsWith(layout.counterPrefix)) {
                return [`[countedSortKeyPrefix] must not start with [counterPrefix] "${layout.counterPrefix}": counter items never count`];
            }
            return [];
        }
        case "attribute": {
            const problems: string[] = [];
            const { name, value } = selection;
            if (typeof name !== "string" || name.length === 0) {
                problems.push('[countedAttributeName] must be a non-empty string when [countedItems] is "attribute"');
            } else if (Buffer.byteLength(name, "utf8") > ATTRIBUTE_NAME_MAX_BYTES) {
                problems.push(`[countedAttributeName] must be at most ${ATTRIBUTE_NAME_MAX_BYTES} bytes`);
            } else if ([layout.partitionKey, layout.sortKey, layout.deletedAttribute, layout.tokenAttribute].includes(name)) {
                problems.push(`[countedAttributeName] must not be a key, [deletedAttribute] or [tokenAttribute] (got "${name}")`);
            }
            if (typeof value !== "string" || value.length === 0) {
                problems.push('[countedAttributeValue] must be a non-empty string when [countedItems] is "attribute"');
            }
            return problems;
        }
        default:
            return [`[countedItems] must be ${SELECTION_KINDS.map((k) => `"${k}"`).join(", ")}`];
    }
}

/** The flat form of a selection (component args, environment). */
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
            // Unknown kinds are reported by selectionProblems, which names [countedItems].
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

/**
 * Picks the layout fields out of `source` (component args, client options), with defaults for the
 * missing ones. Not validated: see layoutProblems and resolveLayout.
 */
export function layoutWithDefaults(source: Partial<CounterTableLayout> & FlatSelection): CounterTableLayout {
    return {
        partitionKey: source.partitionKey ?? DEFAULT_LAYOUT.partitionKey,
        sortKey: source.sortKey ?? DEFAULT_LAYOUT.sortKey,
        deletedAttribute: source.deletedAttribute ?? DEFAULT_LAYOUT.deletedAttribute,
        tokenAttribute: source.tokenAttribute ?? DEFAULT_LAYOUT.tokenAttribute,
        counterPrefix: source.counterPrefix ?? DEFAULT_LAYOUT.counterPrefix,
        countAttribute: source.countAttribute ?? DEFAULT_LAYOUT.countAttribute,
        // The selection as an object, or flat (the component's clientConfig output, which every language reads).
        selection: source.selection ?? (source.countedItems !== undefined ? selectionFromFlat(source) : DEFAULT_LAYOUT.selection),
    };
}

/** Fills defaults into a partial layout and validates it; throws ConfigurationError naming each bad field. */
export function resolveLayout(partial: Partial<CounterTableLayout> = {}): CounterTableLayout {
    const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, ...stripUndefined(partial) };
    const problems = [...removedFieldProblems(partial), ...layoutProblems(layout)];
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return layout;
}

/**
 * The environment an API needs to build its `HybridCounterClient` (read back by clientConfigFromEnv):
 * both table names and the layout. The component outputs it as `apiEnvironment`.
 */
export function clientEnvironment(config: CounterTableConfig): Record<string, string> {
    const selection = flatSelection(config.selection);
    const env: Record<string, string> = {
        [ENV.tableName]: config.tableName,
        [ENV.countersTableName]: countersTable(config),
        [ENV.partitionKey]: config.partitionKey,
        [ENV.sortKey]: config.sortKey,
        [ENV.deletedAttribute]: config.deletedAttribute,
        [ENV.tokenAttribute]: config.tokenAttribute,
        [ENV.counterPrefix]: config.counterPrefix,
        [ENV.countAttribute]: config.countAttribute,
        [ENV.countedItems]: selection.countedItems ?? "client",
    };
    if (selection.countedSortKeyPrefix !== undefined) {
        env[ENV.countedSortKeyPrefix] = selection.countedSortKeyPrefix;
    }
    if (selection.countedAttributeName !== undefined) {
        env[ENV.countedAttributeName] = selection.countedAttributeName;
    }
    if (selection.countedAttributeValue !== undefined) {
        env[ENV.countedAttributeValue] = selection.countedAttributeValue;
    }
    if ((config.counterShards ?? 1) !== 1) {
        env[ENV.counterShards] = String(config.counterShards);
    }
    if (config.regions !== undefined) {
        env[ENV.regions] = regionsJson(config.regions);
    }
    if (config.regionAttribute !== undefined) {
        env[ENV.regionAttribute] = config.regionAttribute;
    }
    return env;
}

/** The environment a Lambda handler needs, as the component sets it. */
export function handlerEnvironment(config: HandlerConfig): Record<string, string> {
    return {
        ...clientEnvironment(config),
        [ENV.fatalQueueUrl]: config.fatalQueueUrl,
        [ENV.metricsNamespace]: config.metricsNamespace,
    };
}

/**
 * Reads the tables and layout from an environment set from the component's `apiEnvironment` output:
 * `new HybridCounterClient({ ...clientConfigFromEnv(process.env), dynamodb })`. Throws
 * ConfigurationError naming each missing or bad variable.
 */
export function clientConfigFromEnv(
    env: Readonly<Record<string, string | undefined>>,
): CounterTableConfig & { readonly countersTableName: string; readonly healQuietWindowSeconds?: number } {
    const problems: string[] = [];
    const config = readConfig(env, problems);
    const windowText = env[ENV.healQuietWindowSeconds];
    const window = windowText === undefined || windowText.length === 0 ? undefined : Number(windowText);
    if (window !== undefined && (!Number.isInteger(window) || window <= 0)) {
        problems.push(`[${ENV.healQuietWindowSeconds}] must be a positive integer`);
    }
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return { ...config, countersTableName: countersTable(config), ...(window === undefined ? {} : { healQuietWindowSeconds: window }) };
}

/** Reads a handler's configuration from its environment; throws ConfigurationError naming each missing variable. */
export function handlerConfigFromEnv(env: Readonly<Record<string, string | undefined>>): HandlerConfig {
    const problems: string[] = [];
    const config = readConfig(env, problems);
    const fatalQueueUrl = env[ENV.fatalQueueUrl];
    if (fatalQueueUrl === undefined || fatalQueueUrl.length === 0) {
        problems.push(`[${ENV.fatalQueueUrl}] must be set`);
    }
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return { ...config, fatalQueueUrl: fatalQueueUrl!, metricsNamespace: env[ENV.metricsNamespace] || DEFAULT_METRICS_NAMESPACE };
}

function readConfig(env: Readonly<Record<string, string | undefined>>, problems: string[]): CounterTableConfig {
    const required = (name: string): string => {
        const value = env[name];
        if (value === undefined || value.length === 0) {
            problems.push(`[${name}] must be set`);
            return "";
        }
        return value;
    };
    problems.push(...removedEnvProblems(env));
    const tableName = required(ENV.tableName);
    const countersTableName = env[ENV.countersTableName] || tableName;
    const partial: Partial<CounterTableLayout> = {
        partitionKey: env[ENV.partitionKey] || undefined,
        sortKey: env[ENV.sortKey] || undefined,
        deletedAttribute: env[ENV.deletedAttribute] || undefined,
        tokenAttribute: env[ENV.tokenAttribute] || undefined,
        counterPrefix: env[ENV.counterPrefix] || undefined,
        countAttribute: env[ENV.countAttribute] || undefined,
        selection: selectionFromFlat({
            countedItems: env[ENV.countedItems] || undefined,
            countedSortKeyPrefix: env[ENV.countedSortKeyPrefix],
            countedAttributeName: env[ENV.countedAttributeName],
            countedAttributeValue: env[ENV.countedAttributeValue],
        }),
    };
    const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, ...stripUndefined(partial) };
    const shardsText = env[ENV.counterShards];
    const counterShards = shardsText === undefined || shardsText.length === 0 ? 1 : Number(shardsText);
    const regionAttribute = env[ENV.regionAttribute] || undefined;
    const regionsText = env[ENV.regions] || undefined;
    let regions: RegionsConfig | undefined;
    if (regionsText !== undefined) {
        try {
            regions = parseRegions(regionsText, ENV.regions, { tableName, countersTableName: env[ENV.countersTableName] || undefined });
        } catch (error) {
            problems.push(...(error as ConfigurationError).problems);
        }
    }
    for (const problem of [
        ...layoutProblems(layout),
        ...counterShardsProblems(counterShards, tableName, countersTableName),
        ...regionAttributeProblems(layout, regionAttribute),
    ]) {
        problems.push(
            problem.replace(/\[(\w+)\]/, (whole, field: string) => (field in ENV ? `[${ENV[field as keyof typeof ENV]}]` : whole)),
        );
    }
    return {
        ...layout,
        tableName,
        countersTableName,
        ...(counterShards === 1 ? {} : { counterShards }),
        ...(regions === undefined ? {} : { regions }),
        ...(regionAttribute === undefined ? {} : { regionAttribute }),
    };
}

function stripUndefined<T extends object>(value: Partial<T>): Partial<T> {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

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

/**
 * The heal-index shard (the value of `hc_heal`) a counter key's best-effort item is written with. With regions it
 * names the region too (`<region>#<n>`): the counters table replicates every region's best-effort items to every
 * member, and a region's settler lists only its own region's entries.
 */
export function healShard(key: string, scope: { readonly regions?: RegionsConfig } = {}): string {
    return healShardValue(fnv1a(key) % HEAL_SHARDS, scope);
}

/** The value of `hc_heal` of heal-index shard `shard` (0 .. HEAL_SHARDS - 1) in the process's region. */
export function healShardValue(shard: number, scope: { readonly regions?: RegionsConfig } = {}): string {
    return scope.regions === undefined ? String(shard) : `${scope.regions.current}#${shard}`;
}

/** Sort key of the settler's audit cursor in the counters table (stored under the counter key of the same name). */
export function settlerCursorSortKey(layout: CounterKeyScope): string {
    return `${regionalCounterPrefix(layout)}settler#cursor`;
}
