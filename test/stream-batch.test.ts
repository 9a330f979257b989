/**
 * The stream consumer applying batches (runtime/stream/consumer.ts, apply.ts, plan.ts), on DynamoDB Local through the
 * mapping emulator with the component's settings:
 * - one conditional UpdateItem per key per batch, one write of the shard's frontier, no transaction, and the write
 *   capacity that costs;
 * - exactly once, whatever Lambda delivers: a batch twice at once and again later, a retry from the record that failed,
 *   halves of a batch whose first attempt crashed after its writes, overlapping deliveries at once;
 * - the same-table placement: the records of the consumer's own writes come back to it and make it write nothing.
 */
import { strict as assert } from "node:assert";
import type { DynamoDBRecord } from "aws-lambda";
import { meterWrites } from "../local/engine/capacity";
import { paddedSequence } from "../runtime/stream/records";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { emfTotals } from "./support/stream-records";
import {
    appliedSums,
    assertExact,
    consumerOf,
    deferred,
    eventOf,
    InvokeHook,
    recordRequests,
    refuseRequests,
    sequencesOf,
    storedFrontier,
    targetOf,
    theShard,
    write,
    writesOf,
} from "./support/stream-harness";

describe("the stream consumer on DynamoDB Local", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    afterEach(() => f?.close());

    describe("one write per key per batch", function () {
        it("applies each key's records of a batch in one UpdateItem of its eventual item, moves the frontier in one more, and sends no transaction", async () => {
            // Prepare: 50 records of key a (30 creates, 10 deletes of two records each), 5 of key b.
            f = await counterFixture(engine());
            await write(f, "a", 30, 10);
            await write(f, "b", 5);
            const requests = recordRequests(f.consumerDynamo);

            // Act
            await f.drain();

            // Assess: one batch; three writes, each once.
            assert.equal(f.emulator.stats.invocations, 1);
            assert.equal(f.emulator.stats.recordsDelivered, 55);
            const writes = writesOf(requests);
            assert.deepEqual(writes.map((w) => `${w.command} ${targetOf(f!.config, w)} ${w.ok}`).sort(), [
                "UpdateItem eventual:a true",
                "UpdateItem eventual:b true",
                "UpdateItem progress true",
            ]);
            assert.deepEqual(appliedSums(f.config, requests), { a: [20], b: [5] });
            assert.equal(requests.filter((r) => r.command.startsWith("Transact")).length, 0);
            await assertExact(f, { a: 20, b: 5 });
        });

        it("costs at most 1 WCU a record: a batch of 100 records over 8 keys makes 9 writes, 16 WCU with the heal index", async () => {
            // Prepare: 72 creates and 14 deletes (two records each) over 8 keys: 100 records.
            f = await counterFixture(engine());
            const expected: Record<string, number> = {};
            for (let k = 0; k < 8; k++) {
                const deletes = k < 7 ? 2 : 0;
                await write(f, `k${k}`, 9, deletes);
                expected[`k${k}`] = 9 - deletes;
            }
            const meter = meterWrites(f.consumerDynamo);

            // Act
            await f.drain();

            // Assess
            assert.equal(f.emulator.stats.invocations, 1);
            assert.equal(f.emulator.stats.recordsDelivered, 100);
            assert.equal(meter.writes, 9, "one write per key and one of the frontier");
            // Each item is under 1 KB: 1 WCU a write, and 1 more for each of the 7 keys a delete listed on the heal index.
            assert.equal(meter.billed, 9 + 7);
            assert.ok(meter.billed / 100 <= 1);
            await assertExact(f, expected);
        });

        it("applies a batch on a table with attribute names of its own, and the consumer's writes use them", async () => {
            // Prepare
            const layout = {
                partitionKey: "tenant",
                sortKey: "resource",
                deletedAttribute: "removed",
                tokenAttribute: "life",
                counterPrefix: "~hc~",
                countAttribute: "total",
            };
            f = await counterFixture(engine(), { layout });
            await write(f, "a", 4, 1);
            const requests = recordRequests(f.consumerDynamo);

            // Act
            await f.drain();

            // Assess
            assert.deepEqual(
                writesOf(requests).map((w) => `${targetOf(f!.config, w)} ${JSON.stringify((w.input as { Key?: unknown }).Key)}`),
                [
                    'eventual:a {"tenant":{"S":"a"},"resource":{"S":"~hc~eventual"}}',
                    `progress {"tenant":{"S":"~hc~stream"},"resource":{"S":"~hc~shard#${(await theShard(engine(), f)).shardId}"}}`,
                ],
            );
            assert.equal(
                (writesOf(requests)[0]!.input as { ExpressionAttributeNames?: Record<string, string> }).ExpressionAttributeNames?.["#c"],
                "total",
            );
            await assertExact(f, { a: 3 });
        });
    });

    describe("every record applied exactly once, whatever Lambda delivers", function () {
        it("a batch delivered to two instances at once is applied by one: the other's writes fail their condition and it writes nothing; delivered again later, nothing is written", async () => {
            // Prepare: the second instance reads the eventual items before the first writes them, and writes after it.
            const hook = new InvokeHook();
            f = await counterFixture(engine(), { wrapInvoke: hook.option });
            await write(f, "a", 6);
            await write(f, "b", 4);
            const secondDynamo = engine().dynamodb();
            const second = consumerOf(engine(), f, { dynamodb: secondDynamo });
            const secondRead = deferred();
            const firstDone = deferred();
            let secondAtWrites = 0;
            holdEventualWrites(f, f.consumerDynamo, () => secondRead.promise);
            holdEventualWrites(f, secondDynamo, async () => {
                if (++secondAtWrites === 2) {
                    secondRead.resolve();
                }
                await firstDone.promise;
            });
            const requests = recordRequests(f.consumerDynamo);
            const secondRequests = recordRequests(secondDynamo);
            let delivered: DynamoDBRecord[] = [];
            hook.wrap = async (invoke, event) => {
                delivered = event.Records ?? [];
                const answers = await Promise.all([invoke(event).finally(firstDone.resolve), second(event).finally(secondRead.resolve)]);
                return answers[0];
            };

            // Act
            await f.drain();

            // Assess: the first applied both keys; the second met their marks and applied nothing.
            assert.equal(f.emulator.stats.invocations, 1);
            assert.deepEqual(appliedSums(f.config, requests), { a: [6], b: [4] });
            assert.deepEqual(
                writesOf(secondRequests)
                    .map((r) => `${targetOf(f!.config, r)} ${r.error}`)
                    .sort(),
                [
                    "eventual:a ConditionalCheckFailedException",
                    "eventual:b ConditionalCheckFailedException",
                    "progress ConditionalCheckFailedException",
                ],
            );
            await assertExact(f, { a: 6, b: 4 });

            // Act: the same batch again, later, to both instances.
            hook.wrap = undefined;
            const before = requests.length + secondRequests.length;
            const { shardId } = await theShard(engine(), f);
            await Promise.all([f.consumer(eventOf(f, shardId, delivered)), second(eventOf(f, shardId, delivered))]);

            // Assess: both find the batch at or below the frontier, and neither writes.
            assert.deepEqual(writesOf([...requests, ...secondRequests].slice(before)), []);
            await assertExact(f, { a: 6, b: 4 });
            secondDynamo.destroy();
        });

        it("a retry from the record that failed (ReportBatchItemFailures) applies the rest, and skips the records of other keys already applied", async () => {
            // Prepare: keys a, b, c interleaved; b's first write is refused (an error not retried within the invocation).
            const hook = new InvokeHook();
            f = await counterFixture(engine(), { wrapInvoke: hook.option });
            for (let i = 0; i < 3; i++) {
                for (const key of ["a", "b", "c"]) {
                    await f.client.create(key, `${key}-${i}`);
                }
            }
            const { shardId, records } = await theShard(engine(), f);
            const sequences = sequencesOf(records);
            let refuseB = 1;
            const refusal = refuseRequests(
                f.consumerDynamo,
                (command, input) => command === "UpdateItem" && isEventualOf(f!, input, "b") && refuseB-- > 0,
            );
            const requests = recordRequests(f.consumerDynamo);
            const answers: unknown[] = [];
            const frontiers: Array<string | undefined> = [];
            hook.wrap = async (invoke, event) => {
                const answer = await invoke(event);
                answers.push(answer);
                frontiers.push(await storedFrontier(f!, shardId));
                return answer;
            };

            // Act
            await f.drain();

            // Assess: a partial failure at b's first record (the batch's second), the frontier just before it (the
            // shard's first write of this process), then a retry from there that applies b and skips a's and c's
            // records after it, moving the frontier in this process only (written once a minute or 1,000 records).
            assert.equal(refusal.refused, 1);
            assert.deepEqual(answers, [
                { state: {}, batchItemFailures: [{ itemIdentifier: sequences[1] }] },
                { state: {}, batchItemFailures: [] },
            ]);
            assert.deepEqual(frontiers, [
                `${paddedSequence(sequences[0]!)}|${sequences[0]}`,
                `${paddedSequence(sequences[0]!)}|${sequences[0]}`,
            ]);
            assert.equal(f.emulator.stats.recordsDelivered, 9 + 8);
            assert.deepEqual(appliedSums(f.config, requests), { a: [3], c: [3], b: [3] });
            assert.equal(emfTotals(f.logs)["DuplicatesSkipped"], 5, "a's and c's records after b's first");
            await assertExact(f, { a: 3, b: 3, c: 3 });
        });

        it("the halves of a batch whose first attempt crashed after its writes, before moving the frontier, apply nothing again", async () => {
            // Prepare: the first invocation applies its keys, cannot move the frontier, then fails (a function error).
            const hook = new InvokeHook();
            f = await counterFixture(engine(), { wrapInvoke: hook.option });
            await write(f, "a", 5, 2);
            await write(f, "b", 3, 1);
            const progress = refuseRequests(
                f.consumerDynamo,
                (command, input) => command === "UpdateItem" && targetOf(f!.config, { command, input }) === "progress",
            );
            progress.on = false;
            const requests = recordRequests(f.consumerDynamo);
            let crashed = false;
            hook.wrap = async (invoke, event) => {
                if (crashed) {
                    return invoke(event);
                }
                crashed = true;
                progress.on = true;
                await invoke(event);
                progress.on = false;
                throw new Error("the function crashed after its writes");
            };

            // Act
            await f.drain();

            // Assess: the halves found every record that moves a count (a: 5 creates, 2 deletes; b: 3 and 1) at or
            // below its key's mark.
            assert.equal(progress.refused, 1);
            assert.deepEqual(
                {
                    functionErrors: f.emulator.stats.functionErrors,
                    bisections: f.emulator.stats.bisections,
                    invocations: f.emulator.stats.invocations,
                },
                { functionErrors: 1, bisections: 1, invocations: 3 },
            );
            assert.deepEqual(appliedSums(f.config, requests), { a: [3], b: [2] });
            assert.equal(emfTotals(f.logs)["DuplicatesSkipped"], 7 + 4);
            await assertExact(f, { a: 3, b: 2 });
        });

        it("overlapping deliveries at once (the batch, its first two thirds, its last two thirds, on three instances) apply each record once", async () => {
            // Prepare
            const hook = new InvokeHook();
            f = await counterFixture(engine(), { wrapInvoke: hook.option });
            await write(f, "a", 8, 3);
            await write(f, "b", 6, 6);
            await write(f, "c", 4);
            const instances = [consumerOf(engine(), f), consumerOf(engine(), f)];
            const requests = recordRequests(f.consumerDynamo);
            hook.wrap = async (invoke, event) => {
                const records = event.Records ?? [];
                const third = Math.floor(records.length / 3);
                const [answer] = await Promise.all([
                    invoke(event),
                    instances[0]!({ ...event, Records: records.slice(0, 2 * third) }),
                    instances[1]!({ ...event, Records: records.slice(third) }),
                ]);
                return answer;
            };

            // Act
            await f.drain();

            // Assess: the sums applied to each key add up to its count, whichever instance applied which records.
            assert.equal(f.emulator.stats.invocations, 1);
            const sums = appliedSums(f.config, requests);
            assert.deepEqual(
                ["a", "b", "c"].map((key) => (sums[key] ?? []).reduce((s, d) => s + d, 0)),
                [5, 0, 4],
            );
            await assertExact(f, { a: 5, b: 0, c: 4 });
            const { shardId, records } = await theShard(engine(), f);
            const last = records.at(-1)!.dynamodb!.SequenceNumber!;
            assert.equal(await storedFrontier(f, shardId), `${paddedSequence(last)}|${last}`);
        });
    });

    describe("the same-table placement: the consumer's own writes do not feed it", function () {
        it("batches of counter items' records (its own writes among them) make no write and do not move the frontier; a further drain writes nothing", async () => {
            // Prepare: every invocation is watched: its records, and the writes it made.
            const hook = new InvokeHook();
            const fx = (f = await counterFixture(engine(), { placement: "same-table", wrapInvoke: hook.option }));
            await write(fx, "a", 6, 2);
            await write(fx, "b", 3, 1);
            const requests = recordRequests(fx.consumerDynamo);
            const invocations: Array<{ sortKeys: string[]; sequences: string[]; writes: number }> = [];
            hook.wrap = async (invoke, event) => {
                const before = writesOf(requests).length;
                const answer = await invoke(event);
                const records = event.Records ?? [];
                invocations.push({
                    sortKeys: records.map((r) => r.dynamodb!.Keys![fx.config.sortKey]!.S!),
                    sequences: sequencesOf(records),
                    writes: writesOf(requests).length - before,
                });
                return answer;
            };

            // Act
            await fx.drain();
            const { shardId } = await theShard(engine(), fx);
            const frontier = await storedFrontier(fx, shardId);
            const afterFirst = { invocations: fx.emulator.stats.invocations, writes: writesOf(requests).length };
            await fx.drain();

            // Assess: the first batch applied the items; every later one held only counter items' records, the
            // consumer's own eventual writes among them, and wrote nothing, not even the frontier.
            const own = (i: { sortKeys: string[] }) => i.sortKeys.every((s) => s.startsWith(fx.config.counterPrefix));
            assert.ok(invocations.length >= 2, `${invocations.length} invocations`);
            assert.equal(own(invocations[0]!), false);
            assert.deepEqual(
                invocations.slice(1).map((i) => ({ own: own(i), writes: i.writes })),
                invocations.slice(1).map(() => ({ own: true, writes: 0 })),
            );
            assert.ok(invocations.slice(1).some((i) => i.sortKeys.includes(`${fx.config.counterPrefix}eventual`)));
            const firstLast = invocations[0]!.sequences.at(-1)!;
            assert.equal(frontier, `${paddedSequence(firstLast)}|${firstLast}`);
            assert.deepEqual(
                { invocations: fx.emulator.stats.invocations, writes: writesOf(requests).length },
                afterFirst,
                "a further drain writes nothing",
            );
            await assertExact(fx, { a: 4, b: 2 });
        });
    });
});

/** Whether a request's input is a write of `key`'s eventual item. */
function isEventualOf(f: CounterFixture, input: Record<string, unknown>, key: string): boolean {
    return targetOf(f.config, { command: "UpdateItem", input }) === `eventual:${key}`;
}

/** Holds every eventual UpdateItem `client` sends until `hold` resolves. */
function holdEventualWrites(f: CounterFixture, client: CounterFixture["consumerDynamo"], hold: () => Promise<void>): void {
    client.middlewareStack.add(
        (next, context) => async (args) => {
            if (
                context.commandName === "UpdateItemCommand" &&
                targetOf(f.config, { command: "UpdateItem", input: args.input as Record<string, unknown> }).startsWith("eventual:")
            ) {
                await hold();
            }
            return next(args);
        },
        { step: "initialize", name: `holdEventualWrites${Math.random()}`, priority: "low" },
    );
}
