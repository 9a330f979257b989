/**
 * Validation of HybridCounterComponent's args: pure, run before any resource is created.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import {
    SELECTION_KINDS,
    counterShardsProblems,
    layoutProblems,
    layoutWithDefaults,
    selectionFromFlat,
    type CounterTableLayout,
} from "../runtime/shared/config";
import { removedFieldProblems } from "../runtime/shared/removed-fields";
import { CLOCK_SKEW_MS, REQUEST_LIFETIME_MS, smallestQuietWindowSeconds, windowCovers } from "../runtime/heal/heal-window";
import { Architecture, BillingMode, CounterPlacement, type HybridCounterComponentArgs } from "./args";
import { COUNTER_PLACEMENTS } from "./counters-table";
import { backfillArgsProblems } from "./backfill";
import { regionsProblems, replicatedTableProblems, type RegionsSetting } from "./regions";
import {
    ALARM_NAMES,
    HYBRID_COUNTER_DEFAULTS as D,
    LIMITS,
    LOG_RETENTION_DAYS,
    scheduleMinutes,
    type HybridCounterAlarmName,
} from "./defaults";

/** Thrown once with every problem found in the args, each naming its arg as `[argName]`. */
export class HybridCounterArgsError extends pulumi.RunError {
    constructor(readonly problems: readonly string[]) {
        super(`invalid HybridCounterComponent args:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
        this.name = "HybridCounterArgsError";
    }
}

/** The args the table-creating path uses; none may be combined with `table`. */
const CREATE_TABLE_ARGS = ["tableName", "billingMode", "readCapacity", "writeCapacity", "tableKmsKeyArn", "deletionProtection"] as const;

const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;
const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/;
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;
const TABLE_ARN = /^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table\/[A-Za-z0-9_.-]{3,255}$/;
const DASHBOARD_NAME = /^[A-Za-z0-9_-]{1,255}$/;
const METRICS_NAMESPACE = /^[A-Za-z0-9.\-_/#:]{1,255}$/;
const NODE_RUNTIME = /^nodejs(\d+)\.x$/;

/**
 * The layout the args describe, with defaults filled in (not validated). For an attached table, the keys
 * not given in the args are the table's own (`tableKeys`).
 */
export function layoutFromArgs(
    args: HybridCounterComponentArgs,
    tableKeys: { hashKey?: string; rangeKey?: string } = {},
): CounterTableLayout {
    return layoutWithDefaults({
        partitionKey: args.partitionKey ?? tableKeys.hashKey,
        sortKey: args.sortKey ?? tableKeys.rangeKey,
        deletedAttribute: args.deletedAttribute,
        tokenAttribute: args.tokenAttribute,
        counterPrefix: args.counterPrefix,
        countAttribute: args.countAttribute,
        selection: selectionFromFlat(args),
    });
}

/**
 * Checks every arg and throws one HybridCounterArgsError listing all problems. Values that are Outputs
 * or promises are checked only for what is knowable now (presence); an attached table's stream settings
 * are checked when they resolve (see {@link attachedTableProblems}).
 */
export function validateHybridCounterArgs(args: HybridCounterComponentArgs): void {
    const problems = hybridCounterArgsProblems(args);
    if (problems.length > 0) {
        throw new HybridCounterArgsError(problems);
    }
}

/** Every problem in the args, in a stable order; empty if the args are valid. */
export function hybridCounterArgsProblems(args: HybridCounterComponentArgs): string[] {
    // An arg the component no longer has, from a program written against an older version.
    const problems: string[] = removedFieldProblems(args);
    const a = args as Record<string, unknown>;

    const integerBetween = (key: keyof HybridCounterComponentArgs, [min, max]: readonly [number, number]) => {
        const value = a[key];
        if (value === undefined) {
            return;
        }
        if (typeof value !== "number" || !Number.isInteger(value)) {
            problems.push(`[${key}] must be an integer`);
        } else if (value < min || value > max) {
            problems.push(`[${key}] must be between ${min} and ${max}`);
        }
    };
    const integerAtLeast = (key: keyof HybridCounterComponentArgs, min: number) => {
        const value = a[key];
        if (value === undefined) {
            return;
        }
        if (typeof value !== "number" || !Number.isInteger(value)) {
            problems.push(`[${key}] must be an integer`);
        } else if (value < min) {
            problems.push(`[${key}] must be at least ${min}`);
        }
    };
    const oneOf = (key: keyof HybridCounterComponentArgs, allowed: readonly string[]) => {
        const value = a[key];
        if (value !== undefined && !allowed.includes(value as string)) {
            problems.push(`[${key}] must be ${allowed.map((v) => `"${v}"`).join(" or ")}`);
        }
    };
    const plainMatches = (key: keyof HybridCounterComponentArgs, pattern: RegExp, what: string) => {
        const value = a[key];
        if (value === undefined || pulumi.Output.isInstance(value) || value instanceof Promise) {
            return;
        }
        if (typeof value !== "string" || !pattern.test(value)) {
            problems.push(`[${key}] must be ${what}`);
        }
    };

    // Table: attach (a resource or an ARN) or create, never two of them.
    if (args.table !== undefined && !aws.dynamodb.Table.isInstance(args.table)) {
        problems.push(
            `[table] must be an aws.dynamodb.Table resource of this program (got ${typeof args.table === "string" ? `the string "${args.table}"` : typeof args.table}); attach a table by ARN with [tableArn], or by name with aws.dynamodb.Table.get(name, tableName)`,
        );
    }
    if (args.table !== undefined && args.tableArn !== undefined) {
        problems.push("[tableArn] must not be set together with [table]");
    }
    for (const attach of ["table", "tableArn"] as const) {
        if (args[attach] !== undefined) {
            for (const key of CREATE_TABLE_ARGS) {
                if (a[key] !== undefined) {
                    problems.push(`[${key}] must not be set together with [${attach}]`);
                }
            }
        }
    }
    plainMatches("tableArn", TABLE_ARN, "a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)");
    // How the regions of a replicated table count, and what that setting needs of the other args (components/regions/).
    problems.push(...regionsProblems(args, layoutFromArgs(args)));
    oneOf("counterPlacement", COUNTER_PLACEMENTS);
    // The runtime's own range (every handler reads the count back with the same check); the placement is the
    // component's to name: in the same-table placement a shard's partition key would be the user's.
    const shardProblems = counterShardsProblems(a.counterShards);
    problems.push(...shardProblems);
    if (shardProblems.length === 0 && (args.counterShards ?? D.counterShards) > 1 && args.counterPlacement === CounterPlacement.SameTable) {
        problems.push(
            `[counterShards] above 1 needs [counterPlacement] "separate" (got ${args.counterShards} with "same-table"): ` +
                "a key's shards are partition keys of the counters table, which in the same-table placement are the user's",
        );
    }
    oneOf("countedItems", SELECTION_KINDS);
    plainMatches("tableName", TABLE_NAME, "3 to 255 characters of letters, digits, '_', '-' and '.'");
    oneOf("billingMode", Object.values(BillingMode));
    integerBetween("readCapacity", LIMITS.capacity);
    integerBetween("writeCapacity", LIMITS.capacity);
    if (args.table === undefined && args.tableArn === undefined) {
        const provisioned = args.billingMode === "PROVISIONED";
        for (const key of ["readCapacity", "writeCapacity"] as const) {
            if (provisioned && args[key] === undefined) {
                problems.push(`[${key}] must be set when [billingMode] is "PROVISIONED"`);
            } else if (!provisioned && args[key] !== undefined) {
                problems.push(`[${key}] must not be set unless [billingMode] is "PROVISIONED"`);
            }
        }
    }
    plainMatches("tableKmsKeyArn", KMS_KEY_ARN, "a KMS key ARN (arn:<partition>:kms:<region>:<account>:key/<key id>)");

    // Layout (the runtime's own rules, so component and handlers agree). An unknown kind is reported above.
    if (args.countedItems === undefined || SELECTION_KINDS.includes(args.countedItems)) {
        problems.push(...layoutProblems(layoutFromArgs(args)));
    } else {
        problems.push(...layoutProblems({ ...layoutFromArgs(args), selection: { kind: "client" } }));
    }
    plainMatches("metricsNamespace", METRICS_NAMESPACE, "1 to 255 characters of letters, digits and . - _ / # :");
    if (typeof args.metricsNamespace === "string" && args.metricsNamespace.startsWith("AWS/")) {
        problems.push(`[metricsNamespace] must not start with "AWS/"`);
    }

    // Functions.
    if (args.lambdaRuntime !== undefined) {
        const match = NODE_RUNTIME.exec(String(args.lambdaRuntime));
        if (!match || Number(match[1]) < LIMITS.minimumNodeMajor) {
            problems.push(`[lambdaRuntime] must be nodejs${LIMITS.minimumNodeMajor}.x or a newer nodejs<major>.x runtime`);
        }
    }
    oneOf("architecture", Object.values(Architecture));
    integerBetween("consumerMemorySize", LIMITS.memorySize);
    integerBetween("consumerTimeout", LIMITS.consumerTimeout);
    integerAtLeast("consumerReservedConcurrency", 1);
    integerBetween("redriveMemorySize", LIMITS.memorySize);
    integerBetween("redriveTimeout", LIMITS.redriveTimeout);
    // An Output or a promise is checked by AWS when it resolves; a plain value is checked now.
    const redriveConcurrency = a.redriveReservedConcurrency;
    if (redriveConcurrency !== undefined && !pulumi.Output.isInstance(redriveConcurrency) && !(redriveConcurrency instanceof Promise)) {
        const [, maxConcurrency] = LIMITS.reservedConcurrency;
        if (typeof redriveConcurrency !== "number" || !Number.isInteger(redriveConcurrency)) {
            problems.push("[redriveReservedConcurrency] must be an integer");
        } else if (redriveConcurrency < 1 || redriveConcurrency > maxConcurrency) {
            problems.push(`[redriveReservedConcurrency] must be between 1 and ${maxConcurrency}`);
        }
    }
    if (args.logRetentionInDays !== undefined && !LOG_RETENTION_DAYS.includes(args.logRetentionInDays)) {
        problems.push(`[logRetentionInDays] must be one of ${LOG_RETENTION_DAYS.join(", ")}`);
    }

    // Stream event source mapping.
    integerBetween("batchSize", LIMITS.batchSize);
    integerBetween("maximumBatchingWindowInSeconds", LIMITS.maximumBatchingWindowInSeconds);
    integerBetween("parallelizationFactor", LIMITS.parallelizationFactor);
    if (args.maximumRetryAttempts === -1) {
        problems.push("[maximumRetryAttempts] must be between 0 and 10000: -1 (retry forever) would block a shard for up to 24 hours");
    } else {
        integerBetween("maximumRetryAttempts", LIMITS.maximumRetryAttempts);
    }
    if (args.maximumRecordAgeInSeconds === -1) {
        problems.push("[maximumRecordAgeInSeconds] must be between 60 and 604800: -1 (no limit) would block a shard for up to 24 hours");
    } else {
        integerBetween("maximumRecordAgeInSeconds", LIMITS.maximumRecordAgeInSeconds);
    }

    // Queues.
    integerBetween("redriveMaxReceiveCount", LIMITS.redriveMaxReceiveCount);
    plainMatches("queueKmsKeyArn", KMS_KEY_ARN, "a KMS key ARN (arn:<partition>:kms:<region>:<account>:key/<key id>)");

    // Alarms.
    if (args.alarmTopicArn !== undefined && args.createAlarmTopic === true) {
        problems.push("[alarmTopicArn] must not be set together with [createAlarmTopic]");
    }
    plainMatches("alarmTopicArn", SNS_TOPIC_ARN, "an SNS topic ARN (arn:<partition>:sns:<region>:<account>:<topic>)");
    for (const alarm of args.disabledAlarms ?? []) {
        if (!ALARM_NAMES.includes(alarm as HybridCounterAlarmName)) {
            problems.push(`[disabledAlarms] must contain only ${ALARM_NAMES.map((n) => `"${n}"`).join(", ")} (found "${alarm}")`);
        }
    }
    integerAtLeast("iteratorAgeAlarmThresholdMs", 1);
    integerAtLeast("consumerErrorsAlarmThreshold", 1);
    integerAtLeast("consumerThrottlesAlarmThreshold", 1);
    integerAtLeast("firstDlqAlarmThreshold", 0);
    integerAtLeast("fatalDlqAlarmThreshold", 0);
    integerAtLeast("firstDlqAgeAlarmThresholdSeconds", 60);
    integerAtLeast("redriveErrorsAlarmThreshold", 1);
    const iteratorAge = args.iteratorAgeAlarmThresholdMs ?? D.iteratorAgeAlarmThresholdMs;
    const recordAge = args.maximumRecordAgeInSeconds ?? D.maximumRecordAgeInSeconds;
    const [minAge, maxAge] = LIMITS.maximumRecordAgeInSeconds;
    const recordAgeValid = Number.isInteger(recordAge) && recordAge >= minAge && recordAge <= maxAge;
    if (recordAgeValid && Number.isInteger(iteratorAge) && iteratorAge >= recordAge * 1000) {
        problems.push(
            `[iteratorAgeAlarmThresholdMs] must be below [maximumRecordAgeInSeconds] x 1000 (${recordAge * 1000}): ` +
                "records older than that leave the stream path before the lag alarm would fire",
        );
    }
    const dlqAge = args.firstDlqAgeAlarmThresholdSeconds ?? D.firstDlqAgeAlarmThresholdSeconds;
    const streamRetention = 24 * 60 * 60;
    // With a record age near or past the retention, no first-DLQ age keeps the records: nothing to check.
    if (recordAgeValid && recordAge < streamRetention - 60 && Number.isInteger(dlqAge) && dlqAge >= streamRetention - recordAge) {
        problems.push(
            `[firstDlqAgeAlarmThresholdSeconds] must be below 86400 - [maximumRecordAgeInSeconds] (${streamRetention - recordAge}): ` +
                "a batch that waits that long in the first DLQ may have left the stream's 24-hour retention before the alarm fires",
        );
    }
    plainMatches("dashboardName", DASHBOARD_NAME, "1 to 255 characters of letters, digits, '-' and '_'");
    problems.push(...backfillArgsProblems(args));

    // Settler.
    if (args.settlerEnabled !== undefined && typeof args.settlerEnabled !== "boolean") {
        problems.push("[settlerEnabled] must be true or false");
    }
    if (args.settlerSchedule !== undefined) {
        const minutes = typeof args.settlerSchedule === "string" ? scheduleMinutes(args.settlerSchedule) : undefined;
        const [min, max] = LIMITS.settlerScheduleMinutes;
        if (minutes === undefined || minutes < min || minutes > max) {
            problems.push(
                `[settlerSchedule] must be rate(<n> <minute(s)|hour(s)|day(s)>) between 1 minute and 1 day (got ${JSON.stringify(args.settlerSchedule)})`,
            );
        }
    }
    integerBetween("healQuietWindowSeconds", LIMITS.healQuietWindowSeconds);
    integerBetween("clientDeadlineMs", LIMITS.clientDeadlineMs);
    // Heal assumption A4 (runtime/heal/heal.ts): the window must outlast the last write of the slowest client call.
    const window = args.healQuietWindowSeconds ?? D.healQuietWindowSeconds;
    const deadline = args.clientDeadlineMs ?? D.clientDeadlineMs;
    const inRange = (value: unknown, [min, max]: readonly [number, number]) =>
        typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;
    if (
        inRange(window, LIMITS.healQuietWindowSeconds) &&
        inRange(deadline, LIMITS.clientDeadlineMs) &&
        !windowCovers(window * 1000, deadline)
    ) {
        problems.push(
            `[healQuietWindowSeconds] must be above [clientDeadlineMs] (${deadline} ms) + ${REQUEST_LIFETIME_MS / 1000} s request lifetime + ` +
                `${CLOCK_SKEW_MS / 1000} s clock skew: at least ${smallestQuietWindowSeconds(deadline)} (got ${window})`,
        );
    }
    oneOf("counterMode", ["strict", "utilization"]);
    integerBetween("settlerKeyBudget", LIMITS.settlerKeyBudget);
    integerBetween("settlerTimeout", LIMITS.settlerTimeout);

    return problems;
}

/** The stream and key settings of a table the user attaches, as resolved from its outputs. */
export interface AttachedTableSettings {
    readonly streamEnabled: boolean | undefined;
    readonly streamViewType: string | undefined;
    readonly hashKey: string | undefined;
    readonly rangeKey: string | undefined;
    /** The table's attribute definitions, when known (the keys' types are checked). */
    readonly attributes?: ReadonlyArray<{ readonly name: string; readonly type: string }>;
    /** The regions of the table's replicas (`replicas[].regionName`), when known: a table with any is refused. */
    readonly replicaRegions?: readonly string[];
}

/**
 * Problems with an attached table, checked when its outputs resolve (at preview for a table declared with
 * literal settings in the same program): its stream, its keys, and its replicas (a global table is refused without
 * `regions`, and with it must have replicas in exactly the member regions: components/regions/). The keys are compared only with the ones the args give: otherwise
 * the table's own keys become the layout's.
 */
export function attachedTableProblems(
    table: AttachedTableSettings,
    given: { partitionKey?: string; sortKey?: string },
    regions?: RegionsSetting,
): string[] {
    const problems: string[] = [];
    if (table.streamEnabled !== true || table.streamViewType !== D.streamViewType) {
        problems.push(
            `[table] must have streamEnabled: true and streamViewType: "${D.streamViewType}" ` +
                `(found streamEnabled: ${String(table.streamEnabled ?? false)}, streamViewType: ${JSON.stringify(table.streamViewType ?? "")})`,
        );
    }
    if (!table.hashKey) {
        problems.push("[table] must have a hash key");
    } else if (given.partitionKey !== undefined && table.hashKey !== given.partitionKey) {
        problems.push(`[table] must have hashKey "${given.partitionKey}" ([partitionKey]); found ${JSON.stringify(table.hashKey)}`);
    }
    if (!table.rangeKey) {
        problems.push("[table] must have a range key: a resource's id is its sort key; found none");
    } else if (given.sortKey !== undefined && table.rangeKey !== given.sortKey) {
        problems.push(`[table] must have rangeKey "${given.sortKey}" ([sortKey]); found ${JSON.stringify(table.rangeKey)}`);
    }
    for (const key of [table.hashKey, table.rangeKey]) {
        const type = table.attributes?.find((attribute) => attribute.name === key)?.type;
        if (key && type !== undefined && type !== "S") {
            problems.push(`[table] must have a string (S) key "${key}"; found type ${type}`);
        }
    }
    problems.push(...replicatedTableProblems(table.replicaRegions, regions));
    return problems;
}
