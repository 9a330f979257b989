/**
 * The consumer's pure planning of a sharded key (runtime/stream/markers.ts, records.ts, heal-due.ts): one group per
 * key, transactions that write each marker in its id's shard and the chunk's delta to one partial, the partial
 * picked, and the keys the shard count refuses.
 */
import { strict as assert } from "node:assert";
import { streamRecordBuilder } from "./support/stream-records";
import { seededRandom } from "../local/engine/faults";
import { DEFAULT_LAYOUT, eventualSortKey, markerSortKey, type CounterTableConfig } from "../runtime/shared/config";
import { markerShard, shardPartitionKey } from "../runtime/shards/layout";
import { driftedKey } from "../runtime/stream/heal-due";
import { partialShard, planBatch, transactionActions, type ItemIntent } from "../runtime/stream/markers";
import { classifyRecord } from "../runtime/stream/records";

const unsharded: CounterTableConfig = { ...DEFAULT_LAYOUT, tableName: "orders", countersTableName: "orders-counters" };
const sharded = (counterShards: number): CounterTableConfig => ({ ...unsharded, counterShards });

const { record, token, del } = streamRecordBuilder(5000);

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
    it("groups by key in the order the batch first shows them, whatever shards its ids' markers live in", () => {
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
            plan.groups.map((g) => [g.counterKey, g.items.map((i) => `${i.id}:${i.target}`)]),
            [
                ["k", [`${s1![0]}:counted`, `${s0![0]}:uncounted`, `${s1![1]}:counted`, `${s2![0]}:counted`]],
                ["j", [`${s1![0]}:counted`]],
            ],
        );
        assert.deepEqual(
            plan.groups.map((g) => Object.keys(g)),
            [
                ["counterKey", "items"],
                ["counterKey", "items"],
            ],
            "a group names no shard",
        );
    });

    it("a batch's plan is the same under any shard count: one group per key, as unsharded", () => {
        const [s0, s1, s2] = idsByShard(8);
        const records = [
            record("INSERT", "k", s0![0]!, token("a")),
            record("INSERT", "k", s1![0]!, token("b")),
            record("MODIFY", "k", s1![0]!, del("b"), token("b")),
            record("INSERT", "j", s2![0]!, token("c")),
            record("REMOVE", "k", s2![1]!, undefined, token("d")),
        ];
        const expected = planBatch(records, unsharded);
        assert.deepEqual(
            expected.groups.map((g) => [g.counterKey, g.items.length]),
            [
                ["k", 3],
                ["j", 1],
            ],
        );
        for (const shards of [1, 3, 8, 16]) {
            assert.deepEqual(planBatch(records, sharded(shards)), expected, `counterShards ${shards}`);
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
    const [s0, s1, s2] = idsByShard(3);
    /** Each action as [kind, table, partition key, sort key]. */
    const written = (actions: ReturnType<typeof transactionActions>["actions"]) =>
        actions.map((a) => {
            const write = (a.Update ?? a.Delete)!;
            return [a.Update ? "Update" : "Delete", write.TableName, write.Key!.pk!.S, write.Key!.sk!.S];
        });

    it("write the delta to the one partial named, each marker in its id's shard, and hard-delete the user's item under the key", () => {
        const softDeleted: ItemIntent = {
            ...intent(s0![1]!, 2),
            target: "uncounted",
            expected: "absent",
            softDelete: { token: { S: "t" } },
        };
        const items = [intent(s1![0]!, 1), softDeleted, intent(s2![0]!, 3), intent(s1![1]!, 4)];

        const { actions, index } = transactionActions(config, "k", items, 0, 2);

        assert.deepEqual(written(actions), [
            ["Update", "orders-counters", "k\u00002", eventualSortKey(config)],
            ["Update", "orders-counters", "k\u00001", markerSortKey(config, s1![0]!)],
            ["Update", "orders-counters", "k", markerSortKey(config, s0![1]!)],
            ["Delete", "orders", "k", s0![1]!],
            ["Update", "orders-counters", "k\u00002", markerSortKey(config, s2![0]!)],
            ["Update", "orders-counters", "k\u00001", markerSortKey(config, s1![1]!)],
        ]);
        assert.deepEqual(actions[0]!.Update!.ExpressionAttributeValues, { ":delta": { N: "3" } }, "the chunk's whole delta");
        assert.deepEqual(index, [{ marker: 1 }, { marker: 2, softDelete: 3 }, { marker: 4 }, { marker: 5 }]);
        assert.deepEqual(
            [0, 1, 2].map((s) => shardPartitionKey("k", s)),
            ["k", "k\u00001", "k\u00002"],
        );
    });

    it("put the delta on any partial named, the markers staying in their shards; partial 0 by default", () => {
        const items = [intent(s0![0]!, 1), intent(s1![0]!, 2), intent(s2![0]!, 3)];
        const markers = [
            ["Update", "orders-counters", "k", markerSortKey(config, s0![0]!)],
            ["Update", "orders-counters", "k\u00001", markerSortKey(config, s1![0]!)],
            ["Update", "orders-counters", "k\u00002", markerSortKey(config, s2![0]!)],
        ];
        for (const [partial, pk] of [
            [undefined, "k"],
            [0, "k"],
            [1, "k\u00001"],
            [2, "k\u00002"],
        ] as const) {
            assert.deepEqual(
                written(transactionActions(config, "k", items, 0, partial).actions),
                [["Update", "orders-counters", pk, eventualSortKey(config)], ...markers],
                `partial ${partial}`,
            );
        }
        // No delta, no partial: only the markers.
        const removal: ItemIntent = { ...intent(s1![1]!, 4), target: "uncounted", expected: "uncounted" };
        assert.deepEqual(written(transactionActions(config, "k", [removal], 0, 2).actions), [
            ["Update", "orders-counters", "k\u00001", markerSortKey(config, s1![1]!)],
        ]);
    });

    it("refuse a partial out of the key's shards, whatever the intents", () => {
        const items = [intent(s0![0]!, 1), intent(s1![0]!, 2)];
        for (const partial of [3, -1, 1.5, Number.NaN]) {
            assert.throws(() => transactionActions(config, "k", items, 0, partial), RangeError, `partial ${partial}`);
            assert.throws(() => transactionActions(config, "k", [], 0, partial), RangeError, `partial ${partial}, no intents`);
        }
        assert.throws(() => transactionActions(unsharded, "k", items, 0, 1), RangeError, "unsharded: only partial 0");
        assert.throws(() => transactionActions(sharded(1), "k", items, 0, 1), RangeError, "one shard: only partial 0");
    });

    it("under one shard write today's items: every counter item under the key itself", () => {
        const items = [intent(s0![0]!, 1), intent(s1![0]!, 2)];
        const today = transactionActions(unsharded, "k", items, 0);
        assert.deepEqual(written(today.actions), [
            ["Update", "orders-counters", "k", eventualSortKey(unsharded)],
            ["Update", "orders-counters", "k", markerSortKey(unsharded, s0![0]!)],
            ["Update", "orders-counters", "k", markerSortKey(unsharded, s1![0]!)],
        ]);
        assert.deepEqual(transactionActions(sharded(1), "k", items, 0, 0), today);
    });
});

describe("the partial a transaction picks", () => {
    it("is 0 under one shard, drawing nothing", () => {
        assert.equal(
            partialShard(1, () => assert.fail("one shard draws no random number")),
            0,
        );
    });

    it("stays within [0, N) for any random value in [0, 1), each shard for its Nth of the range", () => {
        const belowOne = 1 - 2 ** -53;
        for (const shards of [2, 3, 8, 16]) {
            const picked = (r: number) => partialShard(shards, () => r);
            assert.equal(picked(0), 0);
            assert.equal(picked(belowOne), shards - 1, "the largest value below 1");
            for (let s = 0; s < shards; s++) {
                assert.equal(picked(s / shards), s, `the start of shard ${s}'s range`);
                assert.equal(picked((s + 0.5) / shards), s, `the middle of shard ${s}'s range`);
            }
            const random = seededRandom(shards);
            const counts = Array.from({ length: shards }, () => 0);
            for (let i = 0; i < 1000; i++) {
                const s = partialShard(shards, random);
                assert.ok(Number.isInteger(s) && s >= 0 && s < shards, `counterShards ${shards}: ${s}`);
                counts[s]!++;
            }
            assert.ok(
                counts.every((n) => n > 0),
                `counterShards ${shards}: every partial is picked: ${JSON.stringify(counts)}`,
            );
        }
    });
});
