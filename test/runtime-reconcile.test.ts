import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { reconcileKey } from "../runtime/heal/reconcile";
import type { FatalMessage } from "../runtime/stream/fatal";
import { assertExact, counterFixture, type CounterFixture } from "./support/counter-fixture";

describe("reconciliation from the table, on DynamoDB Local", () => {
    const engine = useEngine();

    it("counts creations and deletions whose records expired before the consumer saw them", async () => {
        const fixture = await counterFixture(engine());
        const parked: FatalMessage[] = [];
        const fatal = { park: async (m: FatalMessage) => (parked.push(m), true) };
        // Half the history is counted by the consumer; the rest is lost with the stream.
        for (let i = 0; i < 20; i++) {
            await fixture.client.create("t", `r${i}`);
        }
        await fixture.emulator.drain();
        for (let i = 0; i < 20; i += 2) {
            await fixture.client.delete("t", `r${i}`);
        }
        for (let i = 20; i < 30; i++) {
            await fixture.client.create("t", `r${i}`);
        }
        assert.deepEqual(await fixture.snapshot("t"), { bestEffort: 20, eventual: 20, live: 20, counted: 20, softDeleted: 10 });

        const first = await reconcileKey("t", { config: fixture.config, dynamodb: fixture.consumerDynamo, fatal });
        const second = await reconcileKey("t", { config: fixture.config, dynamodb: fixture.consumerDynamo, fatal });

        assert.deepEqual(first, { key: "t", found: 20, counted: 20, alreadySettled: 0, incomplete: false });
        assert.deepEqual(second, { key: "t", found: 0, counted: 0, alreadySettled: 0, incomplete: false });
        assert.deepEqual(await fixture.snapshot("t"), { bestEffort: 20, eventual: 20, live: 20, counted: 20, softDeleted: 0 });
        assert.deepEqual(parked, []);
        fixture.close();
    });

    it("is safe while the consumer counts the same items", async () => {
        const fixture = await counterFixture(engine());
        const fatal = { park: async () => true };
        for (let i = 0; i < 60; i++) {
            await fixture.client.create(`k${i % 3}`, `r${i}`);
        }
        for (let i = 0; i < 60; i += 3) {
            await fixture.client.delete(`k${i % 3}`, `r${i}`);
        }

        await Promise.all([
            fixture.emulator.drain(),
            ...["k0", "k1", "k2"].map((key) => reconcileKey(key, { config: fixture.config, dynamodb: fixture.consumerDynamo, fatal })),
        ]);
        await fixture.emulator.drain();

        const snapshots = await assertExact(fixture);
        assert.deepEqual(
            [...snapshots.values()].map((s) => s.live),
            [0, 20, 20],
        );
        fixture.close();
    });

    /**
     * A client for reconcile on which key "t" is busy: before each Query of its items (a Query of its markers reads under
     * their prefix) a client creates a new item, busy0, busy1, ...; with `deleteNewestBeforeEachTransaction`, before
     * each of reconcile's transactions the client deletes the newest, as a racing writer of that item would.
     */
    function busyKey(fixture: CounterFixture, options: { deleteNewestBeforeEachTransaction?: boolean } = {}) {
        const dynamodb = engine().dynamodb();
        let written = 0;
        dynamodb.middlewareStack.add(
            (next, context) => async (args) => {
                const input = args.input as { KeyConditionExpression?: string };
                if (context.commandName === "QueryCommand" && input.KeyConditionExpression === "#pk = :key") {
                    await fixture.client.create("t", `busy${written++}`);
                }
                if (options.deleteNewestBeforeEachTransaction && context.commandName === "TransactWriteItemsCommand") {
                    await fixture.client.delete("t", `busy${written - 1}`);
                }
                return next(args);
            },
            { step: "initialize" },
        );
        return { dynamodb, written: () => written };
    }

    it("ends once what its first read found is settled, on a key written between every two of its reads (a busy key)", async () => {
        // Prepare: one item the stream lost; then, before each of reconcile's reads of the key's items, a client writes
        // a new one, whose record the consumer has not seen yet.
        const fixture = await counterFixture(engine());
        await fixture.client.create("t", "lost");
        const { dynamodb, written } = busyKey(fixture);

        // Act
        const result = await reconcileKey("t", { config: fixture.config, dynamodb, fatal: { park: async () => true } });

        // Assess: two reads (the second finds only the item written before it, the stream's to count); the stream then
        // counts the rest exactly once. Before, every read found a new item, and it ended incomplete after 20 rounds.
        assert.deepEqual(result, { key: "t", found: 2, counted: 2, alreadySettled: 0, incomplete: false });
        assert.equal(written(), 2);
        await fixture.emulator.drain();
        assert.deepEqual(await fixture.snapshot("t"), { bestEffort: 3, eventual: 3, live: 3, counted: 3, softDeleted: 0 });
        dynamodb.destroy();
        fixture.close();
    });

    it("commits only what its first read found: a later item the consumer races does not cancel the first read's", async () => {
        // Prepare: one item the stream lost. Before each of reconcile's reads of the key's items a client creates a new
        // one, and before each of its transactions the client deletes the newest, as a racing writer of that item would:
        // a transaction holding the newest item's correction is cancelled.
        const fixture = await counterFixture(engine());
        await fixture.client.create("t", "lost");
        const { dynamodb, written } = busyKey(fixture, { deleteNewestBeforeEachTransaction: true });

        // Act
        const result = await reconcileKey("t", { config: fixture.config, dynamodb, fatal: { park: async () => true } });

        // Assess: the first read found lost and busy0, and its transaction was cancelled by busy0's delete. The second
        // read's transaction holds those two only (busy1, deleted meanwhile, is the consumer's) and commits; the third
        // read finds only what the stream has yet to count. Before, every transaction held the newest item and was
        // cancelled: incomplete after 20 rounds.
        assert.deepEqual(result, { key: "t", found: 2, counted: 2, alreadySettled: 0, incomplete: false });
        assert.equal(written(), 3);
        await fixture.emulator.drain();
        assert.deepEqual(await fixture.snapshot("t"), { bestEffort: 2, eventual: 2, live: 2, counted: 2, softDeleted: 0 });
        dynamodb.destroy();
        fixture.close();
    });

    it("answers incomplete when contention outlasts its time, instead of retrying forever", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("t", "r1");
        injectFaults(fixture.consumerDynamo, { rate: 1, kinds: ["conflict"], random: seededRandom(5) });

        const result = await reconcileKey("t", {
            config: fixture.config,
            dynamodb: fixture.consumerDynamo,
            fatal: { park: async () => true },
            timeoutMs: 3_500,
        });

        assert.deepEqual(result, { key: "t", found: 1, counted: 0, alreadySettled: 0, incomplete: true });
        fixture.close();
    });
});
