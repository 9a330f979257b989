import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { streamFilterPatterns } from "../components/defaults";
import { matchesAny, parsePattern } from "../local/filter";
import {
    ConfigurationError,
    DEFAULT_LAYOUT,
    ENV,
    handlerConfigFromEnv,
    handlerEnvironment,
    resolveLayout,
    type CounterTableConfig,
} from "../runtime/config";
import { planBatch, resolveConditionFailure, transactionActions, type ItemIntent } from "../runtime/counting";
import { fatalMessageBody, MAX_MESSAGE_BYTES } from "../runtime/fatal";
import { classifyRecord, compareSequenceNumbers, lowestSequenceNumber } from "../runtime/records";
import { parseBatchInfo } from "../runtime/redrive";

const config: CounterTableConfig = { ...DEFAULT_LAYOUT, tableName: "orders" };

let sequence = 100;
function record(
    eventName: "INSERT" | "MODIFY" | "REMOVE",
    pk: string,
    sk: string,
    next?: Record<string, unknown>,
    previous?: Record<string, unknown>,
): DynamoDBRecord {
    const image = (flags: Record<string, unknown> | undefined) =>
        flags && {
            pk: { S: pk },
            sk: { S: sk },
            ...Object.fromEntries(Object.entries(flags).map(([k, v]) => [k, typeof v === "boolean" ? { BOOL: v } : v])),
        };
    return {
        eventName,
        eventSourceARN: "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026",
        dynamodb: {
            Keys: { pk: { S: pk }, sk: { S: sk } },
            NewImage: image(next) as never,
            OldImage: image(previous) as never,
            SequenceNumber: String(sequence++),
            ApproximateCreationDateTime: 1_800_000_000,
        },
    };
}

const created = (pk: string, sk: string) => record("INSERT", pk, sk, { counter_processed: false });
const softDeleted = (pk: string, sk: string, processed = true) =>
    record("MODIFY", pk, sk, { counter_processed: processed, deleted: true }, { counter_processed: processed });

describe("classifyRecord", () => {
    const cases: Array<[string, DynamoDBRecord, string]> = [
        ["an unprocessed insert is a creation", created("k", "a"), "event create"],
        ["a soft delete is a deletion", softDeleted("k", "a"), "event delete"],
        [
            "a soft delete from deleted=false is a deletion",
            record("MODIFY", "k", "a", { counter_processed: true, deleted: true }, { counter_processed: true, deleted: false }),
            "event delete",
        ],
        [
            "the consumer's own flag flip on a deleted item is ignored",
            record("MODIFY", "k", "a", { counter_processed: true, deleted: true }, { counter_processed: false, deleted: true }),
            "ignored not a soft delete",
        ],
        [
            "a hard delete is ignored",
            record("REMOVE", "k", "a", undefined, { counter_processed: true, deleted: true }),
            "ignored hard delete",
        ],
        [
            "a counter item is ignored",
            record("MODIFY", "k", "#counter#best-effort", { count: { N: "2" } }, { count: { N: "1" } }),
            "ignored counter item",
        ],
        ["an insert written around the client is ignored", record("INSERT", "k", "a", {}), "ignored not an unprocessed creation"],
        [
            "a soft delete of an item never counted is ignored",
            record("MODIFY", "k", "a", { deleted: true }, {}),
            "ignored not a counted item",
        ],
        [
            "a flag that is not a boolean is poison",
            record("INSERT", "k", "a", { counter_processed: { S: "false" } }),
            "poison dynamodb.NewImage.counter_processed must be a boolean",
        ],
        [
            "a deleted flag that is not a boolean is poison",
            record("MODIFY", "k", "a", { counter_processed: true, deleted: { N: "1" } }, {}),
            "poison dynamodb.NewImage.deleted must be a boolean",
        ],
        [
            "a MODIFY without its old image is poison",
            record("MODIFY", "k", "a", { deleted: true }),
            "poison dynamodb.OldImage is missing: the stream must carry old images",
        ],
    ];
    for (const [name, input, expected] of cases) {
        it(name, () => {
            const c = classifyRecord(input, DEFAULT_LAYOUT);
            const summary =
                c.type === "event"
                    ? `event ${c.event.kind}`
                    : c.type === "ignored"
                      ? `ignored ${c.reason}`
                      : `poison ${c.field} ${c.problem}`;
            assert.equal(summary, expected);
        });
    }

    it("names the key field of a record with an empty partition key", () => {
        const r = created("", "a");
        assert.deepEqual(classifyRecord(r, DEFAULT_LAYOUT), {
            type: "poison",
            sequenceNumber: r.dynamodb!.SequenceNumber,
            field: "dynamodb.Keys.pk",
            problem: "must not be empty",
        });
    });
});

describe("the component's filter criteria agree with the consumer", () => {
    const patterns = streamFilterPatterns(DEFAULT_LAYOUT).map(parsePattern);
    const samples: DynamoDBRecord[] = [
        created("k", "a"),
        softDeleted("k", "a"),
        softDeleted("k", "b", false),
        record("MODIFY", "k", "a", { counter_processed: true, deleted: true }, { counter_processed: true, deleted: false }),
        record("MODIFY", "k", "a", { counter_processed: true, deleted: true }, { counter_processed: false, deleted: true }),
        record("MODIFY", "k", "a", { counter_processed: true }, { counter_processed: false }),
        record("REMOVE", "k", "a", undefined, { counter_processed: true, deleted: true }),
        record("INSERT", "k", "#counter#eventual", { count: { N: "1" } }),
        record("MODIFY", "k", "#counter#best-effort", { count: { N: "2" } }, { count: { N: "1" } }),
        record("INSERT", "k", "a", {}),
    ];
    for (const [i, sample] of samples.entries()) {
        it(`sample ${i}: delivered exactly when the consumer would act on it`, () => {
            const acts = classifyRecord(sample, DEFAULT_LAYOUT).type === "event";
            assert.equal(matchesAny(sample, patterns), acts);
        });
    }
});

describe("planBatch", () => {
    it("groups by counter key and collapses an item's records to its last", () => {
        const a1 = created("k1", "a");
        const a2 = softDeleted("k1", "a", false);
        const b = created("k1", "b");
        const c = softDeleted("k2", "c");
        const plan = planBatch([a1, b, c, a2], config);
        assert.deepEqual(plan.groups, [
            {
                counterKey: "k1",
                items: [
                    {
                        id: "a",
                        target: "removed",
                        expectProcessed: false,
                        sequenceNumbers: [a1.dynamodb!.SequenceNumber, a2.dynamodb!.SequenceNumber],
                    },
                    { id: "b", target: "counted", expectProcessed: false, sequenceNumbers: [b.dynamodb!.SequenceNumber] },
                ],
            },
            {
                counterKey: "k2",
                items: [{ id: "c", target: "removed", expectProcessed: true, sequenceNumbers: [c.dynamodb!.SequenceNumber] }],
            },
        ]);
        assert.equal(plan.ignored, 0);
        assert.deepEqual(plan.poison, []);
    });
});

describe("transactionActions", () => {
    const intent = (id: string, target: ItemIntent["target"], expectProcessed = false): ItemIntent => ({
        id,
        target,
        expectProcessed,
        sequenceNumbers: ["1"],
    });

    it("puts the net delta first, then one conditional action per item", () => {
        const actions = transactionActions(config, "k", [intent("a", "counted"), intent("b", "counted"), intent("c", "removed", true)]);
        assert.deepEqual(actions[0], {
            Update: {
                TableName: "orders",
                Key: { pk: { S: "k" }, sk: { S: "#counter#eventual" } },
                UpdateExpression: "ADD #count :delta",
                ExpressionAttributeNames: { "#count": "count" },
                ExpressionAttributeValues: { ":delta": { N: "1" } },
            },
        });
        assert.deepEqual(actions[1], {
            Update: {
                TableName: "orders",
                Key: { pk: { S: "k" }, sk: { S: "a" } },
                UpdateExpression: "SET #processed = :true",
                ConditionExpression: "#processed = :false",
                ExpressionAttributeNames: { "#processed": "counter_processed" },
                ExpressionAttributeValues: { ":true": { BOOL: true }, ":false": { BOOL: false } },
                ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            },
        });
        assert.deepEqual(actions[3], {
            Delete: {
                TableName: "orders",
                Key: { pk: { S: "k" }, sk: { S: "c" } },
                ConditionExpression: "#deleted = :true AND #processed = :expected",
                ExpressionAttributeNames: { "#deleted": "deleted", "#processed": "counter_processed" },
                ExpressionAttributeValues: { ":true": { BOOL: true }, ":expected": { BOOL: true } },
                ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            },
        });
        assert.equal(actions.length, 4);
    });

    it("omits the counter when the delta is zero", () => {
        const actions = transactionActions(config, "k", [
            intent("a", "counted"),
            intent("b", "removed", true),
            intent("c", "removed", false),
        ]);
        assert.deepEqual(
            actions.map((a) => Object.keys(a)[0]),
            ["Update", "Delete", "Delete"],
        );
    });
});

describe("resolveConditionFailure", () => {
    const counted: ItemIntent = { id: "a", target: "counted", expectProcessed: false, sequenceNumbers: ["1"] };
    const removed: ItemIntent = { id: "a", target: "removed", expectProcessed: true, sequenceNumbers: ["1"] };
    const item = (processed: unknown, deleted?: unknown) => ({
        pk: { S: "k" },
        sk: { S: "a" },
        ...(processed === undefined ? {} : { counter_processed: processed as never }),
        ...(deleted === undefined ? {} : { deleted: deleted as never }),
    });
    const cases: Array<[string, ItemIntent, ReturnType<typeof item> | undefined, unknown]> = [
        ["creation of a vanished item", counted, undefined, { action: "done", why: "deleted before it was counted" }],
        ["creation already counted", counted, item({ BOOL: true }), { action: "done", why: "already counted" }],
        ["deletion already removed", removed, undefined, { action: "done", why: "already removed" }],
        ["deletion of a reused id", removed, item({ BOOL: false }), { action: "done", why: "the id was reused by a newer item" }],
        [
            "deletion of an item never counted",
            removed,
            item({ BOOL: false }, { BOOL: true }),
            { action: "retry", intent: { ...removed, expectProcessed: false } },
        ],
        [
            "deletion of an item counted meanwhile",
            { ...removed, expectProcessed: false },
            item({ BOOL: true }, { BOOL: true }),
            { action: "retry", intent: removed },
        ],
        [
            "a stored flag that is not a boolean",
            counted,
            item({ S: "no" }),
            { action: "poison", field: "counter_processed", problem: "must be a boolean on the stored item" },
        ],
        [
            "a stored deleted flag that is not a boolean",
            removed,
            item({ BOOL: true }, { S: "yes" }),
            { action: "poison", field: "deleted", problem: "must be a boolean on the stored item" },
        ],
    ];
    for (const [name, intent, current, expected] of cases) {
        it(name, () => {
            assert.deepEqual(resolveConditionFailure(intent, current as Parameters<typeof resolveConditionFailure>[1], config), expected);
        });
    }
});

describe("sequence numbers", () => {
    it("compare as numbers of any length", () => {
        assert.equal(compareSequenceNumbers("9", "10"), -1);
        assert.equal(compareSequenceNumbers("100000000000000000000000000001", "100000000000000000000000000000"), 1);
        assert.equal(lowestSequenceNumber(["300", "25", "1000"]), "25");
        assert.equal(lowestSequenceNumber([]), undefined);
    });
});

describe("fatalMessageBody", () => {
    it("keeps a small message whole", () => {
        const r = created("k", "a");
        const body = JSON.parse(fatalMessageBody({ reason: "poison-record", problem: "[x] bad", records: [r] }, new Date(0)));
        assert.deepEqual(body, {
            reason: "poison-record",
            problem: "[x] bad",
            records: [JSON.parse(JSON.stringify(r))],
            parkedAt: "1970-01-01T00:00:00.000Z",
        });
    });

    it("trims images, never the keys, to fit the queue's size limit", () => {
        const r = record("INSERT", "k", "a", { counter_processed: false, blob: { S: "x".repeat(300_000) } });
        const body = fatalMessageBody({ reason: "poison-record", problem: "[x] bad", records: [r] });
        assert.ok(Buffer.byteLength(body) <= MAX_MESSAGE_BYTES);
        const parsed = JSON.parse(body);
        assert.deepEqual(parsed.records[0].dynamodb.Keys, r.dynamodb!.Keys);
        assert.equal(parsed.records[0].dynamodb.SequenceNumber, r.dynamodb!.SequenceNumber);
        assert.equal(parsed.records[0].dynamodb.NewImage, undefined);
        assert.match(parsed.truncated, /^images removed/);
    });
});

describe("parseBatchInfo", () => {
    const arn = "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-11-21T00:00:00.000";
    const body = (info: Record<string, unknown>) => JSON.stringify({ DDBStreamBatchInfo: info });
    const good = { shardId: "shardId-0001", startSequenceNumber: "100", endSequenceNumber: "200", streamArn: arn, batchSize: 3 };

    it("reads Lambda's on-failure record", () => {
        assert.deepEqual(parseBatchInfo(body(good), "orders"), {
            streamArn: arn,
            shardId: "shardId-0001",
            startSequenceNumber: "100",
            endSequenceNumber: "200",
            batchSize: 3,
        });
    });

    const bad: Array<[string, string, string]> = [
        ["not JSON", "{", "[body] is not JSON"],
        ["no batch info", JSON.stringify({ requestContext: {} }), "[DDBStreamBatchInfo] is missing"],
        [
            "a bad sequence number",
            body({ ...good, startSequenceNumber: "abc" }),
            "[DDBStreamBatchInfo.startSequenceNumber] must match /^\\d{1,64}$/",
        ],
        [
            "another table's stream",
            body({ ...good, streamArn: arn.replace("orders", "users") }),
            '[DDBStreamBatchInfo.streamArn] names table "users", not "orders"',
        ],
        ["a missing shard", body({ ...good, shardId: undefined }), "[DDBStreamBatchInfo.shardId] must match /^[\\w.-]{1,128}$/"],
    ];
    for (const [name, input, message] of bad) {
        it(`rejects ${name}`, () => {
            assert.throws(() => parseBatchInfo(input, "orders"), { name: "MalformedRedriveMessageError", message });
        });
    }
});

describe("handler configuration", () => {
    it("round-trips through the environment the component sets", () => {
        const handlerConfig = { ...config, partitionKey: "tenant", fatalQueueUrl: "https://sqs/fatal", metricsNamespace: "Orders" };
        assert.deepEqual(handlerConfigFromEnv(handlerEnvironment(handlerConfig)), handlerConfig);
    });

    it("names every missing or bad variable", () => {
        assert.throws(
            () => handlerConfigFromEnv({ [ENV.sortKey]: "pk" }),
            (e: unknown) =>
                e instanceof ConfigurationError &&
                e.problems.join(" | ") ===
                    `[${ENV.tableName}] must be set | [${ENV.fatalQueueUrl}] must be set | [sortKey] must differ from [partitionKey] (both are "pk")`,
        );
    });

    it("resolveLayout fills defaults and rejects an empty prefix", () => {
        assert.deepEqual(resolveLayout({ partitionKey: "tenant" }), { ...DEFAULT_LAYOUT, partitionKey: "tenant" });
        assert.throws(() => resolveLayout({ counterPrefix: "" }), {
            message: "invalid hybrid-counter configuration: [counterPrefix] must be a non-empty string",
        });
    });
});
