/**
 * Validation of HybridCounterComponent's args: pure, run before any resource is created. Every problem names its
 * arg as `[argName]`; they are collected and thrown once (HybridCounterArgsError).
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import {
    COUNTER_MODES,
    SELECTION_KINDS,
    counterShardsProblems,
    layoutProblems,
    layoutWithDefaults,
    selectionFromFlat,
    thresholdsProblems,
    type CounterTableLayout,
} from "../runtime/shared/config";
import { CLOCK_SKEW_MS, REQUEST_LIFETIME_MS, periodCovers, smallestPeriodSeconds } from "../runtime/heal/heal-window";
import { Architecture, BillingMode, CounterPlacement, type HybridCounterComponentArgs } from "./args";
import { COUNTER_PLACEMENTS } from "./counters-table";
import { backfillArgsProblems } from "./backfill";
import { regionsProblems } from "./regions";
import {
    ALARM_NAMES,
    HYBRID_COUNTER_DEFAULTS as D,
    LIMITS,
    LOG_RETENTION_DAYS,
    scheduleMinutes,
    type HybridCounterAlarmName,
} from "./defaults";

export { attachedTableProblems, type AttachedTableSettings } from "./attached-table";

/** Thrown once with every problem found in the args, each naming its arg as `[argName]`. */
export class HybridCounterArgsError extends pulumi.RunError {
    constructor(readonly problems: readonly string[]) {
        super(`invalid HybridCounterComponent args:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
        this.name = "HybridCounterArgsError";
    }
}

/** The args the table-creating path uses; none may be combined with `table`. */
const CREATE_TABLE_ARGS = ["tableName", "billingMode", "readCapacity", "writeCapacity", "tableKmsKeyArn", "deletionProtection"] as const;

/**
 * Args the component no longer has. A program that still sets one is refused by name rather than ignored, since
 * whoever set it expects it to matter.
 */
const REMOVED_ARGS: Readonly<Record<string, string>> = Object.freeze({
    processedAttribute: "nothing reads or writes it (the consumer keeps its progress in marks on each key's eventual item)",
    backfillStrict: "the backfill follows [counterMode], which every function reads",
});

const KMS_KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;
const KMS_KEY = "a KMS key ARN (arn:<partition>:kms:<region>:<account>:key/<key id>)";
const SNS_TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/;
const SNS_TOPIC = "an SNS topic ARN (arn:<partition>:sns:<region>:<account>:<topic>)";
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
 * or promises are checked only for what is knowable now (presence); an attached table's settings
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
    const check = new ArgsChecker(args);
    for (const [field, why] of Object.entries(REMOVED_ARGS)) {
        if (check.raw[field] !== undefined) {
            check.problems.push(`[${field}] was removed: ${why}; drop it`);
        }
    }
    tableProblems(check);
    layoutArgProblems(check);
    functionProblems(check);
    mappingProblems(check);
    alarmProblems(check);
    check.problems.push(...backfillArgsProblems(args));
    settlerProblems(check);
    limitsProblems(check);
    return check.problems;
}

/** Collects problems of one set of args, with the checks every section uses. */
class ArgsChecker {
    readonly problems: string[] = [];
    readonly raw: Record<string, unknown>;

    constructor(readonly args: HybridCounterComponentArgs) {
        this.raw = args as Record<string, unknown>;
    }

    integerBetween(key: keyof HybridCounterComponentArgs, [min, max]: readonly [number, number]): void {
        const value = this.raw[key];
        if (value === undefined) {
            return;
        }
        if (typeof value !== "number" || !Number.isInteger(value)) {
            this.problems.push(`[${key}] must be an integer`);
        } else if (value < min || value > max) {
            this.problems.push(`[${key}] must be between ${min} and ${max}`);
        }
    }

    integerAtLeast(key: keyof HybridCounterComponentArgs, min: number): void {
        const value = this.raw[key];
        if (value === undefined) {
            return;
        }
        if (typeof value !== "number" || !Number.isInteger(value)) {
            this.problems.push(`[${key}] must be an integer`);
        } else if (value < min) {
            this.problems.push(`[${key}] must be at least ${min}`);
        }
    }

    oneOf(key: keyof HybridCounterComponentArgs, allowed: readonly string[]): void {
        const value = this.raw[key];
        if (value !== undefined && !allowed.includes(value as string)) {
            this.problems.push(`[${key}] must be ${allowed.map((v) => `"${v}"`).join(" or ")}`);
        }
    }

    boolean(key: keyof HybridCounterComponentArgs): void {
        const value = this.raw[key];
        if (value !== undefined && typeof value !== "boolean") {
            this.problems.push(`[${key}] must be true or false`);
        }
    }

    /** A plain string value must match `pattern`; an Output or a promise is checked by AWS when it resolves. */
    plainMatches(key: keyof HybridCounterComponentArgs, pattern: RegExp, what: string): void {
        const value = this.raw[key];
        if (value === undefined || pulumi.Output.isInstance(value) || value instanceof Promise) {
            return;
        }
        if (typeof value !== "string" || !pattern.test(value)) {
            this.problems.push(`[${key}] must be ${what}`);
        }
    }
}

/** The table: attach (a resource or an ARN) or create, never two of them; the placement and the shards. */
function tableProblems(check: ArgsChecker): void {
    const { args, problems } = check;
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
                if (check.raw[key] !== undefined) {
                    problems.push(`[${key}] must not be set together with [${attach}]`);
                }
            }
        }
    }
    check.plainMatches("tableArn", TABLE_ARN, "a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)");
    // How the regions of a replicated table count, and what that setting needs of the other args (components/regions/).
    problems.push(...regionsProblems(args, layoutFromArgs(args)));
    check.oneOf("counterPlacement", COUNTER_PLACEMENTS);
    // The runtime's own range (every handler reads the count back with the same check); the placement is the
    // component's to name: in the same-table placement a shard's partition key would be the user's.
    const shardProblems = counterShardsProblems(check.raw.counterShards);
    problems.push(...shardProblems);
    if (shardProblems.length === 0 && (args.counterShards ?? D.counterShards) > 1 && args.counterPlacement === CounterPlacement.SameTable) {
        problems.push(
            `[counterShards] above 1 needs [counterPlacement] "separate" (got ${args.counterShards} with "same-table"): ` +
                "a key's shards are partition keys of the counters table, which in the same-table placement are the user's",
        );
    }
    check.oneOf("countedItems", SELECTION_KINDS);
    check.plainMatches("tableName", TABLE_NAME, "3 to 255 characters of letters, digits, '_', '-' and '.'");
    check.oneOf("billingMode", Object.values(BillingMode));
    check.integerBetween("readCapacity", LIMITS.capacity);
    check.integerBetween("writeCapacity", LIMITS.capacity);
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
    check.plainMatches("tableKmsKeyArn", KMS_KEY_ARN, KMS_KEY);
}

/** The layout (the runtime's own rules, so component and handlers agree) and the metrics namespace. */
function layoutArgProblems(check: ArgsChecker): void {
    const { args, problems } = check;
    // An unknown selection kind is reported with the table's args.
    if (args.countedItems === undefined || SELECTION_KINDS.includes(args.countedItems)) {
        problems.push(...layoutProblems(layoutFromArgs(args)));
    } else {
        problems.push(...layoutProblems({ ...layoutFromArgs(args), selection: { kind: "client" } }));
    }
    check.plainMatches("metricsNamespace", METRICS_NAMESPACE, "1 to 255 characters of letters, digits and . - _ / # :");
    if (typeof args.metricsNamespace === "string" && args.metricsNamespace.startsWith("AWS/")) {
        problems.push(`[metricsNamespace] must not start with "AWS/"`);
    }
}

/** The functions: runtime, architecture, memory, timeouts, concurrency, logs. */
function functionProblems(check: ArgsChecker): void {
    const { args, problems } = check;
    if (args.lambdaRuntime !== undefined) {
        const match = NODE_RUNTIME.exec(String(args.lambdaRuntime));
        if (!match || Number(match[1]) < LIMITS.minimumNodeMajor) {
            problems.push(`[lambdaRuntime] must be nodejs${LIMITS.minimumNodeMajor}.x or a newer nodejs<major>.x runtime`);
        }
    }
    check.oneOf("architecture", Object.values(Architecture));
    check.integerBetween("consumerMemorySize", LIMITS.memorySize);
    check.integerBetween("consumerTimeout", LIMITS.consumerTimeout);
    check.integerAtLeast("consumerReservedConcurrency", 1);
    check.integerBetween("redriveMemorySize", LIMITS.memorySize);
    check.integerBetween("redriveTimeout", LIMITS.redriveTimeout);
    // An Output or a promise is checked by AWS when it resolves; a plain value is checked now.
    const redriveConcurrency = check.raw.redriveReservedConcurrency;
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
}

/** The stream event source mapping and the queues. */
function mappingProblems(check: ArgsChecker): void {
    const { args, problems } = check;
    check.integerBetween("batchSize", LIMITS.batchSize);
    check.integerBetween("maximumBatchingWindowInSeconds", LIMITS.maximumBatchingWindowInSeconds);
    if (args.parallelizationFactor !== undefined && args.parallelizationFactor !== D.parallelizationFactor) {
        problems.push(
            `[parallelizationFactor] must be 1 (got ${JSON.stringify(args.parallelizationFactor)}): the consumer's marks need ` +
                "the batches of one stream shard applied one at a time",
        );
    }
    if (args.maximumRetryAttempts === -1) {
        problems.push("[maximumRetryAttempts] must be between 0 and 10000: -1 (retry forever) would block a shard for up to 24 hours");
    } else {
        check.integerBetween("maximumRetryAttempts", LIMITS.maximumRetryAttempts);
    }
    if (args.maximumRecordAgeInSeconds === -1) {
        problems.push("[maximumRecordAgeInSeconds] must be between 60 and 604800: -1 (no limit) would block a shard for up to 24 hours");
    } else {
        check.integerBetween("maximumRecordAgeInSeconds", LIMITS.maximumRecordAgeInSeconds);
    }
    check.integerBetween("redriveMaxReceiveCount", LIMITS.redriveMaxReceiveCount);
    check.plainMatches("queueKmsKeyArn", KMS_KEY_ARN, KMS_KEY);
}

/** The alarms, their topic and thresholds, and the dashboard's name. */
function alarmProblems(check: ArgsChecker): void {
    const { args, problems } = check;
    if (args.alarmTopicArn !== undefined && args.createAlarmTopic === true) {
        problems.push("[alarmTopicArn] must not be set together with [createAlarmTopic]");
    }
    check.plainMatches("alarmTopicArn", SNS_TOPIC_ARN, SNS_TOPIC);
    for (const alarm of args.disabledAlarms ?? []) {
        if (!ALARM_NAMES.includes(alarm as HybridCounterAlarmName)) {
            problems.push(`[disabledAlarms] must contain only ${ALARM_NAMES.map((n) => `"${n}"`).join(", ")} (found "${alarm}")`);
        }
    }
    check.integerAtLeast("iteratorAgeAlarmThresholdMs", 1);
    check.integerAtLeast("consumerErrorsAlarmThreshold", 1);
    check.integerAtLeast("consumerThrottlesAlarmThreshold", 1);
    check.integerAtLeast("firstDlqAlarmThreshold", 0);
    check.integerAtLeast("fatalDlqAlarmThreshold", 0);
    check.integerAtLeast("firstDlqAgeAlarmThresholdSeconds", 60);
    check.integerAtLeast("redriveErrorsAlarmThreshold", 1);
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
    check.plainMatches("dashboardName", DASHBOARD_NAME, "1 to 255 characters of letters, digits, '-' and '_'");
}

/** The settler, the mode and the ledger period. */
function settlerProblems(check: ArgsChecker): void {
    const { args, problems } = check;
    check.boolean("settlerEnabled");
    if (args.settlerSchedule !== undefined) {
        const minutes = typeof args.settlerSchedule === "string" ? scheduleMinutes(args.settlerSchedule) : undefined;
        const [min, max] = LIMITS.settlerScheduleMinutes;
        if (minutes === undefined || minutes < min || minutes > max) {
            problems.push(
                `[settlerSchedule] must be rate(<n> <minute(s)|hour(s)|day(s)>) between 1 minute and 1 day (got ${JSON.stringify(args.settlerSchedule)})`,
            );
        }
    }
    check.integerBetween("healQuietWindowSeconds", LIMITS.healQuietWindowSeconds);
    check.integerBetween("clientDeadlineMs", LIMITS.clientDeadlineMs);
    // The ledger's period must outlast every write of the slowest client call, as seen by any clock
    // (runtime/heal/heal-window.ts).
    const period = args.healQuietWindowSeconds ?? D.healQuietWindowSeconds;
    const deadline = args.clientDeadlineMs ?? D.clientDeadlineMs;
    const inRange = (value: unknown, [min, max]: readonly [number, number]) =>
        typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;
    if (
        inRange(period, LIMITS.healQuietWindowSeconds) &&
        inRange(deadline, LIMITS.clientDeadlineMs) &&
        !periodCovers(period * 1000, deadline)
    ) {
        problems.push(
            `[healQuietWindowSeconds] must be above [clientDeadlineMs] (${deadline} ms) + ${REQUEST_LIFETIME_MS / 1000} s request lifetime + ` +
                `2 x ${CLOCK_SKEW_MS / 1000} s clock skew: at least ${smallestPeriodSeconds(deadline)} (got ${period})`,
        );
    }
    check.oneOf("counterMode", COUNTER_MODES);
    check.integerBetween("settlerKeyBudget", LIMITS.settlerKeyBudget);
    check.integerBetween("settlerTimeout", LIMITS.settlerTimeout);
}

/** The limits' threshold events (their fractions and topic) and the usage history. */
function limitsProblems(check: ArgsChecker): void {
    const { args, problems } = check;
    if (args.thresholds !== undefined) {
        problems.push(...thresholdsProblems(args.thresholds));
    }
    check.boolean("createThresholdTopic");
    if (args.thresholdTopicArn !== undefined && args.createThresholdTopic === true) {
        problems.push("[thresholdTopicArn] must not be set together with [createThresholdTopic]");
    }
    check.plainMatches("thresholdTopicArn", SNS_TOPIC_ARN, SNS_TOPIC);
    check.integerBetween("usageRetentionDays", LIMITS.usageRetentionDays);
}
