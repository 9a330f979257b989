/**
 * Counting items from any writer, on DynamoDB Local, with the counters in a table of their own: plain
 * puts, DocumentClient-style items, foreign entities under the same key, full overwrites, hard deletes
 * and the client's soft deletes, each counted exactly once under redelivery, out-of-order redrive and
 * concurrent invocations; and a 10,000-record range that completes or keeps its progress.
 */
import {
    BatchWriteItemCommand,
    DeleteItemCommand,
    PutItemCommand,
    QueryCommand,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { lambdaContext } from "../local/aws/lambda-context";
import { COUNTER_ATTRIBUTES, markerSortKey } from "../runtime/shared/config";
import { assertExact, counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { countTransactions, readStream } from "./support/stream-records";

/** A clock that moves `stepMs` forward on every request the fixture's consumer sends, and never otherwise. */
function virtualRequestClock(fixture: CounterFixture, stepMs: number): () => number {
    let now = 0;
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next) => async (args) => {
        now += stepMs;
        return next(args);
    };
    fixture.consumerDynamo.middlewareStack.add(middleware, { step: "initialize", name: `virtualRequestClock${Math.random()}` });
    return () => now;
}

async function markerStates(fixture: CounterFixture, key: string): Promise<Record<string, string>> {
    const page = await fixture.reader.send(
        new QueryCommand({
            TableName: fixture.countersTableName,
            ConsistentRead: true,
            KeyConditionExpression: "pk = :k AND begins_with(sk, :m)",
            ExpressionAttributeValues: { ":k": { S: key }, ":m": { S: markerSortKey(fixture.layout, "") } },
        }),
    );
    return Object.fromEntries(
        (page.Items ?? []).map((m) => [m.sk!.S!.slice(markerSortKey(fixture.layout, "").length), m[COUNTER_ATTRIBUTES.state]!.S!]),
    );
}

const ctx = (ms = 20_000) => lambdaContext("consumer", ms);

describe("counting items from any writer, counters in a table of their own (DynamoDB Local)", () => {
    const engine = useEngine();

    it("plain puts, DocumentClient-style items, foreign entities, overwrites, hard deletes and client soft deletes count exactly once", async () => {
        const fixture = await counterFixture(engine(), {
            placement: "separate",
            layout: { selection: { kind: "sortKeyPrefix", prefix: "order#" } },
        });
        const put = (item: Record<string, unknown>) =>
            fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: marshall(item) }));
        // Another service's plain PutItem: no token, no flags.
        for (let i = 1; i <= 6; i++) {
            await put({ pk: "acme", sk: `order#${i}`, total: i });
        }
        // DocumentClient-style items: native values marshalled, a "deleted" that is a string or a number (not soft-deleted).
        await put({ pk: "acme", sk: "order#7", deleted: "no", tags: ["a", "b"] });
        await put({ pk: "acme", sk: "order#8", deleted: 0 });
        // Foreign entities under the same key.
        await put({ pk: "acme", sk: "profile", name: "Acme" });
        await put({ pk: "acme", sk: "invoice#1", total: 3 });
        // A full overwrite of a counted item by another writer, twice.
        await put({ pk: "acme", sk: "order#3", total: 30 });
        await put({ pk: "acme", sk: "order#3", total: 300 });
        // Hard deletes by another writer, one of an item that does not exist.
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: marshall({ pk: "acme", sk: "order#2" }) }));
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: marshall({ pk: "acme", sk: "order#99" }) }));
        // The client's own soft delete of an item another writer created.
        assert.deepEqual(await fixture.client.delete("acme", "order#4"), { deleted: true });

        await fixture.emulator.drain();

        const snapshots = await assertExact(fixture);
        assert.deepEqual(
            { eventual: snapshots.get("acme")!.eventual, live: snapshots.get("acme")!.live },
            { eventual: 6, live: 6 },
            "orders 1, 3, 5, 6, 7, 8",
        );
        assert.deepEqual(await markerStates(fixture, "acme"), {
            "order#1": "counted",
            "order#2": "uncounted",
            "order#3": "counted",
            "order#4": "uncounted",
            "order#5": "counted",
            "order#6": "counted",
            "order#7": "counted",
            "order#8": "counted",
        });

        // Every record redelivered, twice: nothing moves.
        const records = await readStream(engine().streams(), fixture.streamArn);
        const transactions = countTransactions(fixture);
        assert.deepEqual(await fixture.consumer({ Records: records }, ctx()), { batchItemFailures: [] });
        assert.deepEqual(await fixture.consumer({ Records: records }, ctx()), { batchItemFailures: [] });
        assert.equal(transactions.calls, 0, "already-applied records cost reads, not transactions");
        assert.equal((await fixture.snapshot("acme")).eventual, 6);
        fixture.close();
    });

    it("a hard delete by another writer is subtracted once under concurrent, repeated and out-of-order deliveries", async () => {
        const fixture = await counterFixture(engine(), {
            placement: "separate",
            layout: { selection: { kind: "attribute", name: "type", value: "order" } },
        });
        for (let i = 0; i < 10; i++) {
            await fixture.reader.send(
                new PutItemCommand({ TableName: fixture.tableName, Item: marshall({ pk: "k", sk: `o${i}`, type: "order" }) }),
            );
        }
        for (let i = 0; i < 5; i++) {
            await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: marshall({ pk: "k", sk: `o${i}` }) }));
        }
        const records = await readStream(engine().streams(), fixture.streamArn);
        const inserts = records.filter((r) => r.eventName === "INSERT");
        const removes = records.filter((r) => r.eventName === "REMOVE");
        assert.deepEqual([inserts.length, removes.length], [10, 5]);

        // The removals arrive first (their creations' batch is in the dead-letter queue): tombstones, nothing subtracted.
        const first = await Promise.all([1, 2, 3].map(() => fixture.consumer({ Records: removes }, ctx())));
        assert.deepEqual(
            first,
            [1, 2, 3].map(() => ({ batchItemFailures: [] })),
        );
        assert.equal((await fixture.snapshot("k")).eventual, 0);
        // The redriven creations: the five deleted ones stay uncounted, and concurrent duplicates count the rest once.
        await Promise.all([fixture.consumer({ Records: inserts }, ctx()), fixture.consumer({ Records: inserts }, ctx())]);
        await Promise.all([fixture.consumer({ Records: records }, ctx()), fixture.consumer({ Records: removes }, ctx())]);

        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 5, live: 5, counted: 5, softDeleted: 0 });
        assert.deepEqual(Object.values(await markerStates(fixture, "k")).sort(), [
            "counted",
            "counted",
            "counted",
            "counted",
            "counted",
            "uncounted",
            "uncounted",
            "uncounted",
            "uncounted",
            "uncounted",
        ]);
        fixture.close();
    });

    it("a 10,000-record range of one key keeps its progress across short invocations, and its redelivery completes in one", async function () {
        const fixture = await counterFixture(engine(), {
            placement: "separate",
            layout: { selection: { kind: "sortKeyPrefix", prefix: "item#" } },
        });
        const total = 10_000;
        for (let i = 0; i < total; i += 25) {
            const requests = Array.from({ length: 25 }, (_, j) => ({
                PutRequest: { Item: marshall({ pk: "big", sk: `item#${String(i + j).padStart(5, "0")}` }) },
            }));
            let pending: typeof requests | undefined = requests;
            while (pending && pending.length > 0) {
                const out = await fixture.reader.send(new BatchWriteItemCommand({ RequestItems: { [fixture.tableName]: pending } }));
                pending = out.UnprocessedItems?.[fixture.tableName] as typeof requests | undefined;
            }
        }
        const records = await readStream(engine().streams(), fixture.streamArn);
        assert.equal(records.length, total);

        // Invocations with 5 s each (3 s of it kept as the safety margin): each reports a checkpoint past the last.
        // Their clock is virtual, 15 ms per DynamoDB request the consumer sends, so an invocation's share of the
        // range depends on the requests it needs, not on how fast this machine answers them.
        const clock = virtualRequestClock(fixture, 15);
        let remaining = records;
        const checkpoints: string[] = [];
        const counted: number[] = [];
        for (let attempt = 0; attempt < 200 && remaining.length > 0; attempt++) {
            const response = await fixture.consumer({ Records: remaining }, lambdaContext("consumer", 5_000, clock));
            counted.push((await fixture.snapshot("big")).eventual);
            const checkpoint = response.batchItemFailures[0]?.itemIdentifier;
            if (checkpoint === undefined) {
                remaining = [];
                break;
            }
            checkpoints.push(checkpoint);
            remaining = remaining.slice(remaining.findIndex((r) => r.dynamodb!.SequenceNumber === checkpoint));
        }
        assert.equal(remaining.length, 0, "the range completed");
        assert.ok(checkpoints.length >= 2, `the range took several invocations: ${counted.join(", ")}`);
        assert.equal(counted.at(-1), total);
        for (let i = 1; i < counted.length; i++) {
            assert.ok(counted[i]! > counted[i - 1]!, `invocation ${i} made progress: ${counted.join(", ")}`);
        }
        for (let i = 1; i < checkpoints.length; i++) {
            assert.ok(BigInt(checkpoints[i]!) > BigInt(checkpoints[i - 1]!), "each checkpoint moved forward");
        }

        // The whole range delivered again, as a redelivery or a redrive would: done within one 5 s invocation, no transaction.
        const transactions = countTransactions(fixture);
        const again = await fixture.consumer({ Records: records }, lambdaContext("consumer", 5_000, clock));
        assert.deepEqual(again, { batchItemFailures: [] });
        assert.equal(transactions.calls, 0);
        assert.equal((await fixture.snapshot("big")).eventual, total);
        fixture.close();
    });
});
