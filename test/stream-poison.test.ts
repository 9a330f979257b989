/**
 * Records the consumer cannot count (runtime/stream/records.ts, consumer.ts), on DynamoDB Local through the mapping
 * emulator with the component's settings: poison (unreadable keys or images, a key the counter cannot hold) goes
 * whole to the fatal queue and counts as nothing, while the rest of its batch counts; a record of a counter item is
 * ignored; a fatal queue that refuses a poison record makes the batch fail from it, and nothing is lost or counted
 * twice.
 */
import { PutItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { KEY_MAX_BYTES } from "../runtime/shared/keys";
import { countedFlag } from "../runtime/shared/selection";
import { newToken } from "../runtime/shared/tokens";
import type { FatalMessage } from "../runtime/stream/fatal";
import { paddedSequence } from "../runtime/stream/records";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { emfTotals } from "./support/stream-records";
import {
    appliedSums,
    consumerOf,
    eventualItem,
    InvokeHook,
    mappingOf,
    recordRequests,
    storedFrontier,
    theShard,
    write,
    writesOf,
} from "./support/stream-harness";

/** A partition key DynamoDB takes (2,048 bytes) and the counter cannot hold (its derived keys add bytes). */
const LONG_KEY = "x".repeat(2048);

const stored = (sequence: string) => `${paddedSequence(sequence)}|${sequence}`;

/** An item as the client would write it (a token and the counted flag), put straight into the user's table. */
async function putClientLike(f: CounterFixture, key: string, id: string): Promise<void> {
    const item: Record<string, AttributeValue> = {
        [f.config.partitionKey]: { S: key },
        [f.config.sortKey]: { S: id },
        [f.config.tokenAttribute]: { S: newToken() },
        ...countedFlag(f.config),
    };
    await f.reader.send(new PutItemCommand({ TableName: f.config.tableName, Item: item }));
}

describe("records the stream consumer cannot count (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    afterEach(() => f?.close());

    it("parks poison whole on the fatal queue and counts it as nothing, ignores a counter item's record, and counts the rest of the batch", async () => {
        // Prepare: in one batch, k-0; an item whose key holds U+0000; one whose key is too long; k-1 delivered with a number for its partition
        // key; k-2 delivered without its new image; a counter item's record (another writer's, under the reserved
        // prefix); k-3.
        const hook = new InvokeHook();
        f = await counterFixture(engine(), { wrapInvoke: hook.option });
        await write(f, "k", 1);
        await putClientLike(f, "bad\u0000key", "x");
        await putClientLike(f, LONG_KEY, "y");
        await write(f, "k", 2, 0, 1);
        await putClientLike(f, "k", `${f.config.counterPrefix}stray`);
        await write(f, "k", 1, 0, 3);
        let delivered: DynamoDBRecord[] = [];
        hook.wrap = async (invoke, event) => {
            delivered = (event.Records ?? []).map((record) => {
                const id = record.dynamodb?.Keys?.[f!.config.sortKey]?.S;
                const copy = structuredClone(record);
                if (id === "k-1") {
                    copy.dynamodb!.Keys![f!.config.partitionKey] = { N: "1" };
                }
                if (id === "k-2") {
                    delete copy.dynamodb!.NewImage;
                }
                return copy;
            });
            return invoke({ ...event, Records: delivered });
        };
        const requests = recordRequests(f.consumerDynamo);

        // Act
        await f.drain();

        // Assess: four poison records parked, each in full as delivered; k counts k-0 and k-3 only.
        assert.equal(f.emulator.stats.invocations, 1);
        const byId = (id: string) => delivered.find((r) => r.dynamodb?.Keys?.[f!.config.sortKey]?.S === id)!;
        const expected: FatalMessage[] = [
            {
                reason: "poison-record",
                problem: "[dynamodb.Keys.pk] cannot be a counter key: must not contain U+0000 (it separates a key from its shard number)",
                counterKey: "bad\u0000key",
                records: [byId("x")],
            },
            {
                reason: "poison-record",
                problem: `[dynamodb.Keys.pk] cannot be a counter key: must be at most ${KEY_MAX_BYTES} bytes (got 2048)`,
                counterKey: LONG_KEY,
                records: [byId("y")],
            },
            { reason: "poison-record", problem: "[dynamodb.Keys.pk] must be a string (S) attribute", records: [byId("k-1")] },
            {
                reason: "poison-record",
                problem: "[dynamodb.NewImage] is missing: the stream must carry new and old images",
                counterKey: "k",
                records: [byId("k-2")],
            },
        ];
        assert.deepEqual(f.fatal, expected);
        assert.equal(emfTotals(f.logs)["PoisonRecords"], 4);
        assert.deepEqual(appliedSums(f.config, requests), { k: [2] });
        assert.deepEqual(
            writesOf(requests).map((w) => w.command),
            ["UpdateItem", "UpdateItem"],
            "k's eventual item and the frontier",
        );
        const snapshot = await f.snapshot("k");
        assert.deepEqual(
            { eventual: snapshot.eventual, counted: snapshot.counted },
            { eventual: 2, counted: 4 },
            "the poisoned creates are live and not counted",
        );
        assert.equal(await eventualItem(f, "bad\u0000key"), undefined);
        assert.equal(await eventualItem(f, LONG_KEY), undefined);
        const { shardId, records } = await theShard(engine(), f);
        assert.equal(await storedFrontier(f, shardId), stored(records.at(-1)!.dynamodb!.SequenceNumber!), "the frontier passed the poison");
    });

    it("a fatal queue that refuses a poison record makes the batch fail from it; delivered again from there, it is parked and nothing counts twice", async () => {
        // Prepare: k-0, an item whose key holds U+0000, k-1, k-2; the fatal queue refuses its first message.
        f = await counterFixture(engine());
        await write(f, "k", 1);
        await putClientLike(f, "bad\u0000key", "x");
        await write(f, "k", 2, 0, 1);
        const { shardId, records } = await theShard(engine(), f);
        const sequences = records.map((r) => r.dynamodb!.SequenceNumber!);
        let offered = 0;
        const fatal = {
            park: async (message: FatalMessage) => {
                if (++offered === 1) {
                    return false;
                }
                f!.fatal.push(message);
                return true;
            },
        };
        const consumer = consumerOf(engine(), f, { fatal });
        const answers: unknown[] = [];
        const frontiers: Array<string | undefined> = [];
        const mapping = mappingOf(engine(), f, async (event) => {
            const answer = await consumer(event);
            answers.push(answer);
            frontiers.push(await storedFrontier(f!, shardId));
            return answer;
        });
        const requests = recordRequests(f.consumerDynamo);

        // Act
        await mapping.drain();

        // Assess: the first attempt applied k's records and stopped the frontier before the poison; the retry from
        // the poison parked it and found k's records applied.
        assert.deepEqual(answers, [
            { state: {}, batchItemFailures: [{ itemIdentifier: sequences[1] }] },
            { state: {}, batchItemFailures: [] },
        ]);
        assert.deepEqual(frontiers, [stored(sequences[0]!), stored(sequences[3]!)]);
        assert.equal(offered, 2);
        assert.deepEqual(
            f.fatal.map((m) => [m.reason, m.counterKey, m.records?.[0]?.dynamodb?.SequenceNumber]),
            [["poison-record", "bad\u0000key", sequences[1]]],
        );
        assert.deepEqual(appliedSums(f.config, requests), { k: [3] });
        const snapshot = await f.snapshot("k");
        assert.deepEqual({ eventual: snapshot.eventual, counted: snapshot.counted }, { eventual: 3, counted: 3 });
    });
});
