/**
 * Stack configuration of the root program (`pulumi config set hybrid-counter:<key> <value>`), read into
 * HybridCounterComponent args. Pure: it takes the stack's config as the plain strings Pulumi stores and
 * returns the args, so it is tested without the Pulumi engine.
 *
 * Only the types of values are checked here; their ranges are the component's own validation
 * (which names the same keys, e.g. `[batchSize] must be between 1 and 10000`).
 */
import type { HybridCounterComponentArgs } from "../index";

/** The config namespace: the project name in Pulumi.yaml. */
export const CONFIG_NAMESPACE = "hybrid-counter";

/** The component's logical name unless `hybrid-counter:name` is set. */
export const DEFAULT_COMPONENT_NAME = "counter";

type Kind = "integer" | "boolean" | "string" | "tags" | "architecture" | "billingMode" | "counterMode" | "fractions";

/** Every key the program reads, with the type of its value. Any other key in the namespace is an error. */
export const CONFIG_KEYS = Object.freeze({
    name: "string",
    tableName: "string",
    deletionProtection: "boolean",
    billingMode: "billingMode",
    readCapacity: "integer",
    writeCapacity: "integer",
    batchSize: "integer",
    maximumBatchingWindowInSeconds: "integer",
    parallelizationFactor: "integer",
    counterShards: "integer",
    counterMode: "counterMode",
    healQuietWindowSeconds: "integer",
    maximumRetryAttempts: "integer",
    maximumRecordAgeInSeconds: "integer",
    redriveMaxReceiveCount: "integer",
    createAlarmTopic: "boolean",
    alarmTopicArn: "string",
    thresholds: "fractions",
    createThresholdTopic: "boolean",
    thresholdTopicArn: "string",
    usageRetentionDays: "integer",
    logRetentionInDays: "integer",
    tracing: "boolean",
    architecture: "architecture",
    consumerMemorySize: "integer",
    tags: "tags",
} satisfies Record<string, Kind>);

export type ConfigKey = keyof typeof CONFIG_KEYS;

export interface StackSettings {
    /** The component's logical name. */
    readonly name: string;
    readonly args: HybridCounterComponentArgs;
}

/** Raised for unknown keys and values of the wrong type; lists every problem. */
export class StackConfigError extends Error {
    constructor(readonly problems: readonly string[]) {
        super(`invalid stack configuration: ${problems.join("; ")}`);
        this.name = "StackConfigError";
    }
}

/**
 * Reads the component's args from the stack's whole configuration (`pulumi.runtime.allConfig()`: keys
 * `<namespace>:<key>`, values as stored strings; objects arrive as JSON). Keys of other namespaces
 * (`aws:region`, ...) are ignored.
 */
export function stackSettingsFromConfig(all: Readonly<Record<string, string>>): StackSettings {
    const problems: string[] = [];
    const args: Record<string, unknown> = {};
    let name = DEFAULT_COMPONENT_NAME;
    const prefix = `${CONFIG_NAMESPACE}:`;
    for (const [fullKey, raw] of Object.entries(all).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
        if (!fullKey.startsWith(prefix)) {
            continue;
        }
        const key = fullKey.slice(prefix.length);
        if (!Object.prototype.hasOwnProperty.call(CONFIG_KEYS, key)) {
            problems.push(`[${fullKey}] is not a setting of this program (known: ${Object.keys(CONFIG_KEYS).join(", ")})`);
            continue;
        }
        const parsed = parseValue(CONFIG_KEYS[key as ConfigKey], raw);
        if (!parsed.ok) {
            problems.push(`[${fullKey}] ${parsed.problem}; found ${JSON.stringify(raw)}`);
        } else if (key === "name") {
            name = parsed.value as string;
        } else {
            args[key] = parsed.value;
        }
    }
    if (problems.length > 0) {
        throw new StackConfigError(problems);
    }
    return { name, args: args as HybridCounterComponentArgs };
}

function parseValue(kind: Kind, raw: string): { ok: true; value: unknown } | { ok: false; problem: string } {
    switch (kind) {
        case "integer":
            return /^-?\d+$/.test(raw.trim()) && Number.isSafeInteger(Number(raw))
                ? { ok: true, value: Number(raw) }
                : { ok: false, problem: "must be an integer" };
        case "boolean":
            return raw === "true" || raw === "false"
                ? { ok: true, value: raw === "true" }
                : { ok: false, problem: "must be true or false" };
        case "string":
            return raw.length > 0 ? { ok: true, value: raw } : { ok: false, problem: "must not be empty" };
        case "architecture":
            return raw === "arm64" || raw === "x86_64" ? { ok: true, value: raw } : { ok: false, problem: "must be arm64 or x86_64" };
        case "billingMode":
            return raw === "PAY_PER_REQUEST" || raw === "PROVISIONED"
                ? { ok: true, value: raw }
                : { ok: false, problem: "must be PAY_PER_REQUEST or PROVISIONED" };
        case "counterMode":
            return raw === "utilization" || raw === "strict"
                ? { ok: true, value: raw }
                : { ok: false, problem: "must be utilization or strict" };
        case "fractions":
            return parseNumbers(raw);
        case "tags": {
            let value: unknown;
            try {
                value = JSON.parse(raw);
            } catch {
                return { ok: false, problem: "must be an object of tag names to strings" };
            }
            const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
            if (!isObject || Object.values(value as object).some((v) => typeof v !== "string")) {
                return { ok: false, problem: "must be an object of tag names to strings" };
            }
            return { ok: true, value };
        }
    }
}

/** A JSON list of numbers (`[0.8, 1]`); their ranges are the component's to check. */
function parseNumbers(raw: string): { ok: true; value: number[] } | { ok: false; problem: string } {
    let value: unknown;
    try {
        value = JSON.parse(raw);
    } catch {
        return { ok: false, problem: "must be a JSON list of numbers" };
    }
    return Array.isArray(value) && value.every((v) => typeof v === "number")
        ? { ok: true, value: value as number[] }
        : { ok: false, problem: "must be a JSON list of numbers" };
}
