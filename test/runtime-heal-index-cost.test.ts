/**
 * The heal index on the hot path: in utilization mode a call that keeps best-effort exact writes no entry; in strict
 * mode the key's entry is written once per heal cycle, not by every call; and the settler moves a busy key's entry
 * behind the backlog. DynamoDB Local bills index writes as DynamoDB does
 * (test/parity.test.ts), so the figures below are the bill.
 */
import { GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { uuidv7 } from "../runtime/shared/tokens";
import { strict as assert } from "node:assert";
import { meterWrites } from "../local/engine/capacity";
import { ModelClient } from "../local/harness/model-client";
import { HybridCounterClient } from "../runtime/client/client";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey, countersTable, type CounterTableConfig } from "../runtime/shared/config";
import type { FatalQueue } from "../runtime/stream/fatal";
import { settle } from "../runtime/heal/settle";
import { useEngine } from "./support/engine";
import { healTables } from "./support/heal-fixture";

const Q = 600_000;
const T0 = 1_800_000_000_000;
const noFatal: FatalQueue = { park: async () => true };

describe("the heal index on the hot path", function () {
    const engine = useEngine();

    for (const mode of ["utilization", "strict"] as const) {
        const entry = mode === "strict" ? "the key's index entry is written once per heal cycle" : "no index entry is written";
        it(`${mode}: a create costs 2 WCU and a delete 3 (strict: 4 for a life its create may still repeat), and ${entry}`, async () => {
            // Prepare
            const config = await healTables(engine());
            const dynamodb = engine().dynamodb();
            const meter = meterWrites(dynamodb);
            const client = new HybridCounterClient({ ...config, dynamodb, mode });
            const cost = async (call: () => Promise<unknown>): Promise<number> => {
                const before = meter.billed;
                await call();
                return meter.billed - before;
            };

            // An item of the client's written three minutes ago: no call that created it can still send an attempt.
            await dynamodb.send(
                new PutItemCommand({
                    TableName: config.tableName,
                    Item: { pk: { S: "k" }, sk: { S: "old" }, [config.tokenAttribute]: { S: uuidv7(Date.now() - 180_000) } },
                }),
            );

            // Act: three creates and a delete on one key (the first create adds the key's index entry), and the delete
            // of the old item.
            const figures = [
                await cost(() => client.create("k", "a")),
                await cost(() => client.create("k", "b")),
                await cost(() => client.create("k", "c")),
                await cost(() => client.delete("k", "b")),
                await cost(() => client.delete("k", "old")),
            ];

            // Assess: the floor (item + best-effort; claim or touch, count, soft delete); in strict mode 1 for the entry
            // the first reservation adds (a call that dies after reserving holds a slot until a heal), and 1 for the
            // release's trace on the marker when the deleted life is young enough for its create to repeat its put
            // (runtime/shared/strict-ledger.ts).
            assert.deepEqual(figures, mode === "strict" ? [3, 2, 2, 4, 3] : [2, 2, 2, 3, 3]);
            assert.equal((await marks(config, "k")).listed, mode === "strict");
        });
    }

    it("a heal removes the entry; the next write adds it again, due from that write", async () => {
        // Prepare
        const config = await healTables(engine());
        const db = engine().dynamodb();
        let clock = T0;
        const client = new ModelClient({ config, dynamodb: db, mode: "strict", now: () => clock });
        await client.create("k", "a", 5);
        clock += 1_000;
        await client.create("k", "b", 5);
        assert.deepEqual(await marks(config, "k"), { due: T0, written: T0 + 1_000, listed: true });

        // Act
        clock += Q + 1_000;
        const run = await settle({
            config,
            dynamodb: db,
            mode: "strict",
            quietWindowMs: Q,
            now: () => clock,
            fatal: noFatal,
            auditSegments: 0,
        });
        const afterHeal = await marks(config, "k");
        clock += 5_000;
        await client.create("k", "c", 5);

        // Assess: the heal read best-effort and the partition (1 RCU each) and wrote the truth and the entry's removal
        assert.equal(run.healed, 1);
        assert.deepEqual(run.heal.healed, { readUnits: 2, writeUnits: 2 });
        assert.deepEqual(run.heal.checks, { count: 0, readUnits: 0, writeUnits: 0 });
        assert.deepEqual(afterHeal, { due: undefined, written: T0 + 1_000, listed: false });
        assert.deepEqual(await marks(config, "k"), { due: clock, written: clock, listed: true });
    });

    it("the settler moves a key still busy after the window behind the backlog, to its last write (a client of an earlier version)", async () => {
        // Prepare: a key first written at T0 and again just inside the window, by clients of an earlier version (no
        // ledger of recent lives: its heal waits for the key to be quiet); a quiet key due later than T0.
        const config = await healTables(engine());
        const db = engine().dynamodb();
        let clock = T0;
        const client = new ModelClient({ config, dynamodb: db, mode: "strict", now: () => clock, keepsLedger: false });
        await client.create("busy", "a", 5);
        clock = T0 + 10;
        await client.create("quiet", "a", 5);
        clock = T0 + Q;
        await client.create("busy", "b", 5);

        // Act: a run with a budget of one key, after the quiet key's window.
        clock = T0 + Q + 20;
        const options = {
            config,
            dynamodb: db,
            mode: "strict" as const,
            quietWindowMs: Q,
            now: () => clock,
            fatal: noFatal,
            auditSegments: 0,
            keyBudget: 1,
        };
        const first = await settle(options);
        const second = await settle(options);

        // Assess: the busy key took the first run's slot and was moved to its last write; the quiet key healed next.
        assert.deepEqual([first.healed, first.skipped], [0, { "quiet-window": 1 }]);
        assert.deepEqual(first.heal.checks, { count: 1, readUnits: 1, writeUnits: 0 }, "a busy key costs its best-effort read");
        assert.deepEqual(second.heal.healed, { readUnits: 2, writeUnits: 2 });
        assert.deepEqual(await marks(config, "busy"), { due: T0 + Q, written: T0 + Q, listed: true });
        assert.equal(second.healed, 1);
        assert.equal((await marks(config, "quiet")).listed, false);
    });

    async function marks(config: CounterTableConfig, key: string): Promise<{ due?: number; written?: number; listed: boolean }> {
        const item = (
            await engine()
                .dynamodb()
                .send(
                    new GetItemCommand({
                        TableName: countersTable(config),
                        Key: { [config.partitionKey]: { S: key }, [config.sortKey]: { S: bestEffortSortKey(config) } },
                        ConsistentRead: true,
                    }),
                )
        ).Item;
        const n = (name: string) => (item?.[name]?.N === undefined ? undefined : Number(item[name]!.N));
        return { due: n(A.dueAt), written: n(A.writtenAt), listed: item?.[A.healShard] !== undefined };
    }
});
