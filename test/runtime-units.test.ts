/**
 * Small pure parts of the stream path and the functions' configuration: sequence numbers, the fatal queue's message
 * body, Lambda's on-failure record as the redrive reads it, and the environment the component gives a function.
 */
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import {
    ConfigurationError,
    DEFAULT_LAYOUT,
    ENV,
    handlerConfigFromEnv,
    handlerEnvironment,
    type HandlerConfig,
} from "../runtime/shared/config";
import { fatalMessageBody, MAX_MESSAGE_BYTES } from "../runtime/stream/fatal";
import { compareSequences, nextSequence, paddedSequence, SEQUENCE_DIGITS } from "../runtime/stream/records";
import { parseBatchInfo } from "../runtime/stream/redrive";

function record(sk: string, blob = ""): DynamoDBRecord {
    return {
        eventName: "INSERT",
        eventSourceARN: "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026",
        dynamodb: {
            Keys: { pk: { S: "k" }, sk: { S: sk } },
            NewImage: { pk: { S: "k" }, sk: { S: sk }, counter_token: { S: "t1" }, ...(blob ? { blob: { S: blob } } : {}) } as never,
            SequenceNumber: "100",
            ApproximateCreationDateTime: 1_800_000_000,
        },
    };
}

describe("sequence numbers", () => {
    it("compare as numbers of any length, pad to compare as strings, and have a next", () => {
        assert.equal(compareSequences("9", "10"), -1);
        assert.equal(compareSequences("100000000000000000000000000001", "100000000000000000000000000000"), 1);
        assert.equal(compareSequences("42", "42"), 0);
        assert.equal(paddedSequence("9").length, SEQUENCE_DIGITS);
        assert.ok(paddedSequence("9") < paddedSequence("10"));
        assert.equal(nextSequence("99999999999999999999"), "100000000000000000000");
    });
});

describe("fatalMessageBody", () => {
    it("keeps a small message whole, with the time it was parked", () => {
        const r = record("a");

        const body = JSON.parse(fatalMessageBody({ reason: "poison-record", problem: "[x] bad", records: [r] }, new Date(0)));

        assert.deepEqual(body, {
            reason: "poison-record",
            problem: "[x] bad",
            records: [JSON.parse(JSON.stringify(r))],
            parkedAt: "1970-01-01T00:00:00.000Z",
        });
    });

    it("trims images, never the keys, to fit the queue's size limit", () => {
        const r = record("a", "x".repeat(300_000));

        const body = fatalMessageBody({ reason: "poison-record", problem: "[x] bad", records: [r] });

        assert.ok(Buffer.byteLength(body) <= MAX_MESSAGE_BYTES);
        const parsed = JSON.parse(body);
        assert.deepEqual(parsed.records[0].dynamodb.Keys, r.dynamodb!.Keys);
        assert.equal(parsed.records[0].dynamodb.SequenceNumber, "100");
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
        });
    });

    const bad: Array<[string, string, string]> = [
        ["not JSON", "{", "[body] is not JSON"],
        ["no batch info", JSON.stringify({ requestContext: {} }), "[DDBStreamBatchInfo] is missing"],
        [
            "a bad sequence number",
            body({ ...good, startSequenceNumber: "abc" }),
            "[DDBStreamBatchInfo.startSequenceNumber] must match /^\\d{1,40}$/",
        ],
        [
            "another table's stream",
            body({ ...good, streamArn: arn.replace("orders", "users") }),
            '[DDBStreamBatchInfo.streamArn] names table "users", not "orders"',
        ],
        ["a missing shard", body({ ...good, shardId: undefined }), "[DDBStreamBatchInfo.shardId] must match /^[\\w.-]{1,128}$/"],
    ];
    for (const [name, input, message] of bad) {
        it(`rejects ${name}, naming the field`, () => {
            assert.throws(() => parseBatchInfo(input, "orders"), { name: "MalformedRedriveMessageError", message });
        });
    }
});

describe("a function's configuration", () => {
    const config: HandlerConfig = {
        ...DEFAULT_LAYOUT,
        partitionKey: "tenant",
        tableName: "orders",
        countersTableName: "orders-counters",
        mode: "strict",
        periodMs: 900_000,
        counterShards: 4,
        fatalQueueUrl: "https://sqs/fatal",
        metricsNamespace: "Orders",
        thresholds: [0.5, 1],
        usageRetentionDays: 30,
    };

    it("round-trips through the environment the component sets: the mode, the period and the shards included", () => {
        assert.deepEqual(handlerConfigFromEnv(handlerEnvironment(config)), config);
        assert.equal(handlerEnvironment(config)[ENV.healQuietWindowSeconds], "900");
    });

    it("names every missing or bad variable", () => {
        assert.throws(
            () => handlerConfigFromEnv({ [ENV.sortKey]: "pk", [ENV.counterMode]: "exact", [ENV.healQuietWindowSeconds]: "0" }),
            (e: unknown) =>
                e instanceof ConfigurationError &&
                e.problems.join(" | ") ===
                    `[${ENV.tableName}] must be set | [${ENV.counterMode}] must be "utilization" or "strict" (got "exact") | [${ENV.healQuietWindowSeconds}] must be a positive integer (got "0") | [${ENV.sortKey}] must differ from [${ENV.partitionKey}] (both are "pk") | [${ENV.fatalQueueUrl}] must be set`,
        );
    });
});
