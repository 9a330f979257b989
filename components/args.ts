/**
 * The component's args, the one API of every language.
 *
 * Pulumi infers the multi-language schema (schema.json, served to Python, Go, C#, Java and YAML through
 * PulumiPlugin.yaml) from this file, so every arg must stay inferable by
 * `@pulumi/pulumi/provider/experimental`:
 * - a choice is an `as const` object plus its type (`BillingMode` below) or an `enum`, never an inline
 *   union such as `"a" | "b"`;
 * - arrays are mutable (`T[]`, not `readonly T[]` or `ReadonlyArray<T>`); maps are string-keyed
 *   (`Record<string, T>`); nested values are interfaces;
 * - no callbacks, no intersections, no other unions, no resources from outside `@pulumi/*`;
 * - a value users wire from another resource is `pulumi.Input<T>`; a bare `T` is a plain value.
 * Every field keeps its TSDoc: it becomes the description in every language's SDK. After changing an arg,
 * run `npm run schema:update` and commit the schema.json diff (test/schema.test.ts compares them).
 */
import type * as aws from "@pulumi/aws";
import type * as pulumi from "@pulumi/pulumi";

/** Billing mode of the table the component creates. */
export const BillingMode = {
    /** On-demand capacity. */
    PayPerRequest: "PAY_PER_REQUEST",
    /** Provisioned capacity: set `readCapacity` and `writeCapacity`. */
    Provisioned: "PROVISIONED",
} as const;
export type BillingMode = (typeof BillingMode)[keyof typeof BillingMode];

/** Instruction set of the component's Lambda functions. */
export const Architecture = {
    /** AWS Graviton (ARM). */
    Arm64: "arm64",
    /** x86-64. */
    X86_64: "x86_64",
} as const;
export type Architecture = (typeof Architecture)[keyof typeof Architecture];

/** The alarms the component creates, by the key used in `disabledAlarms` and `alarmArns`. */
export const AlarmName = {
    /** The stream consumer falls behind (IteratorAge). */
    ConsumerIteratorAge: "consumerIteratorAge",
    /** The stream consumer fails invocations (Errors). */
    ConsumerErrors: "consumerErrors",
    /** The stream consumer is throttled (Throttles). */
    ConsumerThrottles: "consumerThrottles",
    /** A batch left the stream path: the first DLQ holds messages. */
    FirstDlqDepth: "firstDlqDepth",
    /** The first DLQ's oldest message is old: the redrive must re-read its records before the stream's 24 h retention trims them. */
    FirstDlqAge: "firstDlqAge",
    /** A batch needs an operator: the fatal DLQ holds messages. */
    FatalDlqDepth: "fatalDlqDepth",
    /** The redrive function fails invocations (Errors). */
    RedriveErrors: "redriveErrors",
} as const;
export type AlarmName = (typeof AlarmName)[keyof typeof AlarmName];

/** ARN of each alarm the component created, by alarm name; a disabled alarm is absent. */
export interface HybridCounterAlarmArns {
    /** The consumer lag alarm (IteratorAge). */
    readonly consumerIteratorAge?: string;
    /** The consumer errors alarm. */
    readonly consumerErrors?: string;
    /** The consumer throttles alarm. */
    readonly consumerThrottles?: string;
    /** The first DLQ depth alarm. */
    readonly firstDlqDepth?: string;
    /** The first DLQ's oldest-message age alarm. */
    readonly firstDlqAge?: string;
    /** The fatal DLQ depth alarm. */
    readonly fatalDlqDepth?: string;
    /** The redrive errors alarm. */
    readonly redriveErrors?: string;
}

/** Where the counter items live. */
export const CounterPlacement = {
    /** A counters table of its own, `${name}-counters`, beside the user's table. */
    Separate: "separate",
    /** The user's table itself: counter items show in its queries and its stream (filtered out before the consumer). */
    SameTable: "same-table",
} as const;
export type CounterPlacement = (typeof CounterPlacement)[keyof typeof CounterPlacement];

/** Which items of a key count (runtime/shared/selection.ts). */
export const CountedItems = {
    /** Items written through `HybridCounterClient` (they carry its token attribute). */
    Client: "client",
    /** Every item whose sort key begins with `countedSortKeyPrefix`, whoever wrote it. */
    SortKeyPrefix: "sortKeyPrefix",
    /** Every item whose attribute `countedAttributeName` is the string `countedAttributeValue`, whoever wrote it. */
    Attribute: "attribute",
} as const;

export type CountedItems = (typeof CountedItems)[keyof typeof CountedItems];
/** The modes a counter's clients can use (see HybridCounterClient). */
export const CounterModeArg = { Strict: "strict", Utilization: "utilization" } as const;
export type CounterModeArg = (typeof CounterModeArg)[keyof typeof CounterModeArg];

/** What a region does in a multi-region counter (docs/design/global-tables.md). */
export const RegionRole = {
    /**
     * Counts the writes its own clients stamp with its region, and also every counted item no client stamped:
     * another writer's items and the items written before the counter was attached. Exactly one region is home.
     */
    Home: "home",
    /** Counts only the writes its own clients stamp with its region. */
    Member: "member",
} as const;
export type RegionRole = (typeof RegionRole)[keyof typeof RegionRole];

/** One region of a multi-region counter. */
export interface CounterRegionArgs {
    /** The AWS region's name, for example "us-east-1". */
    readonly region: string;
    /** What the region counts. @default "member" */
    readonly role?: RegionRole;
}

/**
 * How the regions of a replicated (global) table count: which region this deployment of the component counts
 * for, and every region that holds a replica of the table, each with its role (docs/design/global-tables.md).
 */
export interface CounterRegionsArgs {
    /** The region this deployment counts for: the region of the provider the component's resources are created with. */
    readonly current: string;
    /** Every region that holds a replica of the table and counts, each once; exactly one has the role "home". */
    readonly members: CounterRegionArgs[];
    /**
     * In a member region: the name of the counters table the home region's component created (its `countersTableName`
     * output, for example through a StackReference), which has a replica in every member. The component then attaches to
     * that table's replica in `current` instead of creating one. Not set in the home region, whose component creates it.
     * @default undefined (required in a member region)
     */
    readonly countersTableName?: pulumi.Input<string>;
}

/** The component's backfill args (part of HybridCounterComponentArgs). */
export interface BackfillArgs {
    /**
     * Run a backfill once when the component is deployed: every live item the selection counts that does not
     * carry this counter's counted flag (because it was written before the counter was attached, or by another
     * writer) is flagged, so that the stream counts it once, and its key is listed for a heal, which counts it
     * into best-effort. Creates the backfill function, its role and log group, and an invocation that starts it.
     * It resumes from its checkpoints across invocations.
     * @default false
     */
    readonly backfillOnDeploy?: pulumi.Input<boolean>;
    /**
     * The run number. A run that completed does nothing when started again; raise this to scan the table
     * once more (for example after restoring a backup).
     * @default 1
     */
    readonly backfillRun?: pulumi.Input<number>;
    /** Segments of the parallel Scan, 1..1000 (fixed for a run once it started). @default 4 */
    readonly backfillSegments?: pulumi.Input<number>;
    /**
     * Read units per second the backfill's Scan may use. For a provisioned table, leave it unset to use
     * `backfillCapacityShare` of the table's read capacity.
     * @default 500 on an on-demand table
     */
    readonly backfillReadUnitsPerSecond?: pulumi.Input<number>;
    /**
     * Write units per second the backfill may use (its flags on the user's items, its heal marks and checkpoints).
     * @default 500 on an on-demand table
     */
    readonly backfillWriteUnitsPerSecond?: pulumi.Input<number>;
    /** Share (0..1] of a provisioned table's capacity the backfill may use. @default 0.5 */
    readonly backfillCapacityShare?: pulumi.Input<number>;
    /** Timeout (s) of each backfill invocation, 60..900; the run continues in the next one. @default 900 */
    readonly backfillTimeout?: pulumi.Input<number>;
}

/**
 * Arguments of {@link HybridCounterComponent}. Every field is optional: `new HybridCounterComponent("orders", {})`
 * creates a complete, encrypted, alarmed counter pipeline with its own table.
 */
export interface HybridCounterComponentArgs extends BackfillArgs {
    // ---------------------------------------------------------------- table

    /**
     * A table this program already manages, or one it reads by name with `aws.dynamodb.Table.get`, to attach
     * the counter to instead of creating one. It must have streams enabled with `streamViewType:
     * "NEW_AND_OLD_IMAGES"` and string hash and range keys; its keys become `partitionKey` and `sortKey`
     * unless those are given (then they must match). With `counterPlacement: "same-table"` it must also have
     * the heal index: a global secondary index "heal-index" with hash key `hc_heal` (S) and range key `hc_due`
     * (N). A table whose replicas use multi-region strong consistency is refused: such a table refuses
     * transactions, and conditional writes made in two regions conflict. A mismatch rejects `ready()` with an
     * error naming `[table]`, which fails the deployment, and leaves the stream mapping disabled.
     *
     * Excludes `tableArn`, and `tableName`, `billingMode`, `readCapacity`, `writeCapacity`, `tableKmsKeyArn`
     * and `deletionProtection`, which only describe a table the component creates.
     * @default undefined (the component creates the table)
     */
    readonly table?: aws.dynamodb.Table;
    /**
     * ARN of an existing table to attach to, one this program does not manage (another stack's, or one not
     * managed by Pulumi). Its settings are read with `aws.dynamodb.getTableOutput` and checked like `table`'s.
     * Excludes `table` and the created table's args.
     * @default undefined
     */
    readonly tableArn?: pulumi.Input<string>;
    /**
     * Where the counter items live. "separate": a table `${name}-counters` the component creates beside the
     * user's table (also when it creates the user's table), so the user's queries and stream never see them.
     * "same-table": in the user's table, under `counterPrefix` (counter items then show in its queries). The
     * counter items need the heal index (a GSI on `hc_heal` and `hc_due`) and TTL on `hc_expires`: the component
     * gives a table it creates both; a table attached in this placement must already have the index (see `table`).
     * @default "separate"
     */
    readonly counterPlacement?: CounterPlacement;
    /**
     * How many partitions of the counters table each key's best-effort spreads over, 1..16: a key's best-effort
     * is one item per shard, each under a partition key of its own, so the client writes of a key hotter than one
     * partition's throughput are spread over several (the eventual counter stays one item per key, written once
     * per key per batch). Above 1 only with `counterPlacement: "separate"` (a shard's partition key must not be the
     * user's). Every function and the API's client take it (`clientConfig`, `apiEnvironment`); reading a key's
     * counters reads every shard (one Query, 1 RCU, per shard).
     * @default 1 (each key's counters are one best-effort and one eventual item, under the key itself)
     */
    readonly counterShards?: number;
    /**
     * How the regions of a replicated (global) table count (docs/design/global-tables.md): one component per region,
     * each with that region's provider, each given the same `members` and its own `current`. A write is counted once,
     * by the consumer of the region whose client created the item (the client stamps it with `regionAttribute`); items
     * nobody stamped belong to the home region. The home region's component creates the counters table with a replica
     * in every other member; a member's component attaches to it (`regions.countersTableName`). Needs the user's table
     * attached (`table` or `tableArn`, the replica in `current`; its replicas must be exactly the members) and
     * `counterPlacement: "separate"`. The backfill on deploy runs in the home region only. A table with replicas is
     * refused without this setting, naming `[table]`: each region's stream carries every region's writes, so a
     * consumer per region would count a write once per region.
     * @default undefined (one region: the table must have no replicas)
     */
    readonly regions?: CounterRegionsArgs;
    /**
     * With `regions`: the attribute (type S) the client writes on each item it creates, naming its region; the
     * region's consumer counts only the items stamped with its name. Distinct from the keys, `deletedAttribute`,
     * `tokenAttribute` and `countedAttributeName`. Only with `regions`.
     * @default "hc_region"
     */
    readonly regionAttribute?: string;
    /**
     * Physical name of the table the component creates.
     * @default undefined (Pulumi auto-names it from `${name}-table`)
     */
    readonly tableName?: pulumi.Input<string>;
    /**
     * Billing mode of the created table. `PROVISIONED` requires `readCapacity` and `writeCapacity`.
     * @default "PAY_PER_REQUEST"
     */
    readonly billingMode?: BillingMode;
    /**
     * Read capacity units of the created table; only with `billingMode: "PROVISIONED"`.
     * @default undefined
     */
    readonly readCapacity?: number;
    /**
     * Write capacity units of the created table; only with `billingMode: "PROVISIONED"`.
     * @default undefined
     */
    readonly writeCapacity?: number;
    /**
     * ARN of a customer managed KMS key for the created table. Server-side encryption is on either way.
     * @default undefined (the AWS owned key)
     */
    readonly tableKmsKeyArn?: pulumi.Input<string>;
    /**
     * Deletion protection of the created table.
     * @default false
     */
    readonly deletionProtection?: boolean;

    // ---------------------------------------------------------------- table layout (runtime/shared/config.ts)

    /** Partition key attribute (type S). @default "pk" */
    readonly partitionKey?: string;
    /** Sort key attribute (type S). @default "sk" */
    readonly sortKey?: string;
    /** Soft-delete flag the API sets. @default "deleted" */
    readonly deletedAttribute?: string;
    /** Per-write token attribute of the API-side client. @default "counter_token" */
    readonly tokenAttribute?: string;
    /** Sort-key prefix reserved for counter items. @default "#counter#" */
    readonly counterPrefix?: string;
    /** Numeric attribute holding a counter's value. @default "count" */
    readonly countAttribute?: string;
    /**
     * Which items of a key count: "client" (written through the client), "sortKeyPrefix" (needs
     * `countedSortKeyPrefix`) or "attribute" (needs `countedAttributeName` and `countedAttributeValue`).
     * The stream filter, the consumer and reconciliation all apply this one selection.
     * @default "client"
     */
    readonly countedItems?: CountedItems;
    /** With `countedItems: "sortKeyPrefix"`: the prefix of the sort keys that count. @default undefined */
    readonly countedSortKeyPrefix?: string;
    /** With `countedItems: "attribute"`: the attribute that marks an item that counts. @default undefined */
    readonly countedAttributeName?: string;
    /** With `countedItems: "attribute"`: the string value the attribute must hold. @default undefined */
    readonly countedAttributeValue?: string;
    /** Namespace of the metrics the handlers emit (CloudWatch embedded metric format). @default "HybridCounter" */
    readonly metricsNamespace?: string;

    // ---------------------------------------------------------------- functions

    /** Lambda runtime of both functions, `nodejs22.x` or newer. @default "nodejs22.x" */
    readonly lambdaRuntime?: string;
    /** Instruction set of both functions. @default "arm64" */
    readonly architecture?: Architecture;
    /** Memory (MB) of the stream consumer, 128..10240. @default 256 */
    readonly consumerMemorySize?: number;
    /** Timeout (s) of the stream consumer, 1..900. @default 60 */
    readonly consumerTimeout?: number;
    /**
     * Reserved concurrency of the stream consumer, 0..1000. A stream mapping invokes at most
     * shards x `parallelizationFactor` instances, so this is rarely needed.
     * @default undefined (unreserved)
     */
    readonly consumerReservedConcurrency?: number;
    /** Memory (MB) of the redrive function, 128..10240. @default 256 */
    readonly redriveMemorySize?: number;
    /**
     * Reserved concurrency of the redrive function, 1..1000: bounds how many first-DLQ batches are re-read
     * and counted at once, so a burst of dead-lettered batches cannot starve the API's own functions.
     * @default undefined (unreserved)
     */
    readonly redriveReservedConcurrency?: pulumi.Input<number>;
    /**
     * Timeout (s) of the redrive function, 1..900. The first DLQ's visibility timeout is six times this.
     * @default 120
     */
    readonly redriveTimeout?: number;
    /** X-Ray active tracing on both functions (adds the two X-Ray write actions to their roles). @default false */
    readonly tracing?: boolean;
    /** Retention (days) of both functions' log groups; one of the values CloudWatch Logs accepts. @default 30 */
    readonly logRetentionInDays?: number;

    // ---------------------------------------------------------------- stream event source mapping

    /** Records per consumer invocation, 1..10000. @default 100 */
    readonly batchSize?: number;
    /** Seconds to gather records before invoking, 0..300. @default 0 */
    readonly maximumBatchingWindowInSeconds?: number;
    /**
     * Concurrent batches per stream shard: only 1 is accepted. The consumer keeps its progress (the marks on each
     * key's eventual item, and the open ranges of each stream shard) per stream shard, which needs the batches of
     * one shard applied one at a time, in order (docs/design/core.md).
     * @default 1
     */
    readonly parallelizationFactor?: number;
    /**
     * Retries of a failed batch before its metadata goes to the first DLQ, 0..10000 (-1, infinite, is rejected:
     * it would block a shard for up to 24 hours).
     * @default 10
     */
    readonly maximumRetryAttempts?: number;
    /**
     * Age (s) after which a record goes to the first DLQ instead of being retried, 60..604800 (-1 is rejected).
     * Keep it well under the stream's 24-hour retention so the redrive can still re-read the batch.
     * @default 21600 (6 hours)
     */
    readonly maximumRecordAgeInSeconds?: number;

    // ---------------------------------------------------------------- queues

    /** Receives of one first-DLQ message before SQS moves it to the fatal DLQ, 1..1000. @default 5 */
    readonly redriveMaxReceiveCount?: number;
    /**
     * ARN of a customer managed KMS key for both queues (the functions get `kms:GenerateDataKey` and
     * `kms:Decrypt` on it).
     * @default undefined (SQS-managed server-side encryption)
     */
    readonly queueKmsKeyArn?: pulumi.Input<string>;

    // ---------------------------------------------------------------- alarms and dashboard

    /**
     * SNS topic ARN that receives every alarm's ALARM and OK notifications. Excludes `createAlarmTopic`.
     * @default undefined (no actions, unless `createAlarmTopic`)
     */
    readonly alarmTopicArn?: pulumi.Input<string>;
    /**
     * Create an SNS topic (encrypted with the AWS managed SNS key) for the alarms. Excludes `alarmTopicArn`.
     * @default false
     */
    readonly createAlarmTopic?: boolean;
    /** Alarms not to create. @default [] (all seven) */
    readonly disabledAlarms?: AlarmName[];
    /**
     * Consumer IteratorAge (ms, maximum over 5 minutes) above which the lag alarm fires. Must be below
     * `maximumRecordAgeInSeconds`.
     * @default 900000 (15 minutes)
     */
    readonly iteratorAgeAlarmThresholdMs?: number;
    /** Consumer Errors (sum over 5 minutes) at or above which the alarm fires. @default 1 */
    readonly consumerErrorsAlarmThreshold?: number;
    /** Consumer Throttles (sum over 5 minutes) at or above which the alarm fires. @default 1 */
    readonly consumerThrottlesAlarmThreshold?: number;
    /** First DLQ visible messages (maximum over 5 minutes) above which the alarm fires. @default 0 */
    readonly firstDlqAlarmThreshold?: number;
    /**
     * Age (s) of the oldest first-DLQ message above which the alarm fires, 60 or more and below
     * 86400 - `maximumRecordAgeInSeconds`: past that the stream (24 h) may have dropped the batch's records.
     * @default 3600 (1 hour)
     */
    readonly firstDlqAgeAlarmThresholdSeconds?: number;
    /** Fatal DLQ visible messages (maximum over 5 minutes) above which the alarm fires. @default 0 */
    readonly fatalDlqAlarmThreshold?: number;
    /** Redrive Errors (sum over 5 minutes) at or above which the alarm fires. @default 1 */
    readonly redriveErrorsAlarmThreshold?: number;
    /**
     * Name of the CloudWatch dashboard (letters, digits, `-` and `_`, at most 255).
     * @default `hybrid-counter-${project}-${stack}-${name}` with other characters replaced by `-`
     */
    readonly dashboardName?: string;

    // ---------------------------------------------------------------- settler (healing and settling)

    /**
     * Deploy the settler: a scheduled function that heals the keys listed in the heal index (their best-effort
     * is recounted from the table, the ledger's old entries go), audits a page of keys nobody listed, removes
     * the tombstones no put can reach any more, and sends threshold events the consumer could not send.
     * @default true
     */
    readonly settlerEnabled?: boolean;
    /**
     * EventBridge schedule of the settler, `rate(<n> <minute(s)|hour(s)|day(s)>)`, between 1 minute and 1 day.
     * @default "rate(5 minutes)"
     */
    readonly settlerSchedule?: string;
    /**
     * The ledger period (s), 421..86400. Every best-effort write of a client call is also recorded in the ledger
     * entry of its item's period (the period of the item's creation), so a life's best-effort is taken from the
     * ledger for one to two periods, then counted from the table by a heal (docs/design/core.md, "Best-effort:
     * the young ledger"). It must exceed `clientDeadlineMs` + a request's lifetime (a SigV4 signature is valid
     * for 5 minutes) + twice 60 s of clock skew between API hosts and the functions: 431 s at least for the
     * default 10 s deadline. Every function gets it, and `clientConfig` always carries it: a client whose
     * `deadlineMs` it does not cover is refused.
     * @default 600 (covers every client deadline up to the client's maximum of 60 s)
     */
    readonly healQuietWindowSeconds?: number;
    /**
     * The largest `deadlineMs` (ms, 100..60000) the API's clients use: the floor of `healQuietWindowSeconds` is
     * derived from it.
     * @default 10000 (the client's own default)
     */
    readonly clientDeadlineMs?: number;
    /**
     * The mode of the counter: "utilization" (best-effort never above the live items) or "strict" (best-effort
     * never below them, and a create never past a key's limit). Every function and the API's client get it
     * (`clientConfig.counterMode`, `apiEnvironment`); a client built with another mode is refused.
     * @default "utilization"
     */
    readonly counterMode?: CounterModeArg;
    /** Keys the settler heals from the heal index per run, 1..10000: bounds a run's cost. @default 200 */
    readonly settlerKeyBudget?: number;
    /** Timeout (s) of the settler, 1..900. @default 300 */
    readonly settlerTimeout?: number;

    // ---------------------------------------------------------------- limits: threshold events and usage history

    /**
     * Fractions of a key's limit, each above 0 and at most 1, none twice: when a key's count crosses one (up or
     * down), the consumer records a threshold event, sent to the threshold topic when there is one.
     * @default [0.8, 1]
     */
    readonly thresholds?: number[];
    /**
     * Create an SNS topic `${name}-thresholds` (encrypted with the AWS managed SNS key) for the threshold events;
     * the consumer, the redrive and the settler may publish to it (`thresholdTopicArn` output). Excludes
     * `thresholdTopicArn`.
     * @default false
     */
    readonly createThresholdTopic?: boolean;
    /**
     * ARN of an existing SNS topic for the threshold events; the consumer, the redrive and the settler get
     * `sns:Publish` on it. Excludes `createThresholdTopic`.
     * @default undefined (no topic: crossings are recorded on the eventual items, and not sent)
     */
    readonly thresholdTopicArn?: pulumi.Input<string>;
    /** Days of each key's usage history (one item per key and UTC day) the consumer keeps, 1..3650. @default 90 */
    readonly usageRetentionDays?: number;

    // ---------------------------------------------------------------- everything

    /** Tags for every child resource that takes tags. @default undefined */
    readonly tags?: pulumi.Input<Record<string, pulumi.Input<string>>>;
}
