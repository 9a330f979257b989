/**
 * The stream consumer and the redrive counting a sharded key (runtime/shards/layout.ts), on DynamoDB Local.
 *
 * The items are written straight to the user's table (puts, soft deletes, other writers' deletes), so the
 * records the consumer reads are the real stream's. Every test checks the layout exactly: each marker under
 * the partition key of the shard `markerShard` names, the counted markers of each shard its live ids, and the sum
 * of the key's eventual partials equal to its counted markers over all shards and to its live items. A partial
 * alone is not asserted: each transaction adds its chunk's delta to one partial picked at random, so a partial
 * means nothing by itself (it may be negative).
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
import { untimedContext } from "../local/aws/lambda-context";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey, eventualSortKey, healShard, markerId, MARKER_STATE } from "../runtime/shared/config";
import { markerShard, shardedKeyProblem, shardOfPartitionKey, shardPartitionKey } from "../runtime/shards/layout";
import { jsonLogger, Metrics } from "../runtime/shared/telemetry";
import { createStreamHandler } from "../runtime/stream/consumer";
import { countRecords, type CountOutcome } from "../runtime/stream/counting";
import { sqsFatalQueue } from "../runtime/stream/fatal";
import { chunkIntents, planBatch } from "../runtime/stream/markers";
import { counterFixture, FATAL_QUEUE_URL, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { readStream, emfTotals } from "./support/stream-records";

const ctx = () => untimedContext("consumer");

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
 * Asserts the sharded layout of `key` exactly: no marker out of its shard, each shard's counted markers == the live
 * ids whose markerShard it is, and the sum of the partials == the counted markers of all shards == the live items.
 * Returns the counted markers per shard.
 */
async function assertCountedExact(fixture: CounterFixture, shards: number, key: string, live: readonly string[]): Promise<number[]> {
    const layout = await countersLayout(fixture, shards);
    assert.deepEqual(layout.misplaced, [], "every marker sits in the shard markerShard names");
    const expected = Array.from({ length: shards }, (_, s) => live.filter((id) => markerShard(id, shards) === s).sort());
    const perShard = expected.map((ids) => ids.length);
    let partials = 0;
    let counted = 0;
    for (let s = 0; s < shards; s++) {
        const partition = layout.partitions.get(shardPartitionKey(key, s));
        assert.deepEqual([...(partition?.counted ?? [])].sort(), expected[s], `shard ${s}: the counted markers are its live ids`);
        partials += partition?.eventual ?? 0;
        counted += partition?.counted.length ?? 0;
    }
    assert.deepEqual(
        { partials, counted },
        { partials: live.length, counted: live.length },
        "the sum of the partials is the counted markers",
    );
    const observed = await fixture.observe(key);
    assert.deepEqual(
        observed.shards.map((s) => s.counted),
        perShard,
    );
    assert.equal(
        observed.shards.reduce((sum, s) => sum + s.eventual, 0),
        live.length,
    );
    assert.deepEqual(
        { eventual: observed.eventual, counted: observed.counted, live: observed.live, softDeleted: observed.softDeleted },
        { eventual: live.length, counted: live.length, live: live.length, softDeleted: 0 },
    );
    return perShard;
}

/** What one transaction of the consumer wrote. */
interface SentTransaction {
    /** The counters-table partition keys of its eventual partials (one at most). */
    readonly partials: string[];
    /** Its markers: the counters-table partition key each is written under, and its id. */
    readonly markers: Array<{ pk: string; id: string }>;
    /** The user-table partition keys it deletes under. */
    readonly user: Set<string>;
    readonly actions: number;
}

/** The TransactWriteItems the fixture's consumer sends from now on. */
function recordTransactions(fixture: CounterFixture): SentTransaction[] {
    const seen: SentTransaction[] = [];
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === "TransactWriteItemsCommand") {
            const input = args.input as TransactWriteItemsCommandInput;
            const sent: SentTransaction = { partials: [], markers: [], user: new Set(), actions: input.TransactItems?.length ?? 0 };
            for (const action of input.TransactItems ?? []) {
                const write = action.Update ?? action.Delete ?? action.Put ?? action.ConditionCheck;
                const key = (write as { Key?: Record<string, AttributeValue> }).Key ?? action.Put!.Item!;
                const pk = key.pk!.S!;
                const sk = key.sk!.S!;
                if (write!.TableName !== fixture.countersTableName) {
                    sent.user.add(pk);
                } else if (sk === eventualSortKey(fixture.layout)) {
                    sent.partials.push(pk);
                } else {
                    const id = markerId(fixture.layout, sk);
                    assert.ok(id !== undefined, `the consumer writes partials and markers only: ${sk}`);
                    sent.markers.push({ pk, id });
                }
            }
            seen.push(sent);
        }
        return next(args);
    };
    fixture.consumerDynamo.middlewareStack.add(middleware, { step: "initialize", name: `recordTransactions${Math.random()}` });
    return seen;
}

/**
 * Asserts the shape every transaction of a sharded key has: at most one eventual partial, one of the key's shards;
 * each marker under its id's shard of the same key; its hard deletes under the user's key. Returns each one's key.
 */
function assertTransactionShapes(transactions: readonly SentTransaction[], shards: number): string[] {
    return transactions.map((t) => {
        assert.ok(t.markers.length > 0, "every transaction writes markers");
        const { key } = shardOfPartitionKey(t.markers[0]!.pk, shards);
        assert.deepEqual(
            t.markers.filter((m) => m.pk !== shardPartitionKey(key, markerShard(m.id, shards))),
            [],
            "each marker is written in its id's shard of the transaction's key",
        );
        assert.ok(t.partials.length <= 1, `a transaction adds to one partial at most: ${JSON.stringify(t.partials)}`);
        for (const pk of t.partials) {
            const at = shardOfPartitionKey(pk, shards);
            assert.ok(
                at.key === key && pk === shardPartitionKey(key, at.shard),
                `its partial is one of the key's shards: ${JSON.stringify(pk)}`,
            );
        }
        assert.ok(
            [...t.user].every((k) => k === key),
            "its hard deletes are of the user's own key",
        );
        return key;
    });
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

/** Two disjoint halves of a key's records: its ids of each parity, or its first and second half in stream order. */
function halves(batch: readonly DynamoDBRecord[], split: "by id" | "by stream position"): [DynamoDBRecord[], DynamoDBRecord[]] {
    const [a, b] =
        split === "by id"
            ? [0, 1].map((half) => batch.filter((r) => Number(r.dynamodb!.Keys!.sk!.S!.slice(1)) % 2 === half))
            : [batch.slice(0, batch.length / 2), batch.slice(batch.length / 2)];
    assert.equal(a!.length + b!.length, batch.length);
    return [a!, b!];
}

/** The ids both halves hold records of. */
function idsOfBoth(a: readonly DynamoDBRecord[], b: readonly DynamoDBRecord[]): Set<string> {
    const ids = (records: readonly DynamoDBRecord[]) => new Set(records.map((r) => r.dynamodb!.Keys!.sk!.S!));
    const inB = ids(b);
    return new Set([...ids(a)].filter((id) => inB.has(id)));
}

/**
 * The items two transactions shared ("table|pk|sk"), asserted to be counter items of `key`'s shards: its eventual
 * partials (their partition keys) and its markers (their ids).
 */
function conflictItems(
    fixture: CounterFixture,
    shards: number,
    key: string,
    shared: readonly string[],
): { partials: string[]; markers: string[] } {
    const partials: string[] = [];
    const markers: string[] = [];
    for (const item of shared) {
        const [table, pk, ...rest] = item.split("|");
        const sk = rest.join("|");
        assert.equal(table, fixture.countersTableName, `only counter items are shared: ${JSON.stringify(item)}`);
        const at = shardOfPartitionKey(pk!, shards);
        assert.ok(at.key === key && pk === shardPartitionKey(key, at.shard), `a shard of ${key}: ${JSON.stringify(item)}`);
        const id = markerId(fixture.layout, sk);
        if (sk === eventualSortKey(fixture.layout)) {
            partials.push(pk!);
        } else {
            assert.ok(
                id !== undefined && pk === shardPartitionKey(key, markerShard(id, shards)),
                `a marker in its shard: ${JSON.stringify(item)}`,
            );
            markers.push(id);
        }
    }
    return { partials, markers };
}

/**
 * Counts `batch` as one invocation of the fixture's consumer does, its every transaction attempt adding to partial
 * `partial` (the random number the consumer draws is fixed in that partial's range). Returns its outcome and retries.
 */
async function countWithPartial(
    fixture: CounterFixture,
    shards: number,
    partial: number,
    batch: readonly DynamoDBRecord[],
): Promise<{ outcome: CountOutcome; retries: number }> {
    const sink = (line: string) => fixture.logs.push(line);
    const logger = jsonLogger("hybrid-counter-consumer", sink);
    const metrics = new Metrics(fixture.config.metricsNamespace, "hybrid-counter-consumer", sink);
    const drawn = (partial + 0.5) / shards;
    try {
        const outcome = await countRecords(batch, {
            config: fixture.config,
            dynamodb: fixture.consumerDynamo,
            fatal: sqsFatalQueue(fixture.queues.client(), FATAL_QUEUE_URL, logger),
            logger,
            metrics,
            remainingMs: () => 10_000,
            random: () => drawn,
        });
        return { outcome, retries: metrics.get("TransactionRetries") };
    } finally {
        metrics.flush();
    }
}

describe("the stream consumer counting a sharded key (DynamoDB Local)", () => {
    const engine = useEngine();
    /** The stream's records so far (the counters live in their own table: every record is a resource's). */
    const records = (fixture: CounterFixture) => readStream(engine().streams(), fixture.streamArn);

    for (const shards of [3, 8]) {
        describe(`counterShards ${shards}`, () => {
            it("counts puts, soft deletes and other writers' deletes of one key over many ids: each shard's counted markers its live ids, the sum of the partials the live items", async () => {
                // Prepare
                const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
                const transactions = recordTransactions(fixture);

                // Act: through the mapping emulator, in the component's batches.
                const hot = await churn(fixture, "hot", 120);
                const cold = await churn(fixture, "cold", 9, 1000);
                await fixture.emulator.drain();

                // Assess
                const perShard = await assertCountedExact(fixture, shards, "hot", hot);
                assert.ok(
                    perShard.every((n) => n > 0),
                    `every shard holds some of hot's ${hot.length} live ids: ${JSON.stringify(perShard)}`,
                );
                await assertCountedExact(fixture, shards, "cold", cold);
                assert.equal(hot.length, 120 - 30 - 13);
                const keys = assertTransactionShapes(transactions, shards);
                assert.deepEqual([...new Set(keys)].sort(), ["cold", "hot"]);
                assert.ok(
                    transactions.some((t, i) => keys[i] === "hot" && new Set(t.markers.map((m) => m.pk)).size > 1),
                    "a transaction writes markers in several shards of its key",
                );
                assert.ok(
                    transactions.some((t) => t.partials.length === 1),
                    "the counting transactions add to a partial",
                );
                assert.ok(
                    transactions.some((t) => t.user.size > 0),
                    "soft-deleted items were removed in the counting transactions",
                );
                assert.deepEqual((await countersLayout(fixture, shards)).bestEffort, [], "the consumer writes no best-effort");
                assert.equal(fixture.queues.messages(FATAL_QUEUE_URL).length, 0);
                fixture.close();
            });

            it("a batch delivered twice counts once: one transaction over the key's shards the first time, only reads the second", async () => {
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
                assert.deepEqual(
                    plan.groups.map((g) => [g.counterKey, g.items.length]),
                    [["twice", 60]],
                    "one group for the key, whatever shards its ids fall in",
                );
                assert.equal(chunkIntents(plan.groups[0]!.items).length, 1, "75 actions and the partial fit one transaction");
                const transactions = recordTransactions(fixture);

                // Act
                const first = await fixture.consumer({ Records: batch }, ctx());
                const afterFirst = transactions.length;
                const second = await fixture.consumer({ Records: batch }, ctx());

                // Assess
                assert.deepEqual([first, second], [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
                assert.equal(afterFirst, 1, "the first delivery: one transaction for the key");
                assertTransactionShapes(transactions, shards);
                const [only] = transactions;
                assert.deepEqual(
                    { actions: only!.actions, partials: only!.partials.length, deletes: [...only!.user] },
                    { actions: 60 + 15 + 1, partials: 1, deletes: ["twice"] },
                    "a marker per id, a hard delete per soft delete and one partial",
                );
                assert.deepEqual(
                    [...new Set(only!.markers.map((m) => m.pk))].sort(),
                    [...new Set(ids.map((id) => shardPartitionKey("twice", markerShard(id, shards))))].sort(),
                    "its markers are in every shard the key's ids fall in",
                );
                assert.ok(new Set(only!.markers.map((m) => m.pk)).size > 1);
                assert.equal(transactions.length, afterFirst, "the second delivery commits nothing");
                const metrics = emfTotals(fixture.logs);
                assert.equal(metrics.RecordsCounted, 60);
                assert.equal(metrics.DuplicatesSkipped, 60);
                await assertCountedExact(fixture, shards, "twice", live);
                fixture.close();
            });

            for (const split of ["by id", "by stream position"] as const) {
                it(`two invocations at once on two disjoint halves of one key's records (${split}) conflict only on a shared partial or a shared id, retry, and end exact`, async () => {
                    // Prepare: 200 ids of one key, a quarter soft-deleted; the records split in two; DynamoDB's conflicts.
                    const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
                    const conflicts = transactionConflicts(fixture);
                    const live = await churn(fixture, "both", 200);
                    const [a, b] = halves(await records(fixture), split);
                    const sharedIds = idsOfBoth(a, b);
                    // By stream position, the second half holds the deletes of the first half's ids r0..r134: 34 soft, 15 another writer's.
                    assert.equal(sharedIds.size, split === "by id" ? 0 : 34 + 15);

                    // Act: the key's group of one invocation meets the other's whenever their transactions pick one partial or hold one id.
                    const results = await Promise.all([fixture.consumer({ Records: a }, ctx()), fixture.consumer({ Records: b }, ctx())]);

                    // Assess: whatever they met on (if anything: two picks share a partial 1 in N times) was a partial of the key or a
                    // marker of an id of both halves; each meeting was retried. The next test makes them meet.
                    assert.deepEqual(results, [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
                    for (const shared of conflicts) {
                        const met = conflictItems(fixture, shards, "both", shared);
                        assert.ok(met.partials.length <= 1, `a transaction writes one partial: ${JSON.stringify(shared)}`);
                        assert.deepEqual(
                            met.markers.filter((id) => !sharedIds.has(id)),
                            [],
                            "only the markers of ids of both halves are shared",
                        );
                        if (split === "by id") {
                            assert.deepEqual([met.partials.length, met.markers], [1, []], "disjoint ids share only a partial");
                        }
                    }
                    assert.equal(emfTotals(fixture.logs).TransactionRetries ?? 0, conflicts.length);
                    await assertCountedExact(fixture, shards, "both", live);
                    assert.equal(fixture.queues.messages(FATAL_QUEUE_URL).length, 0);
                    fixture.close();
                });

                it(`two invocations at once on disjoint halves (${split}) that pick one partial meet on it, retry and end exact; picking two, they never meet on a partial`, async () => {
                    // Prepare: 200 ids of each of two keys; every attempt of an invocation picks the partial it is given.
                    const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards });
                    const conflicts = transactionConflicts(fixture);
                    const live = { same: await churn(fixture, "same", 200), apart: await churn(fixture, "apart", 200) };
                    const batch = await records(fixture);
                    const ofKey = (key: string) =>
                        halves(
                            batch.filter((r) => r.dynamodb!.Keys!.pk!.S === key),
                            split,
                        );
                    const [sameA, sameB] = ofKey("same");
                    const [apartA, apartB] = ofKey("apart");
                    const sharedIds = idsOfBoth(sameA, sameB);
                    assert.deepEqual(idsOfBoth(apartA, apartB), sharedIds);
                    const [one, first, last] = [1, 0, shards - 1];

                    // Act: on "same" both invocations add to partial 1; on "apart" one adds to partial 0, the other to the last.
                    const invocations = await Promise.all([
                        countWithPartial(fixture, shards, one, sameA),
                        countWithPartial(fixture, shards, one, sameB),
                        countWithPartial(fixture, shards, first, apartA),
                        countWithPartial(fixture, shards, last, apartB),
                    ]);

                    // Assess
                    for (const { outcome } of invocations) {
                        assert.deepEqual([outcome.failedSequenceNumber, outcome.poison], [undefined, 0]);
                    }
                    const keyOf = (shared: string[]) => shardOfPartitionKey(shared[0]!.split("|")[1]!, shards).key;
                    const met = {
                        same: conflicts
                            .filter((shared) => keyOf(shared) === "same")
                            .map((shared) => conflictItems(fixture, shards, "same", shared)),
                        apart: conflicts
                            .filter((shared) => keyOf(shared) === "apart")
                            .map((shared) => conflictItems(fixture, shards, "apart", shared)),
                    };
                    assert.equal(met.same.length + met.apart.length, conflicts.length, "no conflict spans two keys");
                    // One partial: they met on it, and each meeting was retried.
                    assert.ok(met.same.length > 0, "the invocations that pick one partial met");
                    for (const { partials, markers } of met.same) {
                        if (split === "by id") {
                            assert.deepEqual(
                                [partials, markers],
                                [[shardPartitionKey("same", one)], []],
                                "disjoint ids share only the partial",
                            );
                        } else {
                            assert.deepEqual(
                                partials.filter((pk) => pk !== shardPartitionKey("same", one)),
                                [],
                                "the one partial, if any",
                            );
                            assert.deepEqual(
                                markers.filter((id) => !sharedIds.has(id)),
                                [],
                                "and markers of ids of both halves",
                            );
                        }
                    }
                    assert.equal(invocations[0]!.retries + invocations[1]!.retries, met.same.length);
                    // Two partials: never met on one; with disjoint ids, never met at all.
                    for (const { partials, markers } of met.apart) {
                        assert.deepEqual(partials, [], "two partials are never shared");
                        assert.ok(markers.length > 0 && markers.every((id) => sharedIds.has(id)), "only an id of both halves is");
                    }
                    if (split === "by id") {
                        assert.deepEqual(met.apart, [], "disjoint ids and two partials: nothing shared");
                    }
                    assert.equal(invocations[2]!.retries + invocations[3]!.retries, met.apart.length);
                    // Exact, each key's count in the partials its invocations picked.
                    await assertCountedExact(fixture, shards, "same", live.same);
                    await assertCountedExact(fixture, shards, "apart", live.apart);
                    const layout = await countersLayout(fixture, shards);
                    const partials = (key: string) =>
                        Array.from({ length: shards }, (_, s) => layout.partitions.get(shardPartitionKey(key, s))?.eventual);
                    assert.deepEqual(
                        partials("same"),
                        Array.from({ length: shards }, (_, s) => (s === one ? live.same.length : undefined)),
                        'every transaction of "same" added to partial 1: it holds the whole count',
                    );
                    if (split === "by id") {
                        // Each invocation counted its own ids into its own partial.
                        const ofHalf = (half: number) => live.apart.filter((id) => Number(id.slice(1)) % 2 === half).length;
                        assert.deepEqual(
                            partials("apart"),
                            Array.from({ length: shards }, (_, s) => (s === first ? ofHalf(0) : s === last ? ofHalf(1) : undefined)),
                        );
                    } else {
                        assert.deepEqual(
                            partials("apart").flatMap((n, s) => (n === undefined || s === first || s === last ? [] : [s])),
                            [],
                            '"apart" holds only the partials its invocations picked',
                        );
                    }
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
        await assertCountedExact(fixture, shards, "k", ["a", "b", "c", "d"]);
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
        assert.equal(emfTotals(fixture.logs).PoisonRecords, 3);
        assert.equal(emfTotals(fixture.logs).RecordsCounted, 4);
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
            responses.push(await fixture.redrive({ Records: [{ messageId, body } as never] }, untimedContext("redrive")));
        }

        // Assess
        assert.deepEqual(responses, [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
        await assertCountedExact(fixture, shards, "r", live);
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
        assert.equal(emfTotals(fixture.logs).KeysMarkedDue, 2);
        await assertCountedExact(fixture, shards, "other", []);
        fixture.close();
    });
});
