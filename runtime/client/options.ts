/**
 * The client's options: checked once at construction, defaults filled in. The counter's settings (mode, period,
 * shards, regions, layout, tables) come from the component's `clientConfig` output, so the API and the functions the
 * component deploys run one configuration; a client given a setting that contradicts it is refused.
 */
import {
    COUNTER_MODES,
    ConfigurationError,
    DEFAULT_PERIOD_SECONDS,
    counterShardsProblems,
    layoutProblems,
    layoutWithDefaults,
    type CounterConfig,
    type CounterMode,
    type CounterTableLayout,
    type FlatSelection,
    type ItemSelection,
} from "../shared/config";
import { COUNTED_ATTRIBUTE, deleteTokenAttribute as deleteTokenOf } from "../shared/config";
import { DEFAULT_REGION_ATTRIBUTE, normalizedRegions, REGION_NAME_MAX_BYTES, regionsProblems, type RegionsConfig } from "../regions/config";
import { FOREIGN_DELETE_ATTRIBUTE } from "../regions/ownership";
import { MAX_CLIENT_DEADLINE_MS, MIN_CLIENT_DEADLINE_MS, periodCovers, smallestPeriodSeconds } from "../heal/heal-window";

/** Attempts per write: the client's whole budget (the SDK's own retries are off for its writes). */
export const DEFAULT_ATTEMPTS = 10;

/** The default client deadline: no write of one call is sent later than this after the call began. */
export const DEFAULT_DEADLINE_MS = 10_000;

/** What the constructor accepts: `clientConfig`'s fields, and the client's own options. */
export interface ClientOptionFields extends Partial<CounterTableLayout>, FlatSelection {
    readonly tableName?: unknown;
    readonly countersTableName?: unknown;
    readonly dynamodb?: unknown;
    /** The mode: `clientConfig.counterMode`; given here too, it must be the same. */
    readonly mode?: unknown;
    readonly counterMode?: unknown;
    readonly attempts?: unknown;
    readonly deadlineMs?: unknown;
    readonly healQuietWindowSeconds?: unknown;
    readonly counterShards?: unknown;
    readonly selection?: ItemSelection;
    readonly regions?: unknown;
    readonly regionAttribute?: unknown;
}

/** The client's options once checked. */
export interface ResolvedClientOptions {
    readonly config: CounterConfig;
    readonly attempts: number;
    readonly deadlineMs: number;
    /** Where a delete's claim and a soft delete store their token: `<tokenAttribute>_delete`. */
    readonly deleteTokenAttribute: string;
    /** Attribute names callers cannot set: the keys and the counter's own attributes. */
    readonly reserved: ReadonlySet<string>;
    /** Bytes a created item must leave free for the counter's later writes to it (the soft delete's). */
    readonly headroom: number;
}

/** The bytes of a client token (a UUIDv7 in its 36-character text form). */
const TOKEN_BYTES = 36;

function tableNameProblem(value: unknown, field: string): string[] {
    return typeof value === "string" && value.length >= 3 && value.length <= 255
        ? []
        : [`[${field}] must be a table name of 3 to 255 characters`];
}

/** The mode: `counterMode` (clientConfig) and `mode` (the caller) name one, or the default. */
function modeOf(options: ClientOptionFields, problems: string[]): CounterMode {
    const { mode, counterMode } = options;
    for (const [field, value] of [
        ["mode", mode],
        ["counterMode", counterMode],
    ] as const) {
        if (value !== undefined && !COUNTER_MODES.includes(value as CounterMode)) {
            problems.push(`[${field}] must be "utilization" or "strict" (got ${JSON.stringify(value)})`);
        }
    }
    if (mode !== undefined && counterMode !== undefined && mode !== counterMode) {
        problems.push(
            `[mode] must be the counter's own mode, "${String(counterMode)}" (clientConfig.counterMode), not "${String(mode)}": ` +
                "the settler heals by the deployed mode, and a client of the other mode would break its bound",
        );
    }
    return ((counterMode ?? mode ?? "utilization") as CounterMode) ?? "utilization";
}

function deadlineOf(options: ClientOptionFields, periodSeconds: number, problems: string[]): number {
    const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
    if (
        typeof deadlineMs !== "number" ||
        !Number.isInteger(deadlineMs) ||
        deadlineMs < MIN_CLIENT_DEADLINE_MS ||
        deadlineMs > MAX_CLIENT_DEADLINE_MS
    ) {
        problems.push(`[deadlineMs] must be an integer from ${MIN_CLIENT_DEADLINE_MS} to ${MAX_CLIENT_DEADLINE_MS}`);
        return DEFAULT_DEADLINE_MS;
    }
    if (!periodCovers(periodSeconds * 1000, deadlineMs)) {
        problems.push(
            `[deadlineMs] ${deadlineMs} needs [healQuietWindowSeconds] of at least ${smallestPeriodSeconds(deadlineMs)} s (deadline + 300 s request ` +
                `lifetime + twice the 60 s clock skew); the counter's is ${periodSeconds} s`,
        );
    }
    return deadlineMs;
}

function periodOf(options: ClientOptionFields, problems: string[]): number {
    const window = options.healQuietWindowSeconds ?? DEFAULT_PERIOD_SECONDS;
    if (typeof window !== "number" || !Number.isInteger(window) || window <= 0 || window > 86_400) {
        problems.push("[healQuietWindowSeconds] must be an integer from 1 to 86400 (the component's clientConfig value)");
        return DEFAULT_PERIOD_SECONDS;
    }
    return window;
}

/** The two table names: both must be set (the same name twice for the same-table placement). */
function tablesProblems(options: ClientOptionFields): string[] {
    if (options.countersTableName === undefined) {
        return [
            ...tableNameProblem(options.tableName, "tableName"),
            "[countersTableName] must be set: the counters table the component deploys (its clientConfig's countersTableName), or [tableName] again for the same-table placement",
        ];
    }
    return [...tableNameProblem(options.tableName, "tableName"), ...tableNameProblem(options.countersTableName, "countersTableName")];
}

/** The attributes a caller's item may not carry: the counter's own (the stamp and the foreign delete's with regions). */
function reservedAttributes(layout: CounterTableLayout, deleteTokenAttribute: string, regionAttribute: string | undefined): Set<string> {
    const reserved = new Set([
        layout.partitionKey,
        layout.sortKey,
        layout.deletedAttribute,
        layout.tokenAttribute,
        deleteTokenAttribute,
        COUNTED_ATTRIBUTE,
    ]);
    if (layout.selection.kind === "attribute") {
        reserved.add(layout.selection.name);
    }
    if (regionAttribute !== undefined) {
        reserved.add(regionAttribute);
        reserved.add(FOREIGN_DELETE_ATTRIBUTE);
    }
    return reserved;
}

/** Checks the constructor's options; throws ConfigurationError naming every bad field. */
export function resolveClientOptions(options: ClientOptionFields): ResolvedClientOptions {
    const problems: string[] = [];
    const layout = layoutWithDefaults(options);
    problems.push(
        ...layoutProblems(layout).map((p) =>
            p.replace(/^\[counted(\w+)\]/, (_, f: string) => `[selection.${f.charAt(0).toLowerCase()}${f.slice(1)}]`),
        ),
    );
    problems.push(...tablesProblems(options));
    const tableName = typeof options.tableName === "string" ? options.tableName : undefined;
    const countersTableName = typeof options.countersTableName === "string" ? options.countersTableName : undefined;
    problems.push(...counterShardsProblems(options.counterShards, tableName, countersTableName));
    problems.push(
        ...regionsProblems(options.regions, options.regionAttribute, {
            tableName,
            countersTableName,
            attributes: {
                partitionKey: layout.partitionKey,
                sortKey: layout.sortKey,
                deletedAttribute: layout.deletedAttribute,
                tokenAttribute: layout.tokenAttribute,
            },
        }),
    );
    const dynamodb = options.dynamodb as { send?: unknown } | undefined;
    if (!dynamodb || typeof dynamodb.send !== "function") {
        problems.push("[dynamodb] must be a DynamoDBClient");
    }
    const mode = modeOf(options, problems);
    const attempts = options.attempts ?? DEFAULT_ATTEMPTS;
    if (typeof attempts !== "number" || !Number.isInteger(attempts) || attempts < 1 || attempts > 20) {
        problems.push("[attempts] must be an integer from 1 to 20");
    }
    const periodSeconds = periodOf(options, problems);
    const deadlineMs = deadlineOf(options, periodSeconds, problems);
    const deleteTokenAttribute = deleteTokenOf(layout);
    if ([layout.partitionKey, layout.sortKey, layout.deletedAttribute].includes(deleteTokenAttribute)) {
        problems.push(`[tokenAttribute] must leave "${deleteTokenAttribute}" free for a delete's token`);
    }
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    const regions = options.regions === undefined ? undefined : normalizedRegions(options.regions as RegionsConfig);
    const regionAttribute = typeof options.regionAttribute === "string" ? options.regionAttribute : undefined;
    const reserved = reservedAttributes(
        layout,
        deleteTokenAttribute,
        regions === undefined ? undefined : (regionAttribute ?? DEFAULT_REGION_ATTRIBUTE),
    );
    return {
        config: {
            ...layout,
            tableName: tableName!,
            countersTableName: countersTableName!,
            mode,
            periodMs: periodSeconds * 1000,
            ...(options.counterShards === undefined || options.counterShards === 1
                ? {}
                : { counterShards: options.counterShards as number }),
            ...(regions === undefined ? {} : { regions }),
            ...(regionAttribute === undefined ? {} : { regionAttribute }),
        },
        attempts: attempts as number,
        deadlineMs,
        deleteTokenAttribute,
        reserved,
        headroom:
            Buffer.byteLength(layout.deletedAttribute, "utf8") +
            1 +
            Buffer.byteLength(deleteTokenAttribute, "utf8") +
            TOKEN_BYTES +
            (regions === undefined ? 0 : Buffer.byteLength(FOREIGN_DELETE_ATTRIBUTE, "utf8") + REGION_NAME_MAX_BYTES),
    };
}
