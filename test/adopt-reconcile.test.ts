/**
 * Reconcile (runtime/ops/reconcile.ts) on DynamoDB Local, through the counter fixture: it sets a key's eventual to its
 * counted items when the stream lost records, answers "pending" and writes nothing while live items are not flagged
 * (the backfill's to flag: their records count them), and "busy" when the key is written between its reads. Its write
 * is conditional on the count and every mark it read, so a record applied meanwhile is never overwritten.
 *
 * Records "lost": the consumer's frontier is moved past them, as when they expired from the stream unapplied.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfill } from "../runtime/backfill/backfill";
import { reconcileKey, type ReconcileResult } from "../runtime/ops/reconcile";
import { eventualKey } from "../runtime/shared/keys";
import { advanceFrontier } from "../runtime/stream/progress";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { recordRequests, theShard, writesOf } from "./support/stream-harness";
import type { LocalEngine } from "../local/engine/engine";

/**
 * The stream loses every record written so far: the consumer's frontier passes them unapplied. A minute passes, so
 * that the consumer reads the frontier again instead of the one it last knew (runtime/stream/consumer.ts).
 */
async function loseRecords(engine: LocalEngine, f: CounterFixture): Promise<void> {
    const { shardId, records } = await theShard(engine, f);
    await advanceFrontier(f.config, f.reader, shardId, records.at(-1)!.dynamodb!.SequenceNumber!);
    f.clock.advance(61_000);
}

/** The eventual count as stored. */
async function eventualOf(f: CounterFixture, key: string): Promise<number> {
    const item = (
        await f.reader.send(
            new GetItemCommand({ TableName: f.config.countersTableName, Key: eventualKey(f.config, key), ConsistentRead: true }),
        )
    ).Item;
    return Number(item?.["count"]?.N ?? "0");
}

/** Another writer's item under the client selection (a token no client made), without the counted flag. */
function othersItem(f: CounterFixture, key: string, id: string) {
    return new PutItemCommand({
        TableName: f.config.tableName,
        Item: { [f.config.partitionKey]: { S: key }, [f.config.sortKey]: { S: id }, [f.config.tokenAttribute]: { S: `other-${id}` } },
    });
}

describe("reconcile on DynamoDB Local", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    let dynamodb: DynamoDBClient | undefined;
    afterEach(() => {
        f?.close();
        dynamodb?.destroy();
    });

    const reconcile = (key: string, attempts?: number): Promise<ReconcileResult> =>
        reconcileKey(key, { config: f!.config, dynamodb: dynamodb!, ...(attempts === undefined ? {} : { attempts }) });

    it("answers exact and writes nothing when eventual is the counted items", async () => {
        // Prepare
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        for (const id of ["a", "b", "c"]) {
            await f.client.create("k", id);
        }
        await f.client.delete("k", "b");
        await f.drain();
        const requests = recordRequests(dynamodb);

        // Act
        const result = await reconcile("k");

        // Assess
        assert.deepEqual(result, { key: "k", outcome: "exact", eventualBefore: 2, eventualAfter: 2, items: 2, unflagged: 0 });
        assert.deepEqual(writesOf(requests), []);
    });

    it("corrects eventual up and down to the counted items when the stream lost records, and later records apply on top", async () => {
        // Prepare: creates (and a delete) the stream lost on one key; another writer's hard deletes it lost on another.
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        for (const id of ["d0", "d1", "d2"]) {
            await f.client.create("down", id);
        }
        await f.drain();
        for (const id of ["u0", "u1", "u2", "u3"]) {
            await f.client.create("up", id);
        }
        await f.client.delete("up", "u0");
        for (const id of ["d0", "d1"]) {
            await f.reader.send(new DeleteItemCommand({ TableName: f.config.tableName, Key: { pk: { S: "down" }, sk: { S: id } } }));
        }
        await loseRecords(engine(), f);
        await f.drain();

        // Act
        const up = await reconcile("up");
        const down = await reconcile("down");

        // Assess
        assert.deepEqual(up, { key: "up", outcome: "corrected", eventualBefore: 0, eventualAfter: 3, items: 3, unflagged: 0 });
        assert.deepEqual(down, { key: "down", outcome: "corrected", eventualBefore: 3, eventualAfter: 1, items: 1, unflagged: 0 });

        // Act + Assess: a later create and delete are counted on top; a second reconcile finds it exact.
        await f.client.create("up", "u4");
        await f.client.delete("down", "d2");
        await f.drain();
        assert.deepEqual([await eventualOf(f, "up"), await eventualOf(f, "down")], [4, 0]);
        assert.equal((await reconcile("up")).outcome, "exact");
        assert.equal((await reconcile("down")).outcome, "exact");
    });

    it("answers pending for live items not flagged yet and writes nothing, however often it runs; the backfill's flags then count them once", async () => {
        // Prepare: two lives of the client, counted; two items another writer put, whose records the stream lost.
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        await f.client.create("k", "a");
        await f.client.create("k", "b");
        await f.drain();
        await f.reader.send(othersItem(f, "k", "o1"));
        await f.reader.send(othersItem(f, "k", "o2"));
        await loseRecords(engine(), f);
        const requests = recordRequests(dynamodb);

        // Act: twice before the backfill.
        const first = await reconcile("k");
        const second = await reconcile("k");

        // Assess
        const pending = { key: "k", outcome: "pending", eventualBefore: 2, eventualAfter: 2, items: 2, unflagged: 2 };
        assert.deepEqual([first, second], [pending, pending]);
        assert.deepEqual(writesOf(requests), []);
        assert.equal(await eventualOf(f, "k"), 2);

        // Act: the backfill flags them; their records count them.
        const report = await backfill({ config: f.config, dynamodb, readUnitsPerSecond: Infinity, writeUnitsPerSecond: Infinity });
        await f.drain();

        // Assess: counted once each, and reconcile agrees.
        assert.equal(report.total.counted, 2);
        assert.equal(await eventualOf(f, "k"), 4);
        assert.deepEqual(await reconcile("k"), { key: "k", outcome: "exact", eventualBefore: 4, eventualAfter: 4, items: 4, unflagged: 0 });
    });

    it("answers busy, writing nothing, when the key is written between its two reads of eventual on every attempt", async () => {
        // Prepare: after each first read of eventual, the client creates a life and the consumer counts it.
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        await f.client.create("k", "a");
        await f.drain();
        const fixture = f;
        let reads = 0;
        dynamodb.middlewareStack.add(
            (next, context) => async (args) => {
                const result = await next(args);
                if (context.commandName === "GetItemCommand" && ++reads % 2 === 1) {
                    await fixture.client.create("k", `during-${reads}`);
                    await fixture.drain();
                }
                return result;
            },
            { step: "initialize", name: "writeBetweenReads" },
        );
        const requests = recordRequests(dynamodb);

        // Act
        const result = await reconcile("k", 3);

        // Assess: three attempts, each met a write; the count is the consumer's, exact.
        assert.deepEqual(result, { key: "k", outcome: "busy", eventualBefore: 3, eventualAfter: 3, items: 0, unflagged: 0 });
        assert.equal(reads, 6);
        assert.deepEqual(writesOf(requests), []);
        assert.equal(await eventualOf(f, "k"), 4);
    });

    it("a record applied between its reads and its write makes the write fail its condition; the next attempt corrects from what it reads then", async () => {
        // Prepare: records of two creates lost (eventual 0, 2 items); after the first attempt's second read, the client
        // creates another life and the consumer counts it (eventual 1).
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        await f.client.create("k", "a");
        await f.client.create("k", "b");
        await loseRecords(engine(), f);
        const fixture = f;
        let reads = 0;
        dynamodb.middlewareStack.add(
            (next, context) => async (args) => {
                const result = await next(args);
                if (context.commandName === "GetItemCommand" && ++reads === 2) {
                    await fixture.client.create("k", "c");
                    await fixture.drain();
                }
                return result;
            },
            { step: "initialize", name: "recordBeforeWrite" },
        );
        const requests = recordRequests(dynamodb);

        // Act
        const result = await reconcile("k");

        // Assess: the first write (0 -> 2) failed; the second attempt set 3, the items' count, over the consumer's 1.
        assert.deepEqual(result, { key: "k", outcome: "corrected", eventualBefore: 1, eventualAfter: 3, items: 3, unflagged: 0 });
        assert.deepEqual(
            writesOf(requests).map((r) => r.ok),
            [false, true],
        );
        assert.equal(await eventualOf(f, "k"), 3);
        await f.drain();
        assert.equal(await eventualOf(f, "k"), 3, "nothing left to apply");
    });
});
