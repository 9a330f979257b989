/**
 * Tombstones and late put attempts (docs/design/core.md, "Late put attempts"), on DynamoDB Local with the consumer
 * applying the stream: a soft-deleted life's tombstone stays until no put attempt of it can land (its token's time +
 * the longest client deadline + a request's 300 s + twice 60 s of skew), so an attempt still on the wire finds the id taken
 * and writes nothing; the settler removes the tombstone once settled; a create of the same id replaces it meanwhile.
 */
import { strict as assert } from "node:assert";
import { UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { deleteTokenAttribute } from "../runtime/shared/config";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { itemOf, listedAt } from "./support/heal-probes";
import { Traffic } from "./support/heal-traffic";
import { tokenTime } from "../runtime/shared/tokens";
import { TOMBSTONE_SETTLED_MS } from "../runtime/stream/effects";

describe("tombstones and late put attempts (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture;

    afterEach(() => f?.close());

    const tokenOf = async (id: string) => (await itemOf(f, "k", id))?.[f.config.tokenAttribute]?.S;

    /**
     * A create of x whose first put attempt stays on the wire (its caller sees a 500, the client reads the id, finds
     * nothing, and puts again): the attempt, to land later.
     */
    async function createLeavingAttempt(mode: "utilization" | "strict") {
        f = await counterFixture(engine(), { mode });
        const traffic = new Traffic(f.config);
        traffic.watch(f.clientDynamo, "api");
        const creating = traffic.run(() => f.client.create("k", "x"));
        const late = await traffic.step("put", "api", "late");
        await traffic.drain();
        assert.deepEqual(await creating, { created: true });
        return { traffic, late };
    }

    /** Deletes x through `traffic`, and applies the stream. */
    async function deleteThrough(traffic: Traffic): Promise<void> {
        const deleting = traffic.run(() => f.client.delete("k", "x"));
        await traffic.drain();
        assert.deepEqual(await deleting, { deleted: true });
        await f.drain();
    }

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: a young life's tombstone stays until its token's time + 480 s, the consumer lists the key for then, and the settler removes it then`, async () => {
            // Prepare
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "x");
            const made = tokenTime(await tokenOf("x"))!;
            assert.deepEqual(await f.client.delete("k", "x"), { deleted: true });
            await f.drain();
            const tombstone = await itemOf(f, "k", "x");

            // Act
            f.clock.advance(made + TOMBSTONE_SETTLED_MS - 30_000 - Date.now()); // a margin for a slow machine's real seconds
            const before = await f.settle();
            const kept = await itemOf(f, "k", "x");
            const dueAt = await listedAt(f, "k");
            f.clock.advance(made + TOMBSTONE_SETTLED_MS + 1_000 - Date.now());
            const after = await f.settle();

            // Assess
            assert.equal(tombstone?.[f.config.deletedAttribute]?.BOOL, true, "the consumer kept the young life's tombstone");
            assert.deepEqual([before.due, before.removed], [0, 0], "nothing is due before the tombstone may go");
            assert.deepEqual(kept, tombstone);
            assert.equal(dueAt, made + TOMBSTONE_SETTLED_MS, "listed for when the tombstone settles");
            assert.deepEqual([after.due, after.removed], [1, 1]);
            assert.equal(await itemOf(f, "k", "x"), undefined);
            assert.equal(await listedAt(f, "k"), undefined);
            await f.drain();
            const s = await f.snapshot("k");
            assert.deepEqual([s.bestEffort, s.eventual, s.live, s.softDeleted], [0, 0, 0, 0]);
        });

        it(`${mode}: a put attempt still on the wire that lands after the delete finds the id taken by the tombstone and writes nothing`, async () => {
            // Prepare: the create's first put attempt stays on the wire; then the life is deleted and the stream applied
            const { traffic, late } = await createLeavingAttempt(mode);
            await deleteThrough(traffic);
            const tombstone = await itemOf(f, "k", "x");
            const before = await f.snapshot("k");

            // Act
            const landed = await late.landLate!();
            await f.drain();

            // Assess
            assert.equal((landed as Error | undefined)?.name, "ConditionalCheckFailedException");
            assert.deepEqual(
                traffic.log
                    .filter((e) => e.label === "put" || e.label === "read item")
                    .map((e) => `${e.label}${e.fault === undefined ? "" : ` (${e.fault})`}`),
                ["put (late)", "read item", "put", "read item"],
                "the create looked before putting again; the delete read the item",
            );
            assert.deepEqual(await itemOf(f, "k", "x"), tombstone);
            assert.deepEqual(await f.snapshot("k"), before);
            assert.deepEqual([before.bestEffort, before.eventual, before.live, before.softDeleted], [0, 0, 0, 1]);
        });

        it(`${mode}: a tombstone whose token another writer rewrote is dated by its delete token: a late put attempt of its life finds the id taken until the delete settles`, async () => {
            // Prepare: a create's first put attempt stays on the wire; the life is deleted two minutes later; another
            // writer then sets the tombstone's token to one of its own, which carries no time
            const { traffic, late } = await createLeavingAttempt(mode);
            const made = tokenTime(await tokenOf("x"))!;
            f.clock.advance(120_000);
            await deleteThrough(traffic);
            await f.reader.send(
                new UpdateItemCommand({
                    TableName: f.config.tableName,
                    Key: { [f.config.partitionKey]: { S: "k" }, [f.config.sortKey]: { S: "x" } },
                    UpdateExpression: "SET #t = :t",
                    ExpressionAttributeNames: { "#t": f.config.tokenAttribute },
                    ExpressionAttributeValues: { ":t": { S: "another-service-1" } },
                }),
            );
            const tombstone = await itemOf(f, "k", "x");
            const deleted = tokenTime(tombstone?.[deleteTokenAttribute(f.config)]?.S)!;

            // Act
            await f.drain();
            const kept = await itemOf(f, "k", "x");
            const landed = await late.landLate!();
            f.clock.advance(made + TOMBSTONE_SETTLED_MS + 1_000 - Date.now());
            const early = await f.settle();
            const keptByHeal = await itemOf(f, "k", "x");
            const dueAt = await listedAt(f, "k");
            f.clock.advance(deleted + TOMBSTONE_SETTLED_MS + 1_000 - Date.now());
            const settled = await f.settle();
            await f.drain();

            // Assess
            assert.deepEqual(kept, tombstone, "the consumer kept the tombstone");
            assert.equal((landed as Error | undefined)?.name, "ConditionalCheckFailedException");
            assert.deepEqual([early.due, early.removed], [1, 0], "the life's own time has passed, its delete's has not");
            assert.deepEqual(keptByHeal, tombstone);
            assert.equal(dueAt, deleted + TOMBSTONE_SETTLED_MS, "listed again for when the delete settles");
            assert.deepEqual([settled.due, settled.removed], [1, 1]);
            assert.equal(await itemOf(f, "k", "x"), undefined);
            const s = await f.snapshot("k");
            assert.deepEqual([s.bestEffort, s.eventual, s.live, s.softDeleted], [0, 0, 0, 0]);
        });

        it(`${mode}: a create of the same id replaces the tombstone with a new life, counted once`, async () => {
            // Prepare
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "x");
            const first = await tokenOf("x");
            await f.client.delete("k", "x");

            // Act
            const again = await f.client.create("k", "x");
            await f.drain();

            // Assess
            assert.deepEqual(again, { created: true });
            const item = await itemOf(f, "k", "x");
            assert.notEqual(item?.[f.config.tokenAttribute]?.S, first);
            assert.equal(item?.[f.config.deletedAttribute], undefined, "a live item, not a tombstone");
            const s = await f.snapshot("k");
            assert.deepEqual([s.bestEffort, s.eventual, s.live, s.softDeleted], [1, 1, 1, 0]);
        });
    }
});
