/**
 * Adoption under load on DynamoDB Local: a table seeded with 5,000 items over 50 keys (with every kind
 * of odd item) is backfilled while the client creates and deletes, other writers put and hard-delete,
 * and the stream consumer runs, all under 5% injected faults. The backfill is killed (SIGKILL) midway and
 * resumed. After the drain, eventual == live selected items for every key, the API saw no error, and the
 * mode's bound held at every observation: in utilization mode best-effort never exceeds the live items;
 * in strict mode it always covers the live items the client wrote, and those never exceed the limit (the
 * items that were there before, and other writers' puts, are not the client's to refuse).
 */
import { DeleteItemCommand, DeleteTableCommand, PutItemCommand, QueryCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import * as path from "node:path";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { readCounterItems } from "../local/harness/markers";
import { seedItems, seedKey, writeItems } from "../local/harness/seed";
import { runWorkload } from "../local/harness/workload";
import { backfill, backfillConfig } from "../runtime/backfill/backfill";
import { BackfillStore } from "../runtime/backfill/store";
import type { ItemSelection } from "../runtime/shared/selection";
import { isLive } from "../runtime/shared/selection";
import { counterFixture, observeWhile, strictAdoptionInvariant, utilizationInvariant } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

/** Client items are "item-<seed>-<n>", seeded ones "item-seed-<n>", other writers' "item-other-<n>". */
const SELECTION: ItemSelection = { kind: "sortKeyPrefix", prefix: "item-" };
const KEYS = 50;

describe("backfill while the API, other writers and the consumer run (DynamoDB Local, 5% faults)", function () {
    // Each scenario has an engine of its own: DynamoDB Local serves every later request slower on an engine
    // that has held a large table and its stream, even after the table is dropped.
    for (const scenario of [
        // The workload is sized to outlast the backfill of its table. Utilization's table holds 5,000 items (it
        // held 20,000, and the file took 192 s of one worker): its four segments still scan about five pages of 250
        // each, the kill still comes after the fourth page with at least 4,000 items left to the resumed run, and
        // every key still holds 100 seeded items mixing the seed's kinds, so the resume, the other writers and the
        // workload still meet on every key, on a table a quarter the size.
        { mode: "strict" as const, items: 2_000, ops: 400, limit: 60, placement: "same-table" as const },
        { mode: "utilization" as const, items: 5_000, ops: 800, limit: undefined, placement: "separate" as const },
    ]) {
        describe(`${scenario.mode} mode`, () => {
            const engine = useEngine();

            it(`${scenario.mode}, counters ${scenario.placement === "separate" ? "in a table of their own" : "in the user's table"}: ${scenario.items} seeded items end exact, killed midway and resumed, 0 API errors, bound kept`, async () => {
                // Prepare: the table as an existing program left it, then the counter attached (stream read from now on).
                const fixture = await counterFixture(engine(), {
                    layout: { selection: SELECTION },
                    placement: scenario.placement,
                    mode: scenario.mode,
                    settings: { startingPosition: "LATEST" },
                    clientFaults: { rate: 0.05, seed: 31 },
                    consumerFaults: { rate: 0.05, seed: 32 },
                });
                const config = backfillConfig(fixture.config);
                const seed = seedItems({ items: scenario.items, keys: KEYS, seed: 33, resourcePrefix: "item-seed-" });
                await writeItems(fixture.reader, config.tableName, seed.items);
                await fixture.emulator.poll();
                const keys = [...seed.expectedLive.keys()];

                const backfillDynamo = engine().dynamodb();
                const backfillFaults = injectFaults(backfillDynamo, { rate: 0.05, random: seededRandom(34) });
                const otherDynamo = engine().dynamodb();
                const otherFaults = injectFaults(otherDynamo, { rate: 0.05, random: seededRandom(35) });
                // A budget above what the engine serves: the rate limiter has its own test, and the backfill still
                // overlaps the whole workload (the kill comes after its fourth page).
                const options = {
                    config,
                    mode: scenario.mode,
                    runId: "adopt",
                    segments: 4,
                    pageSize: 250,
                    readUnitsPerSecond: 20_000,
                    writeUnitsPerSecond: 20_000,
                };

                // Act: everything at once.
                let stop = false;
                const workload = runWorkload(fixture.client, {
                    ops: scenario.ops,
                    keys,
                    concurrency: 6,
                    deleteRatio: 0.3,
                    limit: scenario.limit,
                    seed: 36,
                });
                const others = (async () => {
                    const random = seededRandom(37);
                    let puts = 0;
                    let removes = 0;
                    for (let n = 0; !stop; n++) {
                        const key = keys[Math.floor(random() * keys.length)]!;
                        if (random() < 0.5) {
                            const Item = { pk: { S: key }, sk: { S: `item-other-${n}` } };
                            await sendWithRetries(() => otherDynamo.send(new PutItemCommand({ TableName: config.tableName, Item })));
                            puts++;
                        } else {
                            const index = Math.floor(random() * scenario.items);
                            const Key = { pk: { S: seedKey(index % KEYS) }, sk: { S: `item-seed-${index}` } };
                            await sendWithRetries(() => otherDynamo.send(new DeleteItemCommand({ TableName: config.tableName, Key })));
                            removes++;
                        }
                    }
                    return { puts, removes };
                })();
                const consuming = (async () => {
                    while (!stop) {
                        const read = await fixture.emulator.poll();
                        const invoked = await fixture.emulator.deliver();
                        if (read === 0 && invoked === 0) {
                            await new Promise((r) => setTimeout(r, 50));
                        }
                    }
                })();
                const adoption = (async () => {
                    // A first backfill process, killed once it has checkpointed a few pages.
                    const child = spawn(
                        process.execPath,
                        [
                            "--import",
                            "tsx",
                            path.join(__dirname, "support", "backfill-child.ts"),
                            JSON.stringify({ endpoint: engine().endpoint, options }),
                        ],
                        { stdio: ["ignore", "pipe", "pipe"] },
                    );
                    let childExited = false;
                    let childErrors = "";
                    child.stderr.on("data", (chunk: Buffer) => (childErrors += chunk.toString()));
                    const exited = new Promise<void>((resolve) =>
                        child.once("exit", () => {
                            childExited = true;
                            resolve();
                        }),
                    );
                    const store = new BackfillStore(config, fixture.reader, { now: Date.now, sleep: async () => undefined });
                    for (;;) {
                        const pages = [...(await store.checkpoints("adopt")).values()].reduce((n, c) => n + c.pages, 0);
                        if (pages >= 4) {
                            break;
                        }
                        assert.equal(childExited, false, `the first backfill process exited before it was killed: ${childErrors}`);
                        await new Promise((r) => setTimeout(r, 100));
                    }
                    child.kill("SIGKILL");
                    await exited;
                    // Resumed in this process, under faults, to the end.
                    return backfill({ ...options, dynamodb: backfillDynamo });
                })();
                const all = Promise.all([workload, adoption]).finally(() => {
                    stop = true;
                });
                const invariant = scenario.mode === "strict" ? strictAdoptionInvariant(scenario.limit!) : utilizationInvariant;
                const { observations, violations } = await observeWhile(fixture, keys, all, invariant);
                const [[work, report], written] = await Promise.all([all, others, consuming]).then(([a, o]) => [a, o] as const);
                await fixture.emulator.drain();
                await fixture.redriveAll();
                await fixture.emulator.drain();

                // Assess
                assert.deepEqual(violations, []);
                assert.ok(observations > 0);
                assert.deepEqual(work.apiErrors, []);
                assert.equal(report.status, "complete");
                assert.equal(report.resumed, true);
                assert.ok(written.puts > 0 && written.removes > 0, JSON.stringify(written));
                const injected = (s: { injected: Record<string, number> }) => Object.values(s.injected).reduce((a, b) => a + b, 0);
                assert.ok(injected(backfillFaults) > 0 && injected(otherFaults) > 0 && injected(fixture.clientFaults!) > 0);
                // eventual == live selected items, for every key, whoever wrote them.
                for (const key of keys) {
                    const { live, others } = await liveSelected(key);
                    const counters = await readCounterItems(fixture.reader, config.countersTableName, config, key);
                    assert.equal(counters.eventual, live, `key ${key}: eventual ${counters.eventual} != live ${live}`);
                    assert.equal(counters.countedMarkers, live, `key ${key}: counted markers ${counters.countedMarkers} != live ${live}`);
                    if (scenario.mode === "strict") {
                        // The backfill brought the items that were there before into best-effort too; only other
                        // writers' items, which best-effort never covers, are left to eventual.
                        assert.ok(
                            counters.bestEffort >= live - others,
                            `key ${key}: best-effort ${counters.bestEffort} < ${live} - ${others}`,
                        );
                    }
                }
                backfillDynamo.destroy();
                otherDynamo.destroy();
                for (const TableName of new Set([config.tableName, config.countersTableName])) {
                    await fixture.reader.send(new DeleteTableCommand({ TableName }));
                }
                fixture.close();

                /** Live selected items of a key, and how many of them other writers put. */
                async function liveSelected(key: string): Promise<{ live: number; others: number }> {
                    let live = 0;
                    let others = 0;
                    let start: Record<string, AttributeValue> | undefined;
                    do {
                        const page = await fixture.reader.send(
                            new QueryCommand({
                                TableName: config.tableName,
                                ConsistentRead: true,
                                KeyConditionExpression: "pk = :k",
                                ExpressionAttributeValues: { ":k": { S: key } },
                                ExclusiveStartKey: start,
                            }),
                        );
                        for (const item of (page.Items ?? []).filter((i) => isLive(i, config))) {
                            live++;
                            others += item.sk?.S?.startsWith("item-other-") ? 1 : 0;
                        }
                        start = page.LastEvaluatedKey;
                    } while (start);
                    return { live, others };
                }
            });
        });
    }
});

/** Another writer's own retries on top of the SDK's: it keeps trying until its write is served. */
async function sendWithRetries(send: () => Promise<unknown>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
        try {
            await send();
            return;
        } catch (error) {
            if (attempt >= 10) {
                throw error;
            }
            await new Promise((r) => setTimeout(r, 20 * 2 ** Math.min(attempt, 5)));
        }
    }
}
