import { PutItemCommand, TransactWriteItemsCommand, type TransactWriteItem } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { LagMeter, percentile } from "../local/harness/lag";
import { createCounterTable } from "../local/engine/table";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";
import { useEngine } from "./support/engine";

let sequence = 100;

/** A creation's stream record, as the mapping delivers it. */
function insert(key: string, id: string): DynamoDBRecord {
    return {
        eventName: "INSERT",
        dynamodb: {
            SequenceNumber: String(++sequence),
            Keys: { pk: { S: key }, sk: { S: id } },
            NewImage: { pk: { S: key }, sk: { S: id }, counter_token: { S: `t-${id}` } },
        },
    };
}

/** A soft deletion's stream record. */
function softDelete(key: string, id: string): DynamoDBRecord {
    return {
        eventName: "MODIFY",
        dynamodb: {
            SequenceNumber: String(++sequence),
            Keys: { pk: { S: key }, sk: { S: id } },
            OldImage: { pk: { S: key }, sk: { S: id }, counter_token: { S: `t-${id}` } },
            NewImage: { pk: { S: key }, sk: { S: id }, counter_token: { S: `t-${id}` }, deleted: { BOOL: true } },
        },
    };
}

/** The marker write that counts a creation (the marker model: markers in the counters table). */
const counted = (key: string, id: string): TransactWriteItem => ({
    Update: {
        TableName: "t-counters",
        Key: { pk: { S: key }, sk: { S: `#counter#item#${id}` } },
        UpdateExpression: "SET #state = :target, #seq = :seq",
        ExpressionAttributeValues: { ":target": { S: "counted" }, ":seq": { S: "1" } },
    },
});
/** The marker write that counts a deletion. */
const removed = (key: string, id: string): TransactWriteItem => ({
    Update: {
        TableName: "t-counters",
        Key: { pk: { S: key }, sk: { S: `#counter#item#${id}` } },
        UpdateExpression: "SET #state = :target, #seq = :seq",
        ExpressionAttributeValues: { ":target": { S: "uncounted" }, ":seq": { S: "2" } },
    },
});
const counterDelta = (key: string): TransactWriteItem => ({
    Update: { TableName: "t", Key: { pk: { S: key }, sk: { S: "#counter#eventual" } }, UpdateExpression: "ADD #c :d" },
});

describe("the lag meter: from the API call's return to the commit of the item's count", () => {
    it("measures write -> commit, split at the moment the mapping read the record", () => {
        const meter = new LagMeter(DEFAULT_LAYOUT);
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.read(insert("k", "a"), 1_300);

        meter.committed([counterDelta("k"), counted("k", "a")], 1_350, 1_400);

        const b = meter.breakdown();
        assert.deepEqual(b.total, { p50: 400, p99: 400, max: 400 });
        assert.deepEqual(b.stream, { p50: 300, p99: 300, max: 300 });
        assert.deepEqual(b.pipeline, { p50: 100, p99: 100, max: 100 });
        assert.equal(b.samples, 1);
        assert.equal(b.unmatched, 0);
    });

    it("does not let a commit count a write the mapping read after the transaction was sent", () => {
        const meter = new LagMeter(DEFAULT_LAYOUT);
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.read(insert("k", "a"), 1_100);
        meter.wrote({ key: "k", id: "b", delta: 1, at: 1_150 });
        meter.read(insert("k", "b"), 1_250);

        meter.committed([counted("k", "a"), counted("k", "b")], 1_200, 1_300);

        assert.equal(meter.breakdown().samples, 1);
        assert.equal(meter.breakdown().unmatched, 1);
        meter.committed([counted("k", "b")], 1_400, 1_500);
        assert.deepEqual(meter.breakdown().total, { p50: 350, p99: 350, max: 350 }, "300 ms for a, 350 ms for b");
        assert.equal(meter.breakdown().unmatched, 0);
    });

    it("counts a deletion only on a delete of the item, and a creation deleted in the same batch with it", () => {
        const meter = new LagMeter(DEFAULT_LAYOUT);
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.wrote({ key: "k", id: "a", delta: -1, at: 1_050 });
        meter.read(insert("k", "a"), 1_100);
        meter.read(softDelete("k", "a"), 1_100);

        meter.committed([counted("k", "a")], 1_200, 1_300);
        const afterUpdate = meter.breakdown();
        meter.committed([removed("k", "a")], 1_400, 1_600);

        assert.equal(afterUpdate.samples, 1, "an update counts the creation only");
        assert.deepEqual(meter.breakdown().total, { p50: 550, p99: 550, max: 550 }, "300 ms for the creation, 550 ms for the deletion");
        assert.equal(meter.breakdown().unmatched, 0);
    });

    it("takes a record the mapping read before the API call returned as seen no later than the return", () => {
        const meter = new LagMeter(DEFAULT_LAYOUT);
        meter.read(insert("k", "a"), 1_000);
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_020 });
        meter.read(insert("k", "b"), 1_000);
        meter.committed([counted("k", "b")], 1_010, 1_015);
        meter.wrote({ key: "k", id: "b", delta: 1, at: 1_030 });

        meter.committed([counted("k", "a")], 1_040, 1_100);

        const b = meter.breakdown();
        assert.equal(b.samples, 2);
        assert.deepEqual(b.total, { p50: 80, p99: 80, max: 80 }, "0 ms for b, counted before its call returned; 80 ms for a");
        assert.equal(b.unmatched, 0);
    });

    it("ignores a second report of the same write and counts invoked records up to the checkpoint", () => {
        const meter = new LagMeter(DEFAULT_LAYOUT);
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_500 });
        const records = [insert("k", "a"), insert("k", "b"), insert("k", "c")];

        meter.invoked({ Records: records }, { batchItemFailures: [{ itemIdentifier: records[2]!.dynamodb!.SequenceNumber! }] });

        assert.equal(meter.counted, 2);
        assert.equal(meter.breakdown().unmatched, 1);
    });

    it("takes percentiles by rank", () => {
        assert.equal(percentile([], 99), 0);
        assert.equal(percentile([1, 2, 3, 4], 50), 3);
        assert.equal(percentile([1, 2, 3, 4], 99), 4);
    });
});

describe("the lag meter on DynamoDB Local", () => {
    const engine = useEngine();

    it("sees the consumer's commit on the client it watches, also when the response is then lost", async () => {
        const dynamodb = engine().dynamodb();
        await createCounterTable(dynamodb, "lag-meter");
        await dynamodb.send(
            new PutItemCommand({ TableName: "lag-meter", Item: { pk: { S: "k" }, sk: { S: "a" }, counter_token: { S: "t-a" } } }),
        );
        const meter = new LagMeter(DEFAULT_LAYOUT);
        meter.wrote({ key: "k", id: "a", delta: 1, at: Date.now() });
        meter.read(insert("k", "a"), Date.now());
        meter.watchCommits(dynamodb);
        // Outside the meter: the commit succeeds, then the caller loses the response (a 500 after commit).
        dynamodb.middlewareStack.add(
            (next) => async (args) => {
                await next(args);
                throw new Error("response lost");
            },
            { step: "deserialize", name: "loseResponse", priority: "high" },
        );

        await assert.rejects(
            dynamodb.send(
                new TransactWriteItemsCommand({
                    TransactItems: [
                        {
                            Update: {
                                TableName: "lag-meter",
                                Key: { pk: { S: "k" }, sk: { S: "#counter#item#a" } },
                                UpdateExpression: "SET hc_state = :target",
                                ExpressionAttributeValues: { ":target": { S: "counted" } },
                            },
                        },
                    ],
                }),
            ),
            /response lost/,
        );

        assert.equal(meter.breakdown().samples, 1);
        assert.equal(meter.breakdown().unmatched, 0);
        dynamodb.destroy();
    });
});
