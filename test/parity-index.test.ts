/** The heal index's writes, billed by the parity layer (local/engine/parity.ts) as DynamoDB bills a global secondary index. */
import { TransactWriteItemsCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { createCountersTable } from "../local/engine/table";
import { HEAL_DUE, HEAL_INDEX_NAME, HEAL_PARTITION } from "../runtime/heal/index-marks";

describe("the parity layer bills global secondary index writes as DynamoDB does", () => {
    const engine = useEngine();
    let db: DynamoDBClient;
    let tables = 0;
    before(() => {
        db = engine().dynamodb({ maxAttempts: 1 });
    });
    after(() => db.destroy());

    /** The heal index's entry of one item: added, moved, left, removed. */
    const steps: Array<{ step: string; update: string; values?: Record<string, AttributeValue>; index: number }> = [
        {
            step: "adds the entry",
            update: `SET ${HEAL_PARTITION} = :s, ${HEAL_DUE} = :t`,
            values: { ":s": { S: "3" }, ":t": { N: "1" } },
            index: 1,
        },
        { step: "moves its key", update: `SET ${HEAL_DUE} = :t`, values: { ":t": { N: "2" } }, index: 2 },
        { step: "keeps its key", update: `SET ${HEAL_DUE} = :t, c = :t`, values: { ":t": { N: "2" } }, index: 0 },
        { step: "changes no key", update: "ADD c :one", values: { ":one": { N: "1" } }, index: 0 },
        { step: "removes the entry", update: `REMOVE ${HEAL_PARTITION}`, index: 1 },
    ];

    it("bills a single update's index writes as DynamoDB does: 1 to add or remove an entry, 2 to move it, 0 otherwise", async () => {
        const name = `parity-gsi-${++tables}`;
        await createCountersTable(db, name, undefined, { healIndex: true });
        const billed: number[] = [];
        for (const { update, values } of steps) {
            const out = await db.send(
                new UpdateItemCommand({
                    TableName: name,
                    Key: { pk: { S: "k" }, sk: { S: "be" } },
                    UpdateExpression: update,
                    ...(values ? { ExpressionAttributeValues: values } : {}),
                    ReturnConsumedCapacity: "TOTAL",
                }),
            );
            billed.push(out.ConsumedCapacity!.CapacityUnits!);
        }
        assert.deepEqual(
            billed,
            steps.map((s) => 1 + s.index),
        );
    });

    it("bills a transaction's index writes on top of its 2 units per KB per item", async () => {
        const name = `parity-gsi-${++tables}`;
        await createCountersTable(db, name, undefined, { healIndex: true });
        const before = engine().parity!.stats.transactionIndexWriteUnits;
        const billed: number[] = [];
        for (const { update, values } of steps) {
            const out = await db.send(
                new TransactWriteItemsCommand({
                    TransactItems: [
                        {
                            Update: {
                                TableName: name,
                                Key: { pk: { S: "k" }, sk: { S: "be" } },
                                UpdateExpression: update,
                                ...(values ? { ExpressionAttributeValues: values } : {}),
                            },
                        },
                    ],
                    ReturnConsumedCapacity: "INDEXES",
                }),
            );
            billed.push(out.ConsumedCapacity![0]!.CapacityUnits!);
            const index = out.ConsumedCapacity![0]!.GlobalSecondaryIndexes;
            assert.deepEqual(index?.[HEAL_INDEX_NAME]?.CapacityUnits ?? 0, steps[billed.length - 1]!.index, update);
        }
        assert.deepEqual(
            billed,
            steps.map((s) => 2 + s.index),
        );
        assert.equal(engine().parity!.stats.transactionIndexWriteUnits - before, 4);
    });
});
