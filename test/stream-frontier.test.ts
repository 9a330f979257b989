/**
 * A stream shard's frontier (runtime/stream/progress.ts), on DynamoDB Local through the mapping emulator with the
 * component's settings:
 * - a batch Lambda gave up on before any attempt of it wrote anything goes to the first DLQ; the shard's next batch
 *   reads it again from the stream and applies it before its own records (a later record of the same key among
 *   them), and its redrive then applies nothing; with no next batch, the redrive applies it alone;
 * - the frontier moves only forward (a stale instance, two instances and the redrive at once) and keeps the sequence
 *   number as the stream gave it;
 * - records gone from the stream go to the fatal queue as records-expired;
 * - the cost of the check: a batch that follows the frontier reads one record of the stream; the frontier is written
 *   with a process's first batch, then every 1,000 records or a minute.
 */
import { PutItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { TrimmedDataAccessException, type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-dynamodb-streams";
import type { InitializeMiddleware } from "@smithy/types";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import type { OnFailureRecord } from "../local/aws/mapping-settings";
import { advanceFrontier, readFrontier } from "../runtime/stream/progress";
import { paddedSequence } from "../runtime/stream/records";
import { counterFixture, FIRST_DLQ_URL, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { emfTotals } from "./support/stream-records";
import {
    appliedSums,
    assertExact,
    consumerOf,
    eventOf,
    InvokeHook,
    mappingOf,
    recordRequests,
    refuseRequests,
    storedFrontier,
    targetOf,
    theShard,
    write,
    writesOf,
} from "./support/stream-harness";

/** The frontier as stored after applying up to `sequence`. */
const stored = (sequence: string) => `${paddedSequence(sequence)}|${sequence}`;

/** The first DLQ's messages: the batches Lambda gave up on, first and last record. */
function deadLetters(f: CounterFixture): Array<[string, string]> {
    return f.queues.messages(FIRST_DLQ_URL).map((m) => {
        const info = (JSON.parse(m.body) as OnFailureRecord).DDBStreamBatchInfo;
        return [info.startSequenceNumber, info.endSequenceNumber];
    });
}

/** The records of the shard after the first `skip`. */
async function recordsAfter(
    engine: Parameters<typeof theShard>[0],
    f: CounterFixture,
    skip: number,
): Promise<{ shardId: string; records: DynamoDBRecord[] }> {
    const { shardId, records } = await theShard(engine, f);
    return { shardId, records: records.slice(skip) };
}

describe("a stream shard's frontier on DynamoDB Local", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    afterEach(() => f?.close());

    const failures = {
        "throws at once (a function error: the batch is bisected down to single records)": (hook: InvokeHook) => {
            hook.wrap = async () => {
                throw new Error("the function failed before doing anything");
            };
            return () => (hook.wrap = undefined);
        },
        "finds its DynamoDB client refusing every request (the batch fails from its first record)": (
            _hook: InvokeHook,
            fixture: CounterFixture,
        ) => {
            const refusal = refuseRequests(fixture.consumerDynamo, () => true);
            return () => (refusal.on = false);
        },
    };

    for (const [failure, fail] of Object.entries(failures)) {
        it(`a batch every attempt of which ${failure} goes to the first DLQ; the next batch applies it before its own records, a later record of the same key among them; its redrive then applies nothing`, async () => {
            // Prepare: batch A (k-0, k-1, j-0) fails on every attempt, without writing anything.
            const hook = new InvokeHook();
            f = await counterFixture(engine(), { wrapInvoke: hook.option });
            await write(f, "k", 2);
            await write(f, "j", 1);
            const a = await theShard(engine(), f);
            const recover = fail(hook, f);
            await f.drain();
            recover();
            assert.equal(f.emulator.stats.recordsToOnFailure, 3);
            const letters = deadLetters(f);
            assert.deepEqual(
                [letters[0]![0], letters.at(-1)![1]],
                [a.records[0]!.dynamodb!.SequenceNumber, a.records[2]!.dynamodb!.SequenceNumber],
            );
            assert.equal((await f.snapshot("k")).eventual, 0);
            assert.equal(await storedFrontier(f, a.shardId), undefined);
            // Batch B: a later record of k (k-2) and one of j.
            await write(f, "k", 1, 0, 2);
            await write(f, "j", 1, 0, 1);
            const b = await recordsAfter(engine(), f, 3);
            const requests = recordRequests(f.consumerDynamo);
            const invocations = f.emulator.stats.invocations;

            // Act
            await f.drain();

            // Assess: B's one invocation applied A's records with its own, one write per key.
            assert.equal(f.emulator.stats.invocations - invocations, 1);
            assert.equal(emfTotals(f.logs)["RangesRedriven"], 1);
            assert.deepEqual(appliedSums(f.config, requests), { k: [3], j: [2] });
            assert.equal(await storedFrontier(f, b.shardId), stored(b.records.at(-1)!.dynamodb!.SequenceNumber!));
            await assertExact(f, { k: 3, j: 2 });

            // Act: the redrive of A's messages, and of one of them again (SQS delivers at least once).
            const redriveRequests = recordRequests(f.consumerDynamo);
            const oneLetter = f.queues.messages(FIRST_DLQ_URL)[0]!.body;
            const redriven = await f.redriveAll();
            f.queues.send(FIRST_DLQ_URL, oneLetter);
            const again = await f.redriveAll();

            // Assess: every message found its records below the frontier: no write.
            assert.deepEqual([redriven, again], [letters.length, 1]);
            assert.deepEqual(writesOf(redriveRequests), []);
            assert.deepEqual(deadLetters(f), []);
            await assertExact(f, { k: 3, j: 2 });
        });
    }

    it("a batch Lambda gave up on, with no later batch, is applied by the redrive alone; redriven again, it writes nothing", async () => {
        // Prepare
        const hook = new InvokeHook();
        f = await counterFixture(engine(), { wrapInvoke: hook.option });
        await write(f, "k", 3, 1);
        const { shardId, records } = await theShard(engine(), f);
        hook.wrap = async () => {
            throw new Error("the function failed before doing anything");
        };
        await f.drain();
        const letters = f.queues.messages(FIRST_DLQ_URL).map((m) => m.body);
        assert.equal(letters.length, records.length, "bisected down to single records");
        const requests = recordRequests(f.consumerDynamo);

        // Act
        const redriven = await f.redriveAll();

        // Assess
        assert.equal(redriven, letters.length);
        assert.deepEqual(appliedSums(f.config, requests), { k: [1, 1, 1, -1] }, "each message applies its record, in order");
        assert.equal(await storedFrontier(f, shardId), stored(records.at(-1)!.dynamodb!.SequenceNumber!));
        await assertExact(f, { k: 2 });

        // Act: every message again.
        const before = requests.length;
        letters.forEach((body) => f!.queues.send(FIRST_DLQ_URL, body));
        assert.equal(await f.redriveAll(), letters.length);

        // Assess
        assert.deepEqual(writesOf(requests.slice(before)), []);
        await assertExact(f, { k: 2 });
    });

    it("moves only forward: a stale instance applying old batches again writes nothing and leaves it; it keeps the sequence number as the stream gave it", async () => {
        // Prepare: the stale instance applies A's first record, the fixture's consumer then A and B.
        f = await counterFixture(engine());
        const stale = consumerOf(engine(), f);
        await write(f, "a", 2);
        const a = await theShard(engine(), f);
        await stale(eventOf(f, a.shardId, a.records.slice(0, 1)));
        await f.consumer(eventOf(f, a.shardId, a.records));
        await write(f, "a", 1, 0, 2);
        await write(f, "b", 1);
        const b = await recordsAfter(engine(), f, 2);
        await f.consumer(eventOf(f, b.shardId, b.records));
        // The fixture's consumer wrote the frontier after A (its first batch), and moved it past B in memory only.
        const last = a.records.at(-1)!.dynamodb!.SequenceNumber!;
        const requests = recordRequests(f.consumerDynamo);

        // Act: the stale instance (its cached frontier A's first record) gets A, then B, again; the frontier is moved
        // back directly.
        const answers = [await stale(eventOf(f, a.shardId, a.records)), await stale(eventOf(f, b.shardId, b.records))];
        await advanceFrontier(f.config, f.reader, a.shardId, a.records[0]!.dynamodb!.SequenceNumber!);

        // Assess: nothing applied, nothing written, the frontier where A left it (the direct move back refused), and
        // read back as the stream gave it (its zeros).
        assert.deepEqual(answers, [
            { state: {}, batchItemFailures: [] },
            { state: {}, batchItemFailures: [] },
        ]);
        assert.deepEqual(appliedSums(f.config, requests), {});
        // Batches that apply nothing move the stale instance's frontier in its memory only (it wrote it a moment ago).
        assert.deepEqual(writesOf(requests), [], "no write");
        assert.equal(await storedFrontier(f, a.shardId), stored(last));
        assert.match(last, /^0+[1-9]\d*$/, "DynamoDB Local's sequence numbers have leading zeros");
        assert.equal(await readFrontier(f.config, f.reader, a.shardId), last);
        await assertExact(f, { a: 3, b: 1 });
    });

    it("a process writes its shard's frontier with its first batch, then only every 1,000 records (or a minute); a process that starts from the written one re-reads the rest, applies nothing and writes only the frontier", async () => {
        // Prepare: 1,200 records of 12 keys, in batches of 100
        f = await counterFixture(engine());
        for (let k = 0; k < 12; k++) {
            await write(f, `k${k}`, 100);
        }
        const requests = recordRequests(f.consumerDynamo);

        // Act
        await f.drain();
        const progressWrites = writesOf(requests).filter((w) => targetOf(f!.config, w) === "progress");
        const { shardId, records } = await theShard(engine(), f);
        const written = await storedFrontier(f, shardId);
        const fresh = consumerOf(engine(), f);
        const freshRequests = recordRequests(f.consumerDynamo);
        const answer = await fresh(eventOf(f, shardId, records.slice(-100)));

        // Assess: 12 batches, two frontier writes (the first batch's, and the eleventh's, 1,000 records later); the
        // process that takes the last batch again (applied, not written) finds every record applied by its mark
        assert.equal(f.emulator.stats.invocations, 12);
        assert.equal(progressWrites.length, 2);
        assert.equal(written, stored(records[1_099]!.dynamodb!.SequenceNumber!));
        assert.deepEqual(answer, { state: {}, batchItemFailures: [] });
        assert.deepEqual(appliedSums(f.config, freshRequests), {});
        assert.equal(writesOf(freshRequests).length, 1, "the frontier only");
        assert.equal(await storedFrontier(f, shardId), stored(records.at(-1)!.dynamodb!.SequenceNumber!));
        await assertExact(f, Object.fromEntries(Array.from({ length: 12 }, (_, k) => [`k${k}`, 100])));
    });

    it("two instances and the redrive at once apply each record once, and leave the frontier at the last record", async () => {
        // Prepare: batch A in the first DLQ; batch B delivered to two instances at once while A is redriven.
        const hook = new InvokeHook();
        f = await counterFixture(engine(), { wrapInvoke: hook.option });
        await write(f, "k", 4, 1);
        await write(f, "j", 2);
        hook.wrap = async () => {
            throw new Error("the function failed before doing anything");
        };
        await f.drain();
        await write(f, "k", 2, 1, 4);
        await write(f, "j", 1, 1, 2);
        const { shardId, records } = await theShard(engine(), f);
        const second = consumerOf(engine(), f);
        hook.wrap = async (invoke, event) => (await Promise.all([invoke(event), second(event)]))[0];
        const requests = recordRequests(f.consumerDynamo);

        // Act
        await Promise.all([f.redriveAll(), f.drain()]);

        // Assess
        const sums = appliedSums(f.config, requests);
        assert.deepEqual(
            ["k", "j"].map((key) => (sums[key] ?? []).reduce((s, d) => s + d, 0)),
            [4, 2],
        );
        assert.equal(await storedFrontier(f, shardId), stored(records.at(-1)!.dynamodb!.SequenceNumber!));
        await assertExact(f, { k: 4, j: 2 });
    });

    it("records gone from the stream (older than 24 hours) go to the fatal queue as records-expired; the batch applies what the stream holds", async () => {
        // Prepare: the frontier after k-0; batch A (k-1) in the first DLQ; the stream no longer holds the record after
        // the frontier (its iterator there is refused as trimmed), so the read starts at the oldest record it holds.
        const hook = new InvokeHook();
        f = await counterFixture(engine(), { wrapInvoke: hook.option });
        const streams = engine().streams();
        const trimmed = { on: false };
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const input = args.input as { ShardIteratorType?: string };
            if (trimmed.on && context.commandName === "GetShardIteratorCommand" && input.ShardIteratorType === "AFTER_SEQUENCE_NUMBER") {
                throw new TrimmedDataAccessException({
                    $metadata: {},
                    message: "the requested sequence number is beyond the trim horizon",
                });
            }
            return next(args);
        };
        streams.middlewareStack.add(middleware, { step: "initialize", name: "trimmed" });
        const consumer = consumerOf(engine(), f, { streams });
        await write(f, "k", 1);
        const first = await theShard(engine(), f);
        await consumer(eventOf(f, first.shardId, first.records));
        hook.wrap = async () => {
            throw new Error("the function failed before doing anything");
        };
        await write(f, "k", 1, 0, 1);
        await f.drain();
        await write(f, "k", 1, 0, 2);
        const { shardId, records } = await theShard(engine(), f);
        trimmed.on = true;

        // Act: batch B (k-2).
        const answer = await consumer(eventOf(f, shardId, records.slice(2)));

        // Assess
        assert.deepEqual(answer, { state: {}, batchItemFailures: [] });
        assert.deepEqual(
            f.fatal.map((m) => ({ reason: m.reason, detail: m.detail })),
            [
                {
                    reason: "records-expired",
                    detail: {
                        shardId,
                        streamArn: f.streamArn,
                        startSequenceNumber: records[0]!.dynamodb!.SequenceNumber,
                        endSequenceNumber: records[2]!.dynamodb!.SequenceNumber,
                    },
                },
            ],
        );
        assert.equal(await storedFrontier(f, shardId), stored(records[2]!.dynamodb!.SequenceNumber!));
        await assertExact(f, { k: 3 });
        streams.destroy();
    });

    it("a span the stream does not yield to its end fails the batch from its first record, writing nothing; delivered again, it is applied", async () => {
        // Prepare: the frontier after k-0; then k-1 and k-2, of which only k-2 is delivered, while the stream answers
        // every read empty (an open shard that has not yet served the records).
        f = await counterFixture(engine());
        const streams = engine().streams();
        const stalled = { on: false };
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            if (stalled.on && context.commandName === "GetRecordsCommand") {
                return {
                    output: { Records: [], NextShardIterator: (args.input as { ShardIterator?: string }).ShardIterator, $metadata: {} },
                    response: {},
                };
            }
            return next(args);
        };
        streams.middlewareStack.add(middleware, { step: "initialize", name: "stalled" });
        const consumer = consumerOf(engine(), f, { streams });
        await write(f, "k", 1);
        const first = await theShard(engine(), f);
        await consumer(eventOf(f, first.shardId, first.records));
        await write(f, "k", 2, 0, 1);
        const { shardId, records } = await theShard(engine(), f);
        const requests = recordRequests(f.consumerDynamo);
        stalled.on = true;

        // Act
        const answer = await consumer(eventOf(f, shardId, records.slice(2)));

        // Assess
        assert.deepEqual(answer, { state: {}, batchItemFailures: [{ itemIdentifier: records[2]!.dynamodb!.SequenceNumber }] });
        assert.deepEqual(writesOf(requests), []);
        assert.equal(await storedFrontier(f, shardId), stored(records[0]!.dynamodb!.SequenceNumber!));

        // Act
        stalled.on = false;
        const again = await consumer(eventOf(f, shardId, records.slice(2)));

        // Assess
        assert.deepEqual(again, { state: {}, batchItemFailures: [] });
        assert.deepEqual(appliedSums(f.config, requests), { k: [2] });
        await assertExact(f, { k: 3 });
        streams.destroy();
    });

    it("with no filter (as the component deploys it), records the consumer counts nothing for cost no write, and a batch that follows the frontier reads one record of the stream", async () => {
        // Prepare: between two batches of key k, another writer's items the selection does not count (no client
        // token): the mapping delivers them, and the consumer writes nothing for them.
        f = await counterFixture(engine());
        const streams = engine().streams();
        const read = { records: 0 };
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const result = await next(args);
            if (context.commandName === "GetRecordsCommand") {
                read.records += ((result.output as { Records?: unknown[] }).Records ?? []).length;
            }
            return result;
        };
        streams.middlewareStack.add(middleware, { step: "initialize", name: "countRecords" });
        const consumer = consumerOf(engine(), f, { streams });
        const mapping = mappingOf(engine(), f, consumer);
        const writes: string[] = [];
        f.consumerDynamo.middlewareStack.add(
            (next, context) => async (args) => {
                if (
                    ["UpdateItemCommand", "PutItemCommand", "DeleteItemCommand", "TransactWriteItemsCommand"].includes(
                        context.commandName ?? "",
                    )
                ) {
                    writes.push(context.commandName!);
                }
                return next(args);
            },
            { step: "initialize", name: "countWrites" },
        );
        await write(f, "k", 1);
        await mapping.drain();
        const before = writes.length;
        for (let i = 0; i < 20; i++) {
            await putUncounted(f.reader, f, "k", `other-${i}`);
        }
        await mapping.drain();
        const writesForOthers = writes.length - before;
        await write(f, "k", 1, 0, 1);
        read.records = 0;

        // Act
        await mapping.drain();

        // Assess: the other writer's 20 records cost no write (the frontier, written a moment ago, moved in the
        // consumer's memory only); the batch (k-1) follows that frontier.
        assert.equal(mapping.stats.recordsFiltered, 0);
        assert.equal(writesForOthers, 0);
        await assertExact(f, { k: 2 });
        assert.deepEqual({ read: read.records, rangesRedriven: emfTotals(f.logs)["RangesRedriven"] ?? 0 }, { read: 1, rangesRedriven: 0 });
        streams.destroy();
    });
});

/** Another writer's item the client selection does not count (it has no client token). */
async function putUncounted(dynamodb: DynamoDBClient, f: CounterFixture, key: string, id: string): Promise<void> {
    await dynamodb.send(
        new PutItemCommand({
            TableName: f.config.tableName,
            Item: { [f.config.partitionKey]: { S: key }, [f.config.sortKey]: { S: id }, note: { S: "not counted" } },
        }),
    );
}
