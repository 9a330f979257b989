/**
 * What the consumer keeps on a key beside its count (runtime/limits/usage.ts, runtime/stream/marks.ts, plan.ts), on
 * DynamoDB Local through the mapping emulator with the component's settings:
 * - usage per UTC day: creates, deletes, the peak and the limit, the current day on the eventual item and each finished
 *   day on an item of its own; a late record of a finished day; the retention; `client.usage` reading them;
 * - stream marks: one per stream shard, a mark not written for two days removed at the key's next write;
 * - two stream shards writing one key at once keep both batches' usage.
 *
 * The clock: `f.clock` moves `Date.now` for the handlers and the client, and the mapping stamps each record it
 * delivers with the moved clock (DynamoDB Local stamps the real time), as the stream stamps a record when it is written.
 */
import { GetItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { dayOf, EXPIRES_ATTRIBUTE, type UsageDay } from "../runtime/limits/usage";
import { eventualKey, usageKey } from "../runtime/shared/keys";
import { MARK_PREFIX, markName, markValue } from "../runtime/stream/marks";
import { paddedSequence } from "../runtime/stream/records";
import { counterFixture, type CounterFixture, type FixtureOptions } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { applyInterleaved, eventualItem, InvokeHook, theShard, write } from "./support/stream-harness";

const DAY = 86_400_000;

/** A fixture whose clock stands at noon UTC tomorrow, and whose mapping stamps records with that clock. */
async function clockedFixture(engine: Parameters<typeof counterFixture>[0], options: FixtureOptions = {}): Promise<CounterFixture> {
    const hook = new InvokeHook();
    const f = await counterFixture(engine, { ...options, wrapInvoke: hook.option });
    hook.wrap = (invoke, event) =>
        invoke({
            ...event,
            Records: (event.Records ?? []).map((r) => ({
                ...r,
                dynamodb: {
                    ...r.dynamodb,
                    ApproximateCreationDateTime: r.dynamodb!.ApproximateCreationDateTime! + f.clock.offsetMs / 1000,
                },
            })),
        });
    f.clock.advance(Date.parse(`${dayOf(Date.now() + DAY)}T12:00:00Z`) - Date.now());
    return f;
}

/** The day item of `key` for `day` as stored (undefined: none). */
async function dayItem(f: CounterFixture, key: string, day: string) {
    return (
        await f.reader.send(
            new GetItemCommand({ TableName: f.config.countersTableName, Key: usageKey(f.config, key, day), ConsistentRead: true }),
        )
    ).Item;
}

/** The names of the marks on `key`'s eventual item. */
async function marksOf(f: CounterFixture, key: string): Promise<Record<string, string>> {
    const item = (await eventualItem(f, key)) ?? {};
    return Object.fromEntries(
        Object.entries(item)
            .filter(([name]) => name.startsWith(MARK_PREFIX))
            .map(([name, value]) => [name, value.S!]),
    );
}

describe("usage and marks as the consumer keeps them (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    afterEach(() => f?.close());

    it("counts creates, deletes and the peak per UTC day, moves a finished day to an item of its own at the key's first record of the next, and client.usage reads them", async () => {
        // Prepare + Act: three days of a key under limit 10.
        f = await clockedFixture(engine());
        await f.client.setLimit("k", 10);
        const days = [dayOf(Date.now()), dayOf(Date.now() + DAY), dayOf(Date.now() + 2 * DAY)];
        await write(f, "k", 3, 1);
        await f.drain();
        f.clock.advance(DAY);
        await write(f, "k", 2, 2, 3);
        await f.drain();
        f.clock.advance(DAY);
        await write(f, "k", 1, 0, 5);
        await f.drain();

        // Assess: day 0 ends at 2 (peak 3), day 1 goes 2 -> 4 -> 2, day 2 2 -> 3.
        const expected: UsageDay[] = [
            { day: days[0]!, creates: 3, deletes: 1, peak: 3, limit: 10 },
            { day: days[1]!, creates: 2, deletes: 2, peak: 4, limit: 10 },
            { day: days[2]!, creates: 1, deletes: 0, peak: 3, limit: 10 },
        ];
        assert.deepEqual(await f.client.usage("k", { from: days[0]!, to: days[2]! }), expected);
        for (const day of days.slice(0, 2)) {
            assert.equal(
                (await dayItem(f, "k", day))?.[EXPIRES_ATTRIBUTE]?.N,
                String(Date.parse(`${day}T00:00:00Z`) / 1000 + 91 * 86_400),
                `${day}: the retention (90 days) and a day`,
            );
        }
        assert.equal(await dayItem(f, "k", days[2]!), undefined, "the current day rides on the eventual item");
        assert.deepEqual(await f.client.usage("k", { from: days[1]!, to: days[1]! }), [expected[1]]);
    });

    it("adds a late record of a finished day to that day's item, marked by its stream shard", async () => {
        // Prepare: day 0, then day 1; then a record stamped on day 0, as another stream shard's record of the key
        // delivered late would be.
        f = await clockedFixture(engine());
        const days = [dayOf(Date.now()), dayOf(Date.now() + DAY)];
        await write(f, "k", 2);
        await f.drain();
        f.clock.advance(DAY);
        await write(f, "k", 1, 0, 2);
        await f.drain();
        f.clock.advance(-DAY);
        await write(f, "k", 1, 1, 3);

        // Act
        await f.drain();

        // Assess: day 0 has the late create and delete; the current day and the count are untouched by their day.
        assert.deepEqual(await f.client.usage("k", { from: days[0]!, to: days[1]! }), [
            { day: days[0], creates: 3, deletes: 1, peak: 2 },
            { day: days[1], creates: 1, deletes: 0, peak: 3 },
        ]);
        const { shardId, records } = await theShard(engine(), f);
        assert.equal((await dayItem(f, "k", days[0]!))?.[markName(shardId)]?.S, paddedSequence(records.at(-1)!.dynamodb!.SequenceNumber!));
        assert.equal((await f.snapshot("k")).eventual, 3);
    });

    it("with a retention of 2 days, drops the days past it when a day moves, and never writes them again", async () => {
        // Prepare + Act: days 0, 1 and 2; then a late record of day 0.
        f = await clockedFixture(engine(), { usageRetentionDays: 2 });
        const days = [dayOf(Date.now()), dayOf(Date.now() + DAY), dayOf(Date.now() + 2 * DAY)];
        await write(f, "k", 1);
        await f.drain();
        f.clock.advance(DAY);
        await write(f, "k", 1, 0, 1);
        await f.drain();
        assert.notEqual(await dayItem(f, "k", days[0]!), undefined, "day 0 is within the retention on day 1");
        f.clock.advance(DAY);
        await write(f, "k", 1, 0, 2);
        await f.drain();
        f.clock.advance(-2 * DAY);
        await write(f, "k", 1, 0, 3);
        await f.drain();

        // Assess
        assert.equal(await dayItem(f, "k", days[0]!), undefined);
        assert.deepEqual(await f.client.usage("k", { from: days[0]!, to: days[2]! }), [
            { day: days[1], creates: 1, deletes: 0, peak: 2 },
            { day: days[2], creates: 1, deletes: 0, peak: 3 },
        ]);
        assert.equal(
            (await dayItem(f, "k", days[1]!))?.[EXPIRES_ATTRIBUTE]?.N,
            String(Date.parse(`${days[1]}T00:00:00Z`) / 1000 + 3 * 86_400),
        );
        assert.equal((await f.snapshot("k")).eventual, 4);
    });

    it("removes a mark not written for two days at the key's next write, keeps one written the day before, and holds one mark per stream shard", async () => {
        // Prepare: k's eventual item with the shard's mark, and marks of two other shards (closed ones) written two
        // days and one day ago.
        f = await clockedFixture(engine());
        await write(f, "k", 1);
        await f.drain();
        const { shardId } = await theShard(engine(), f);
        const [twoDays, oneDay] = [markName("shardId-closed-two-days-ago"), markName("shardId-closed-yesterday")];
        await f.reader.send(
            new UpdateItemCommand({
                TableName: f.config.countersTableName,
                Key: eventualKey(f.config, "k"),
                UpdateExpression: "SET #a = :a, #b = :b",
                ExpressionAttributeNames: { "#a": twoDays, "#b": oneDay },
                ExpressionAttributeValues: {
                    ":a": { S: markValue("5", Date.now() - 2 * DAY) },
                    ":b": { S: markValue("7", Date.now() - DAY) },
                },
            }),
        );

        // Act
        await write(f, "k", 1, 0, 1);
        await f.drain();

        // Assess
        const last = async () => (await theShard(engine(), f!)).records.at(-1)!.dynamodb!.SequenceNumber!;
        assert.deepEqual(await marksOf(f, "k"), {
            [markName(shardId)]: markValue(await last(), Date.now()),
            [oneDay]: markValue("7", Date.now() - DAY),
        });

        // Act: a day later, another write.
        f.clock.advance(DAY);
        await write(f, "k", 1, 0, 2);
        await f.drain();

        // Assess
        assert.deepEqual(await marksOf(f, "k"), { [markName(shardId)]: markValue(await last(), Date.now()) });
    });

    it("keeps both batches' usage when two stream shards write one key at once (a batch that nets no change among them)", async () => {
        // Prepare: k holds k-0 (day: 1 create). Shard X's batch creates and deletes k-1 (the count does not move);
        // shard Y's creates k-2. Y reads k's eventual item, X applies its batch, then Y writes (as a redrive of a
        // closed parent shard's batch and the child shard's next batch can, or two shards of a split partition).
        f = await clockedFixture(engine());
        await write(f, "k", 1);
        await f.drain();
        await write(f, "k", 1, 1, 1);
        await write(f, "k", 1, 0, 2);
        const stamped = (await theShard(engine(), f)).records.map((r) => ({
            ...r,
            dynamodb: { ...r.dynamodb, ApproximateCreationDateTime: r.dynamodb!.ApproximateCreationDateTime! + f!.clock.offsetMs / 1000 },
        }));

        // Act
        const [x, y] = await applyInterleaved(
            engine(),
            f,
            "k",
            { shardId: "shardId-x", records: stamped.slice(1, 4) },
            { shardId: "shardId-y", records: stamped.slice(4) },
        );

        // Assess
        assert.deepEqual([x.failedFrom, y.failedFrom], [undefined, undefined]);
        assert.equal((await f.snapshot("k")).eventual, 2);
        const [usage] = await f.client.usage("k", { from: dayOf(Date.now()), to: dayOf(Date.now()) });
        assert.deepEqual({ creates: usage?.creates, deletes: usage?.deletes }, { creates: 3, deletes: 1 });
    });
});
