/**
 * A reused id's marker stays under its bound (runtime/shared/strict-ledger.ts, "Marker bound"), staged on DynamoDB
 * Local behind the parity layer (AWS's 400 KB item and 4 MB transaction limits enforced):
 * - one id created and deleted thousands of times, with the creating call's 120 s compressed through the clock every
 *   party reads (`Date.now`): the marker never passes MARKER_MAX_BYTES, every delete gives its slot back, and the
 *   marker keeps its tombstone expiry once the consumer has removed the item;
 * - the same history against a mutant that writes one attribute per life again (as earlier versions did): rejected;
 * - 99 ids whose markers an earlier version grew to about 44 KB each: a batch of their creates is counted, in
 *   transactions sized from the markers as read, and the markers shrink back under the bound;
 * - an id whose marker an earlier version grew to near 400 KB, with a user's item as large as the client accepts:
 *   its delete gives the slot back, the consumer removes the soft-deleted item, and the id can be created again.
 */
import { GetItemCommand, PutItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { HybridCounterClient } from "../runtime/client/client";
import { COUNTER_ATTRIBUTES, MARKER_STATE, markerSortKey, paddedSequence } from "../runtime/shared/config";
import { REPEATED, droppableLedger, repeatedAttribute } from "../runtime/shared/strict-ledger";
import { MARKER_MAX_BYTES } from "../runtime/stream/markers";
import { newToken } from "../runtime/shared/tokens";
import { itemSize } from "../runtime/stream/chunking";
import { resolveClientOptions } from "../runtime/client/validation";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { counterFixture, FIRST_DLQ_URL, type CounterFixture } from "./support/counter-fixture";
import { markPerLife } from "./fuzz/mutants";
import { useEngine } from "./support/engine";
import { snapshotKey } from "../local/harness/observe";

/** DynamoDB's item size limit. */
const ITEM_LIMIT = 400 * 1024;
/** Past the creating call's deadline plus the clock skew (resource-writes.ts, `mayStillBeRepeated`): an old life. */
const OLDER_THAN_A_CALL_MS = 121_000;

/** Mapping settings under which no record is too old: the clock is moved hours ahead over a long history. */
const AGELESS = { maximumRecordAgeInSeconds: -1 };

/** `Date.now` moved forward by what the history asks: the 120 s of a life's youth without waiting for them. */
class Clock {
    private offset = 0;
    private readonly real = Date.now;

    install(): void {
        const real = this.real;
        Date.now = () => real() + this.offset;
    }

    advance(ms: number): void {
        this.offset += ms;
    }

    restore(): void {
        Date.now = this.real;
    }
}

async function readMarker(fixture: CounterFixture, key: string, id: string): Promise<Record<string, AttributeValue> | undefined> {
    const response = await fixture.reader.send(
        new GetItemCommand({
            TableName: fixture.countersTableName,
            Key: { [fixture.layout.partitionKey]: { S: key }, [fixture.layout.sortKey]: { S: markerSortKey(fixture.layout, id) } },
            ConsistentRead: true,
        }),
    );
    return response.Item;
}

async function itemExists(fixture: CounterFixture, key: string, id: string): Promise<boolean> {
    const response = await fixture.reader.send(
        new GetItemCommand({
            TableName: fixture.tableName,
            Key: { [fixture.layout.partitionKey]: { S: key }, [fixture.layout.sortKey]: { S: id } },
            ConsistentRead: true,
        }),
    );
    return response.Item !== undefined;
}

/** Delivers the stream until the consumer has removed the soft-deleted item (a bounded number of rounds, no pause). */
async function untilRemoved(fixture: CounterFixture, key: string, id: string): Promise<void> {
    for (let round = 0; round < 50; round++) {
        await fixture.emulator.drain({ idlePolls: 1, pollIntervalMs: 0 });
        if (!(await itemExists(fixture, key, id))) {
            return;
        }
    }
    assert.fail(`the consumer did not remove ${key}/${id}`);
}

interface ReuseOutcome {
    /** Creates that answered anything but created. */
    readonly refused: number;
    /** Failures the client reported (each one a slot it may hold: a release sent once that failed, say). */
    readonly reported: number;
    /** The largest the marker was, read after every cycle. */
    readonly largestMarker: number;
    readonly finalMarker: Record<string, AttributeValue> | undefined;
}

/**
 * One id created and deleted `cycles` times by a strict client; every third life is deleted after the clock moved
 * past its creating call (an old life), the others at once (a young life, which takes its release through the marker).
 * The client reports its failures (a loaded DynamoDB Local may fail a release, which holds a slot by design).
 */
async function reuse(fixture: CounterFixture, clock: Clock, cycles: number): Promise<ReuseOutcome> {
    let reported = 0;
    const client = new HybridCounterClient({
        ...fixture.layout,
        tableName: fixture.tableName,
        countersTableName: fixture.countersTableName,
        dynamodb: fixture.clientDynamo,
        mode: "strict",
        deadlineMs: 60_000,
        onBestEffortFailure: () => reported++,
    });
    let refused = 0;
    let largestMarker = 0;
    for (let cycle = 0; cycle < cycles; cycle++) {
        const created = await client.create("k", "x");
        if (!created.created) {
            refused++;
            continue;
        }
        if (cycle % 3 === 2) {
            clock.advance(OLDER_THAN_A_CALL_MS);
        }
        assert.deepEqual(await client.delete("k", "x"), { deleted: true });
        await untilRemoved(fixture, "k", "x");
        largestMarker = Math.max(largestMarker, itemSize(await readMarker(fixture, "k", "x")));
    }
    return { refused, reported, largestMarker, finalMarker: await readMarker(fixture, "k", "x") };
}

/** A marker as the consumer leaves it after an early record of a removal: "uncounted", its expiry taken off since. */
function baseMarker(fixture: CounterFixture, key: string, id: string): Record<string, AttributeValue> {
    return {
        [fixture.layout.partitionKey]: { S: key },
        [fixture.layout.sortKey]: { S: markerSortKey(fixture.layout, id) },
        [COUNTER_ATTRIBUTES.state]: { S: MARKER_STATE.uncounted },
        [COUNTER_ATTRIBUTES.seq]: { S: paddedSequence("1") },
    };
}

/**
 * A marker as an earlier version leaves it after many quick lives of its id: "uncounted", its expiry taken off, and
 * one `hc_repeated_<token>` per life, every token older than any attempt of its life can land. `bytes`: the marker's
 * size, made exact by the marks' values ("released" or "pending", 8 or 7 bytes).
 */
function grownMarker(fixture: CounterFixture, key: string, id: string, bytes: number): Record<string, AttributeValue> {
    const longAgo = Date.now() - 24 * 60 * 60 * 1000;
    const marker = baseMarker(fixture, key, id);
    const mark = itemSize({ [repeatedAttribute(newToken())]: { S: REPEATED.released } });
    const lives = Math.ceil((bytes - itemSize(marker)) / mark);
    const short = lives * mark - (bytes - itemSize(marker));
    for (let life = 0; life < lives; life++) {
        marker[repeatedAttribute(newToken(longAgo + life))] = { S: life < short ? REPEATED.pending : REPEATED.released };
    }
    assert.equal(itemSize(marker), bytes);
    return marker;
}

describe("a reused id's marker stays under its bound", function () {
    // The parity layer meters each partition's throughput on the clock every party reads, as the time it compresses
    // passes for DynamoDB too.
    const engine = useEngine({ parity: { now: () => Date.now() } });
    let clock = new Clock();
    beforeEach(() => {
        clock = new Clock();
        clock.install();
    });
    afterEach(() => clock.restore());

    it("one id created and deleted 400 times: the marker stays under MARKER_MAX_BYTES, every slot comes back, the expiry is back", async () => {
        // Prepare: records are never too old for the mapping (the clock runs ahead by 121 s every third life).
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate", settings: AGELESS });

        // Act
        const outcome = await reuse(fixture, clock, 400);
        const end = await fixture.observe("k");

        // Assess: every delete gave its slot back but for failures the client reported, and a bounded marker with its
        // tombstone expiry.
        assert.equal(outcome.refused, 0);
        assert.ok(outcome.largestMarker <= MARKER_MAX_BYTES, `the marker reached ${outcome.largestMarker} bytes`);
        assert.deepEqual([end.eventual, end.live], [0, 0]);
        assert.ok(end.bestEffort <= outcome.reported, `${end.bestEffort} slots held, ${outcome.reported} failures reported`);
        assert.equal(outcome.finalMarker?.[COUNTER_ATTRIBUTES.state]?.S, MARKER_STATE.uncounted);
        assert.notEqual(outcome.finalMarker?.[COUNTER_ATTRIBUTES.expiresAt]?.N, undefined, "the tombstone expires again");
        assert.deepEqual(
            Object.keys(outcome.finalMarker ?? {}).filter((name) => name.startsWith(COUNTER_ATTRIBUTES.repeatedPrefix)),
            [],
        );
        fixture.close();
    });

    it("the consumer removes hc_released and hc_pending once their lives are sealed, and keeps what a live life needs", async () => {
        // Prepare: a marker whose ledger values name lives of two hours ago; then a new life of the id.
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate" });
        const [older, released, pending] = [1, 3, 2].map((offset) => newToken(Date.now() - 2 * 60 * 60 * 1000 + offset));
        const marker = {
            ...baseMarker(fixture, "k", "x"),
            [COUNTER_ATTRIBUTES.released]: { S: released! },
            [COUNTER_ATTRIBUTES.pending]: { S: pending! },
        };
        await fixture.reader.send(new PutItemCommand({ TableName: fixture.countersTableName, Item: marker }));
        assert.deepEqual(await fixture.client.create("k", "x"), { created: true });

        // Act
        await fixture.emulator.drain();
        const after = await readMarker(fixture, "k", "x");

        // Assess: both gone with the record of the new life; the pure rule keeps what a live life may need.
        assert.equal(after?.[COUNTER_ATTRIBUTES.state]?.S, MARKER_STATE.counted);
        assert.equal(after?.[COUNTER_ATTRIBUTES.released], undefined);
        assert.equal(after?.[COUNTER_ATTRIBUTES.pending], undefined);
        const now = Date.now();
        const young = newToken(now);
        assert.deepEqual(droppableLedger({ released, pending }, undefined, now), { released, pending });
        assert.deepEqual(droppableLedger({ released, pending: young }, older, now), {}, "the item's life is one it covers");
        assert.deepEqual(droppableLedger({ released: young, pending: young }, undefined, now), {}, "their lives may still act");
        fixture.close();
    });

    it("rejects a mutant that leaves one attribute per life on the marker", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate", settings: AGELESS });
        markPerLife(fixture.clientDynamo);

        // Act
        const outcome = await reuse(fixture, clock, 150);

        // Assess: the same check fails.
        assert.ok(outcome.largestMarker > MARKER_MAX_BYTES, `the mutant's marker stayed at ${outcome.largestMarker} bytes`);
        fixture.close();
    });

    it("counts a batch of creates of 99 ids whose markers an earlier version grew to about 44 KB each", async () => {
        // Prepare: 99 markers of 44 KB (about 800 lives each; 4.4 MB together, past one transaction's 4 MB). The
        // consumer's budget is long enough for DynamoDB Local to read and write them on a loaded machine.
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate", functionTimeoutMs: 300_000 });
        const ids = Array.from({ length: 99 }, (_, i) => `id-${String(i).padStart(2, "0")}`);
        for (const id of ids) {
            await fixture.reader.send(
                new PutItemCommand({ TableName: fixture.countersTableName, Item: grownMarker(fixture, "k", id, 44 * 1024) }),
            );
        }
        const grown = itemSize(await readMarker(fixture, "k", ids[0]!));
        for (const id of ids) {
            assert.deepEqual(await fixture.client.create("k", id), { created: true });
        }

        // Act: one batch of 99 INSERTs, then whatever the first DLQ holds, redriven.
        await fixture.emulator.drain();
        await fixture.redriveAll();

        // Assess (nothing runs meanwhile: a read of the key over several pages is one observation)
        const end = await snapshotKey(fixture.reader, fixture.tableName, fixture.layout, "k", fixture.countersTableName);
        assert.deepEqual([end.live, end.eventual, end.bestEffort], [99, 99, 99]);
        assert.equal(fixture.queues.receive(FIRST_DLQ_URL, 10).length, 0, "nothing went to the first DLQ");
        const sizes = await Promise.all(ids.map(async (id) => itemSize(await readMarker(fixture, "k", id))));
        assert.ok(Math.max(...sizes) < grown, "the consumer's writes removed the marks no attempt can need");
        fixture.close();
    });

    it("an item as large as the client accepts, whose marker an earlier version grew near 400 KB: released, removed, created again", async () => {
        // Prepare: a marker 30 bytes short of 400 KB (about 7,300 lives), and the largest item the client accepts.
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate" });
        await fixture.reader.send(
            new PutItemCommand({ TableName: fixture.countersTableName, Item: grownMarker(fixture, "k", "x", ITEM_LIMIT - 30) }),
        );
        const grown = itemSize(await readMarker(fixture, "k", "x"));
        const largest = largestAccepted(fixture);
        const tooLarge = await fixture.client.tryCreate("k", "x", 1, { payload: `${largest}p` }).catch((error: Error) => error);

        // Act: create, count, delete, count; then the id again.
        const first = await fixture.client.tryCreate("k", "x", 1, { payload: largest });
        await fixture.emulator.drain();
        // The marker's put (400 WCU) and the count's transaction (2 WCU per KB of the marker: 800) spent more than the
        // key's partition holds (1,000 WCU, refilled at 1,000 a second: local/engine/parity.ts). A delete sent before
        // it refilled has its release, sent once, throttled: a slot held by design, on a fast machine more often than
        // on a slow one. The delete comes once the partition has refilled, on the clock every party reads: a bucket is
        // never in debt by more than one request's units, so two seconds fill it whatever the machine's speed, and the
        // delete's writes (a touch, the marker's update of about 400 WCU, the release) fit in it.
        clock.advance(2_000);
        const deleted = await fixture.client.delete("k", "x");
        const afterDelete = await fixture.observe("k");
        await fixture.emulator.drain();
        const removed = !(await itemExists(fixture, "k", "x"));
        const again = await fixture.client.tryCreate("k", "x", 1, { payload: largest });
        await fixture.emulator.drain();

        // Assess
        assert.ok(tooLarge instanceof InvalidArgumentError && tooLarge.field === "attributes", String(tooLarge));
        assert.equal(first.created, true);
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(afterDelete.bestEffort, 0, "the delete gave its slot back");
        assert.equal(removed, true, "the consumer removed the soft-deleted item");
        assert.equal(again.created, true);
        const end = await fixture.observe("k");
        assert.deepEqual([end.live, end.eventual, end.bestEffort], [1, 1, 1]);
        assert.equal(fixture.queues.receive(FIRST_DLQ_URL, 10).length, 0);
        assert.ok(itemSize(await readMarker(fixture, "k", "x")) < grown);
        fixture.close();
    });
});

/**
 * The longest string payload the client accepts for item "x" under key "k": the item as the client builds it (the
 * caller's attributes, its keys and its token) leaves the room its own later writes need (`headroom`).
 */
function largestAccepted(fixture: CounterFixture): string {
    const { headroom } = resolveClientOptions({
        ...fixture.layout,
        tableName: fixture.tableName,
        countersTableName: fixture.countersTableName,
        dynamodb: fixture.reader,
        mode: "strict",
    });
    const item = (payload: number): Record<string, AttributeValue> => ({
        payload: { S: "p".repeat(payload) },
        [fixture.layout.partitionKey]: { S: "k" },
        [fixture.layout.sortKey]: { S: "x" },
        [fixture.layout.tokenAttribute]: { S: newToken() },
    });
    const fixed = itemSize(item(0));
    return "p".repeat(ITEM_LIMIT - headroom - fixed);
}
