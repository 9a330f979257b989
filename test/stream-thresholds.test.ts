/**
 * Threshold events as the consumer writes them (runtime/limits/thresholds.ts, runtime/stream/plan.ts), on DynamoDB
 * Local through the mapping emulator with the component's settings: each crossing up and down recorded once, in the
 * write that applies its record, with an id from the key, the record, the threshold and the direction; sent after the
 * write, and by the settler's audit when the send failed; a limit changed under a key announced at its next record;
 * nothing kept without a topic; the outbox bounded.
 */
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { OUTBOX_MAX, readThresholdState, type ThresholdEvent } from "../runtime/limits/thresholds";
import { paddedSequence } from "../runtime/stream/records";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { applyInterleaved, consumerOf, eventOf, eventualItem, mappingOf, theShard, write } from "./support/stream-harness";

/** The event of a crossing by `record` (or by a limit change, `cause`), as the consumer sends it. */
function crossing(
    record: DynamoDBRecord,
    count: number,
    limit: number,
    threshold: number,
    direction: "up" | "down",
    cause?: string,
): ThresholdEvent {
    const sequence = record.dynamodb!.SequenceNumber!;
    return {
        id: `k:${cause ?? sequence}:${threshold}:${direction}`,
        key: "k",
        count,
        limit,
        threshold,
        direction,
        time: new Date(record.dynamodb!.ApproximateCreationDateTime! * 1000).toISOString(),
    };
}

/** The outbox of `key`'s eventual item: the band and the events not yet sent. */
async function outbox(f: CounterFixture, key: string) {
    return readThresholdState(await eventualItem(f, key));
}

describe("threshold events as the consumer records them (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    afterEach(() => f?.close());

    it("announces each crossing up and down once, with an id naming the key, the record that crossed, the threshold and the direction", async () => {
        // Prepare: limit 5, thresholds 0.8 and 1 (counts 4 and 5); five creates, two deletes.
        f = await counterFixture(engine());
        await f.client.setLimit("k", 5);
        await write(f, "k", 5, 2);
        const { shardId, records } = await theShard(engine(), f);

        // Act
        await f.drain();
        await consumerOf(engine(), f)(eventOf(f, shardId, records));

        // Assess: the fourth and fifth creates cross up; the soft deletes (records 6 and 8) cross down. The batch
        // delivered again, to another instance, announces nothing more.
        assert.deepEqual(f.events, [
            crossing(records[3]!, 4, 5, 0.8, "up"),
            crossing(records[4]!, 5, 5, 1, "up"),
            crossing(records[6]!, 4, 5, 1, "down"),
            crossing(records[8]!, 3, 5, 0.8, "down"),
        ]);
        assert.deepEqual(await outbox(f, "k"), { band: 0, pending: [] });
    });

    it("keeps events the topic refused in the outbox; the settler's audit sends them with the same ids and clears it", async () => {
        // Prepare: limit 2 (both thresholds at count 2); the consumer's sends fail.
        f = await counterFixture(engine());
        await f.client.setLimit("k", 2);
        await write(f, "k", 2);
        let sends = 0;
        const consumer = consumerOf(engine(), f, { sendEvents: async () => (sends++, false) });
        await mappingOf(engine(), f, consumer).drain();
        const { records } = await theShard(engine(), f);
        const expected = [crossing(records[1]!, 2, 2, 0.8, "up"), crossing(records[1]!, 2, 2, 1, "up")];
        assert.equal(sends, 1);
        assert.deepEqual(f.events, []);
        assert.deepEqual(await outbox(f, "k"), { band: 2, pending: expected });

        // Act
        await f.settle();
        await f.settle();

        // Assess
        assert.deepEqual(f.events, expected);
        assert.deepEqual(await outbox(f, "k"), { band: 2, pending: [] });
    });

    it("announces, at the key's next record, the band a limit changed under the key moves it into", async () => {
        // Prepare: five items under limit 10 (band 0), then limit 5 (band 2 for a count of 5), with no record.
        f = await counterFixture(engine());
        await f.client.setLimit("k", 10);
        await write(f, "k", 5);
        await f.drain();
        await f.client.setLimit("k", 5);
        await f.drain();
        assert.deepEqual(f.events, []);
        await f.client.delete("k", "k-0");

        // Act
        await f.drain();

        // Assess: the limit's crossings, named by the mark the key held (its fifth create), then the delete's.
        const { records } = await theShard(engine(), f);
        const cause = `limit@${paddedSequence(records[4]!.dynamodb!.SequenceNumber!)}`;
        assert.deepEqual(f.events, [
            crossing(records[6]!, 5, 5, 0.8, "up", cause),
            crossing(records[6]!, 5, 5, 1, "up", cause),
            crossing(records[6]!, 4, 5, 1, "down"),
        ]);
    });

    it("without a topic keeps the band and no event", async () => {
        // Prepare
        f = await counterFixture(engine(), { topic: false });
        await f.client.setLimit("k", 2);
        await write(f, "k", 3);

        // Act + Assess
        await f.drain();
        assert.deepEqual(await outbox(f, "k"), { band: 2, pending: [] });
        await write(f, "k", 0, 3);
        await f.drain();
        assert.deepEqual(await outbox(f, "k"), { band: 0, pending: [] });
        assert.deepEqual(f.events, []);
    });

    it("keeps a crossing one stream shard recorded and could not send when another shard writes the key at once: the settler's audit sends it", async () => {
        // Prepare: k holds k-0 under limit 2 (both thresholds at a count of 2). Shard X's batch creates and deletes
        // k-1: four crossings, which its topic refuses, so they stay in the outbox; the count does not move. Shard Y's
        // batch creates k-2. Y reads k's eventual item, X applies its batch, then Y writes.
        f = await counterFixture(engine());
        await f.client.setLimit("k", 2);
        await write(f, "k", 1);
        await f.drain();
        await write(f, "k", 1, 1, 1);
        await write(f, "k", 1, 0, 2);
        const { records } = await theShard(engine(), f);

        // Act
        await applyInterleaved(
            engine(),
            f,
            "k",
            { shardId: "shardId-x", records: records.slice(1, 4), sendEvents: async () => false },
            { shardId: "shardId-y", records: records.slice(4) },
        );
        await f.settle();

        // Assess: every crossing reached the topic, X's through the audit.
        const sent = new Set(f.events.map((e) => e.id));
        const xCrossings = [
            crossing(records[1]!, 2, 2, 0.8, "up"),
            crossing(records[1]!, 2, 2, 1, "up"),
            crossing(records[3]!, 1, 2, 1, "down"),
            crossing(records[3]!, 1, 2, 0.8, "down"),
        ];
        assert.deepEqual(
            xCrossings.map((e) => [e.id, sent.has(e.id)]),
            xCrossings.map((e) => [e.id, true]),
        );
        assert.ok(sent.has(crossing(records[4]!, 2, 2, 1, "up").id));
    });

    it(`keeps the last ${OUTBOX_MAX} events while the topic refuses them, and the band exact: the next crossing is announced`, async () => {
        // Prepare: five thresholds all reached at a count of 1 (limit 1); six creates and deletes of one item each,
        // 60 crossings, in one batch; the topic refuses them.
        const thresholds = [0.2, 0.4, 0.6, 0.8, 1];
        f = await counterFixture(engine(), { thresholds });
        await f.client.setLimit("k", 1);
        for (let i = 0; i < 6; i++) {
            await write(f, "k", 1, 1, i);
        }
        let topicUp = false;
        const consumer = consumerOf(engine(), f, { sendEvents: async (events) => topicUp && (f!.events.push(...events), true) });
        const mapping = mappingOf(engine(), f, consumer);
        const { records } = await theShard(engine(), f);
        const all = records.flatMap((record, i) =>
            i % 3 === 0
                ? thresholds.map((t) => crossing(record, 1, 1, t, "up"))
                : i % 3 === 2
                  ? [...thresholds].reverse().map((t) => crossing(record, 0, 1, t, "down"))
                  : [],
        );
        assert.equal(all.length, 60);

        // Act
        await mapping.drain();

        // Assess
        assert.equal(mapping.stats.invocations, 1);
        assert.deepEqual(await outbox(f, "k"), { band: 0, pending: all.slice(-OUTBOX_MAX) });

        // Act: the topic is back; one more create.
        topicUp = true;
        await write(f, "k", 1, 0, 6);
        await mapping.drain();

        // Assess: the create's five crossings are sent, behind the oldest events the outbox still held.
        const created = (await theShard(engine(), f)).records.at(-1)!;
        const next = thresholds.map((t) => crossing(created, 1, 1, t, "up"));
        assert.deepEqual(f.events, [...all, ...next].slice(-OUTBOX_MAX));
        assert.deepEqual(await outbox(f, "k"), { band: 5, pending: [] });
    });
});
