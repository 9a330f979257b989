import {
    CreateTableCommand,
    GetItemCommand,
    PutItemCommand,
    TransactWriteItemsCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type TransactWriteItem,
} from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { itemSize } from "../local/engine/parity-model";
import { createCounterTable } from "../local/engine/table";

/** A clock the tests move by hand, so every bucket's level is exact. */
const clock = { t: 1_000_000, now: () => clock.t, advance: (ms: number) => (clock.t += ms) };
/** Long enough for every partition's bucket to refill completely. */
const REFILL_MS = 60_000;

const ON_DEMAND_THROTTLED =
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. " +
    "If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html.";

/** The error a call rejects with (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
    try {
        await promise;
    } catch (error) {
        return error as Error & Record<string, unknown>;
    }
    assert.fail("expected the call to be refused");
}

/** An item of exactly `bytes` bytes as DynamoDB sizes it: pk, sk, a flag and a string payload. */
function itemOf(pk: string, sk: string, bytes: number): Record<string, AttributeValue> {
    const fixed = itemSize({ pk: { S: pk }, sk: { S: sk }, f: { BOOL: false }, x: { S: "" } });
    return { pk: { S: pk }, sk: { S: sk }, f: { BOOL: false }, x: { S: "x".repeat(bytes - fixed) } };
}

const flip = (table: string, pk: string, sk: string): TransactWriteItem => ({
    Update: {
        TableName: table,
        Key: { pk: { S: pk }, sk: { S: sk } },
        UpdateExpression: "SET f = :t",
        ExpressionAttributeValues: { ":t": { BOOL: true } },
    },
});

/** The scaled rates the bench's hot-key scenario meters with: 10 WCU/s, and DynamoDB's 3 read units per write unit. */
const SCALED = { writeUnitsPerSecond: 10, readUnitsPerSecond: 30 };

describe("the parity layer enforces DynamoDB's limits on DynamoDB Local", () => {
    // Tables named scaled-partition-* are metered at the scaled rates per partition key value, scaled-item-* per item.
    const engine = useEngine({
        parity: {
            now: clock.now,
            metering: (table) =>
                table.startsWith("scaled-partition-")
                    ? { ...SCALED, per: "partition" }
                    : table.startsWith("scaled-item-")
                      ? { ...SCALED, per: "item" }
                      : undefined,
        },
    });
    let db: DynamoDBClient;
    let direct: DynamoDBClient;
    let tables = 0;
    const table = async (): Promise<string> => {
        const name = `parity-${++tables}`;
        await createCounterTable(db, name);
        return name;
    };

    before(() => {
        // One attempt: the SDK would otherwise retry a throttled request and hide the error.
        db = engine().dynamodb({ maxAttempts: 1 });
        direct = engine().dynamodb({ maxAttempts: 1, direct: true });
    });
    beforeEach(() => clock.advance(REFILL_MS));
    after(() => {
        db.destroy();
        direct.destroy();
    });

    describe("100 actions per transaction", () => {
        it("commits 100 actions and refuses 101 with the service's validation message", async () => {
            const name = await table();
            const puts = (n: number) =>
                Array.from({ length: n }, (_, i) => ({ Put: { TableName: name, Item: { pk: { S: `k${i}` }, sk: { S: "a" } } } }));

            await db.send(new TransactWriteItemsCommand({ TransactItems: puts(100) }));
            const refused = await rejection(db.send(new TransactWriteItemsCommand({ TransactItems: puts(101) })));

            assert.equal(refused.name, "ValidationException");
            assert.match(
                refused.message,
                /^1 validation error detected: Value '\[(com\.amazonaws\.dynamodb\.v20120810\.TransactWriteItem@[0-9a-f]+, ){100}com\.amazonaws\.dynamodb\.v20120810\.TransactWriteItem@[0-9a-f]+\]' at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100$/,
            );
            assert.equal(engine().parity!.stats.refused.tooManyActions, 1);
        });
    });

    describe("4 MB of items per transaction, counting the stored items an update touches", () => {
        // 11 items adding up to exactly 4 MB (4,194,304 bytes), each on its own partition key.
        const sizes = [...Array.from({ length: 10 }, () => 381_300), 4_194_304 - 10 * 381_300];

        it("commits flag flips on items of exactly 4 MB in all, billed 2 write units per KB of each item", async () => {
            const name = await table();
            for (const [i, bytes] of sizes.entries()) {
                await db.send(new PutItemCommand({ TableName: name, Item: itemOf(`p${i}`, "a", bytes) }));
                clock.advance(REFILL_MS);
            }

            const committed = await db.send(
                new TransactWriteItemsCommand({
                    TransactItems: sizes.map((_, i) => flip(name, `p${i}`, "a")),
                    ReturnConsumedCapacity: "TOTAL",
                }),
            );

            assert.equal(
                sizes.reduce((a, b) => a + b, 0),
                4 * 1024 * 1024,
            );
            const billed = sizes.reduce((n, bytes) => n + 2 * Math.ceil(bytes / 1024), 0);
            assert.deepEqual(committed.ConsumedCapacity, [{ TableName: name, CapacityUnits: billed, WriteCapacityUnits: billed }]);
            assert.equal(billed, 8_206);
        });

        it("refuses the same flips once one item is a byte larger, which DynamoDB Local alone commits", async () => {
            const name = await table();
            for (const [i, bytes] of sizes.entries()) {
                await db.send(new PutItemCommand({ TableName: name, Item: itemOf(`p${i}`, "a", i === 0 ? bytes + 1 : bytes) }));
                clock.advance(REFILL_MS);
            }
            const flips = sizes.map((_, i) => flip(name, `p${i}`, "a"));

            const refused = await rejection(db.send(new TransactWriteItemsCommand({ TransactItems: flips })));
            const before = await db.send(
                new GetItemCommand({ TableName: name, Key: { pk: { S: "p0" }, sk: { S: "a" } }, ConsistentRead: true }),
            );
            await direct.send(new TransactWriteItemsCommand({ TransactItems: flips }));

            assert.equal(refused.name, "ValidationException");
            assert.equal(
                refused.message,
                "Collection size of items exceeded, which can also be caused by the aggregate size of the items in the transaction exceeding the 4MB limit",
            );
            assert.deepEqual(before.Item?.f, { BOOL: false });
            assert.equal(engine().parity!.stats.refused.transactionTooLarge, 1);
        });

        it("counts the item an update leaves: attributes it adds can push the transaction over 4 MB", async () => {
            const name = await table();
            for (const [i, bytes] of sizes.entries()) {
                await db.send(new PutItemCommand({ TableName: name, Item: itemOf(`p${i}`, "a", bytes) }));
                clock.advance(REFILL_MS);
            }
            // "SET f = :t" leaves the size as it is; adding one attribute "g" of 1 byte adds 2 bytes.
            const grow = (extra: string): TransactWriteItem[] =>
                sizes.map((_, i) =>
                    i === 0
                        ? {
                              Update: {
                                  TableName: name,
                                  Key: { pk: { S: "p0" }, sk: { S: "a" } },
                                  UpdateExpression: `SET f = :t${extra}`,
                                  ExpressionAttributeValues: { ":t": { BOOL: true }, ...(extra ? { ":g": { S: "g" } } : {}) },
                              },
                          }
                        : flip(name, `p${i}`, "a"),
                );

            const refused = await rejection(db.send(new TransactWriteItemsCommand({ TransactItems: grow(", g = :g") })));
            clock.advance(REFILL_MS);
            await db.send(new TransactWriteItemsCommand({ TransactItems: grow("") }));

            assert.equal(refused.name, "ValidationException");
            assert.match(refused.message, /aggregate size of the items in the transaction exceeding the 4MB limit$/);
        });
    });

    describe("400 KB per item (DynamoDB Local enforces it; the layer lets its answer through)", () => {
        it("puts an item of exactly 400 KB and refuses one byte more", async () => {
            const name = await table();
            const exact = itemOf("k", "a", 400 * 1024);

            await db.send(new PutItemCommand({ TableName: name, Item: exact }));
            const refused = await rejection(db.send(new PutItemCommand({ TableName: name, Item: itemOf("k", "b", 400 * 1024 + 1) })));

            assert.equal(itemSize(exact), 409_600);
            assert.equal(refused.name, "ValidationException");
            assert.equal(refused.message, "Item size has exceeded the maximum allowed size");
        });

        it("counts the attributes an update adds: up to 400 KB in all, and no byte more", async () => {
            const name = await table();
            await db.send(new PutItemCommand({ TableName: name, Item: itemOf("k", "a", 300 * 1024) }));
            // A new attribute "q" of n characters adds 1 + n bytes.
            const add = (n: number) =>
                db.send(
                    new UpdateItemCommand({
                        TableName: name,
                        Key: { pk: { S: "k" }, sk: { S: "a" } },
                        UpdateExpression: "SET q = :q",
                        ExpressionAttributeValues: { ":q": { S: "q".repeat(n) } },
                    }),
                );

            const refused = await rejection(add(100 * 1024));
            clock.advance(REFILL_MS);
            await add(100 * 1024 - 1);
            const stored = await db.send(
                new GetItemCommand({ TableName: name, Key: { pk: { S: "k" }, sk: { S: "a" } }, ConsistentRead: true }),
            );

            assert.equal(refused.name, "ValidationException");
            assert.equal(refused.message, "Item size to update has exceeded the maximum allowed size");
            assert.equal(itemSize(stored.Item), 409_600);
        });

        it("cancels a transaction whose update would pass 400 KB, naming the action", async () => {
            const name = await table();
            await db.send(new PutItemCommand({ TableName: name, Item: itemOf("k", "a", 400 * 1024) }));
            clock.advance(REFILL_MS);

            const refused = await rejection(
                db.send(
                    new TransactWriteItemsCommand({
                        TransactItems: [
                            { Put: { TableName: name, Item: { pk: { S: "other" }, sk: { S: "b" } } } },
                            {
                                Update: {
                                    TableName: name,
                                    Key: { pk: { S: "k" }, sk: { S: "a" } },
                                    UpdateExpression: "SET z = :z",
                                    ExpressionAttributeValues: { ":z": { BOOL: true } },
                                },
                            },
                        ],
                    }),
                ),
            );

            assert.equal(refused.name, "TransactionCanceledException");
            assert.equal(
                refused.message,
                "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ValidationError]",
            );
            assert.deepEqual(refused.CancellationReasons, [
                { Code: "None" },
                { Code: "ValidationError", Message: "Item size to update has exceeded the maximum allowed size" },
            ]);
        });
    });

    describe("1,000 write units and 3,000 read units per second per partition key", () => {
        it("serves 1,000 write units on one key, then throttles it with the on-demand error, and refills at 1,000 per second", async () => {
            const name = await table();
            // Each put of a 100 KB item costs 100 write units.
            const put = (i: number) => db.send(new PutItemCommand({ TableName: name, Item: itemOf("hot", `r${i}`, 100 * 1024) }));
            for (let i = 0; i < 10; i++) {
                await put(i);
            }

            const throttled = await rejection(put(10));
            const otherKey = await db.send(new PutItemCommand({ TableName: name, Item: itemOf("cold", "r0", 100 * 1024) }));
            clock.advance(1);
            await put(11);
            const again = await rejection(put(12));

            assert.equal(throttled.name, "ThrottlingException");
            assert.equal(throttled.message, ON_DEMAND_THROTTLED);
            assert.deepEqual(throttled.throttlingReasons, [
                { reason: "TableWriteKeyRangeThroughputExceeded", resource: `arn:aws:dynamodb:ddblocal:000000000000:table/${name}` },
            ]);
            assert.equal(otherKey.$metadata.httpStatusCode, 200);
            assert.equal(again.name, "ThrottlingException");
            assert.equal(engine().parity!.stats.throttledByKey.get(`${name}/{"S":"hot"}`), 2);
        });

        it("raises ProvisionedThroughputExceededException on a provisioned table", async () => {
            const name = `parity-provisioned-${++tables}`;
            await db.send(
                new CreateTableCommand({
                    TableName: name,
                    BillingMode: "PROVISIONED",
                    ProvisionedThroughput: { ReadCapacityUnits: 10_000, WriteCapacityUnits: 10_000 },
                    AttributeDefinitions: [
                        { AttributeName: "pk", AttributeType: "S" },
                        { AttributeName: "sk", AttributeType: "S" },
                    ],
                    KeySchema: [
                        { AttributeName: "pk", KeyType: "HASH" },
                        { AttributeName: "sk", KeyType: "RANGE" },
                    ],
                }),
            );
            const put = (i: number) => db.send(new PutItemCommand({ TableName: name, Item: itemOf("hot", `r${i}`, 400 * 1024) }));
            await put(0);
            await put(1);
            await put(2);

            const throttled = await rejection(put(3));

            assert.equal(throttled.name, "ProvisionedThroughputExceededException");
            assert.equal(
                throttled.message,
                "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.",
            );
            assert.deepEqual(throttled.ThrottlingReasons, [
                { reason: "TableWriteKeyRangeThroughputExceeded", resource: `arn:aws:dynamodb:ddblocal:000000000000:table/${name}` },
            ]);
        });

        it("serves 3,000 consistent read units on one key, then throttles its reads but not its writes", async () => {
            const name = await table();
            await db.send(new PutItemCommand({ TableName: name, Item: itemOf("hot", "big", 400 * 1024) }));
            clock.advance(REFILL_MS);
            // A consistent read of a 400 KB item costs 100 read units.
            const read = () =>
                db.send(new GetItemCommand({ TableName: name, Key: { pk: { S: "hot" }, sk: { S: "big" } }, ConsistentRead: true }));
            for (let i = 0; i < 30; i++) {
                await read();
            }

            const throttled = await rejection(read());
            const write = await db.send(new PutItemCommand({ TableName: name, Item: { pk: { S: "hot" }, sk: { S: "small" } } }));

            assert.equal(throttled.name, "ThrottlingException");
            assert.deepEqual(throttled.throttlingReasons, [
                { reason: "TableReadKeyRangeThroughputExceeded", resource: `arn:aws:dynamodb:ddblocal:000000000000:table/${name}` },
            ]);
            assert.equal(write.$metadata.httpStatusCode, 200);
        });

        it("cancels a transaction touching a throttled key with a ThrottlingError reason for that action only", async () => {
            const name = await table();
            for (let i = 0; i < 3; i++) {
                await db.send(new PutItemCommand({ TableName: name, Item: itemOf("hot", `r${i}`, 400 * 1024) }));
            }

            const refused = await rejection(
                db.send(
                    new TransactWriteItemsCommand({
                        TransactItems: [
                            { Put: { TableName: name, Item: { pk: { S: "cold" }, sk: { S: "a" } } } },
                            { Put: { TableName: name, Item: { pk: { S: "hot" }, sk: { S: "b" } } } },
                        ],
                    }),
                ),
            );

            assert.equal(refused.name, "TransactionCanceledException");
            assert.equal(
                refused.message,
                "Transaction cancelled, please refer cancellation reasons for specific reasons [None, ThrottlingError]",
            );
            assert.deepEqual(refused.CancellationReasons, [{ Code: "None" }, { Code: "ThrottlingError", Message: ON_DEMAND_THROTTLED }]);
            assert.equal(engine().parity!.stats.unchecked, 0);
        });

        it("bills a transaction 2 write units per KB per item against each item's partition", async () => {
            const name = await table();
            // Two 300 KB items on one key: the transaction costs 2 * 300 * 2 = 1,200 units, more than a second.
            await db.send(new PutItemCommand({ TableName: name, Item: itemOf("hot", "a", 300 * 1024) }));
            await db.send(new PutItemCommand({ TableName: name, Item: itemOf("hot", "b", 300 * 1024) }));
            clock.advance(REFILL_MS);

            const committed = await db.send(
                new TransactWriteItemsCommand({
                    TransactItems: [flip(name, "hot", "a"), flip(name, "hot", "b")],
                    ReturnConsumedCapacity: "INDEXES",
                }),
            );
            clock.advance(199);
            const stillInDebt = await rejection(
                db.send(new PutItemCommand({ TableName: name, Item: { pk: { S: "hot" }, sk: { S: "c" } } })),
            );
            clock.advance(2);
            await db.send(new PutItemCommand({ TableName: name, Item: { pk: { S: "hot" }, sk: { S: "c" } } }));

            assert.deepEqual(committed.ConsumedCapacity, [
                {
                    TableName: name,
                    CapacityUnits: 1_200,
                    WriteCapacityUnits: 1_200,
                    Table: { CapacityUnits: 1_200, WriteCapacityUnits: 1_200 },
                },
            ]);
            assert.equal(stillInDebt.name, "ThrottlingException");
        });
    });

    describe("a table metered at a scaled rate (the bench's hot-key ceiling)", () => {
        const put = (name: string, pk: string, sk: string) =>
            db.send(new PutItemCommand({ TableName: name, Item: { pk: { S: pk }, sk: { S: sk } } }));

        it("serves 10 one-unit writes on one key, throttles the 11th, and refills at 10 per second", async () => {
            // Prepare
            const name = `scaled-partition-${++tables}`;
            await createCounterTable(db, name);

            // Act
            for (let i = 0; i < 10; i++) {
                await put(name, "hot", `r${i}`);
            }
            const throttled = await rejection(put(name, "hot", "r10"));
            const otherKey = await put(name, "cold", "r0");
            // A tenth of a second refills one unit: one more write, and the bucket is empty again.
            clock.advance(100);
            const afterAUnitRefilled = await put(name, "hot", "r11");
            const again = await rejection(put(name, "hot", "r12"));

            // Assess
            assert.equal(throttled.name, "ThrottlingException");
            assert.equal(throttled.message, ON_DEMAND_THROTTLED);
            assert.equal(otherKey.$metadata.httpStatusCode, 200);
            assert.equal(afterAUnitRefilled.$metadata.httpStatusCode, 200);
            assert.equal(again.name, "ThrottlingException");
            assert.equal(engine().parity!.stats.throttledByKey.get(`${name}/{"S":"hot"}`), 2);
            assert.deepEqual(engine().parity!.metered.get(name), { ...SCALED, per: "partition" });
        });

        it("sustains one key at exactly 10 write units per second, and throttles it at 11", async () => {
            // Prepare
            const atRate = `scaled-partition-${++tables}`;
            const overRate = `scaled-partition-${++tables}`;
            await createCounterTable(db, atRate);
            await createCounterTable(db, overRate);
            const drive = async (name: string, perSecond: number): Promise<number> => {
                let throttled = 0;
                for (let i = 0; i < 150; i++) {
                    clock.advance(1000 / perSecond);
                    await put(name, "hot", `r${i}`).catch((error: Error) => {
                        assert.equal(error.name, "ThrottlingException");
                        throttled++;
                    });
                }
                return throttled;
            };

            // Act
            const underOrAt = await drive(atRate, 10);
            const over = await drive(overRate, 11);

            // Assess: at 11/s the bucket loses 1/11 of a unit per write; its 10 units last about 110 writes.
            assert.equal(underOrAt, 0);
            assert.ok(over > 0 && over < 40, `${over} of 150 writes at 11/s throttled`);
        });

        it("serves 30 consistent read units per second on a key scaled to 10 write units, and throttles the 31st", async () => {
            // Prepare
            const name = `scaled-partition-${++tables}`;
            await createCounterTable(db, name);
            await put(name, "hot", "small");
            clock.advance(REFILL_MS);
            const read = () =>
                db.send(new GetItemCommand({ TableName: name, Key: { pk: { S: "hot" }, sk: { S: "small" } }, ConsistentRead: true }));

            // Act
            for (let i = 0; i < 30; i++) {
                await read();
            }
            const throttled = await rejection(read());

            // Assess
            assert.equal(throttled.name, "ThrottlingException");
            assert.deepEqual(throttled.throttlingReasons, [
                { reason: "TableReadKeyRangeThroughputExceeded", resource: `arn:aws:dynamodb:ddblocal:000000000000:table/${name}` },
            ]);
        });

        it("meters a table per item: one key's items on many sort keys never share a bucket, one item still has 10 units", async () => {
            // Prepare
            const name = `scaled-item-${++tables}`;
            await createCounterTable(db, name);
            const bump = () =>
                db.send(
                    new UpdateItemCommand({
                        TableName: name,
                        Key: { pk: { S: "hot" }, sk: { S: "one" } },
                        UpdateExpression: "ADD c :one",
                        ExpressionAttributeValues: { ":one": { N: "1" } },
                    }),
                );

            // Act
            for (let i = 0; i < 30; i++) {
                await put(name, "hot", `r${i}`);
            }
            for (let i = 0; i < 10; i++) {
                await bump();
            }
            const throttled = await rejection(bump());

            // Assess
            assert.equal(throttled.name, "ThrottlingException");
            assert.equal(engine().parity!.stats.throttledByKey.get(`${name}/{"S":"hot"}/{"S":"one"}`), 1);
            assert.equal(
                [...engine().parity!.stats.throttledByKey.keys()].filter((k) => k.startsWith(`${name}/`)).length,
                1,
                "only the one item was throttled",
            );
        });

        it("leaves every other table at DynamoDB's 1,000 write units per partition key value", async () => {
            // Prepare
            const name = await table();

            // Act: 11 one-unit writes would be throttled on a scaled table.
            const answers = [];
            for (let i = 0; i < 11; i++) {
                answers.push(await put(name, "hot", `r${i}`));
            }

            // Assess
            assert.deepEqual(
                answers.map((a) => a.$metadata.httpStatusCode),
                Array.from({ length: 11 }, () => 200),
            );
            assert.equal(engine().parity!.metered.has(name), false);
            assert.deepEqual(engine().parity!.limits, {
                partitionWriteUnitsPerSecond: 1_000,
                partitionReadUnitsPerSecond: 3_000,
                bucketSeconds: 1,
            });
        });
    });
});
