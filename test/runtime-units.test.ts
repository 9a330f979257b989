import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import {
    ConfigurationError,
    DEFAULT_LAYOUT,
    ENV,
    handlerConfigFromEnv,
    handlerEnvironment,
    resolveLayout,
    type CounterTableConfig,
} from "../runtime/shared/config";
import { fatalMessageBody, MAX_MESSAGE_BYTES } from "../runtime/stream/fatal";
import { compareSequenceNumbers, lowestSequenceNumber } from "../runtime/stream/records";
import { parseBatchInfo } from "../runtime/stream/redrive";

const config: CounterTableConfig = { ...DEFAULT_LAYOUT, tableName: "orders", countersTableName: "orders-counters" };

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

const created = (pk: string, sk: string) => record("INSERT", pk, sk, { counter_token: { S: "t1" } });

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
        const r = record("INSERT", "k", "a", { counter_token: { S: "t1" }, blob: { S: "x".repeat(300_000) } });
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
    const handlerConfig = () => ({ ...config, partitionKey: "tenant", fatalQueueUrl: "https://sqs/fatal", metricsNamespace: "Orders" });

    it("round-trips through the environment the component sets", () => {
        assert.deepEqual(handlerConfigFromEnv(handlerEnvironment(handlerConfig())), handlerConfig());
    });

    it("names every missing or bad variable", () => {
        assert.throws(
            () => handlerConfigFromEnv({ [ENV.sortKey]: "pk" }),
            (e: unknown) =>
                e instanceof ConfigurationError &&
                e.problems.join(" | ") ===
                    `[${ENV.tableName}] must be set | [${ENV.sortKey}] must differ from [partitionKey] (both are "pk") | [${ENV.fatalQueueUrl}] must be set`,
        );
    });

    it("refuses the removed processedAttribute by name, in a layout and in the environment", () => {
        const why = "was removed: nothing reads or writes it (the stream consumer keeps its idempotency in markers)";
        const legacy = { processedAttribute: "counter_processed" } as Partial<typeof DEFAULT_LAYOUT>;

        assert.throws(() => resolveLayout(legacy), {
            message: `invalid hybrid-counter configuration: [processedAttribute] ${why}; drop it`,
        });
        assert.throws(
            () => handlerConfigFromEnv({ ...handlerEnvironment(handlerConfig()), HYBRID_COUNTER_PROCESSED_ATTRIBUTE: "counter_processed" }),
            (e: unknown) =>
                e instanceof ConfigurationError && e.problems.join(" | ") === `[HYBRID_COUNTER_PROCESSED_ATTRIBUTE] ${why}; unset it`,
        );
    });

    it("resolveLayout fills defaults and rejects an empty prefix", () => {
        assert.deepEqual(resolveLayout({ partitionKey: "tenant" }), { ...DEFAULT_LAYOUT, partitionKey: "tenant" });
        assert.throws(() => resolveLayout({ counterPrefix: "" }), {
            message: "invalid hybrid-counter configuration: [counterPrefix] must be a non-empty string",
        });
    });
});
