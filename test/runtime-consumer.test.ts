import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import { DescribeStreamCommand, TrimmedDataAccessException } from "@aws-sdk/client-dynamodb-streams";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { untimedContext } from "../local/aws/lambda-context";
import { LocalQueues } from "../local/aws/sqs";
import { createStreamHandler } from "../runtime/stream/consumer";
import { createRedriveHandler } from "../runtime/stream/redrive";
import { assertExact, counterFixture, FATAL_QUEUE_URL } from "./support/counter-fixture";
import { countTransactions, readStream, emfTotals } from "./support/stream-records";

const ctx = () => untimedContext("consumer");

describe("the stream consumer on DynamoDB Local", () => {
    const engine = useEngine();

    it("counts the same batch delivered twice once", async () => {
        const fixture = await counterFixture(engine());
        for (let i = 0; i < 30; i++) {
            await fixture.client.create("twice", `r${i}`);
        }
        for (let i = 0; i < 10; i++) {
            await fixture.client.delete("twice", `r${i}`);
        }
        const records = await readStream(engine().streams(), fixture.streamArn);
        const resourceRecords = records.filter((r) => !r.dynamodb!.Keys!.sk!.S!.startsWith("#counter#"));
        // Each delete writes its claim on the item before the soft delete: a MODIFY the consumer ignores.
        assert.equal(resourceRecords.length, 50, "30 inserts, 10 delete claims and 10 soft deletes, beside the counter items' own records");

        const first = await fixture.consumer({ Records: records }, ctx());
        const second = await fixture.consumer({ Records: records }, ctx());

        assert.deepEqual(first, { batchItemFailures: [] });
        assert.deepEqual(second, { batchItemFailures: [] });
        const s = await fixture.snapshot("twice");
        assert.deepEqual(s, { bestEffort: 20, eventual: 20, live: 20, counted: 20, softDeleted: 0 });
        const metrics = emfTotals(fixture.logs);
        assert.equal(metrics.RecordsCounted, 30, "first delivery: 20 creations and 10 created-then-deleted items");
        assert.equal(metrics.DuplicatesSkipped, 30, "second delivery: every item was already settled");
        fixture.close();
    });

    it("a batch that holds its records twice counts each once and removes no live item (fuzz seed 319)", async () => {
        // Prepare: two creates, their records listed twice in one delivery.
        const fixture = await counterFixture(engine());
        await fixture.client.create("k", "a");
        await fixture.client.create("k", "b");
        const records = (await readStream(engine().streams(), fixture.streamArn)).filter(
            (r) => !r.dynamodb!.Keys!.sk!.S!.startsWith("#counter#"),
        );

        // Act
        const result = await fixture.consumer({ Records: [...records, ...records.map((r) => structuredClone(r))] }, ctx());

        // Assess: both items stay, each counted once.
        assert.deepEqual(result, { batchItemFailures: [] });
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 2, eventual: 2, live: 2, counted: 2, softDeleted: 0 });
        fixture.close();
    });

    it("two invocations processing overlapping batches at the same time count each record once", async () => {
        const fixture = await counterFixture(engine());
        const keys = ["o1", "o2", "o3"];
        for (let i = 0; i < 60; i++) {
            await fixture.client.create(keys[i % 3]!, `r${i}`);
        }
        for (let i = 0; i < 60; i += 4) {
            await fixture.client.delete(keys[i % 3]!, `r${i}`);
        }
        const records = await readStream(engine().streams(), fixture.streamArn);
        const a = records.slice(0, Math.floor((records.length * 2) / 3));
        const b = records.slice(Math.floor(records.length / 3));

        const results = await Promise.all([fixture.consumer({ Records: a }, ctx()), fixture.consumer({ Records: b }, ctx())]);

        assert.deepEqual(results, [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
        const snapshots = await assertExact(fixture);
        assert.deepEqual(
            [...snapshots.values()].map((s) => s.live),
            [15, 15, 15],
        );
        fixture.close();
    });

    it("aggregates a batch per counter key: one transaction per 99 items plus the counter", async () => {
        const fixture = await counterFixture(engine());
        for (let i = 0; i < 150; i++) {
            await fixture.client.create("hot", `r${i}`);
        }
        for (let i = 0; i < 5; i++) {
            await fixture.client.create("cold", `r${i}`);
        }
        const records = await readStream(engine().streams(), fixture.streamArn);
        const seen = countTransactions(fixture);

        await fixture.consumer({ Records: records }, ctx());

        // hot: 99 + 1 and 51 + 1 actions; cold: 5 + 1. The paper's one transaction per record: 155 calls of 2.
        assert.deepEqual(seen, { calls: 3, actions: 155 + 3 });
        assert.equal((await fixture.snapshot("hot")).eventual, 150);
        assert.equal((await fixture.snapshot("cold")).eventual, 5);
        fixture.close();
    });

    it("a deletion counted before its creation removes the item without a decrement, and the late creation counts nothing", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("late", "r1");
        await fixture.client.delete("late", "r1");
        const records = (await readStream(engine().streams(), fixture.streamArn)).filter((r) => r.dynamodb?.Keys?.sk?.S === "r1");
        // The soft delete, not the delete's claim before it.
        const insert = records[0];
        const modify = records.find((r) => r.eventName === "MODIFY" && r.dynamodb?.NewImage?.deleted?.BOOL === true);
        assert.equal(insert!.eventName, "INSERT");
        assert.equal(modify!.eventName, "MODIFY");

        // As when the creation's batch went to the dead-letter queue and the deletion's did not.
        await fixture.consumer({ Records: [modify!] }, ctx());
        assert.deepEqual(await fixture.snapshot("late"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        await fixture.consumer({ Records: [insert!] }, ctx());

        assert.deepEqual(await fixture.snapshot("late"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        fixture.close();
    });

    it("sends poison records whole to the fatal queue, counts the rest, and does not block the shard", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("p", "good-1");
        // A creation written around the client, with a flag that is not a boolean: poison from the real stream.
        await fixture.reader.send(
            new PutItemCommand({
                TableName: fixture.tableName,
                Item: { pk: { S: "p" }, sk: { S: "bad-flag" }, counter_counted: { S: "false" } },
            }),
        );
        await fixture.client.create("p", "good-2");
        const real = await readStream(engine().streams(), fixture.streamArn);
        const template = real.find((r) => r.dynamodb?.Keys?.sk?.S === "good-1")!;
        const forged = (n: number, change: (r: DynamoDBRecord) => void): DynamoDBRecord => {
            const r = JSON.parse(JSON.stringify(template)) as DynamoDBRecord;
            r.dynamodb!.SequenceNumber = `9${String(n).padStart(20, "0")}`;
            change(r);
            return r;
        };
        const poison = [
            forged(1, (r) => delete r.dynamodb!.Keys!.pk),
            forged(2, (r) => (r.dynamodb!.Keys!.pk = { N: "7" })),
            forged(3, (r) => delete r.dynamodb!.NewImage),
            forged(4, (r) => (r.dynamodb!.Keys!.sk = { S: "x".repeat(1025) })),
            forged(5, (r) => ((r as { eventName: string }).eventName = "UPSERT")),
            forged(6, (r) => delete r.dynamodb!.SequenceNumber),
        ];

        const response = await fixture.consumer({ Records: [...real, ...poison] }, ctx());

        assert.deepEqual(response, { batchItemFailures: [] });
        assert.deepEqual(await fixture.snapshot("p"), { bestEffort: 2, eventual: 2, live: 2, counted: 2, softDeleted: 0 });
        const parked = fixture.queues
            .messages(FATAL_QUEUE_URL)
            .map((m) => JSON.parse(m.body) as { reason: string; problem: string; records: DynamoDBRecord[] });
        assert.deepEqual(
            parked.map((m) => m.problem),
            [
                "[dynamodb.Keys.pk] is missing",
                "[dynamodb.Keys.pk] must be a string (S) attribute",
                "[dynamodb.NewImage] is missing: the stream must carry new and old images",
                "[dynamodb.Keys.sk] must be at most 1024 bytes",
                '[eventName] must be INSERT, MODIFY or REMOVE (got "UPSERT")',
                "[dynamodb.SequenceNumber] must be a decimal string of at most 40 digits",
            ],
        );
        for (const m of parked) {
            assert.equal(m.reason, "poison-record");
            assert.equal(m.records.length, 1, "the full record travels with the message");
        }
        assert.deepEqual(parked[1]!.records[0], JSON.parse(JSON.stringify(poison[1])));
        assert.equal(emfTotals(fixture.logs).PoisonRecords, 6);
        fixture.close();
    });

    it("reports a poison record for redelivery when the fatal queue cannot take it, so nothing is lost", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("q", "good");
        const real = await readStream(engine().streams(), fixture.streamArn);
        const broken = JSON.parse(JSON.stringify(real.find((r) => r.dynamodb?.Keys?.sk?.S === "good"))) as DynamoDBRecord;
        broken.dynamodb!.SequenceNumber = "99999999999999999999";
        delete broken.dynamodb!.NewImage;
        const failingSqs = new SQSClient({
            region: "us-east-1",
            endpoint: "http://127.0.0.1:9",
            credentials: { accessKeyId: "x", secretAccessKey: "x" },
            maxAttempts: 1,
        });
        const logs: string[] = [];
        const consumer = createStreamHandler({
            config: fixture.config,
            dynamodb: fixture.consumerDynamo,
            sqs: failingSqs,
            sink: (l) => logs.push(l),
        });

        const response = await consumer({ Records: [...real, broken] }, ctx());

        assert.deepEqual(response, { batchItemFailures: [{ itemIdentifier: "99999999999999999999" }] });
        assert.equal((await fixture.snapshot("q")).eventual, 1, "the good record was counted");
        assert.ok(logs.some((l) => l.includes("could not send to the fatal queue")));
        fixture.close();
    });

    it("redrive: records gone from the stream leave a plain message for operators", async () => {
        const fixture = await counterFixture(engine());
        const streams = engine().streams();
        streams.middlewareStack.add(
            () => async () => {
                throw new TrimmedDataAccessException({ $metadata: { httpStatusCode: 400 }, message: "records trimmed" });
            },
            { step: "initialize", name: "trimmed" },
        );
        const queues = new LocalQueues();
        const sqs = queues.client();
        const redrive = createRedriveHandler({
            config: fixture.config,
            dynamodb: fixture.consumerDynamo,
            streams,
            sqs,
            sink: () => undefined,
        });
        const body = JSON.stringify({
            requestContext: { condition: "RetryAttemptsExhausted" },
            DDBStreamBatchInfo: {
                shardId: "shardId-00000001",
                startSequenceNumber: "100",
                endSequenceNumber: "200",
                batchSize: 5,
                streamArn: fixture.streamArn,
            },
        });
        const message = (messageId: string, text: string) => ({ messageId, body: text }) as never;

        const response = await redrive(
            {
                Records: [
                    message("m1", body),
                    message("m2", "{not json"),
                    message(
                        "m3",
                        JSON.stringify({ DDBStreamBatchInfo: { streamArn: "arn:aws:dynamodb:us-east-1:1:table/other/stream/x" } }),
                    ),
                ],
            },
            untimedContext("redrive"),
        );

        assert.deepEqual(response, { batchItemFailures: [] });
        const parked = queues.messages(FATAL_QUEUE_URL).map((m) => JSON.parse(m.body) as { reason: string; problem: string });
        assert.deepEqual(
            parked.map((m) => m.reason),
            ["records-expired", "malformed-redrive-message", "malformed-redrive-message"],
        );
        assert.match(
            parked[0]!.problem,
            /^The records 100 to 200 of shard shardId-00000001 could not be read from the stream \(TrimmedDataAccessException\): DynamoDB keeps stream records for 24 hours\./,
        );
        assert.equal(parked[1]!.problem, "[body] is not JSON");
        assert.match(parked[2]!.problem, /^\[DDBStreamBatchInfo\.streamArn\] names table "other", not "counter-test-/);
        fixture.close();
    });

    it("redrive: a range the stream does not yield to its end is retried, not counted short", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("r", "a");
        const streams = engine().streams();
        const [first] = await readStream(streams, fixture.streamArn);
        const shards = await streams.send(new DescribeStreamCommand({ StreamArn: fixture.streamArn }));
        const body = JSON.stringify({
            DDBStreamBatchInfo: {
                shardId: shards.StreamDescription!.Shards![0]!.ShardId,
                startSequenceNumber: first!.dynamodb!.SequenceNumber,
                endSequenceNumber: "999999999999999999999999",
                streamArn: fixture.streamArn,
            },
        });

        const response = await fixture.redrive({ Records: [{ messageId: "m1", body } as never] }, untimedContext("redrive"));

        assert.deepEqual(response, { batchItemFailures: [{ itemIdentifier: "m1" }] });
        assert.equal((await fixture.snapshot("r")).eventual, 0, "nothing of the short range was counted");
        assert.equal(fixture.queues.messages(FATAL_QUEUE_URL).length, 0);
        fixture.close();
    });

    it("works on an existing schema with its own attribute names", async () => {
        const fixture = await counterFixture(engine(), {
            layout: {
                partitionKey: "tenant",
                sortKey: "resource",
                deletedAttribute: "gone",
                tokenAttribute: "writer",
                counterPrefix: "~ctr~",
                countAttribute: "n",
            },
        });
        for (let i = 0; i < 12; i++) {
            await fixture.client.create(`t${i % 2}`, `r${i}`);
        }
        for (let i = 0; i < 12; i += 3) {
            await fixture.client.delete(`t${i % 2}`, `r${i}`);
        }
        await fixture.emulator.drain();

        const snapshots = await assertExact(fixture);
        assert.deepEqual(
            [...snapshots.entries()].map(([k, s]) => [k, s.eventual, s.bestEffort]),
            [
                ["t0", 4, 4],
                ["t1", 4, 4],
            ],
        );
        assert.deepEqual(await fixture.client.count("t0"), { bestEffort: 4, eventual: 4, value: 4 });
        fixture.close();
    });

    it("leaves the counter alone for a transaction that fails on a non-retryable error", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("v", "r1");
        const records = await readStream(engine().streams(), fixture.streamArn);
        // Point the consumer at a table that does not exist: every transaction is rejected outright.
        const consumer = createStreamHandler({
            config: { ...fixture.config, tableName: "no-such-table", countersTableName: "no-such-table" },
            dynamodb: fixture.consumerDynamo,
            sqs: new LocalQueues().client(),
            sink: () => undefined,
        });
        const insert = records.find((r) => r.dynamodb?.Keys?.sk?.S === "r1")!;

        const response = await consumer({ Records: records }, ctx());

        assert.deepEqual(response, { batchItemFailures: [{ itemIdentifier: insert.dynamodb!.SequenceNumber! }] });
        assert.equal((await fixture.snapshot("v")).eventual, 0);
        fixture.close();
    });
});
