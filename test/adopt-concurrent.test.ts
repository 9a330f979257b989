/**
 * Adoption under traffic on DynamoDB Local (runtime/backfill/), through the counter fixture: a table's items from
 * before the counter are backfilled while the API's client creates and deletes, other writers put, rewrite and delete,
 * and the consumer runs, with 5% injected faults on the client, the consumer and the backfill. Two runs go at once,
 * one of them crashing between a page and its checkpoint and resumed. Once the stream has drained every key's eventual
 * is its live items, each flagged once; two periods later the settler has brought best-effort to the mode's target.
 */
import { DeleteItemCommand, PutItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { SEEDED_SELECTION, seedItems, writeItems } from "../local/harness/seed";
import { BackfillError, backfill, type BackfillReport } from "../runtime/backfill/backfill";
import { CHECKPOINT_ATTRIBUTE } from "../runtime/backfill/checkpoints";
import type { CounterMode } from "../runtime/shared/config";
import { advanceFrontier } from "../runtime/stream/progress";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { refuseRequests, theShard } from "./support/stream-harness";

const TWO_PERIODS = 2 * 600_000 + 1_000;

/** Polls and delivers the fixture's stream until `stop` is set, as Lambda's mapping does while traffic goes on. */
async function consumeUntil(f: CounterFixture, stop: { done: boolean }): Promise<void> {
    while (!stop.done) {
        await f.emulator.poll();
        await f.emulator.deliver();
        await new Promise((resolve) => setTimeout(resolve, 20));
    }
}

describe("backfill while the API, other writers and the consumer run (DynamoDB Local, 5% faults)", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    const clients: DynamoDBClient[] = [];
    afterEach(() => {
        f?.close();
        clients.splice(0).forEach((c) => c.destroy());
    });

    for (const [i, mode] of (["utilization", "strict"] as CounterMode[]).entries()) {
        it(`${mode}: every key's eventual ends at its live items, each counted once, and best-effort at the heal's target; two runs at once, one crashed between a page and its checkpoint and resumed; no call failed`, async () => {
            // Prepare: 200 items over 5 keys from before the counter.
            const seed = 41 + i;
            f = await counterFixture(engine(), {
                mode,
                layout: { selection: SEEDED_SELECTION },
                clientFaults: { rate: 0.05, seed },
                consumerFaults: { rate: 0.05, seed: seed + 100 },
            });
            const fixture = f;
            const seeded = seedItems({ items: 200, keys: 5, seed, largeItems: 0 });
            await writeItems(f.reader, f.config.tableName, seeded.items);
            const { shardId, records } = await theShard(engine(), f);
            await advanceFrontier(f.config, f.reader, shardId, records.at(-1)!.dynamodb!.SequenceNumber!);
            const keys = [...seeded.expectedLive.keys()];
            const seededIds = seeded.items
                .map((item) => ({ key: item["pk"]!.S!, id: item["sk"]!.S! }))
                .filter((x) => x.id.startsWith("order#"));
            const backfillClient = (faultSeed: number) => {
                const client = engine().dynamodb();
                clients.push(client);
                injectFaults(client, { rate: 0.05, random: seededRandom(faultSeed) });
                return client;
            };
            const crashing = backfillClient(seed + 200);
            let saves = 0;
            const crash = refuseRequests(
                crashing,
                (command, input) => command === "UpdateItem" && JSON.stringify(input).includes(CHECKPOINT_ATTRIBUTE) && ++saves === 4,
            );
            const other = backfillClient(seed + 300);
            const writer = engine().dynamodb();
            clients.push(writer);
            const random = seededRandom(seed + 400);
            const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
            const stop = { done: false };
            const apiErrors: unknown[] = [];
            const created: Array<{ key: string; id: string }> = [];

            // Act: the consumer, two backfill runs, the API and other writers, all at once.
            const consumer = consumeUntil(fixture, stop);
            const runs = Promise.allSettled([
                backfill({
                    config: f.config,
                    dynamodb: crashing,
                    runId: "a",
                    segments: 3,
                    pageSize: 10,
                    readUnitsPerSecond: 200,
                    writeUnitsPerSecond: 200,
                }),
                backfill({
                    config: f.config,
                    dynamodb: other,
                    runId: "b",
                    segments: 2,
                    pageSize: 15,
                    readUnitsPerSecond: 200,
                    writeUnitsPerSecond: 200,
                }),
            ]);
            const api = (async () => {
                for (let n = 0; n < 60; n++) {
                    const key = pick(keys);
                    try {
                        if (random() < 0.6 || created.length === 0) {
                            const id = `order#api-${n}`;
                            const result = await fixture.client.tryCreate(key, id, 1_000);
                            if (result.created) {
                                created.push({ key, id });
                            }
                        } else {
                            const target = random() < 0.5 ? created.splice(Math.floor(random() * created.length), 1)[0]! : pick(seededIds);
                            await fixture.client.delete(target.key, target.id);
                        }
                    } catch (error) {
                        apiErrors.push(error);
                    }
                }
            })();
            const others = (async () => {
                for (let n = 0; n < 40; n++) {
                    const roll = random();
                    const target = pick(seededIds);
                    if (roll < 0.4) {
                        await writer.send(
                            new PutItemCommand({
                                TableName: fixture.config.tableName,
                                Item: { pk: { S: pick(keys) }, sk: { S: `order#other-${n}` }, total: { N: String(n) } },
                            }),
                        );
                    } else if (roll < 0.7) {
                        await writer.send(
                            new DeleteItemCommand({
                                TableName: fixture.config.tableName,
                                Key: { pk: { S: target.key }, sk: { S: target.id } },
                            }),
                        );
                    } else {
                        // A rewrite of the whole item: it drops the counted flag, which the consumer then writes again.
                        await writer.send(
                            new PutItemCommand({
                                TableName: fixture.config.tableName,
                                Item: { pk: { S: target.key }, sk: { S: target.id }, status: { S: "rewritten" } },
                            }),
                        );
                    }
                }
            })();
            const [crashed, finished] = await runs;
            await Promise.all([api, others]);
            crash.on = false;
            const resumed = await backfill({
                config: f.config,
                dynamodb: crashing,
                runId: "a",
                readUnitsPerSecond: 200,
                writeUnitsPerSecond: 200,
            });
            stop.done = true;
            await consumer;
            await f.drain();
            await f.redriveAll();
            await f.drain();

            // Assess: the crash stopped run a with a BackfillError; run b and the resumed run a completed.
            assert.equal(crashed.status, "rejected");
            assert.ok((crashed as PromiseRejectedResult).reason instanceof BackfillError);
            assert.equal((finished as PromiseFulfilledResult<BackfillReport>).value.status, "complete");
            assert.deepEqual([resumed.status, resumed.resumed], ["complete", true]);
            assert.deepEqual(apiErrors, []);
            assert.deepEqual(f.fatal, []);
            for (const key of keys) {
                const s = await f.snapshot(key);
                assert.deepEqual([s.eventual, s.counted], [s.live, s.live], `${key}: eventual and the flagged items are the live items`);
            }

            // Act: two periods later, the settler heals every listed key.
            f.clock.advance(TWO_PERIODS);
            await f.settle({ auditItems: 1_000 });
            await f.drain();

            // Assess: best-effort at the mode's target: strict, every live counted item; utilization, the client's lives.
            for (const key of keys) {
                const s = await f.snapshot(key);
                assert.equal(s.bestEffort, mode === "strict" ? s.live : s.clientLive, key);
                assert.equal(s.eventual, s.live, key);
            }
        });
    }
});
