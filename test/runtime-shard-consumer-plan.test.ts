/**
 * The consumer's pure planning of a sharded key (runtime/stream/markers.ts, records.ts, heal-due.ts): groups per
 * (key, marker shard), transactions of one shard, and the keys the shard count refuses.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { DEFAULT_LAYOUT, eventualSortKey, markerSortKey, type CounterTableConfig } from "../runtime/shared/config";
import { markerShard, shardPartitionKey } from "../runtime/shards/layout";
import { driftedKey } from "../runtime/stream/heal-due";
import { planBatch, transactionActions, type ItemIntent } from "../runtime/stream/markers";
import { classifyRecord } from "../runtime/stream/records";

const unsharded: CounterTableConfig = { ...DEFAULT_LAYOUT, tableName: "orders", countersTableName: "orders-counters" };
const sharded = (counterShards: number): CounterTableConfig => ({ ...unsharded, counterShards });

let sequence = 5000;
type Image = Record<string, AttributeValue>;
function record(eventName: "INSERT" | "MODIFY" | "REMOVE", pk: string, sk: string, next?: Image, previous?: Image): DynamoDBRecord {
    const full = (image: Image | undefined) => image && { pk: { S: pk }, sk: { S: sk }, ...image };
    return {
        eventName,
        dynamodb: {
            Keys: { pk: { S: pk }, sk: { S: sk } },
            NewImage: full(next) as never,
            OldImage: full(previous) as never,
            SequenceNumber: String(sequence++),
        },
    };
}
const token = (t: string): Image => ({ counter_token: { S: t } });
const del = (t: string): Image => ({ counter_token: { S: t }, deleted: { BOOL: true } });

const intent = (id: string, n: number): ItemIntent => ({
    id,
    target: "counted",
    expected: "absent",
    seq: String(n).padStart(40, "0"),
    sequenceNumbers: [String(n)],
});

/** Ids of `shards` shards, the first two of each shard in the order r0, r1, ... meets them. */
function idsByShard(shards: number): string[][] {
    const byShard: string[][] = Array.from({ length: shards }, () => []);
    for (let i = 0; byShard.some((ids) => ids.length < 2); i++) {
        byShard[markerShard(`r${i}`, shards)]!.push(`r${i}`);
    }
    return byShard.map((ids) => ids.slice(0, 2));
}

describe("planning a sharded key's batch", () => {
    it("groups by (key, marker shard) in the order the batch first shows them, each group with its user key and shard", () => {
        const [s0, s1, s2] = idsByShard(3);
        const records = [
            record("INSERT", "k", s1![0]!, token("a")),
            record("INSERT", "k", s0![0]!, token("b")),
            record("INSERT", "j", s1![0]!, token("c")),
            record("INSERT", "k", s1![1]!, token("d")),
            record("MODIFY", "k", s0![0]!, del("b"), token("b")),
            record("INSERT", "k", s2![0]!, token("e")),
        ];

        const plan = planBatch(records, sharded(3));

        assert.deepEqual(
            plan.groups.map((g) => [g.counterKey, g.shard, g.items.map((i) => `${i.id}:${i.target}`)]),
            [
                ["k", 1, [`${s1![0]}:counted`, `${s1![1]}:counted`]],
                ["k", 0, [`${s0![0]}:uncounted`]],
                ["j", 1, [`${s1![0]}:counted`]],
                ["k", 2, [`${s2![0]}:counted`]],
            ],
        );
    });

    it("an unsharded plan has no shard on its groups: one group per key, as before", () => {
        const records = [record("INSERT", "k", "a", token("a")), record("INSERT", "k", "b", token("b"))];
        for (const config of [unsharded, sharded(1)]) {
            const plan = planBatch(records, config);
            assert.deepEqual(
                plan.groups.map((g) => Object.keys(g)),
                [["counterKey", "items"]],
            );
        }
    });

    it("a change of a key holding U+0000, or too long for its shards' suffix, is poison naming the partition key; not under one shard", () => {
        const named = record("INSERT", "k\u00001", "a", token("a"));
        const long = record("INSERT", "x".repeat(2047), "a", token("b"));
        const fits = record("INSERT", "x".repeat(2046), "a", token("c"));
        const problems = (config: CounterTableConfig) =>
            [named, long, fits].map((r) => {
                const c = classifyRecord(r, config);
                return c.type === "poison" ? `${c.field} ${c.problem}` : c.type;
            });

        assert.deepEqual(problems(sharded(3)), [
            "dynamodb.Keys.pk must not contain U+0000 when counterShards is above 1 (it separates a key from its shard number)",
            "dynamodb.Keys.pk must be at most 2046 bytes when counterShards is 3 (its shards' partition keys add 2 bytes)",
            "change",
        ]);
        assert.deepEqual(problems(sharded(16)).slice(1), [
            "dynamodb.Keys.pk must be at most 2045 bytes when counterShards is 16 (its shards' partition keys add 3 bytes)",
            "dynamodb.Keys.pk must be at most 2045 bytes when counterShards is 16 (its shards' partition keys add 3 bytes)",
        ]);
        assert.deepEqual(problems(unsharded), ["change", "change", "change"]);
        // A record that moves no membership needs no marker: it stays ignored.
        const noise = record("MODIFY", "k\u00001", "a", { ...token("a"), x: { N: "1" } }, token("a"));
        assert.equal(classifyRecord(noise, sharded(3)).type, "ignored");
        const plan = planBatch([named, record("INSERT", "k", "a", token("d"))], sharded(3));
        assert.deepEqual([plan.poison.map((p) => p.field), plan.groups.map((g) => g.counterKey)], [["dynamodb.Keys.pk"], ["k"]]);
    });

    it("a drifted key the shard count refuses is never marked (its partition key could name another key's shard)", () => {
        const removed = (key: string) => record("REMOVE", key, "a", undefined, token("a"));
        assert.equal(driftedKey(removed("k\u00001"), sharded(3)), undefined);
        assert.equal(driftedKey(removed("k\u00001"), unsharded), "k\u00001");
        assert.equal(driftedKey(removed("k"), sharded(3)), "k");
    });
});

describe("a sharded key's transactions", () => {
    const config = sharded(3);
    const [s0, s1] = idsByShard(3);

    it("write the markers and the partial under the shard's partition key, and hard-delete the user's item under the key", () => {
        const softDeleted: ItemIntent = {
            ...intent(s1![1]!, 2),
            target: "uncounted",
            expected: "absent",
            softDelete: { token: { S: "t" } },
        };
        const { actions, index } = transactionActions(config, "k", [intent(s1![0]!, 1), softDeleted], 0, 1);

        assert.deepEqual(
            actions.map((a) => {
                const write = (a.Update ?? a.Delete)!;
                return [a.Update ? "Update" : "Delete", write.TableName, write.Key!.pk!.S, write.Key!.sk!.S];
            }),
            [
                ["Update", "orders-counters", "k\u00001", eventualSortKey(config)],
                ["Update", "orders-counters", "k\u00001", markerSortKey(config, s1![0]!)],
                ["Update", "orders-counters", "k\u00001", markerSortKey(config, s1![1]!)],
                ["Delete", "orders", "k", s1![1]!],
            ],
        );
        assert.deepEqual(index, [{ marker: 1 }, { marker: 2, softDelete: 3 }]);
        assert.equal(shardPartitionKey("k", 1), "k\u00001");
    });

    it("take their shard from the intents when none is named, and refuse intents of two shards or of another shard", () => {
        const implied = transactionActions(config, "k", [intent(s1![0]!, 1)], 0);
        assert.equal(implied.actions[0]!.Update!.Key!.pk!.S, "k\u00001");
        const shard0 = transactionActions(config, "k", [intent(s0![0]!, 1)], 0);
        assert.equal(shard0.actions[0]!.Update!.Key!.pk!.S, "k", "shard 0 is the key itself");
        assert.throws(() => transactionActions(config, "k", [intent(s0![0]!, 1), intent(s1![0]!, 2)], 0), RangeError);
        assert.throws(() => transactionActions(config, "k", [intent(s0![0]!, 1)], 0, 1), RangeError);
        assert.throws(() => transactionActions(config, "k", [], 0, 3), RangeError);
    });
});
