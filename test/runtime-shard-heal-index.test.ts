/**
 * A sharded key's heal and the heal index, on DynamoDB Local: what the model-based checker found (fuzz seed 15 over 3
 * shards, utilization). A utilization drift mark lives on shard 0 (the key's own best-effort item) and stands for the
 * whole key; a shard's heal write removes its own entry. So a heal must not leave a drifted shard behind unlisted:
 * - a shard with no best-effort item at all, whose homed lives' increments were all lost, is healed (its item created
 *   with the live items homed there), not skipped as having nothing to heal;
 * - a shard the heal could not write (a client wrote it since the read, or it is still within its quiet window) keeps
 *   the key on the index when another shard's write took the key's entry off it.
 */
import { strict as assert } from "node:assert";
import { GetItemCommand, PutItemCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey, countersTable, type CounterTableConfig } from "../runtime/shared/config";
import { bestEffortMarkNames, bestEffortMarkValues, bestEffortUpdate, dueMarkInput } from "../runtime/shared/best-effort-marks";
import { healKey, readForHeal, writeHeal, type HealOptions } from "../runtime/heal/heal";
import { settle } from "../runtime/heal/settle";
import { shardPartitionKey } from "../runtime/shards/layout";
import { useEngine } from "./support/engine";
import { healTables } from "./support/heal-fixture";
import { ledgerAttribute, ledgerPeriodMs } from "../runtime/ledger/ledger";
import { N, OLD, Q, T0, noFatal, shape, tokenIn } from "./support/shard-heal";

describe("a sharded key's heal keeps a drifted shard on the heal index (DynamoDB Local)", () => {
    const engine = useEngine();
    let config: CounterTableConfig;
    const db = (): DynamoDBClient => engine().dynamodb();
    const options = (now = T0): HealOptions => ({ config, dynamodb: db(), mode: "utilization", quietWindowMs: Q, now: () => now });
    const bestEffortKey = (key: string, shard: number) => ({
        [config.partitionKey]: { S: shardPartitionKey(key, shard) },
        [config.sortKey]: { S: bestEffortSortKey(config) },
    });

    async function putItem(key: string, id: string, token: string): Promise<void> {
        await db().send(
            new PutItemCommand({
                TableName: config.tableName,
                Item: { pk: { S: key }, sk: { S: id }, [config.tokenAttribute]: { S: token } },
            }),
        );
    }

    /**
     * A utilization client's increment of shard `shard` for the life `token`, at `now` (no heal-index mark: utilization
     * writes carry none), moving the life's ledger entry as the client does.
     */
    async function increment(key: string, shard: number, now: number, token: string): Promise<void> {
        const ledger = ledgerAttribute(token, ledgerPeriodMs(Q / 1000))!;
        await db().send(
            new UpdateItemCommand({
                TableName: countersTable(config),
                Key: bestEffortKey(key, shard),
                UpdateExpression: bestEffortUpdate(":one", false, true),
                ExpressionAttributeNames: { "#count": config.countAttribute, ...bestEffortMarkNames(false, ledger) },
                ExpressionAttributeValues: bestEffortMarkValues(key, now),
            }),
        );
    }

    /** A utilization call's drift mark: on shard 0, the key's own best-effort item. */
    async function markDue(key: string, at = OLD): Promise<void> {
        await db().send(new UpdateItemCommand(dueMarkInput(config, key, at)));
    }

    /** Each shard's best-effort count (undefined: no item). */
    async function counts(key: string): Promise<Array<number | undefined>> {
        return Promise.all(
            Array.from({ length: N }, (_, shard) =>
                item(key, shard).then((i) =>
                    i?.[config.countAttribute]?.N === undefined ? undefined : Number(i[config.countAttribute]!.N),
                ),
            ),
        );
    }

    async function item(key: string, shard: number): Promise<Record<string, AttributeValue> | undefined> {
        return (
            await db().send(new GetItemCommand({ TableName: countersTable(config), Key: bestEffortKey(key, shard), ConsistentRead: true }))
        ).Item;
    }

    /** Whether an entry of some shard of `key` is on the heal index, and the earliest due time of its entries. */
    async function listed(key: string): Promise<{ listed: boolean; dueAt?: number }> {
        const dues: number[] = [];
        for (let shard = 0; shard < N; shard++) {
            const found = await item(key, shard);
            if (found?.[A.healShard] !== undefined && found[A.dueAt]?.N !== undefined) {
                dues.push(Number(found[A.dueAt]!.N));
            }
        }
        return dues.length === 0 ? { listed: false } : { listed: true, dueAt: Math.min(...dues) };
    }

    beforeEach(async () => {
        // A user table and a counters table of its own, with the heal index.
        config = { ...(await healTables(engine())), counterShards: N };
    });

    it("heals a shard that has no best-effort item but live items homed there (their increments were lost)", async () => {
        // Prepare: a life homed in shard 2 whose increment never landed; its call marked the key (on shard 0).
        await putItem("k", "a", tokenIn(2));
        await markDue("k");

        // Act
        const run = await settle({ ...options(), fatal: noFatal, auditSegments: 0 });

        // Assess: shard 2's item is created with its live item; nothing is left due.
        assert.equal(run.keysFromIndex, 1);
        assert.deepEqual(await counts("k"), [0, undefined, 1]);
        assert.deepEqual(await listed("k"), { listed: false });
        // A shard with no item and nothing homed there is still left alone.
        assert.deepEqual(shape((await healKey("k", options(T0 + 1))).shards)?.[1], {
            shard: 1,
            outcome: "skipped",
            reason: "no-best-effort",
            before: undefined,
        });
    });

    it("heals a drifted shard while another life of it is still recent, and keeps the key listed until that life is old", async () => {
        // Prepare: an old life homed in shard 2 whose increment was lost (the call marked shard 0); shard 2 written just
        // now, by a recent life's increment.
        const b = tokenIn(2, T0 - 1);
        await putItem("k", "a", tokenIn(2));
        await putItem("k", "b", b);
        await increment("k", 2, T0 - 1, b);
        await markDue("k");

        // Act
        const healed = await healKey("k", options());

        // Assess: the key is healed though shard 2 is busy (its shards together): a counted from the table (old), b as its
        // ledger entry holds it (recent). The key stays listed until b's entry can be folded.
        assert.deepEqual(
            shape(healed.shards)?.map((s) => [s.shard, s.outcome, s.reason]),
            [
                [0, "healed", undefined],
                [1, "skipped", "no-best-effort"],
                [2, "healed", undefined],
            ],
        );
        assert.deepEqual(await counts("k"), [0, undefined, 2]);
        assert.equal((await listed("k")).listed, true);
        // Once b's period is older than the window, the next settler run folds it and nothing is left due.
        await settle({ ...options(T0 + Q), fatal: noFatal, auditSegments: 0 });
        assert.deepEqual(await counts("k"), [0, undefined, 2]);
        assert.deepEqual(await listed("k"), { listed: false });
    });

    it("keeps the key listed when a client writes a drifted shard between the heal's read and its write", async () => {
        // Prepare: a life homed in shard 2 whose increment was lost (the call marked shard 0); the heal reads the key.
        await putItem("k", "a", tokenIn(2));
        const b = tokenIn(2);
        await increment("k", 2, OLD, b);
        await putItem("k", "b", b);
        await markDue("k");
        const read = await readForHeal("k", options());

        // Act: another life's increment lands on shard 2, then the heal writes.
        const c = tokenIn(2, T0);
        await putItem("k", "c", c);
        await increment("k", 2, T0, c);
        const written = await writeHeal(read, options());

        // Assess: the shards' one transaction raced on shard 2: nothing changed (shard 2 one below its lives), the key
        // still on the index.
        assert.deepEqual(
            shape(written.shards)?.map((s) => [s.shard, s.outcome]),
            [
                [0, "raced"],
                [1, "skipped"],
                [2, "raced"],
            ],
        );
        assert.deepEqual(await counts("k"), [undefined, undefined, 2]);
        assert.equal((await listed("k")).listed, true);
    });
});
