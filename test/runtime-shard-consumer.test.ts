/**
 * The stream consumer and the redrive counting a sharded key (runtime/shards/layout.ts), on DynamoDB Local.
 *
 * The items are written straight to the user's table (puts, soft deletes, other writers' deletes), so the
 * records the consumer reads are the real stream's. Every test checks the layout exactly: each marker under
 * the partition key of the shard `markerShard` names, each shard's eventual partial equal to the counted
 * markers of that shard, and the sum equal to the live items.
 */
import {
    DeleteItemCommand,
    GetItemCommand,
    PutItemCommand,
    ScanCommand,
    TransactionCanceledException,
    UpdateItemCommand,
    type AttributeValue,
    type ServiceInputTypes,
    type ServiceOutputTypes,
    type TransactWriteItemsCommandInput,
} from "@aws-sdk/client-dynamodb";
import { DescribeStreamCommand } from "@aws-sdk/client-dynamodb-streams";
import type { InitializeMiddleware } from "@smithy/types";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { lambdaContext } from "../local/aws/lambda-context";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey, eventualSortKey, healShard, markerId, MARKER_STATE } from "../runtime/shared/config";
import { markerShard, shardedKeyProblem, shardOfPartitionKey, shardPartitionKey } from "../runtime/shards/layout";
import { createStreamHandler } from "../runtime/stream/consumer";
import { planBatch } from "../runtime/stream/markers";
import { counterFixture, FATAL_QUEUE_URL, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { readStream } from "./support/stream-records";

const ctx = () => lambdaContext("consumer", 10_000);

/** A client-like token for item `n` (the selection counts items whose token is a string). */
const token = (n: number): string => `0190a6e4-0000-7000-8000-${String(n).padStart(12, "0")}`;

async function put(fixture: CounterFixture, key: string, id: string, n: number): Promise<void> {
    await fixture.reader.send(
        new PutItemCommand({
            TableName: fixture.tableName,
            Item: { pk: { S: key }, sk: { S: id }, [fixture.layout.tokenAttribute]: { S: token(n) } },
        }),
    );
}

/** A soft delete as the client makes it: the flag set on the live item, its token kept. */
async function softDelete(fixture: CounterFixture, key: string, id: string): Promise<void> {
    await fixture.reader.send(
        new UpdateItemCommand({
            TableName: fixture.tableName,
            Key: { pk: { S: key }, sk: { S: id } },
            UpdateExpression: "SET #deleted = :true",
            ConditionExpression: "attribute_exists(pk)",
            ExpressionAttributeNames: { "#deleted": fixture.layout.deletedAttribute },
            ExpressionAttributeValues: { ":true": { BOOL: true } },
        }),
    );
}

/** Another writer's (or TTL's) delete of a live item. */
async function hardDelete(fixture: CounterFixture, key: string, id: string): Promise<void> {
    await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: key }, sk: { S: id } } }));
}

/**
 * Writes `ids` items of `key` (ids r0, r1, ...): every 4th is then soft-deleted, every 7th of the others deleted by
 * another writer. Returns the ids left live.
 */
async function churn(fixture: CounterFixture, key: string, ids: number, first = 0): Promise<string[]> {
    const live: string[] = [];
    for (let i = first; i < first + ids; i++) {
        await put(fixture, key, `r${i}`, i);
    }
    for (let i = first; i < first + ids; i++) {
        if (i % 4 === 0) {
            await softDelete(fixture, key, `r${i}`);
        } else if (i % 7 === 0) {
            await hardDelete(fixture, key, `r${i}`);
        } else {
            live.push(`r${i}`);
        }
    }
    return live;
}

/** The counters table's items, as every shard of every key holds them. */
interface CountersLayout {
    /** Per counters-table partition key: its eventual partial (undefined: none), its counted and uncounted markers. */
    readonly partitions: Map<string, { eventual?: number; counted: string[]; uncounted: string[] }>;
    /** Markers stored under a partition key other than the one of the shard markerShard names. */
    readonly misplaced: string[];
    /** Partition keys holding a best-effort item. */
    readonly bestEffort: string[];
}

async function countersLayout(fixture: CounterFixture, shards: number): Promise<CountersLayout> {
    const partitions: CountersLayout["partitions"] = new Map();
    const misplaced: string[] = [];
    const bestEffort: string[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
        const page = await fixture.reader.send(
            new ScanCommand({ TableName: fixture.countersTableName, ConsistentRead: true, ExclusiveStartKey: start }),
        );
        for (const item of page.Items ?? []) {
            const pk = item.pk!.S!;
            const sk = item.sk!.S!;
            const partition = partitions.get(pk) ?? { counted: [], uncounted: [] };
            partitions.set(pk, partition);
            const id = markerId(fixture.layout, sk);
            if (sk === eventualSortKey(fixture.layout)) {
                partition.eventual = Number(item[fixture.layout.countAttribute]!.N);
            } else if (sk === bestEffortSortKey(fixture.layout)) {
                bestEffort.push(pk);
            } else if (id !== undefined) {
                const { key } = shardOfPartitionKey(pk, shards);
                if (pk !== shardPartitionKey(key, markerShard(id, shards))) {
                    misplaced.push(`${JSON.stringify(pk)}/${id}`);
                }
                (item[A.state]?.S === MARKER_STATE.counted ? partition.counted : partition.uncounted).push(id);
            }
        }
        start = page.LastEvaluatedKey;
    } while (start);
    return { partitions, misplaced, bestEffort };
}

/**
 * Asserts the sharded layout of `key` exactly: no marker out of its shard, each shard's partial == its counted
 * markers == the live ids homed there, and the sum == the live items. Returns the live ids per shard.
 */
async function assertShardsExact(fixture: CounterFixture, shards: number, key: string, live: readonly string[]): Promise<number[]> {
    const layout = await countersLayout(fixture, shards);
    assert.deepEqual(layout.misplaced, [], "every marker sits in the shard markerShard names");
    const expected = Array.from({ length: shards }, (_, s) => live.filter((id) => markerShard(id, shards) === s).sort());
    const perShard = expected.map((ids) => ids.length);
    for (let s = 0; s < shards; s++) {
        const partition = layout.partitions.get(shardPartitionKey(key, s));
        assert.deepEqual([...(partition?.counted ?? [])].sort(), expected[s], `shard ${s}: the counted markers are its live ids`);
        assert.equal(partition?.eventual ?? 0, expected[s]!.length, `shard ${s}: the partial equals its counted markers`);
    }
    const observed = await fixture.observe(key);
    assert.deepEqual(
        observed.shards.map((s) => [s.eventual, s.counted]),
        perShard.map((n) => [n, n]),
    );
    assert.deepEqual(
        { eventual: observed.eventual, counted: observed.counted, live: observed.live, softDeleted: observed.softDeleted },
        { eventual: live.length, counted: live.length, live: live.length, softDeleted: 0 },
    );
    return perShard;
}

/** The TransactWriteItems the fixture's consumer sends from now on: per transaction, the partition keys it writes per table. */
function recordTransactions(fixture: CounterFixture): Array<{ counters: Set<string>; user: Set<string>; actions: number }> {
    const seen: Array<{ counters: Set<string>; user: Set<string>; actions: number }> = [];
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === "TransactWriteItemsCommand") {
            const input = args.input as TransactWriteItemsCommandInput;
            const counters = new Set<string>();
            const user = new Set<string>();
            for (const action of input.TransactItems ?? []) {
                const write = action.Update ?? action.Delete ?? action.Put ?? action.ConditionCheck;
                const key = (write as { Key?: Record<string, AttributeValue> }).Key?.pk?.S ?? (action.Put?.Item?.pk?.S as string);
                (write!.TableName === fixture.countersTableName ? counters : user).add(key);
            }
            seen.push({ counters, user, actions: input.TransactItems?.length ?? 0 });
        }
        return next(args);
    };
    fixture.consumerDynamo.middlewareStack.add(middleware, { step: "initialize", name: `recordTransactions${Math.random()}` });
    return seen;
}

/**
 * DynamoDB's rule for transactions at once, which DynamoDB Local does not apply (it serializes them): a transaction
 * that touches an item another one in flight touches is cancelled with TransactionConflict on that action. Each
 * transaction of the fixture's consumer is held in flight for `holdMs`, so two invocations' transactions overlap.
 * Returns every conflict: the items the two transactions shared, as "table|pk|sk".
 */
function transactionConflicts(fixture: CounterFixture, holdMs = 30): string[][] {
    const conflicts: string[][] = [];
    const inFlight = new Set<Set<string>>();
    const itemOf = (action: NonNullable<TransactWriteItemsCommandInput["TransactItems"]>[number]): string => {
        const write = (action.Update ?? action.Delete ?? action.ConditionCheck)!;
        return `${write.TableName}|${write.Key!.pk!.S}|${write.Key!.sk!.S}`;
    };
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName !== "TransactWriteItemsCommand") {
            return next(args);
        }
        const items = ((args.input as TransactWriteItemsCommandInput).TransactItems ?? []).map(itemOf);
        const shared = [...inFlight].flatMap((other) => items.filter((item) => other.has(item)));
        if (shared.length > 0) {
            conflicts.push([...new Set(shared)]);
            const reasons = items.map((item) =>
                shared.includes(item) ? { Code: "TransactionConflict", Message: "Transaction is ongoing for the item" } : { Code: "None" },
            );
            throw new TransactionCanceledException({
                $metadata: { httpStatusCode: 400 },
                message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(", ")}]`,
                CancellationReasons: reasons,
            });
        }
        const mine = new Set(items);
        inFlight.add(mine);
        try {
            await new Promise((resolve) => setTimeout(resolve, holdMs));
            return await next(args);
        } finally {
            inFlight.delete(mine);
        }
    };
    fixture.consumerDynamo.middlewareStack.add(middleware, { step: "initialize", name: "transactionConflicts" });
    return conflicts;
}

function metricsFrom(logs: readonly string[]): Record<string, number> {
    const totals: Record<string, number> = {};
    for (const line of logs) {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (parsed._aws) {
            for (const [k, v] of Object.entries(parsed)) {
                if (typeof v === "number") {
                    totals[k] = (totals[k] ?? 0) + v;
                }
            }
        }
    }
    return totals;
}

describe("the stream consumer counting a sharded key (DynamoDB Local)", () => {
    const engine = useEngine();
    /** The stream's records so far (the counters live in their own table: every record is a resource's). */
    const records = (fixture: CounterFixture) => readStream(engine().streams(), fixture.streamArn);

    for (const shards of [3, 8]) {
        describe(`counterShards ${shards}`, () => {
            it("counts puts, soft deletes and other writers' deletes of one key over many ids: each shard's partial is its counted markers, the sum the live items", async () => {
                // Prepare
                const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
                const transactions = recordTransactions(fixture);

                // Act: through the mapping emulator, in the component's batches.
                const hot = await churn(fixture, "hot", 120);
                const cold = await churn(fixture, "cold", 9, 1000);
                await fixture.emulator.drain();

                // Assess
                const perShard = await assertShardsExact(fixture, shards, "hot", hot);
                assert.ok(
                    perShard.every((n) => n > 0),
                    `every shard holds some of hot's ${hot.length} live ids: ${JSON.stringify(perShard)}`,
                );
                await assertShardsExact(fixture, shards, "cold", cold);
                assert.equal(hot.length, 120 - 30 - 13);
                for (const t of transactions) {
                    assert.equal(t.counters.size, 1, "a transaction writes one shard's partition of the counters table");
                    const [pk] = [...t.counters];
                    const { key } = shardOfPartitionKey(pk!, shards);
                    assert.ok(
                        [...t.user].every((k) => k === key),
                        "its hard deletes are of the user's own key",
                    );
                }
                assert.ok(
                    transactions.some((t) => t.user.size > 0),
                    "soft-deleted items were removed in the counting transactions",
                );
                assert.deepEqual((await countersLayout(fixture, shards)).bestEffort, [], "the consumer writes no best-effort");
                assert.equal(fixture.queues.messages(FATAL_QUEUE_URL).length, 0);
                fixture.close();
            });

            it("a batch delivered twice counts once: one transaction per shard the first time, only reads the second", async () => {
                // Prepare: 60 creates and 15 soft deletes of one key, in one batch.
                const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
                const live: string[] = [];
                for (let i = 0; i < 60; i++) {
                    await put(fixture, "twice", `r${i}`, i);
                }
                for (let i = 0; i < 60; i++) {
                    if (i % 4 === 0) {
                        await softDelete(fixture, "twice", `r${i}`);
                    } else {
                        live.push(`r${i}`);
                    }
                }
                const batch = await records(fixture);
                assert.equal(batch.length, 75);
                const plan = planBatch(batch, fixture.config);
                const ids = Array.from({ length: 60 }, (_, i) => `r${i}`);
                const shardsHeld = new Set(ids.map((id) => markerShard(id, shards)));
                assert.deepEqual(
                    plan.groups.map((g) => [g.counterKey, g.shard]).sort(),
                    [...shardsHeld].sort().map((s) => ["twice", s]),
                    "one group per shard the key's ids fall in",
                );
                const transactions = recordTransactions(fixture);

                // Act
                const first = await fixture.consumer({ Records: batch }, ctx());
                const afterFirst = transactions.length;
                const second = await fixture.consumer({ Records: batch }, ctx());

                // Assess
                assert.deepEqual([first, second], [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
                assert.equal(afterFirst, shardsHeld.size, "the first delivery: one transaction per shard group");
                const shardsCounting = new Set(live.map((id) => markerShard(id, shards))).size;
                assert.equal(
                    transactions.reduce((n, t) => n + t.actions, 0),
                    60 + 15 + shardsCounting,
                    "a marker per id, a hard delete per soft delete and one partial per shard whose count moves",
                );
                assert.equal(transactions.length, afterFirst, "the second delivery commits nothing");
                const metrics = metricsFrom(fixture.logs);
                assert.equal(metrics.RecordsCounted, 60);
                assert.equal(metrics.DuplicatesSkipped, 60);
                await assertShardsExact(fixture, shards, "twice", live);
                fixture.close();
            });

            for (const split of ["by id", "by stream position"] as const) {
                it(`two invocations at once on two disjoint halves of one key's records (${split}) conflict only within a shard, retry, and end exact`, async () => {
                    // Prepare: 200 ids of one key, a quarter soft-deleted; the records split in two; DynamoDB's conflicts.
                    const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
                    const conflicts = transactionConflicts(fixture);
                    const live = await churn(fixture, "both", 200);
                    const batch = await records(fixture);
                    const [a, b] =
                        split === "by id"
                            ? [0, 1].map((half) => batch.filter((r) => Number(r.dynamodb!.Keys!.sk!.S!.slice(1)) % 2 === half))
                            : [batch.slice(0, batch.length / 2), batch.slice(batch.length / 2)];
                    assert.equal(a!.length + b!.length, batch.length);

                    // Act: every shard's group of one invocation meets the same shard's group of the other.
                    const results = await Promise.all([fixture.consumer({ Records: a! }, ctx()), fixture.consumer({ Records: b! }, ctx())]);

                    // Assess: the groups met (on one shard's items each time), retried, and counted every record once.
                    assert.deepEqual(results, [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
                    assert.ok(conflicts.length > 0, "the two invocations' groups of one shard met");
                    for (const shared of conflicts) {
                        const partitions = new Set(shared.map((item) => item.split("|").slice(0, 2).join("|")));
                        assert.deepEqual(
                            [...partitions].map((p) => p.split("|")[0]),
                            [fixture.countersTableName],
                            "only counter items are shared",
                        );
                        assert.equal(partitions.size, 1, `a conflict is within one shard: ${JSON.stringify(shared)}`);
                        if (split === "by id") {
                            assert.deepEqual(
                                shared.map((item) => item.split("|")[2]),
                                [eventualSortKey(fixture.layout)],
                                "disjoint ids share only their shard's partial",
                            );
                        }
                    }
                    assert.equal(metricsFrom(fixture.logs).TransactionRetries, conflicts.length);
                    await assertShardsExact(fixture, shards, "both", live);
                    assert.equal(fixture.queues.messages(FATAL_QUEUE_URL).length, 0);
                    fixture.close();
                });
            }
        });
    }

    it("counterShards 3: a record whose key holds U+0000 (or leaves no room for a shard's suffix) is parked alone, and the rest of its batch counted", async () => {
        // Prepare: "k" with four items; "k\u00001" would name k's shard 1; a 2,047-byte key has no room for "\u00002".
        const shards = 3;
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
        const named = "k\u00001";
        const long = "x".repeat(2047);
        await put(fixture, "k", "a", 1);
        await put(fixture, named, "a", 2);
        await put(fixture, "k", "b", 3);
        await put(fixture, long, "a", 4);
        await put(fixture, "k", "c", 5);
        await hardDelete(fixture, named, "a");
        await put(fixture, "k", "d", 6);
        const batch = await records(fixture);
        assert.equal(batch.length, 7);

        // Act
        const response = await fixture.consumer({ Records: batch }, ctx());

        // Assess: the batch succeeds, k is exact, the refused records are parked one by one, naming the partition key.
        assert.deepEqual(response, { batchItemFailures: [] });
        await assertShardsExact(fixture, shards, "k", ["a", "b", "c", "d"]);
        const parked = fixture.queues
            .messages(FATAL_QUEUE_URL)
            .map((m) => JSON.parse(m.body) as { reason: string; problem: string; records: DynamoDBRecord[] });
        assert.deepEqual(
            parked.map((m) => [m.reason, m.problem, m.records.map((r) => [r.eventName, r.dynamodb!.Keys!.pk!.S!.length])]),
            [
                ["poison-record", `[dynamodb.Keys.pk] ${shardedKeyProblem(named, shards)}`, [["INSERT", 3]]],
                ["poison-record", `[dynamodb.Keys.pk] ${shardedKeyProblem(long, shards)}`, [["INSERT", 2047]]],
                ["poison-record", `[dynamodb.Keys.pk] ${shardedKeyProblem(named, shards)}`, [["REMOVE", 3]]],
            ],
        );
        assert.equal(
            parked[0]!.problem,
            "[dynamodb.Keys.pk] must not contain U+0000 when counterShards is above 1 (it separates a key from its shard number)",
        );
        assert.equal(
            parked[1]!.problem,
            "[dynamodb.Keys.pk] must be at most 2046 bytes when counterShards is 3 (its shards' partition keys add 2 bytes)",
        );
        // Nothing was written for the refused keys: "k\u00001" is k's shard 1, and it holds only k's counted markers.
        const layout = await countersLayout(fixture, shards);
        assert.ok([...layout.partitions.keys()].every((pk) => shardOfPartitionKey(pk, shards).key === "k"));
        assert.deepEqual(
            [...layout.partitions.values()].flatMap((p) => p.uncounted),
            [],
        );
        assert.equal(metricsFrom(fixture.logs).PoisonRecords, 3);
        assert.equal(metricsFrom(fixture.logs).RecordsCounted, 4);
        fixture.close();
    });

    it("counterShards 3: the redrive, reading a dead-lettered range from the stream, counts it into the shards and parks a refused key", async () => {
        // Prepare
        const shards = 3;
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
        const live = await churn(fixture, "r", 40);
        await put(fixture, "r\u00002", "z", 99);
        const streams = engine().streams();
        const batch = await records(fixture);
        const streamShards =
            (await streams.send(new DescribeStreamCommand({ StreamArn: fixture.streamArn }))).StreamDescription?.Shards ?? [];
        assert.equal(streamShards.length, 1);
        const body = JSON.stringify({
            requestContext: { condition: "RetryAttemptsExhausted" },
            DDBStreamBatchInfo: {
                shardId: streamShards[0]!.ShardId,
                startSequenceNumber: batch[0]!.dynamodb!.SequenceNumber,
                endSequenceNumber: batch[batch.length - 1]!.dynamodb!.SequenceNumber,
                batchSize: batch.length,
                streamArn: fixture.streamArn,
            },
        });

        // Act: twice, as SQS may deliver a message twice.
        const responses = [];
        for (const messageId of ["m1", "m2"]) {
            responses.push(await fixture.redrive({ Records: [{ messageId, body } as never] }, lambdaContext("redrive", 10_000)));
        }

        // Assess
        assert.deepEqual(responses, [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
        await assertShardsExact(fixture, shards, "r", live);
        assert.deepEqual(
            fixture.queues.messages(FATAL_QUEUE_URL).map((m) => (JSON.parse(m.body) as { problem: string }).problem),
            [`[dynamodb.Keys.pk] ${shardedKeyProblem("r\u00002", shards)}`, `[dynamodb.Keys.pk] ${shardedKeyProblem("r\u00002", shards)}`],
        );
        fixture.close();
    });

    it("counterShards 1 writes today's items: the partition key is the key, one group and one partial per key", async () => {
        // Prepare: the same records counted under a configuration without a shard count and one that names 1.
        const unnamed = await counterFixture(engine(), { placement: "separate" });
        const live = await churn(unnamed, "one", 30);
        const batch = await records(unnamed);
        const named = await counterFixture(engine(), { placement: "separate" });
        const explicit = createStreamHandler({
            config: { ...named.config, tableName: unnamed.tableName, counterShards: 1 },
            dynamodb: named.consumerDynamo,
            sqs: named.queues.client(),
            sink: () => undefined,
        });
        const sent: unknown[][] = [[], []];
        for (const [n, fixture] of [unnamed, named].entries()) {
            fixture.consumerDynamo.middlewareStack.add(
                (next, context) => async (args) => {
                    if (context.commandName === "TransactWriteItemsCommand") {
                        // The transactions as sent, with the tables named alike and the tombstone clock left out.
                        const text = JSON.stringify((args.input as TransactWriteItemsCommandInput).TransactItems)
                            .replaceAll(fixture.countersTableName, "COUNTERS")
                            .replaceAll(unnamed.tableName, "USER");
                        sent[n]!.push(JSON.parse(text.replace(/"N":"\d{10}"/g, '"N":"EXP"')));
                    }
                    return next(args);
                },
                { step: "initialize", name: "sent" },
            );
        }
        assert.deepEqual(planBatch(batch, { ...named.config, counterShards: 1 }), planBatch(batch, unnamed.config));
        assert.ok(!("shard" in planBatch(batch, { ...named.config, counterShards: 1 }).groups[0]!), "an unsharded plan is today's");

        // Act: the unsharded consumer first; the same records again, against a second counters table, under counterShards 1
        // (the user's items put back as the records left them, for the hard deletes to find them).
        assert.deepEqual(await unnamed.consumer({ Records: batch }, ctx()), { batchItemFailures: [] });
        await churn(unnamed, "one", 30);
        assert.deepEqual(await explicit({ Records: batch }, ctx()), { batchItemFailures: [] });

        // Assess: the same transactions, every counter item under the key itself.
        assert.equal(sent[0]!.length, 1, "one transaction for the key");
        assert.deepEqual(sent[1], sent[0]);
        assert.ok(JSON.stringify(sent[0]).includes('"pk":{"S":"one"}'));
        assert.ok(!JSON.stringify(sent[0]).includes("\\u0000"));
        for (const fixture of [unnamed, named]) {
            const layout = await countersLayout(fixture, 1);
            assert.deepEqual([...layout.partitions.keys()], ["one"]);
            assert.deepEqual(layout.misplaced, []);
            const partition = layout.partitions.get("one")!;
            assert.equal(partition.eventual, live.length);
            assert.deepEqual([...partition.counted].sort(), [...live].sort());
        }
        const item = await unnamed.reader.send(
            new GetItemCommand({
                TableName: unnamed.countersTableName,
                Key: { pk: { S: "one" }, sk: { S: eventualSortKey(unnamed.layout) } },
                ConsistentRead: true,
            }),
        );
        assert.equal(item.Item?.count?.N, String(live.length));
        unnamed.close();
        named.close();
    });

    it("counterShards 3: the consumer marks shard 0's best-effort item of a drifted key, also when only another shard holds best-effort", async () => {
        // Prepare: "zero" has best-effort in shard 0, "other" only in shard 2, "none" in no shard; one live item each.
        const shards = 3;
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
        const bestEffortItem = (key: string, shard: number) => ({
            pk: { S: shardPartitionKey(key, shard) },
            sk: { S: bestEffortSortKey(fixture.layout) },
        });
        for (const [key, shard] of [
            ["zero", 0],
            ["other", 2],
        ] as const) {
            await fixture.reader.send(
                new PutItemCommand({ TableName: fixture.countersTableName, Item: { ...bestEffortItem(key, shard), count: { N: "1" } } }),
            );
        }
        for (const [n, key] of ["zero", "other", "none"].entries()) {
            await put(fixture, key, "x", n);
        }
        await fixture.emulator.drain();

        // Act: another writer deletes each live item (TTL would do the same).
        for (const key of ["zero", "other", "none"]) {
            await hardDelete(fixture, key, "x");
        }
        await fixture.emulator.drain();

        // Assess: shard 0 of "zero" and of "other" is on the heal index (for the user's key); nothing is created for "none".
        const read = async (key: string, shard: number) =>
            (
                await fixture.reader.send(
                    new GetItemCommand({ TableName: fixture.countersTableName, Key: bestEffortItem(key, shard), ConsistentRead: true }),
                )
            ).Item;
        const listing = (item: Record<string, AttributeValue> | undefined) =>
            item === undefined
                ? "absent"
                : {
                      count: item.count?.N,
                      listed: item[A.healShard]?.S !== undefined && item[A.dueAt] !== undefined,
                      marks: item[A.marks]?.N,
                  };
        assert.deepEqual(
            {
                zero: await Promise.all([0, 1, 2].map(async (s) => listing(await read("zero", s)))),
                other: await Promise.all([0, 1, 2].map(async (s) => listing(await read("other", s)))),
                none: await Promise.all([0, 1, 2].map(async (s) => listing(await read("none", s)))),
            },
            {
                zero: [{ count: "1", listed: true, marks: "1" }, "absent", "absent"],
                other: [{ count: undefined, listed: true, marks: "1" }, "absent", { count: "1", listed: false, marks: undefined }],
                none: ["absent", "absent", "absent"],
            },
        );
        const healShards = await Promise.all(["zero", "other"].map(async (key) => (await read(key, 0))?.[A.healShard]?.S));
        assert.deepEqual(
            healShards,
            ["zero", "other"].map((key) => healShard(key)),
            "the index entry is the user key's",
        );
        assert.equal(metricsFrom(fixture.logs).KeysMarkedDue, 2);
        await assertShardsExact(fixture, shards, "other", []);
        fixture.close();
    });
});
