import { UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { LagMeter, percentile, recordKind } from "../local/harness/lag";
import { createCountersTable } from "../local/engine/table";
import { COUNTED_ATTRIBUTE, countingGeneration, DEFAULT_LAYOUT, type CounterConfig } from "../runtime/shared/config";
import { paddedSequence } from "../runtime/stream/records";
import { useEngine } from "./support/engine";

const config: CounterConfig = {
    ...DEFAULT_LAYOUT,
    tableName: "lag-items",
    countersTableName: "lag-counters",
    mode: "utilization",
    periodMs: 600_000,
};
const flag = { [COUNTED_ATTRIBUTE]: { S: countingGeneration(config) } };

let sequence = 100;

/** A creation's stream record, as the mapping delivers it (the client writes the counted flag with the item). */
function insert(key: string, id: string): DynamoDBRecord {
    return {
        eventName: "INSERT",
        dynamodb: {
            SequenceNumber: String(++sequence),
            Keys: { pk: { S: key }, sk: { S: id } },
            NewImage: { pk: { S: key }, sk: { S: id }, counter_token: { S: `t-${id}` }, ...flag },
        },
    };
}

/** A soft deletion's stream record. */
function softDelete(key: string, id: string): DynamoDBRecord {
    const image = { pk: { S: key }, sk: { S: id }, counter_token: { S: `t-${id}` }, ...flag };
    return {
        eventName: "MODIFY",
        dynamodb: {
            SequenceNumber: String(++sequence),
            Keys: { pk: { S: key }, sk: { S: id } },
            OldImage: image,
            NewImage: { ...image, deleted: { BOOL: true } },
        },
    };
}

/** The mark a write that applied `record` (and every record of its key before it) moves to. */
const markOf = (record: DynamoDBRecord) => paddedSequence(record.dynamodb!.SequenceNumber!);

describe("the lag meter: from the API call's return to the write that applied its record to the eventual counter", () => {
    it("measures write -> commit, split at the moment the mapping read the record", () => {
        // Prepare
        const meter = new LagMeter(config);
        const a = insert("k", "a");
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.read(a, 1_300);

        // Act
        meter.committed("k", markOf(a), 1_350, 1_400);

        // Assess
        const b = meter.breakdown();
        assert.deepEqual(b.total, { p50: 400, p99: 400, max: 400 });
        assert.deepEqual(b.stream, { p50: 300, p99: 300, max: 300 });
        assert.deepEqual(b.pipeline, { p50: 100, p99: 100, max: 100 });
        assert.equal(b.samples, 1);
        assert.equal(b.unmatched, 0);
    });

    it("does not let a commit count a write the mapping read after the write was sent, nor one above its mark, nor another key's", () => {
        // Prepare
        const meter = new LagMeter(config);
        const [a, b, c] = [insert("k", "a"), insert("k", "b"), insert("k", "c")];
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.read(a, 1_100);
        meter.wrote({ key: "k", id: "b", delta: 1, at: 1_150 });
        meter.read(b, 1_250);
        meter.wrote({ key: "k", id: "c", delta: 1, at: 1_160 });
        meter.read(c, 1_170);

        // Act
        meter.committed("other", markOf(c), 1_190, 1_195);
        meter.committed("k", markOf(a), 1_200, 1_300);
        const first = meter.breakdown();
        meter.committed("k", markOf(c), 1_400, 1_500);

        // Assess: a by the first commit; b (read after it was sent) and c (above its mark) by the second.
        assert.deepEqual([first.samples, first.unmatched], [1, 2]);
        assert.deepEqual(meter.breakdown().total, { p50: 340, p99: 350, max: 350 }, "300 ms for a, 350 ms for b, 340 ms for c");
        assert.deepEqual([meter.breakdown().samples, meter.breakdown().unmatched], [3, 0]);
    });

    it("counts a creation and a deletion of one item each by the mark that reaches its own record", () => {
        // Prepare
        const meter = new LagMeter(config);
        const [created, deleted] = [insert("k", "a"), softDelete("k", "a")];
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.wrote({ key: "k", id: "a", delta: -1, at: 1_050 });
        meter.read(created, 1_100);
        meter.read(deleted, 1_100);

        // Act
        meter.committed("k", markOf(created), 1_200, 1_300);
        const afterCreation = meter.breakdown();
        meter.committed("k", markOf(deleted), 1_400, 1_600);

        // Assess
        assert.equal(afterCreation.samples, 1, "the first mark reaches the creation only");
        assert.deepEqual(meter.breakdown().total, { p50: 550, p99: 550, max: 550 }, "300 ms for the creation, 550 ms for the deletion");
        assert.equal(meter.breakdown().unmatched, 0);
    });

    it("takes a record the mapping read before the API call returned as seen no later than the return", () => {
        // Prepare
        const meter = new LagMeter(config);
        const [b, a] = [insert("k", "b"), insert("k", "a")];
        meter.read(a, 1_000);
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_020 });
        meter.read(b, 1_000);

        // Act: b is counted before its call returned; a after.
        meter.committed("k", markOf(b), 1_010, 1_015);
        meter.wrote({ key: "k", id: "b", delta: 1, at: 1_030 });
        meter.committed("k", markOf(a), 1_040, 1_100);

        // Assess
        const breakdown = meter.breakdown();
        assert.equal(breakdown.samples, 2);
        assert.deepEqual(breakdown.total, { p50: 80, p99: 80, max: 80 }, "0 ms for b, counted before its call returned; 80 ms for a");
        assert.equal(breakdown.unmatched, 0);
    });

    it("ignores a second report of the same write, and counts invoked records that move a count, up to the checkpoint", () => {
        // Prepare
        const meter = new LagMeter(config);
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_000 });
        meter.wrote({ key: "k", id: "a", delta: 1, at: 1_500 });
        const unflagged: DynamoDBRecord = {
            eventName: "INSERT",
            dynamodb: {
                SequenceNumber: String(++sequence),
                Keys: { pk: { S: "k" }, sk: { S: "x" } },
                NewImage: { pk: { S: "k" }, sk: { S: "x" }, counter_token: { S: "t" } },
            },
        };
        const records = [insert("k", "a"), unflagged, insert("k", "b"), insert("k", "c")];

        // Act
        meter.invoked({ Records: records }, { batchItemFailures: [{ itemIdentifier: records[3]!.dynamodb!.SequenceNumber! }] });

        // Assess
        assert.equal(meter.counted, 2);
        assert.equal(recordKind(unflagged, config), undefined, "an item without the counted flag moves no count (its flag's record will)");
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

    it("sees the write of a key's eventual item that moves its mark, on the client it watches, also when the response is then lost", async () => {
        // Prepare
        const dynamodb = engine().dynamodb();
        await createCountersTable(dynamodb, config.countersTableName);
        const meter = new LagMeter(config);
        const a = insert("k", "a");
        meter.wrote({ key: "k", id: "a", delta: 1, at: Date.now() });
        meter.read(a, Date.now());
        meter.watchCommits(dynamodb);
        // Outside the meter: the write succeeds, then the caller loses the response (a 500 after the write).
        dynamodb.middlewareStack.add(
            (next) => async (args) => {
                await next(args);
                throw new Error("response lost");
            },
            { step: "deserialize", name: "loseResponse", priority: "high" },
        );
        const update = (sortKey: string) =>
            new UpdateItemCommand({
                TableName: config.countersTableName,
                Key: { pk: { S: "k" }, sk: { S: sortKey } },
                UpdateExpression: "ADD #c :d SET #m = :m",
                ExpressionAttributeNames: { "#c": "count", "#m": "hc_s_x" },
                ExpressionAttributeValues: { ":d": { N: "1" }, ":m": { S: `${markOf(a)}|20000` } },
            });

        // Act: the same write of another item is no commit of a count; the eventual item's is.
        await assert.rejects(dynamodb.send(update("#counter#best-effort")), /response lost/);
        const before = meter.breakdown().samples;
        await assert.rejects(dynamodb.send(update("#counter#eventual")), /response lost/);

        // Assess
        assert.equal(before, 0);
        assert.deepEqual([meter.breakdown().samples, meter.breakdown().unmatched], [1, 0]);
        dynamodb.destroy();
    });
});
