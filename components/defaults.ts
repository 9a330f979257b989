/**
 * Every default of HybridCounterComponent, in one pure module (no resources are created here).
 *
 * Facts these values rest on (AWS Lambda and DynamoDB Streams documentation):
 * - A DynamoDB stream keeps records for 24 hours; after that GetRecords raises TrimmedDataAccessException.
 * - An event source mapping left at its defaults retries a failing batch forever
 *   (MaximumRetryAttempts -1, MaximumRecordAgeInSeconds -1), blocking the shard for up to 24 hours.
 * - An SQS on-failure destination receives only the batch's metadata (shard and sequence range), so the
 *   redrive must re-read the records from the stream while they still exist.
 */
import { DEFAULT_DEADLINE_MS } from "../runtime/client/options";
import {
    DEFAULT_LAYOUT,
    DEFAULT_METRICS_NAMESPACE,
    DEFAULT_PERIOD_SECONDS,
    DEFAULT_THRESHOLDS,
    DEFAULT_USAGE_RETENTION_DAYS,
} from "../runtime/shared/config";
import { MAX_CLIENT_DEADLINE_MS, MIN_CLIENT_DEADLINE_MS, smallestPeriodSeconds } from "../runtime/heal/heal-window";
import { AlarmName, type Architecture, type BillingMode } from "./args";

export { DEFAULT_LAYOUT, DEFAULT_METRICS_NAMESPACE };

/** Type token of the component. */
export const COMPONENT_TYPE = "hybrid-counter:index:HybridCounterComponent";

/** The alarms the component creates, by the key used in `disabledAlarms` and `alarmArns`. */
export type HybridCounterAlarmName = AlarmName;

/** Every alarm name, in the order the component creates the alarms. */
export const ALARM_NAMES: readonly HybridCounterAlarmName[] = Object.freeze(Object.values(AlarmName));

export const HYBRID_COUNTER_DEFAULTS = Object.freeze({
    // Table
    billingMode: "PAY_PER_REQUEST" as BillingMode,
    deletionProtection: false,
    /** The view type the consumer needs: it reads NewImage and OldImage. */
    streamViewType: "NEW_AND_OLD_IMAGES",
    /** Counter items in a table of their own: the user's queries and stream never see them. */
    counterPlacement: "separate" as "separate" | "same-table",
    /** One shard per key: each key's counters are one best-effort and one eventual item (runtime/shards/layout.ts). */
    counterShards: 1,

    // Functions
    lambdaRuntime: "nodejs22.x",
    architecture: "arm64" as Architecture,
    consumerMemorySize: 256,
    consumerTimeout: 60,
    redriveMemorySize: 256,
    redriveTimeout: 120,
    tracing: false,
    logRetentionInDays: 30,
    metricsNamespace: DEFAULT_METRICS_NAMESPACE,

    // Stream event source mapping
    batchSize: 100,
    maximumBatchingWindowInSeconds: 0,
    /** The only factor accepted: the consumer's marks need the batches of one stream shard applied one at a time. */
    parallelizationFactor: 1,
    /**
     * Retries of a failing batch before Lambda gives up on it and sends its metadata to the first DLQ.
     * Bisecting a batch does not consume retries, so ten retries still isolates a poison record.
     */
    maximumRetryAttempts: 10,
    /**
     * Six hours: a record older than this goes to the first DLQ instead of blocking the shard. The stream
     * keeps records for 24 hours, so the redrive still has at least 18 hours to re-read the batch.
     */
    maximumRecordAgeInSeconds: 6 * 60 * 60,

    // Queues
    /** Receives of one first-DLQ message before SQS moves it to the fatal DLQ. */
    redriveMaxReceiveCount: 5,

    // Alarms
    /** 15 minutes of lag: far below the 6-hour record age at which records start to leave the stream path. */
    iteratorAgeAlarmThresholdMs: 15 * 60 * 1000,
    consumerErrorsAlarmThreshold: 1,
    consumerThrottlesAlarmThreshold: 1,
    /** Any message in the first DLQ means a batch left the stream path. */
    firstDlqAlarmThreshold: 0,
    /**
     * One hour in the first DLQ: a batch reaches it at most `maximumRecordAgeInSeconds` (6 h) after its
     * records were written, and the stream drops them at 24 h, so this leaves the redrive (or an operator)
     * about 17 hours to act before the records can no longer be re-read.
     */
    firstDlqAgeAlarmThresholdSeconds: 60 * 60,
    /** Any message in the fatal DLQ needs an operator. */
    fatalDlqAlarmThreshold: 0,
    redriveErrorsAlarmThreshold: 1,
    createAlarmTopic: false,

    // Settler (runtime/heal/settle.ts) and the ledger period (runtime/ledger/ledger.ts)
    settlerEnabled: true,
    /** Every 5 minutes: a key listed for a heal is healed within minutes of its listing. */
    settlerSchedule: "rate(5 minutes)",
    /**
     * 600 s, the ledger period. A create's writes must all land in its period's ledger entry before any reader
     * sees that period two periods old and removes the entry: the period must exceed the client deadline (10 s by
     * default) + a request's lifetime (AWS rejects a SigV4-signed request that arrives more than 5 minutes after
     * it was signed) + twice the clock skew between any two hosts (a minute of budget each):
     * 10 + 300 + 120 = 430 s, rounded up to 10 minutes, which covers the client's largest deadline (60 s) too.
     */
    healQuietWindowSeconds: DEFAULT_PERIOD_SECONDS,
    /**
     * The largest `deadlineMs` the API's clients use: the client's own default, 10 s. The period must exceed
     * it + 300 s + 120 s (runtime/heal/heal-window.ts); a client with a longer deadline than the deployed period
     * covers is refused at construction (the period travels in clientConfig).
     */
    clientDeadlineMs: DEFAULT_DEADLINE_MS,
    /** The counter's mode, in every function and in clientConfig. */
    counterMode: "utilization" as "strict" | "utilization",
    /** Keys healed from the heal index per run: bounds a run's cost. */
    settlerKeyBudget: 200,
    settlerMemorySize: 256,
    /** A run with the default budget takes seconds; five minutes leaves room for throttling. */
    settlerTimeout: 300,
    settlerErrorsAlarmThreshold: 1,

    // Limits: threshold events and usage history (runtime/limits/)
    /** The fractions of a key's limit whose crossings are announced. */
    thresholds: DEFAULT_THRESHOLDS,
    createThresholdTopic: false,
    /** Days of usage history kept per key. */
    usageRetentionDays: DEFAULT_USAGE_RETENTION_DAYS,
});

/** Fixed settings (not args) with the reason for each. */
export const FIXED = Object.freeze({
    /** Lambda handler export in each bundle. */
    handler: "index.handler",
    /** TRIM_HORIZON: LATEST can miss records written while the mapping is being created. */
    startingPosition: "TRIM_HORIZON",
    /** Split a failing batch to isolate the failing record. */
    bisectBatchOnFunctionError: true,
    /**
     * A tumbling window of 900 s (the most Lambda takes), kept for one effect: with a window, the event names its
     * stream shard (`shardId`), which the consumer's marks and open ranges are keyed by. The consumer keeps no state
     * across a window: it answers every invocation with an empty state.
     */
    tumblingWindowInSeconds: 900,
    /** The handlers return `batchItemFailures`, so only the failed part of a batch is retried. */
    functionResponseTypes: ["ReportBatchItemFailures"],
    /** 14 days, the SQS maximum: operators get the longest time to look at a failed batch. */
    queueMessageRetentionSeconds: 1_209_600,
    /**
     * AWS recommends a visibility timeout of at least six times the function timeout for an SQS event
     * source, so that a message is not received again while a retried invocation still holds it.
     */
    visibilityTimeoutPerFunctionTimeout: 6,
    /** One first-DLQ message (one stream batch) per redrive invocation, so one bad batch fails alone. */
    redriveBatchSize: 1,
    /** Text logs: the handlers write CloudWatch embedded-metric-format lines to stdout. */
    logFormat: "Text",
    /** Every alarm looks at one 5-minute period: a breach anywhere in it alarms. */
    alarmPeriodSeconds: 300,
    alarmEvaluationPeriods: 1,
});

/** The retention values CloudWatch Logs accepts. */
export const LOG_RETENTION_DAYS: readonly number[] = Object.freeze([
    1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
]);

/** Limits the validation enforces, each the AWS limit unless said otherwise. */
export const LIMITS = Object.freeze({
    batchSize: [1, 10_000],
    maximumBatchingWindowInSeconds: [0, 300],
    maximumRetryAttempts: [0, 10_000],
    maximumRecordAgeInSeconds: [60, 604_800],
    memorySize: [128, 10_240],
    /** The redrive's queue visibility timeout is six times its timeout and SQS allows at most 12 hours. */
    consumerTimeout: [1, 900],
    redriveTimeout: [1, 900],
    redriveMaxReceiveCount: [1, 1000],
    reservedConcurrency: [0, 1000],
    capacity: [1, 40_000],
    /**
     * The ledger period: above the shortest client deadline (100 ms) + 300 s SigV4 validity + 2 x 60 s skew
     * (runtime/heal/heal-window.ts; the floor for the deadline actually used, [clientDeadlineMs], is checked beside
     * it); at most a day (a young life's best-effort is held in the ledger for up to two periods).
     */
    healQuietWindowSeconds: [smallestPeriodSeconds(MIN_CLIENT_DEADLINE_MS), 86_400],
    /** The client's own range for `deadlineMs`. */
    clientDeadlineMs: [MIN_CLIENT_DEADLINE_MS, MAX_CLIENT_DEADLINE_MS],
    /** A settler run at least every minute (EventBridge's finest rate) and at most every day. */
    settlerScheduleMinutes: [1, 1_440],
    settlerKeyBudget: [1, 10_000],
    settlerTimeout: [1, 900],
    /** Days of usage history: a day at least, ten years at most. */
    usageRetentionDays: [1, 3_650],
    /** Oldest Node.js runtime the bundles target (esbuild target node22). */
    minimumNodeMajor: 22,
} as const);

/**
 * Minutes between two runs of a `rate(<n> minute|minutes|hour|hours|day|days)` schedule expression;
 * undefined for anything else (cron expressions are not accepted: their period cannot be bounded simply).
 */
export function scheduleMinutes(expression: string): number | undefined {
    const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
    if (!match) {
        return undefined;
    }
    const n = Number(match[1]);
    const unit = match[2]!.replace(/s$/, "");
    // EventBridge wants the singular unit for 1 and the plural otherwise.
    if ((n === 1) !== (match[2] === unit)) {
        return undefined;
    }
    return n * (unit === "minute" ? 1 : unit === "hour" ? 60 : 1_440);
}

/** Visibility timeout of the first DLQ for a given redrive timeout. */
export function firstDlqVisibilityTimeout(redriveTimeout: number): number {
    return redriveTimeout * FIXED.visibilityTimeoutPerFunctionTimeout;
}
