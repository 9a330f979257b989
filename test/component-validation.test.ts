import * as assert from "node:assert/strict";
import * as aws from "@pulumi/aws";
import {
    HybridCounterArgsError,
    HybridCounterComponent,
    attachedTableProblems,
    hybridCounterArgsProblems,
    validateHybridCounterArgs,
    type HybridCounterComponentArgs,
} from "../index";
import { assertBundlesExist, bundlePathsUnder } from "../components/bundles";
import { settle, setupPulumiMocks } from "../local/deployment/pulumi-mocks";

const RETENTIONS = "1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653";
const KMS = "a KMS key ARN (arn:<partition>:kms:<region>:<account>:key/<key id>)";

/** Two regions, one of them home: a setting of the right shape. */
const TWO_REGIONS = {
    current: "us-east-1",
    members: [
        { region: "us-east-1", role: "home" as const },
        { region: "eu-west-1", role: "member" as const },
    ],
};
/** A multi-region counter attaches to the user's global table (here by ARN): the regions cases below set it. */
const ATTACHED = { tableArn: "arn:aws:dynamodb:us-east-1:123456789012:table/orders" };

/** One bad arg each, with the exact problem it must produce. */
const CASES: Array<[string, HybridCounterComponentArgs, string[]]> = [
    ["batchSize below range", { batchSize: 0 }, ["[batchSize] must be between 1 and 10000"]],
    ["batchSize above range", { batchSize: 10_001 }, ["[batchSize] must be between 1 and 10000"]],
    ["batchSize not an integer", { batchSize: 1.5 }, ["[batchSize] must be an integer"]],
    ["batching window", { maximumBatchingWindowInSeconds: 301 }, ["[maximumBatchingWindowInSeconds] must be between 0 and 300"]],
    [
        "a parallelization factor of 2",
        { parallelizationFactor: 2 },
        ["[parallelizationFactor] must be 1 (got 2): the consumer's marks need the batches of one stream shard applied one at a time"],
    ],
    [
        "a parallelization factor of 10, Lambda's most",
        { parallelizationFactor: 10 },
        ["[parallelizationFactor] must be 1 (got 10): the consumer's marks need the batches of one stream shard applied one at a time"],
    ],
    [
        "infinite retries",
        { maximumRetryAttempts: -1 },
        ["[maximumRetryAttempts] must be between 0 and 10000: -1 (retry forever) would block a shard for up to 24 hours"],
    ],
    ["too many retries", { maximumRetryAttempts: 10_001 }, ["[maximumRetryAttempts] must be between 0 and 10000"]],
    [
        "the removed processedAttribute (a program written against an older version)",
        { processedAttribute: "counter_processed" } as HybridCounterComponentArgs,
        [
            "[processedAttribute] was removed: nothing reads or writes it (the consumer keeps its progress in marks on each key's eventual item); drop it",
        ],
    ],
    [
        "the removed backfillStrict (a program written against an older version)",
        { backfillStrict: true } as HybridCounterComponentArgs,
        ["[backfillStrict] was removed: the backfill follows [counterMode], which every function reads; drop it"],
    ],
    [
        "infinite record age",
        { maximumRecordAgeInSeconds: -1 },
        ["[maximumRecordAgeInSeconds] must be between 60 and 604800: -1 (no limit) would block a shard for up to 24 hours"],
    ],
    ["record age below range", { maximumRecordAgeInSeconds: 59 }, ["[maximumRecordAgeInSeconds] must be between 60 and 604800"]],
    ["consumer memory", { consumerMemorySize: 64 }, ["[consumerMemorySize] must be between 128 and 10240"]],
    ["redrive memory", { redriveMemorySize: 20_000 }, ["[redriveMemorySize] must be between 128 and 10240"]],
    ["consumer timeout", { consumerTimeout: 0 }, ["[consumerTimeout] must be between 1 and 900"]],
    ["redrive timeout", { redriveTimeout: 901 }, ["[redriveTimeout] must be between 1 and 900"]],
    ["reserved concurrency 0", { consumerReservedConcurrency: 0 }, ["[consumerReservedConcurrency] must be at least 1"]],
    ["log retention", { logRetentionInDays: 2 }, [`[logRetentionInDays] must be one of ${RETENTIONS}`]],
    ["old runtime", { lambdaRuntime: "nodejs20.x" }, ["[lambdaRuntime] must be nodejs22.x or a newer nodejs<major>.x runtime"]],
    ["non-node runtime", { lambdaRuntime: "python3.13" }, ["[lambdaRuntime] must be nodejs22.x or a newer nodejs<major>.x runtime"]],
    ["architecture", { architecture: "sparc" as "arm64" }, ['[architecture] must be "arm64" or "x86_64"']],
    ["billing mode", { billingMode: "ON_DEMAND" as "PROVISIONED" }, ['[billingMode] must be "PAY_PER_REQUEST" or "PROVISIONED"']],
    [
        "provisioned without capacity",
        { billingMode: "PROVISIONED" },
        [
            '[readCapacity] must be set when [billingMode] is "PROVISIONED"',
            '[writeCapacity] must be set when [billingMode] is "PROVISIONED"',
        ],
    ],
    ["capacity without provisioned", { readCapacity: 5 }, ['[readCapacity] must not be set unless [billingMode] is "PROVISIONED"']],
    [
        "capacity out of range",
        { billingMode: "PROVISIONED", readCapacity: 0, writeCapacity: 5 },
        ["[readCapacity] must be between 1 and 40000"],
    ],
    ["table name", { tableName: "ab" }, ["[tableName] must be 3 to 255 characters of letters, digits, '_', '-' and '.'"]],
    ["table key alias", { tableKmsKeyArn: "alias/orders" }, [`[tableKmsKeyArn] must be ${KMS}`]],
    ["queue key id", { queueKmsKeyArn: "1234abcd-12ab-34cd-56ef-1234567890ab" }, [`[queueKmsKeyArn] must be ${KMS}`]],
    ["empty partition key", { partitionKey: "" }, ["[partitionKey] must be a non-empty string"]],
    [
        "attribute clash",
        { deletedAttribute: "counter_token" },
        ['[tokenAttribute] must differ from [deletedAttribute] (both are "counter_token")'],
    ],
    ["unknown placement", { counterPlacement: "elsewhere" as never }, ['[counterPlacement] must be "separate" or "same-table"']],
    ["no counter shards", { counterShards: 0 }, ["[counterShards] must be an integer from 1 to 16 (got 0)"]],
    ["more counter shards than 16", { counterShards: 17 }, ["[counterShards] must be an integer from 1 to 16 (got 17)"]],
    ["a fraction of a counter shard", { counterShards: 2.5 }, ["[counterShards] must be an integer from 1 to 16 (got 2.5)"]],
    ["counter shards as a string", { counterShards: "4" as never }, ['[counterShards] must be an integer from 1 to 16 (got "4")']],
    [
        "counter shards in the user's table",
        { counterShards: 4, counterPlacement: "same-table" },
        [
            '[counterShards] above 1 needs [counterPlacement] "separate" (got 4 with "same-table"): ' +
                "a key's shards are partition keys of the counters table, which in the same-table placement are the user's",
        ],
    ],
    ["unknown selection", { countedItems: "all" as never }, ['[countedItems] must be "client" or "sortKeyPrefix" or "attribute"']],
    [
        "prefix selection without a prefix",
        { countedItems: "sortKeyPrefix" },
        ['[countedSortKeyPrefix] must be a non-empty string of at most 1024 bytes when [countedItems] is "sortKeyPrefix"'],
    ],
    [
        "prefix selection under the counter prefix",
        { countedItems: "sortKeyPrefix", countedSortKeyPrefix: "#counter#x" },
        ['[countedSortKeyPrefix] must not overlap [counterPrefix] "#counter#": counter items never count'],
    ],
    [
        "attribute selection without its attribute",
        { countedItems: "attribute", countedAttributeValue: "order" },
        ['[countedAttributeName] must be an attribute name of 1 to 255 bytes when [countedItems] is "attribute"'],
    ],
    [
        "attribute selection on the deleted flag",
        { countedItems: "attribute", countedAttributeName: "deleted", countedAttributeValue: "no" },
        ['[countedAttributeName] must not be a key or one of the counter\'s own attributes (got "deleted")'],
    ],
    [
        "attribute selection on the counted flag",
        { countedItems: "attribute", countedAttributeName: "hc_counted", countedAttributeValue: "yes" },
        ['[countedAttributeName] must not be a key or one of the counter\'s own attributes (got "hc_counted")'],
    ],
    [
        "table ARN",
        { tableArn: "orders" },
        ["[tableArn] must be a DynamoDB table ARN (arn:<partition>:dynamodb:<region>:<account>:table/<name>)"],
    ],
    ["AWS namespace", { metricsNamespace: "AWS/Lambda" }, ['[metricsNamespace] must not start with "AWS/"']],
    [
        "namespace characters",
        { metricsNamespace: "my counter" },
        ["[metricsNamespace] must be 1 to 255 characters of letters, digits and . - _ / # :"],
    ],
    [
        "topic passed and created",
        { alarmTopicArn: "arn:aws:sns:us-east-1:123456789012:ops", createAlarmTopic: true },
        ["[alarmTopicArn] must not be set together with [createAlarmTopic]"],
    ],
    [
        "topic not an ARN",
        { alarmTopicArn: "ops" },
        ["[alarmTopicArn] must be an SNS topic ARN (arn:<partition>:sns:<region>:<account>:<topic>)"],
    ],
    [
        "unknown alarm",
        { disabledAlarms: ["consumerLag" as "consumerErrors"] },
        [
            '[disabledAlarms] must contain only "consumerIteratorAge", "consumerErrors", "consumerThrottles", "firstDlqDepth", ' +
                '"firstDlqAge", "fatalDlqDepth", "redriveErrors" (found "consumerLag")',
        ],
    ],
    ["iterator age threshold 0", { iteratorAgeAlarmThresholdMs: 0 }, ["[iteratorAgeAlarmThresholdMs] must be at least 1"]],
    ["errors threshold 0", { consumerErrorsAlarmThreshold: 0 }, ["[consumerErrorsAlarmThreshold] must be at least 1"]],
    ["throttles threshold 0", { consumerThrottlesAlarmThreshold: 0 }, ["[consumerThrottlesAlarmThreshold] must be at least 1"]],
    ["redrive errors threshold 0", { redriveErrorsAlarmThreshold: 0 }, ["[redriveErrorsAlarmThreshold] must be at least 1"]],
    ["first DLQ threshold negative", { firstDlqAlarmThreshold: -1 }, ["[firstDlqAlarmThreshold] must be at least 0"]],
    ["fatal DLQ threshold fractional", { fatalDlqAlarmThreshold: 0.5 }, ["[fatalDlqAlarmThreshold] must be an integer"]],
    [
        "lag alarm after records leave the stream path",
        { maximumRecordAgeInSeconds: 600, iteratorAgeAlarmThresholdMs: 600_000 },
        [
            "[iteratorAgeAlarmThresholdMs] must be below [maximumRecordAgeInSeconds] x 1000 (600000): " +
                "records older than that leave the stream path before the lag alarm would fire",
        ],
    ],
    [
        "dashboard name",
        { dashboardName: "orders counter" },
        ["[dashboardName] must be 1 to 255 characters of letters, digits, '-' and '_'"],
    ],
    ["receive count", { redriveMaxReceiveCount: 0 }, ["[redriveMaxReceiveCount] must be between 1 and 1000"]],
    ["redrive reserved concurrency 0", { redriveReservedConcurrency: 0 }, ["[redriveReservedConcurrency] must be between 1 and 1000"]],
    ["redrive reserved concurrency 2.5", { redriveReservedConcurrency: 2.5 }, ["[redriveReservedConcurrency] must be an integer"]],
    [
        "first DLQ age alarm under a minute",
        { firstDlqAgeAlarmThresholdSeconds: 59 },
        ["[firstDlqAgeAlarmThresholdSeconds] must be at least 60"],
    ],
    [
        "first DLQ age alarm after the stream drops the records",
        { maximumRecordAgeInSeconds: 21_600, firstDlqAgeAlarmThresholdSeconds: 64_800 },
        [
            "[firstDlqAgeAlarmThresholdSeconds] must be below 86400 - [maximumRecordAgeInSeconds] (64800): " +
                "a batch that waits that long in the first DLQ may have left the stream's 24-hour retention before the alarm fires",
        ],
    ],
    [
        // Below the floor of the shortest deadline: 100 ms + 300 s lifetime + 2 x 60 s skew = 420.1 s.
        "a ledger period shorter than a request can live",
        { healQuietWindowSeconds: 420 },
        ["[healQuietWindowSeconds] must be between 421 and 86400"],
    ],
    [
        // The default 10 s deadline + 300 s lifetime + 2 x 60 s skew = 430 s: the period must be longer.
        "a ledger period that does not cover the default client deadline",
        { healQuietWindowSeconds: 430 },
        [
            "[healQuietWindowSeconds] must be above [clientDeadlineMs] (10000 ms) + 300 s request lifetime + 2 x 60 s clock skew: at least 431 (got 430)",
        ],
    ],
    [
        "a ledger period that does not cover the clients' largest deadline",
        { healQuietWindowSeconds: 480, clientDeadlineMs: 60_000 },
        [
            "[healQuietWindowSeconds] must be above [clientDeadlineMs] (60000 ms) + 300 s request lifetime + 2 x 60 s clock skew: at least 481 (got 480)",
        ],
    ],
    ["client deadline above the client's range", { clientDeadlineMs: 60_001 }, ["[clientDeadlineMs] must be between 100 and 60000"]],
    [
        "settler schedule as a cron expression",
        { settlerSchedule: "cron(0/5 * * * ? *)" },
        ['[settlerSchedule] must be rate(<n> <minute(s)|hour(s)|day(s)>) between 1 minute and 1 day (got "cron(0/5 * * * ? *)")'],
    ],
    [
        "settler schedule longer than a day",
        { settlerSchedule: "rate(2 days)" },
        ['[settlerSchedule] must be rate(<n> <minute(s)|hour(s)|day(s)>) between 1 minute and 1 day (got "rate(2 days)")'],
    ],
    [
        "settler schedule with a singular unit for many",
        { settlerSchedule: "rate(5 minute)" },
        ['[settlerSchedule] must be rate(<n> <minute(s)|hour(s)|day(s)>) between 1 minute and 1 day (got "rate(5 minute)")'],
    ],
    ["counter mode", { counterMode: "exact" as never }, ['[counterMode] must be "utilization" or "strict"']],
    ["settler key budget", { settlerKeyBudget: 0 }, ["[settlerKeyBudget] must be between 1 and 10000"]],
    ["settler timeout", { settlerTimeout: 901 }, ["[settlerTimeout] must be between 1 and 900"]],
    ["settler switch", { settlerEnabled: "yes" as never }, ["[settlerEnabled] must be true or false"]],
    [
        "a threshold above the limit",
        { thresholds: [0.5, 1.5] },
        ["[thresholds] must be fractions of the limit, each above 0 and at most 1 (got [0.5,1.5])"],
    ],
    ["a threshold of 0", { thresholds: [0] }, ["[thresholds] must be fractions of the limit, each above 0 and at most 1 (got [0])"]],
    ["a threshold named twice", { thresholds: [0.8, 0.8, 1] }, ["[thresholds] must not name a fraction twice"]],
    [
        "a threshold topic passed and created",
        { thresholdTopicArn: "arn:aws:sns:us-east-1:123456789012:limits", createThresholdTopic: true },
        ["[thresholdTopicArn] must not be set together with [createThresholdTopic]"],
    ],
    [
        "a threshold topic that is not an ARN",
        { thresholdTopicArn: "limits" },
        ["[thresholdTopicArn] must be an SNS topic ARN (arn:<partition>:sns:<region>:<account>:<topic>)"],
    ],
    [
        "a threshold topic switch that is not a boolean",
        { createThresholdTopic: "yes" as never },
        ["[createThresholdTopic] must be true or false"],
    ],
    ["no day of usage history", { usageRetentionDays: 0 }, ["[usageRetentionDays] must be between 1 and 3650"]],
    ["more than ten years of usage history", { usageRetentionDays: 3_651 }, ["[usageRetentionDays] must be between 1 and 3650"]],
    ["a fraction of a day of usage history", { usageRetentionDays: 1.5 }, ["[usageRetentionDays] must be an integer"]],
    // A multi-region setting: its shape is checked in full (what it needs of the other args: test/regions-component.test.ts).
    [
        "a multi-region setting without the user's table",
        { regions: TWO_REGIONS },
        [
            "[regions] needs the user's global table attached with [table] or [tableArn] (the replica in [regions.current]): " +
                "the component does not create a replicated table",
        ],
    ],
    [
        "regions that are not an object",
        { ...ATTACHED, regions: ["us-east-1"] as never },
        ["[regions] must be an object { current, members }"],
    ],
    [
        "one member region",
        { ...ATTACHED, regions: { current: "us-east-1", members: [{ region: "us-east-1", role: "home" }] } },
        [
            "[regions.members] must list at least 2 regions, each { region, role }: one region is not a multi-region counter " +
                "(leave [regions] unset for a table without replicas)",
        ],
    ],
    [
        "a current region that is not a region name",
        { ...ATTACHED, regions: { ...TWO_REGIONS, current: "virginia" } },
        ['[regions.current] must be an AWS region name such as "us-east-1" (got "virginia")'],
    ],
    [
        "a current region that is not a member",
        { ...ATTACHED, regions: { ...TWO_REGIONS, current: "ap-south-1" } },
        ['[regions.current] must be one of [regions.members] (got "ap-south-1", members are us-east-1, eu-west-1)'],
    ],
    [
        "no home region",
        { ...ATTACHED, regions: { current: "us-east-1", members: [{ region: "us-east-1" }, { region: "eu-west-1", role: "member" }] } },
        [
            '[regions.members] must give exactly one region the role "home" (found 0): ' +
                "the home region counts the items no client stamped with its region",
        ],
    ],
    [
        "two home regions",
        {
            ...ATTACHED,
            regions: {
                current: "us-east-1",
                members: [
                    { region: "us-east-1", role: "home" },
                    { region: "eu-west-1", role: "home" },
                ],
            },
        },
        [
            '[regions.members] must give exactly one region the role "home" (found 2): ' +
                "the home region counts the items no client stamped with its region",
        ],
    ],
    [
        "a region listed twice, an unknown role and a bad region name",
        {
            ...ATTACHED,
            regions: {
                current: "us-east-1",
                members: [
                    { region: "us-east-1", role: "home" },
                    { region: "us-east-1", role: "member" },
                    { region: "eu-west-1", role: "primary" as never },
                    { region: "Europe" },
                ],
            },
        },
        [
            '[regions.members[1].region] must name each region once ("us-east-1" is listed twice)',
            '[regions.members[2].role] must be "home" or "member" (got "primary")',
            '[regions.members[3].region] must be an AWS region name such as "us-east-1" (got "Europe")',
        ],
    ],
];

function expectArgsError(problems: string[]) {
    return (error: unknown) => {
        assert.ok(error instanceof HybridCounterArgsError);
        assert.deepEqual(error.problems, problems);
        assert.equal(error.message, `invalid HybridCounterComponent args:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
        return true;
    };
}

describe("HybridCounterComponent validation", () => {
    for (const [title, args, problems] of CASES) {
        it(`rejects ${title} with ${problems.join(" / ")} and creates nothing`, async () => {
            // Prepare
            const recorder = await setupPulumiMocks();

            // Act / Assess
            assert.throws(() => new HybridCounterComponent("orders", args), expectArgsError(problems));
            await settle(recorder);
            assert.deepEqual(recorder.resources, []);
        });
    }

    it("collects every problem and throws once", () => {
        // Prepare
        const args: HybridCounterComponentArgs = { batchSize: 0, parallelizationFactor: 0, maximumRetryAttempts: -1 };

        // Act / Assess
        assert.throws(
            () => validateHybridCounterArgs(args),
            expectArgsError([
                "[batchSize] must be between 1 and 10000",
                "[parallelizationFactor] must be 1 (got 0): the consumer's marks need the batches of one stream shard applied one at a time",
                "[maximumRetryAttempts] must be between 0 and 10000: -1 (retry forever) would block a shard for up to 24 hours",
            ]),
        );
    });

    it("accepts the empty args and every boundary value", () => {
        // Prepare
        const low: HybridCounterComponentArgs = {
            batchSize: 1,
            maximumBatchingWindowInSeconds: 0,
            parallelizationFactor: 1,
            counterShards: 1,
            maximumRetryAttempts: 0,
            maximumRecordAgeInSeconds: 60,
            iteratorAgeAlarmThresholdMs: 59_999,
            consumerMemorySize: 128,
            consumerTimeout: 1,
            redriveTimeout: 1,
            redriveMaxReceiveCount: 1,
            redriveReservedConcurrency: 1,
            firstDlqAgeAlarmThresholdSeconds: 60,
            healQuietWindowSeconds: 421,
            clientDeadlineMs: 100,
            settlerSchedule: "rate(1 minute)",
            settlerKeyBudget: 1,
            settlerTimeout: 1,
            thresholds: [Number.MIN_VALUE],
            usageRetentionDays: 1,
            createThresholdTopic: false,
        };
        const high: HybridCounterComponentArgs = {
            batchSize: 10_000,
            maximumBatchingWindowInSeconds: 300,
            parallelizationFactor: 1,
            counterShards: 16,
            maximumRetryAttempts: 10_000,
            maximumRecordAgeInSeconds: 604_800,
            consumerMemorySize: 10_240,
            consumerTimeout: 900,
            redriveTimeout: 900,
            redriveMaxReceiveCount: 1000,
            redriveReservedConcurrency: 1000,
            lambdaRuntime: "nodejs24.x",
            healQuietWindowSeconds: 86_400,
            clientDeadlineMs: 60_000,
            settlerSchedule: "rate(1 day)",
            settlerKeyBudget: 10_000,
            settlerTimeout: 900,
            counterMode: "strict",
            settlerEnabled: false,
            thresholds: [0.25, 0.5, 0.75, 1],
            usageRetentionDays: 3_650,
            createThresholdTopic: true,
        };

        // Act / Assess
        assert.deepEqual(hybridCounterArgsProblems({}), []);
        assert.deepEqual(hybridCounterArgsProblems(low), []);
        assert.deepEqual(hybridCounterArgsProblems(high), []);
        // One shard is today's layout, in either placement.
        assert.deepEqual(hybridCounterArgsProblems({ counterShards: 1, counterPlacement: "same-table" }), []);
        assert.deepEqual(hybridCounterArgsProblems({ counterShards: 16, counterPlacement: "separate" }), []);
    });

    it("rejects create-table args next to an attached table, creating nothing but the user's table", async () => {
        // Prepare
        const recorder = await setupPulumiMocks();
        const table = new aws.dynamodb.Table("user-table", {
            hashKey: "pk",
            rangeKey: "sk",
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
        });
        const args: HybridCounterComponentArgs = {
            table,
            tableName: "orders",
            billingMode: "PROVISIONED",
            readCapacity: 5,
            writeCapacity: 5,
            tableKmsKeyArn: "arn:aws:kms:us-east-1:123456789012:key/abc",
            deletionProtection: true,
        };

        // Act / Assess
        assert.throws(
            () => new HybridCounterComponent("orders", args),
            expectArgsError([
                "[tableName] must not be set together with [table]",
                "[billingMode] must not be set together with [table]",
                "[readCapacity] must not be set together with [table]",
                "[writeCapacity] must not be set together with [table]",
                "[tableKmsKeyArn] must not be set together with [table]",
                "[deletionProtection] must not be set together with [table]",
            ]),
        );
        await settle(recorder);
        assert.deepEqual(
            recorder.resources.map((r) => `${r.type} ${r.name}`),
            ["aws:dynamodb/table:Table user-table"],
        );
    });

    it("checks an attached table's stream and keys", () => {
        // Prepare
        const layout = { partitionKey: "pk", sortKey: "sk" };

        // Act
        const good = attachedTableProblems(
            { streamEnabled: true, streamViewType: "NEW_AND_OLD_IMAGES", hashKey: "pk", rangeKey: "sk" },
            layout,
        );
        const bad = attachedTableProblems({ streamEnabled: true, streamViewType: "KEYS_ONLY", hashKey: "id", rangeKey: undefined }, layout);
        const keysFromTable = attachedTableProblems(
            { streamEnabled: true, streamViewType: "NEW_AND_OLD_IMAGES", hashKey: "tenant", rangeKey: "order" },
            {},
        );

        // Assess
        assert.deepEqual(good, []);
        assert.deepEqual(bad, [
            '[table] must have streamEnabled: true and streamViewType: "NEW_AND_OLD_IMAGES" (found streamEnabled: true, streamViewType: "KEYS_ONLY")',
            '[table] must have hashKey "pk" ([partitionKey]); found "id"',
            "[table] must have a range key: a resource's id is its sort key; found none",
        ]);
        assert.deepEqual(keysFromTable, []);
    });

    it("refuses an attached table with replicas, naming [table] and the replicas' regions", () => {
        // Prepare: a happy-path table, then the same table with replicas (one property changed).
        const table = { streamEnabled: true, streamViewType: "NEW_AND_OLD_IMAGES", hashKey: "pk", rangeKey: "sk" };

        // Act
        const unreplicated = attachedTableProblems({ ...table, replicaRegions: [] }, {});
        const replicated = attachedTableProblems({ ...table, replicaRegions: ["us-west-2", "eu-west-1"] }, {});

        // Assess
        assert.deepEqual(unreplicated, []);
        assert.deepEqual(replicated, [
            '[table] must not have replicas (found "us-west-2", "eu-west-1") unless [regions] says how regions count: it is a ' +
                "global table, whose stream in each region carries every region's writes, so a consumer per region would count each " +
                "write once per region, and two regions' updates of one counter item would lose one to last-writer-wins. Set " +
                "[regions] in every region's component; see docs/design/global-tables.md",
        ]);
    });

    it("with [regions], takes a table whose regions are exactly the members, and names the members that differ", () => {
        // Prepare: the table as read in us-east-1, its replicas in the two other members.
        const table = { streamEnabled: true, streamViewType: "NEW_AND_OLD_IMAGES", hashKey: "pk", rangeKey: "sk" };
        const setting = {
            current: "us-east-1",
            members: [
                { region: "us-east-1", role: "home" as const },
                { region: "eu-west-1", role: "member" as const },
                { region: "us-west-2", role: "member" as const },
            ],
        };

        // Act
        const exact = attachedTableProblems({ ...table, replicaRegions: ["eu-west-1", "us-west-2"] }, {}, setting);
        const listingItself = attachedTableProblems({ ...table, replicaRegions: ["us-east-1", "eu-west-1", "us-west-2"] }, {}, setting);
        const oneMissing = attachedTableProblems({ ...table, replicaRegions: ["eu-west-1"] }, {}, setting);
        const oneMore = attachedTableProblems({ ...table, replicaRegions: ["eu-west-1", "us-west-2", "ap-south-1"] }, {}, setting);

        // Assess
        assert.deepEqual([exact, listingItself], [[], []]);
        assert.deepEqual(oneMissing, ['[regions.members] lists "us-west-2", where [table] has no replica (its replicas: "eu-west-1")']);
        assert.deepEqual(oneMore, [
            "[regions.members] must list every region of [table]'s replicas: \"ap-south-1\" would be counted by no region's consumer of its own",
        ]);
    });

    it("refuses a table whose replicas use multi-region strong consistency, with [regions] too, naming [table]", () => {
        // Prepare: the happy-path table of the three-region setting below, then its replicas in strong consistency.
        const table = {
            streamEnabled: true,
            streamViewType: "NEW_AND_OLD_IMAGES",
            hashKey: "pk",
            rangeKey: "sk",
            replicaRegions: ["eu-west-1", "us-west-2"],
        };
        const setting = {
            current: "us-east-1",
            members: [
                { region: "us-east-1", role: "home" as const },
                { region: "eu-west-1", role: "member" as const },
                { region: "us-west-2", role: "member" as const },
            ],
        };

        // Act
        const eventual = attachedTableProblems({ ...table, strongReplicaRegions: [] }, {}, setting);
        const strong = attachedTableProblems({ ...table, strongReplicaRegions: ["eu-west-1", "us-west-2"] }, {}, setting);

        // Assess
        assert.deepEqual(eventual, []);
        assert.deepEqual(strong, [
            '[table] must not use multi-region strong consistency (replicas with consistencyMode "STRONG" in "eu-west-1", "us-west-2"): ' +
                "such a table refuses transactions, and conditional writes made in two regions at once conflict; use multi-region " +
                "eventual consistency with [regions] (see docs/design/global-tables.md)",
        ]);
    });

    it("in the same-table placement, takes a table with the heal index (either key spelling) and refuses one without it", () => {
        // Prepare
        const table = { streamEnabled: true, streamViewType: "NEW_AND_OLD_IMAGES", hashKey: "pk", rangeKey: "sk" };
        const attributes = [
            { name: "pk", type: "S" },
            { name: "sk", type: "S" },
            { name: "hc_heal", type: "S" },
            { name: "hc_due", type: "N" },
        ];
        const byKeys = { name: "heal-index", hashKey: "hc_heal", rangeKey: "hc_due" };
        const bySchemas = {
            name: "heal-index",
            keySchemas: [
                { attributeName: "hc_heal", keyType: "HASH" },
                { attributeName: "hc_due", keyType: "RANGE" },
            ],
        };
        const refusal = (found: string) =>
            '[table] must have the heal index in the same-table placement: a global secondary index "heal-index" with hash key "hc_heal" (S) ' +
            `and range key "hc_due" (N), where the settler finds the keys listed for a heal (found ${found}); add it to the table, ` +
            'or use [counterPlacement] "separate"';

        // Act
        const problems = (indexes: object[], attrs = attributes, sameTable = true) =>
            attachedTableProblems({ ...table, attributes: attrs, globalSecondaryIndexes: indexes }, { sameTable });

        // Assess
        assert.deepEqual(problems([byKeys]), []);
        assert.deepEqual(problems([bySchemas]), []);
        assert.deepEqual(problems([], attributes, false), [], "a separate counters table carries the index");
        assert.deepEqual(problems([]), [refusal("no index")]);
        assert.deepEqual(problems([{ ...byKeys, rangeKey: "due" }]), [refusal('the indexes "heal-index"')]);
        assert.deepEqual(
            problems(
                [byKeys],
                attributes.map((a) => (a.name === "hc_due" ? { name: "hc_due", type: "S" } : a)),
            ),
            [refusal('the indexes "heal-index"')],
        );
    });

    it("tells the user to build when a bundle is missing", () => {
        // Prepare
        const paths = bundlePathsUnder("/nonexistent-root");

        // Act / Assess
        assert.throws(() => assertBundlesExist(paths), {
            message:
                "Lambda bundle not found: /nonexistent-root/dist/bundles/stream-consumer/index.js, " +
                "/nonexistent-root/dist/bundles/redrive/index.js, /nonexistent-root/dist/bundles/backfill/index.js, /nonexistent-root/dist/bundles/settler/index.js. " +
                "Run `npm run build` (or `npm run build:bundles`) first.",
        });
    });
});
