/**
 * The parity layer's transaction window (local/engine/transaction-window.ts): while the engine applies a
 * TransactWriteItems, a plain write of one of its items gets TransactionConflictException, another transaction naming
 * one of them is cancelled with a TransactionConflict reason, and so is a TransactGetItems, as DynamoDB does. A hold
 * keeps the transaction open, so every conflict is staged, not timed. DynamoDB Local alone accepts every one of them.
 */
import {
    GetItemCommand,
    PutItemCommand,
    TransactGetItemsCommand,
    TransactWriteItemsCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type TransactWriteItem,
} from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { createCounterTable } from "../local/engine/table";
import { useEngine } from "./support/engine";

const key = (pk: string, sk: string): Record<string, AttributeValue> => ({ pk: { S: pk }, sk: { S: sk } });
const add = (table: string, pk: string, sk: string, n: number): TransactWriteItem => ({
    Update: {
        TableName: table,
        Key: key(pk, sk),
        UpdateExpression: "ADD n :n",
        ExpressionAttributeValues: { ":n": { N: String(n) } },
    },
});

/** The error a call rejects with (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
    try {
        await promise;
    } catch (error) {
        return error as Error & Record<string, unknown>;
    }
    assert.fail("expected the call to be refused");
}

describe("the parity layer raises DynamoDB's transaction conflicts on DynamoDB Local", () => {
    const engine = useEngine({ parity: true });
    let db: DynamoDBClient;
    let direct: DynamoDBClient;
    let tables = 0;
    const table = async (): Promise<string> => {
        const name = `conflicts-${++tables}`;
        await createCounterTable(db, name);
        return name;
    };
    const count = async (client: DynamoDBClient, name: string, pk: string, sk: string): Promise<number> =>
        Number((await client.send(new GetItemCommand({ TableName: name, Key: key(pk, sk), ConsistentRead: true }))).Item?.n?.N ?? "0");

    before(() => {
        // One attempt: the SDK would otherwise hide what the layer answered.
        db = engine().dynamodb({ maxAttempts: 1 });
        direct = engine().dynamodb({ maxAttempts: 1, direct: true });
    });

    it("refuses a plain write of an item a pending transaction includes, and writes nothing; others pass", async () => {
        // Prepare: a transaction over a/1 and a/2, held open by the layer.
        const name = await table();
        const parity = engine().parity!;
        const before = { ...parity.stats.conflicts };
        const hold = parity.holdTransactions((t) => t.items.some((i) => i.table === name));
        const transaction = db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "a", "1", 10), add(name, "a", "2", 10)] }));
        await hold.held;

        // Act: a plain UpdateItem, PutItem of items it holds, and an UpdateItem of one it does not.
        const updated = await rejection(
            db.send(
                new UpdateItemCommand({
                    TableName: name,
                    Key: key("a", "2"),
                    UpdateExpression: "ADD n :n",
                    ExpressionAttributeValues: { ":n": { N: "1" } },
                }),
            ),
        );
        const put = await rejection(db.send(new PutItemCommand({ TableName: name, Item: { ...key("a", "1"), n: { N: "5" } } })));
        await db.send(
            new UpdateItemCommand({
                TableName: name,
                Key: key("a", "3"),
                UpdateExpression: "ADD n :n",
                ExpressionAttributeValues: { ":n": { N: "1" } },
            }),
        );
        await hold.met;
        hold.release();
        await transaction;
        const after = await db.send(
            new UpdateItemCommand({
                TableName: name,
                Key: key("a", "2"),
                UpdateExpression: "ADD n :n",
                ExpressionAttributeValues: { ":n": { N: "1" } },
                ReturnValues: "UPDATED_NEW",
            }),
        );

        // Assess: DynamoDB's error, a 400 that wrote nothing; the window closes with the engine's answer.
        for (const error of [updated, put]) {
            assert.equal(error.name, "TransactionConflictException");
            assert.equal(error.message, "Transaction is ongoing for the item");
            assert.equal((error.$metadata as { httpStatusCode: number }).httpStatusCode, 400);
        }
        assert.deepEqual(
            [await count(db, name, "a", "1"), after.Attributes?.n?.N, await count(db, name, "a", "3")],
            [10, "11", 1],
            "the refused writes left no trace; the write of an item outside the transaction passed",
        );
        assert.equal(parity.stats.conflicts.writes - before.writes, 2);
    });

    it("cancels a transaction, and a TransactGetItems, that name an item a pending transaction includes", async () => {
        // Prepare
        const name = await table();
        const parity = engine().parity!;
        const hold = parity.holdTransactions((t) => t.items.some((i) => i.table === name && i.key.sk !== undefined));
        const first = db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "b", "1", 1), add(name, "b", "2", 1)] }));
        await hold.held;

        // Act
        const second = await rejection(
            db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "b", "3", 1), add(name, "b", "2", 1)] })),
        );
        const read = await rejection(
            db.send(
                new TransactGetItemsCommand({
                    TransactItems: [{ Get: { TableName: name, Key: key("b", "1") } }, { Get: { TableName: name, Key: key("b", "4") } }],
                }),
            ),
        );
        hold.release();
        await first;

        // Assess: one reason per action, in order, TransactionConflict where the item was held.
        assert.equal(second.name, "TransactionCanceledException");
        assert.deepEqual(
            (second.CancellationReasons as Array<{ Code: string }>).map((r) => r.Code),
            ["None", "TransactionConflict"],
        );
        assert.match(second.message, /\[None, TransactionConflict\]/);
        assert.equal(read.name, "TransactionCanceledException");
        assert.deepEqual(
            (read.CancellationReasons as Array<{ Code: string }>).map((r) => r.Code),
            ["TransactionConflict", "None"],
        );
        assert.deepEqual(
            [await count(db, name, "b", "1"), await count(db, name, "b", "2"), await count(db, name, "b", "3")],
            [1, 1, 0],
            "the cancelled transaction wrote nothing",
        );
    });

    it("keeps no window after a transaction's answer, cancelled or committed", async () => {
        // Prepare: a transaction whose condition fails, then one that commits.
        const name = await table();
        const failing: TransactWriteItem = {
            Update: { ...add(name, "c", "1", 1).Update!, ConditionExpression: "attribute_exists(n)" },
        };

        // Act
        const cancelled = await rejection(db.send(new TransactWriteItemsCommand({ TransactItems: [failing, add(name, "c", "2", 1)] })));
        await db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "c", "1", 1), add(name, "c", "2", 1)] }));
        await db.send(new PutItemCommand({ TableName: name, Item: { ...key("c", "1"), n: { N: "7" } } }));
        await db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "c", "1", 1)] }));

        // Assess
        assert.deepEqual(
            (cancelled.CancellationReasons as Array<{ Code: string }>).map((r) => r.Code),
            ["ConditionalCheckFailed", "None"],
        );
        assert.deepEqual([await count(db, name, "c", "1"), await count(db, name, "c", "2")], [8, 1]);
    });

    it("answers a resent ClientRequestToken from the engine's record, whatever transaction is pending on its items", async () => {
        // Prepare: a transaction with a token commits; another transaction over the same item is then held open.
        const name = await table();
        const token = `token-${Date.now()}`;
        const first = { TransactItems: [add(name, "e", "1", 1)], ClientRequestToken: token };
        await db.send(new TransactWriteItemsCommand(first));
        const hold = engine().parity!.holdTransactions((t) => t.items.some((i) => i.table === name));
        const pending = db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "e", "1", 10), add(name, "e", "2", 10)] }));
        await hold.held;

        // Act: the same request again (a lost answer resent), and one without a token.
        await db.send(new TransactWriteItemsCommand(first));
        const fresh = await rejection(db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "e", "1", 1)] })));
        hold.release();
        await pending;

        // Assess: the resend changed nothing and met no conflict; the fresh one was cancelled.
        assert.deepEqual(
            (fresh.CancellationReasons as Array<{ Code: string }>).map((r) => r.Code),
            ["TransactionConflict"],
        );
        assert.equal(await count(db, name, "e", "1"), 11);
    });

    it("DynamoDB Local alone accepts the same plain write while the transaction is held (what the layer adds)", async () => {
        // Prepare
        const name = await table();
        const hold = engine().parity!.holdTransactions((t) => t.items.some((i) => i.table === name));
        const transaction = db.send(new TransactWriteItemsCommand({ TransactItems: [add(name, "d", "1", 10), add(name, "d", "2", 10)] }));
        await hold.held;

        // Act: the same write, straight to the engine.
        await direct.send(
            new UpdateItemCommand({
                TableName: name,
                Key: key("d", "1"),
                UpdateExpression: "ADD n :n",
                ExpressionAttributeValues: { ":n": { N: "1" } },
            }),
        );
        hold.release();
        await transaction;

        // Assess
        assert.equal(await count(db, name, "d", "1"), 11);
    });
});
