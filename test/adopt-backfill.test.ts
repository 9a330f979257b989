/**
 * The backfill (runtime/backfill/) on DynamoDB Local, through the counter fixture: it flags the live selected items
 * the table held before the counter, the stream counts each flag once, and nothing is flagged twice whatever happens
 * to a run (two runners at once, a crash between a page and its checkpoint, an abort and a resume, a run abandoned and
 * another started). Its checkpoints go when a run completes; an abandoned run's expire and the settler deletes them.
 *
 * "Before the counter": the items are written, then the consumer's frontier is moved past their records, as if the
 * stream had never held them (a stream enabled with the counter holds nothing of what came before).
 */
import {
    GetItemCommand,
    InternalServerError,
    ProvisionedThroughputExceededException,
    QueryCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { SEEDED_SELECTION, seedItems, writeItems } from "../local/harness/seed";
import { preexistingItems } from "../local/twin/adopt";
import { BackfillError, backfill, type BackfillOptions, type BackfillReport } from "../runtime/backfill/backfill";
import { CHECKPOINT_ATTRIBUTE } from "../runtime/backfill/checkpoints";
import { ConfigurationError } from "../runtime/shared/errors";
import { backfillPartitionKey, eventualKey } from "../runtime/shared/keys";
import { HEAL_DUE } from "../runtime/heal/index-marks";
import { advanceFrontier } from "../runtime/stream/progress";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { recordRequests, refuseRequests, theShard, writesOf } from "./support/stream-harness";
import type { LocalEngine } from "../local/engine/engine";

type Item = Record<string, AttributeValue>;
const DAY = 86_400_000;

/** Writes `items` as the table held them before the counter: the consumer's frontier passes their records. */
async function beforeTheCounter(engine: LocalEngine, f: CounterFixture, items: readonly Item[]): Promise<void> {
    await writeItems(f.reader, f.config.tableName, items);
    const { shardId, records } = await theShard(engine, f);
    await advanceFrontier(f.config, f.reader, shardId, records.at(-1)!.dynamodb!.SequenceNumber!);
}

/** The backfill checkpoints the counters table holds (every run's). */
async function checkpoints(f: CounterFixture): Promise<Item[]> {
    const page = await f.reader.send(
        new QueryCommand({
            TableName: f.config.countersTableName,
            KeyConditionExpression: "#pk = :pk",
            ExpressionAttributeNames: { "#pk": f.config.partitionKey },
            ExpressionAttributeValues: { ":pk": { S: backfillPartitionKey(f.config) } },
            ConsistentRead: true,
        }),
    );
    return page.Items ?? [];
}

/** Each key's eventual count and its live and counted items, as the table holds them. */
async function counts(
    f: CounterFixture,
    keys: Iterable<string>,
): Promise<Record<string, { eventual: number; live: number; counted: number }>> {
    const out: Record<string, { eventual: number; live: number; counted: number }> = {};
    for (const key of keys) {
        const s = await f.snapshot(key);
        out[key] = { eventual: s.eventual, live: s.live, counted: s.counted };
    }
    return out;
}

/** What `counts` shows once every live item counts: eventual = live = counted. */
function exact(live: ReadonlyMap<string, number>): Record<string, { eventual: number; live: number; counted: number }> {
    return Object.fromEntries([...live].map(([key, n]) => [key, { eventual: n, live: n, counted: n }]));
}

/** Live items per key of the client selection's `preexistingItems`. */
function liveOf(items: readonly Item[]): Map<string, number> {
    const live = new Map<string, number>();
    for (const item of items) {
        live.set(item["pk"]!.S!, (live.get(item["pk"]!.S!) ?? 0) + 1);
    }
    return live;
}

const sum = (values: Iterable<number>) => [...values].reduce((a, b) => a + b, 0);

describe("backfill on DynamoDB Local", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    let dynamodb: DynamoDBClient | undefined;
    afterEach(() => {
        f?.close();
        dynamodb?.destroy();
    });

    /** A backfill of the fixture's counter with its own client, unthrottled. */
    const run = (options: Partial<BackfillOptions> = {}): Promise<BackfillReport> =>
        backfill({ config: f!.config, dynamodb: dynamodb!, readUnitsPerSecond: Infinity, writeUnitsPerSecond: Infinity, ...options });

    it("flags exactly the live selected items the table held (no other entity, soft-deleted or counter item), the stream counts each once, a second run flags nothing, and a completed run leaves no checkpoint", async () => {
        // Prepare: the counter items in the user's table too (same-table placement), every odd kind of item.
        f = await counterFixture(engine(), { placement: "same-table", layout: { selection: SEEDED_SELECTION } });
        dynamodb = engine().dynamodb();
        const seed = seedItems({ items: 160, keys: 5, seed: 11, largeItems: 1 });
        await beforeTheCounter(engine(), f, seed.items);
        const live = sum(seed.expectedLive.values());

        // Act
        const first = await run({ segments: 3, pageSize: 20 });
        await f.drain();

        // Assess
        assert.deepEqual(
            [first.status, first.resumed, first.segmentsDone, first.total.counted, first.total.alreadyCounted],
            ["complete", false, 3, live, 0],
        );
        assert.ok(first.total.skipped >= seed.items.length - live, "every other item skipped");
        for (const key of seed.expectedLive.keys()) {
            assert.notEqual((await readEventual(f, key))?.[HEAL_DUE], undefined, `${key} is listed for a heal`);
        }
        assert.deepEqual(await counts(f, seed.expectedLive.keys()), exact(seed.expectedLive));
        assert.deepEqual(await checkpoints(f), []);

        // Act + Assess: a second run finds every item counted and flags nothing; the count does not move.
        const second = await run({ segments: 2, pageSize: 100 });
        await f.drain();
        assert.deepEqual(
            [second.status, second.total.counted, second.total.alreadyCounted, second.thisCall.keysListed],
            ["complete", 0, live, 0],
        );
        assert.deepEqual(await counts(f, seed.expectedLive.keys()), exact(seed.expectedLive));
        assert.deepEqual(await checkpoints(f), []);
    });

    it("two runners of one run and a run of another id, at once, flag each item once", async () => {
        // Prepare
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        const items = preexistingItems(f.config, 150, 5);
        await beforeTheCounter(engine(), f, items);

        // Act
        const reports = await Promise.all([
            run({ runId: "a", segments: 3, pageSize: 10 }),
            run({ runId: "a", segments: 3, pageSize: 10 }),
            run({ runId: "b", segments: 2, pageSize: 15 }),
        ]);
        await f.drain();

        // Assess: between them they flagged each item once, and each counts once.
        assert.equal(sum(reports.map((r) => r.thisCall.counted)), items.length);
        assert.deepEqual(await counts(f, liveOf(items).keys()), exact(liveOf(items)));
        // A runner another runner overtook leaves the run to whoever carried it: run again, it completes and clears up.
        const again = await run({ runId: "a" });
        assert.deepEqual([again.status, again.thisCall.counted], ["complete", 0]);
        assert.deepEqual(await checkpoints(f), []);
    });

    it("a crash between a page's flags and its checkpoint repeats that page on resume, flagging nothing twice", async () => {
        // Prepare: the third page's checkpoint is refused (the process dies there: its flags are written, its
        // checkpoint is not).
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        const items = preexistingItems(f.config, 100, 4);
        await beforeTheCounter(engine(), f, items);
        const requests = recordRequests(dynamodb);
        let saves = 0;
        const crash = refuseRequests(
            dynamodb,
            (command, input) => command === "UpdateItem" && JSON.stringify(input).includes(CHECKPOINT_ATTRIBUTE) && ++saves === 3,
        );

        // Act
        const error = await run({ segments: 1, pageSize: 20 }).then(
            () => undefined,
            (e: unknown) => e,
        );
        crash.on = false;
        const flaggedBeforeCrash = writesOf(requests).filter((r) => r.ok === true && r.input["TableName"] === f!.config.tableName).length;
        const resumed = await run({ segments: 1, pageSize: 20 });
        await f.drain();

        // Assess: three pages flagged before the crash, two of them checkpointed; the resume repeated the third only.
        assert.ok(error instanceof BackfillError, String(error));
        assert.equal(flaggedBeforeCrash, 60);
        assert.deepEqual(
            [resumed.status, resumed.resumed, resumed.thisCall.alreadyCounted, resumed.thisCall.counted],
            ["complete", true, 20, 40],
        );
        assert.deepEqual(
            [resumed.total.counted, resumed.total.alreadyCounted],
            [80, 20],
            "across calls, each item once: counted or found counted",
        );
        assert.deepEqual(await counts(f, liveOf(items).keys()), exact(liveOf(items)));
    });

    it("an aborted run resumes from its checkpoints; resumed with another segment count it is refused naming [segments], before anything is written", async () => {
        // Prepare
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        const items = preexistingItems(f.config, 120, 4);
        await beforeTheCounter(engine(), f, items);
        const abort = new AbortController();
        let pages = 0;

        // Act: Ctrl-C after the fourth page.
        const aborted = await run({
            runId: "r",
            segments: 2,
            pageSize: 10,
            signal: abort.signal,
            onProgress: () => void (++pages === 4 && abort.abort()),
        });
        const requests = recordRequests(dynamodb);
        const refused = await run({ runId: "r", segments: 3 }).then(
            () => undefined,
            (e: unknown) => e,
        );
        const writesWhenRefused = writesOf(requests).length;
        const resumed = await run({ runId: "r", pageSize: 10 });
        await f.drain();

        // Assess
        assert.equal(aborted.status, "aborted");
        assert.ok(aborted.total.counted >= 40 && aborted.total.counted < items.length, `flagged ${aborted.total.counted} before stopping`);
        assert.ok(refused instanceof ConfigurationError);
        assert.deepEqual(refused.problems, [
            '[segments] run "r" was started with 2 segments; resume it with the same number or start a new run',
        ]);
        assert.equal(writesWhenRefused, 0);
        assert.deepEqual(
            [resumed.status, resumed.resumed, resumed.segments, resumed.total.counted, resumed.thisCall.counted],
            ["complete", true, 2, items.length, items.length - aborted.total.counted],
        );
        assert.deepEqual(await counts(f, liveOf(items).keys()), exact(liveOf(items)));
        assert.deepEqual(await checkpoints(f), []);
    });

    it("a run abandoned unfinished leaves checkpoints expiring 30 days after its last page; a run with another id flags only what it left; the settler deletes them once expired, not before", async () => {
        // Prepare: run "a" stops after three pages and is never resumed.
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        const items = preexistingItems(f.config, 100, 4);
        await beforeTheCounter(engine(), f, items);
        const abort = new AbortController();
        let pages = 0;
        const abandoned = await run({
            runId: "a",
            segments: 2,
            pageSize: 10,
            signal: abort.signal,
            onProgress: () => void (++pages === 3 && abort.abort()),
        });
        const stoppedAt = Math.floor(Date.now() / 1000);

        // Act: another run, with another id.
        const other = await run({ runId: "b", segments: 3, pageSize: 10 });
        await f.drain();

        // Assess: "b" flagged what "a" had not; every item counts once; "a"'s checkpoints remain, with their expiry.
        assert.equal(abandoned.status, "aborted");
        assert.deepEqual(
            [other.status, other.total.counted, other.total.alreadyCounted],
            ["complete", items.length - abandoned.total.counted, abandoned.total.counted],
        );
        assert.deepEqual(await counts(f, liveOf(items).keys()), exact(liveOf(items)));
        const left = await checkpoints(f);
        assert.equal(left.length, 2, "one per segment of run a");
        for (const checkpoint of left) {
            assert.ok(checkpoint["sk"]!.S!.includes("run#a#"));
            const expires = Number(checkpoint["hc_expires"]!.N);
            assert.ok(Math.abs(expires - (stoppedAt + 30 * 86_400)) <= 5, `expires ${expires}, 30 days after ${stoppedAt}`);
        }

        // Act + Assess: the settler leaves them while they are not expired, and deletes them after.
        await f.settle({ auditItems: 1_000 });
        assert.equal((await checkpoints(f)).length, 2);
        f.clock.advance(30 * DAY + 60_000);
        await f.settle({ auditItems: 1_000 });
        assert.deepEqual(await checkpoints(f), []);
    });

    it("retries a request refused with a retryable error, and throws BackfillError carrying it only after 8 attempts; a non-retryable error stops it at once; resumed, the run completes exact", async () => {
        // Prepare: every flag write is throttled.
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        const items = preexistingItems(f.config, 30, 2);
        await beforeTheCounter(engine(), f, items);
        const requests = recordRequests(dynamodb);
        const throttle = new ProvisionedThroughputExceededException({
            $metadata: { httpStatusCode: 400 },
            message: "throttled by the test",
        });
        let throttled = 0;
        dynamodb.middlewareStack.add(
            (next, context) => async (args) => {
                if (
                    throttled >= 0 &&
                    context.commandName === "UpdateItemCommand" &&
                    (args.input as { TableName?: string }).TableName === f!.config.tableName
                ) {
                    throttled++;
                    throw throttle;
                }
                return next(args);
            },
            { step: "initialize", name: "throttleFlags", priority: "low" },
        );

        // Act
        const failed = await run({ segments: 1, pageSize: 10 }).then(
            () => undefined,
            (e: unknown) => e,
        );

        // Assess: the first flag was sent 8 times, then the run stopped with a BackfillError naming the throttle.
        assert.ok(failed instanceof BackfillError, String(failed));
        assert.equal(failed.cause, throttle);
        assert.match(failed.message, /ProvisionedThroughputExceededException/);
        assert.equal(throttled, 8);
        assert.equal(writesOf(requests).filter((r) => r.input["TableName"] === f!.config.tableName).length, 8);

        // Act + Assess: a non-retryable refusal of the run's first read stops it at once.
        throttled = -1;
        let refusedReads = 0;
        const denied = refuseRequests(dynamodb, (command) => command === "Query" && ++refusedReads > 0);
        const stopped = await run({ segments: 1 }).then(
            () => undefined,
            (e: unknown) => e,
        );
        assert.ok(stopped instanceof BackfillError, String(stopped));
        assert.equal((stopped.cause as Error).name, "AccessDeniedException");
        assert.equal(refusedReads, 1);
        denied.on = false;

        // Act + Assess: the faults gone, the run completes and every item counts once.
        const resumed = await run({ segments: 1, pageSize: 10 });
        await f.drain();
        assert.deepEqual([resumed.status, resumed.total.counted], ["complete", items.length]);
        assert.deepEqual(await counts(f, liveOf(items).keys()), exact(liveOf(items)));
    });

    it("refuses bad options naming each field, before any request", async () => {
        // Prepare
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        const requests = recordRequests(dynamodb);

        // Act
        const refused = await run({
            runId: "no spaces",
            segments: 0,
            pageSize: 10_001,
            capacityShare: 1.5,
            readUnitsPerSecond: 0,
            writeUnitsPerSecond: -1,
        }).then(
            () => undefined,
            (e: unknown) => e,
        );
        const noTable = await backfill({ config: { ...f.config, tableName: undefined as unknown as string }, dynamodb }).then(
            () => undefined,
            (e: unknown) => e,
        );

        // Assess
        assert.ok(refused instanceof ConfigurationError);
        assert.deepEqual(refused.problems, [
            "[runId] must be 1 to 64 letters, digits or _ . : -",
            "[segments] must be an integer from 1 to 1000",
            "[pageSize] must be an integer from 1 to 10000",
            "[capacityShare] must be a number in (0, 1]",
            "[readUnitsPerSecond] must be a positive number (Infinity for no limit)",
            "[writeUnitsPerSecond] must be a positive number (Infinity for no limit)",
        ]);
        assert.ok(noTable instanceof ConfigurationError);
        assert.deepEqual(noTable.problems, ["[config.tableName] must be set"]);
        assert.deepEqual(requests, []);
    });

    for (const counterShards of [1, 3]) {
        it(`strict${counterShards > 1 ? `, ${counterShards} shards` : ""}: a key adopted at its limit refuses once the settler has healed it, and admits again once a delete and a heal bring it under`, async () => {
            // Prepare: 5 items of one key from before the counter; the key's limit is 5.
            f = await counterFixture(engine(), { mode: "strict", counterShards });
            dynamodb = engine().dynamodb();
            const items = preexistingItems(f.config, 5, 1);
            await beforeTheCounter(engine(), f, items);
            const key = items[0]!["pk"]!.S!;
            await f.client.setLimit(key, 5);

            // Act: adopted; the stream counts the flags; the backfill listed the key; the settler heals it.
            const report = await run();
            await f.drain();
            const before = await f.client.count(key);
            const eventualItem = await readEventual(f, key);
            await f.settle();

            // Assess: best-effort took the adopted items' units: the key is at its limit.
            assert.deepEqual([report.total.counted, report.thisCall.keysListed], [5, 1]);
            assert.deepEqual(before, { bestEffort: 0, eventual: 5, value: 5 }, "before the heal, best-effort holds none of them");
            assert.notEqual(eventualItem?.[HEAL_DUE], undefined, "the backfill listed the key");
            assert.deepEqual(await f.client.count(key), { bestEffort: 5, eventual: 5, value: 5 });
            const refused = await f.client.tryCreate(key, "new");
            assert.deepEqual([refused.created, refused.reason], [false, "limit"]);

            // Act + Assess: one adopted item deleted through the client: its unit waits for a heal, then the key admits.
            assert.deepEqual(await f.client.delete(key, items[0]!["sk"]!.S!), { deleted: true });
            await f.drain();
            assert.equal((await f.client.tryCreate(key, "new")).created, false, "the unit is held until the heal");
            await f.settle();
            assert.equal((await f.client.tryCreate(key, "new")).created, true);
            assert.deepEqual(await f.client.count(key).then((c) => c.bestEffort), 5);
        });
    }

    it("a checkpoint and a flag whose answers were lost after they were written (a 500, retried by the SDK) are recognised: the run goes on, and every item counts once", async () => {
        // Prepare: the first checkpoint save and the first flag each answer 500 after they commit.
        f = await counterFixture(engine());
        dynamodb = engine().dynamodb();
        const items = preexistingItems(f.config, 40, 2);
        await beforeTheCounter(engine(), f, items);
        const lost = { checkpoint: 0, flag: 0 };
        dynamodb.middlewareStack.add(
            (next, context) => async (args) => {
                const input = args.input as { TableName?: string };
                const kind =
                    context.commandName !== "UpdateItemCommand"
                        ? undefined
                        : JSON.stringify(input).includes(CHECKPOINT_ATTRIBUTE)
                          ? "checkpoint"
                          : input.TableName === f!.config.tableName
                            ? "flag"
                            : undefined;
                const result = await next(args);
                if (kind !== undefined && lost[kind]++ === 0) {
                    throw new InternalServerError({ $metadata: { httpStatusCode: 500 }, message: "lost after the write, by the test" });
                }
                return result;
            },
            { step: "deserialize", name: "loseAnswers", priority: "high" },
        );

        // Act
        const report = await run({ segments: 1, pageSize: 10 });
        await f.drain();

        // Assess: not taken for another runner's checkpoint; the flag's repeat found it flagged (counted as found).
        assert.deepEqual([report.status, report.segmentsDone], ["complete", 1]);
        assert.deepEqual([report.total.counted, report.total.alreadyCounted], [items.length - 1, 1]);
        assert.ok(lost.checkpoint > 1 && lost.flag > 1, "both were sent again");
        assert.deepEqual(await counts(f, liveOf(items).keys()), exact(liveOf(items)));
        assert.deepEqual(await checkpoints(f), []);
    });
});

async function readEventual(f: CounterFixture, key: string): Promise<Item | undefined> {
    return (
        await f.reader.send(
            new GetItemCommand({ TableName: f.config.countersTableName, Key: eventualKey(f.config, key), ConsistentRead: true }),
        )
    ).Item;
}
