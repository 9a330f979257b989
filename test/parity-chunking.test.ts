import { TransactWriteItemsCommand, type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { counterFixture, FATAL_QUEUE_URL, type CounterFixture } from "./support/counter-fixture";
import { untimedContext } from "../local/aws/lambda-context";
import { snapshotKey } from "../local/harness/observe";
import {
    COUNTER_CHUNK_LIMITS,
    firstChunk,
    itemSize,
    planChunks,
    recordImageSize,
    separateTooLarge,
    TRANSACTION_MAX_BYTES,
    withMargin,
} from "../runtime/stream/chunking";
import { transactionActions } from "../runtime/stream/markers";
import { reconcileKey } from "../runtime/heal/reconcile";

const KB = 1024;

describe("transaction chunking by count and by size (pure)", () => {
    it("sizes items as DynamoDB documents: names and values, numbers by significant digits, 3 + 1 per element for lists and maps", () => {
        const item = {
            s: { S: "héllo" }, // 1 + 6
            n: { N: "-0012.3400" }, // 1 + ceil(4 / 2) + 1
            b: { B: Buffer.from("abc").toString("base64") }, // 1 + 3
            t: { BOOL: true }, // 1 + 1
            z: { NULL: true }, // 1 + 1
            ss: { SS: ["a", "bc"] }, // 2 + 3
            l: { L: [{ S: "a" }, { N: "1" }] }, // 1 + 3 + (1 + 1) + (1 + 2)
            m: { M: { k: { S: "v" } } }, // 1 + 3 + (1 + 1 + 1)
        };

        const size = itemSize(item);

        assert.equal(size, 7 + 4 + 4 + 2 + 2 + 5 + 9 + 7);
    });

    it("keeps 99 small items per chunk: one action is the counter's", () => {
        const items = Array.from({ length: 250 }, (_, i) => i);

        const chunks = planChunks(items, () => 200);

        assert.deepEqual(
            chunks.map((c) => c.length),
            [99, 99, 52],
        );
        assert.deepEqual(chunks.flat(), items);
    });

    it("cuts chunks of large items under 4 MB with the margin and the counter's bytes kept back", () => {
        const items = Array.from({ length: 12 }, (_, i) => i);
        // 380 KB items: 389,120 bytes, 428,032 with a 10% margin; 9 of them fit in 4 MB less 4 KB, 10 do not.
        const sizeOf = () => 380 * KB;

        const chunks = planChunks(items, sizeOf);

        assert.equal(withMargin(380 * KB), 428_032);
        assert.ok(9 * 428_032 <= TRANSACTION_MAX_BYTES - COUNTER_CHUNK_LIMITS.reservedBytes);
        assert.ok(10 * 428_032 > TRANSACTION_MAX_BYTES - COUNTER_CHUNK_LIMITS.reservedBytes);
        assert.deepEqual(
            chunks.map((c) => c.length),
            [9, 3],
        );
    });

    it("mixes both bounds: large items close a chunk early, small ones fill it to 99", () => {
        // Five 700 KB items (788,480 bytes with the margin) fill 3.9 MB: the sixth opens the next chunk.
        const sizes = [...Array.from({ length: 6 }, () => 700 * KB), ...Array.from({ length: 150 }, () => 100)];

        const chunks = planChunks(
            sizes.map((_, i) => i),
            (i) => sizes[i]!,
        );

        assert.deepEqual(
            chunks.map((c) => c.length),
            [5, 99, 52],
        );
    });

    it("sets apart an item too large for any transaction beside the counter, and never returns an empty chunk", () => {
        const sizes = new Map([
            ["fits", 300 * KB],
            ["too-large", 3_900 * KB],
        ]);

        const { fitting, tooLarge } = separateTooLarge(["fits", "too-large"], (k) => sizes.get(k)!);
        const alone = firstChunk(["too-large", "fits"], (k) => sizes.get(k)!);

        assert.deepEqual(fitting, ["fits"]);
        assert.deepEqual(tooLarge, ["too-large"]);
        assert.deepEqual(alone, ["too-large"]);
    });

    it("estimates a record by the larger of its images", () => {
        const record: DynamoDBRecord = {
            eventName: "MODIFY",
            dynamodb: { NewImage: { a: { S: "x".repeat(10) } }, OldImage: { a: { S: "x".repeat(30) } }, SequenceNumber: "1" },
        };

        assert.equal(recordImageSize(record), 31);
        assert.equal(recordImageSize(undefined), 0);
    });
});

/** Counts the TransactWriteItems calls a client makes and the actions each held. */
function transactionSizes(fixture: CounterFixture): number[] {
    const seen: number[] = [];
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === "TransactWriteItemsCommand") {
            seen.push((args.input as { TransactItems?: unknown[] }).TransactItems?.length ?? 0);
        }
        return next(args);
    };
    fixture.consumerDynamo.middlewareStack.add(middleware, { step: "initialize", name: "transactionSizes" });
    return seen;
}

describe("the consumer and reconciliation chunk by size behind the parity layer", () => {
    // These tests are about the 4 MB transaction limit; at 1,000 WCU/s per key, writing 4.5 MB to one key
    // would only add seconds of throttling (the partition limit has its own tests in parity.test.ts).
    const engine = useEngine({ parity: { partitionWriteUnitsPerSecond: 1_000_000, partitionReadUnitsPerSecond: 1_000_000 } });
    const payload = "x".repeat(380 * KB);

    it("counts 12 items of 380 KB by their small markers, and hard-deletes them in transactions under 4 MB, where one is refused", async () => {
        const fixture = await counterFixture(engine());
        const sizes = transactionSizes(fixture);
        for (let i = 0; i < 12; i++) {
            await fixture.client.create("big", `r${i}`, { payload });
        }
        await fixture.emulator.drain();
        const created = [...sizes];
        for (let i = 0; i < 12; i++) {
            await fixture.client.delete("big", `r${i}`);
        }
        // What chunking by count alone would send: the counter, 12 markers and 12 hard deletes in one transaction.
        const countOnly = transactionActions(
            fixture.config,
            "big",
            Array.from({ length: 12 }, (_, i) => ({
                id: `r${i}`,
                target: "uncounted" as const,
                expected: "counted" as const,
                seq: "9".repeat(40),
                sequenceNumbers: [],
                softDelete: { token: { S: "never" } },
            })),
            Date.now(),
        ).actions;
        const refused = await fixture.reader.send(new TransactWriteItemsCommand({ TransactItems: countOnly })).then(
            () => undefined,
            (error: Error) => error,
        );

        await fixture.emulator.drain();
        const s = await snapshotKey(fixture.reader, fixture.tableName, fixture.layout, "big");

        assert.deepEqual(created, [13], "the counter and 12 markers: the 380 KB items are not in the transaction");
        assert.equal(countOnly.length, 25);
        assert.equal(refused?.name, "ValidationException");
        assert.match(refused.message, /aggregate size of the items in the transaction exceeding the 4MB limit$/);
        assert.deepEqual(sizes.slice(1), [19, 7], "9 then 3 hard deletes, each with its marker, after the counter");
        assert.deepEqual(
            { eventual: s.eventual, live: s.live, counted: s.counted, softDeleted: s.softDeleted },
            { eventual: 0, live: 0, counted: 0, softDeleted: 0 },
        );
        assert.deepEqual(fixture.queues.messages(FATAL_QUEUE_URL), []);
        fixture.close();
    });

    it("reconciles 12 stranded items of 380 KB on one key in transactions under 4 MB", async () => {
        const fixture = await counterFixture(engine());
        const sizes = transactionSizes(fixture);
        for (let i = 0; i < 12; i++) {
            await fixture.client.create("stranded", `r${i}`, { payload });
        }
        const parked: unknown[] = [];

        // The stream is never read: the records are as good as expired.
        const result = await reconcileKey("stranded", {
            config: fixture.config,
            dynamodb: fixture.consumerDynamo,
            fatal: { park: async (m) => (parked.push(m), true) },
        });

        assert.deepEqual(result, { key: "stranded", found: 12, counted: 12, alreadySettled: 0, incomplete: false });
        assert.deepEqual(sizes, [19, 7], "9 then 3 corrections (a marker and a check of the 380 KB item), after the counter");
        assert.deepEqual(parked, []);
        fixture.close();
    });

    it("parks a hard delete too large for any transaction beside its counter, with its records and the reason, and counts the rest", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("k", "small");
        await fixture.emulator.drain();
        await fixture.client.create("k", "other");
        // A soft delete whose image (as a stream could carry it from a larger item store) outweighs 4 MB.
        const image = { pk: { S: "k" }, sk: { S: "huge" }, counter_token: { S: "t" }, payload: { S: "x".repeat(4 * 1024 * KB) } };
        const huge: DynamoDBRecord = {
            eventName: "MODIFY",
            eventSource: "aws:dynamodb",
            dynamodb: {
                Keys: { pk: { S: "k" }, sk: { S: "huge" } },
                NewImage: { ...image, deleted: { BOOL: true } },
                OldImage: image,
                SequenceNumber: "900000000000000000001",
            },
        };
        const normal: DynamoDBRecord = {
            eventName: "INSERT",
            eventSource: "aws:dynamodb",
            dynamodb: {
                Keys: { pk: { S: "k" }, sk: { S: "other" } },
                NewImage: { pk: { S: "k" }, sk: { S: "other" }, counter_token: { S: "t2" } },
                SequenceNumber: "900000000000000000002",
            },
        };

        const response = await fixture.consumer({ Records: [huge, normal] }, untimedContext("consumer"));
        const fatal = fixture.queues.messages(FATAL_QUEUE_URL).map((m) => JSON.parse(m.body) as Record<string, unknown>);

        assert.deepEqual(response, { batchItemFailures: [] });
        assert.equal(fatal.length, 1);
        assert.equal(fatal[0]!.reason, "item-too-large");
        assert.equal(fatal[0]!.counterKey, "k");
        assert.equal(fatal[0]!.id, "huge");
        assert.match(
            String(fatal[0]!.problem),
            /^item of about 4194\d{3} bytes cannot share a transaction \(4 MB at most\) with its counter$/,
        );
        // Larger than an SQS message: the images are cut and the keys and sequence numbers kept.
        assert.deepEqual(
            (fatal[0]!.records as Array<{ dynamodb: { SequenceNumber: string } }>).map((r) => r.dynamodb.SequenceNumber),
            ["900000000000000000001"],
        );
        const s = await snapshotKey(fixture.reader, fixture.tableName, fixture.layout, "k");
        assert.equal(s.eventual, 2);
        fixture.close();
    });
});
