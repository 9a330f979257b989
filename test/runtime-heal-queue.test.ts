/**
 * The heal index served oldest first across its shards (DynamoDB Local, virtual clock): a backlog of B due keys
 * heals within ceil(B / keyBudget) settler runs, while newer due keys keep arriving in low shards.
 */
import { GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { COUNTER_ATTRIBUTES as A, HEAL_SHARDS, bestEffortSortKey, countersTable, healShard } from "../runtime/shared/config";
import type { FatalQueue } from "../runtime/stream/fatal";
import { settle } from "../runtime/heal/settle";
import { useEngine } from "./support/engine";
import { healTables } from "./support/heal-fixture";

const Q = 60_000;
const T0 = 1_800_000_000_000;
const noFatal: FatalQueue = { park: async () => true };

/** `count` fresh key names whose heal-index shard is `shard`. */
function keysInShard(shard: number, count: number, prefix: string): string[] {
    const keys: string[] = [];
    for (let i = 0; keys.length < count; i++) {
        if (healShard(`${prefix}${i}`) === String(shard)) {
            keys.push(`${prefix}${i}`);
        }
    }
    return keys;
}

describe("the settler serves the heal index oldest first across shards (DynamoDB Local)", function () {
    const engine = useEngine();

    it("a backlog of 5 due keys in the high shards heals within ceil(5 / 2) runs while 2 newer keys arrive in shard 0 each run", async () => {
        // Prepare: the backlog, written long ago, in shards 15, 14 and 13.
        const config = await healTables(engine());
        const db = engine().dynamodb();
        const write = (key: string, at: number) =>
            db.send(
                new PutItemCommand({
                    TableName: countersTable(config),
                    Item: {
                        pk: { S: key },
                        sk: { S: bestEffortSortKey(config) },
                        count: { N: "0" },
                        [A.version]: { N: "1" },
                        [A.writtenAt]: { N: String(at) },
                        [A.dueAt]: { N: String(at) },
                        [A.healShard]: { S: healShard(key) },
                    },
                }),
            );
        const backlog = [
            ...keysInShard(HEAL_SHARDS - 1, 2, "old-a"),
            ...keysInShard(HEAL_SHARDS - 2, 2, "old-b"),
            ...keysInShard(HEAL_SHARDS - 3, 1, "old-c"),
        ];
        for (const [i, key] of backlog.entries()) {
            await write(key, T0 + i);
        }
        const budget = 2;
        const runs = Math.ceil(backlog.length / budget);
        const arrivals = keysInShard(0, 2 * runs, "new");

        // Act: each run, 2 keys written later than the whole backlog (yet due) arrive in shard 0 first.
        let clock = T0 + 10 * Q;
        for (let run = 1; run <= runs; run++) {
            for (const key of arrivals.slice(2 * (run - 1), 2 * run)) {
                await write(key, clock - Q - 1);
            }
            const report = await settle({
                config,
                dynamodb: db,
                mode: "strict",
                quietWindowMs: Q,
                now: () => clock,
                fatal: noFatal,
                auditSegments: 0,
                keyBudget: budget,
            });
            assert.equal(report.keysFromIndex, budget);
            assert.equal(report.healed, budget);
            clock += Q;
        }

        // Assess: every backlog key was healed (it left the heal index) by run ceil(B / budget).
        const stillDue: string[] = [];
        for (const key of backlog) {
            const item = await db.send(
                new GetItemCommand({
                    TableName: countersTable(config),
                    Key: { pk: { S: key }, sk: { S: bestEffortSortKey(config) } },
                    ConsistentRead: true,
                }),
            );
            if (item.Item?.[A.healShard] !== undefined) {
                stillDue.push(key);
            }
        }
        assert.deepEqual(stillDue, []);
    });
});
