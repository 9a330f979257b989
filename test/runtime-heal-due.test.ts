/**
 * Who puts a key on the heal index (runtime/shared/best-effort-marks.ts), on DynamoDB Local through the whole
 * pipeline (client, stream, mapping emulator, consumer): in utilization mode no call that keeps best-effort exact,
 * a call that may have left it off its items once, the consumer for a change the client did not make; in strict
 * mode every best-effort write.
 */
import {
    DeleteItemCommand,
    GetItemCommand,
    PutItemCommand,
    ProvisionedThroughputExceededException,
    UpdateItemCommand,
    type ServiceInputTypes,
    type ServiceOutputTypes,
    type UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { HybridCounterClient } from "../runtime/client/client";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey } from "../runtime/shared/config";
import { healKey, readForHeal, writeHeal } from "../runtime/heal/heal";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { landAgain, recordPuts } from "./support/put-attempts";

/** Whether the key's best-effort item exists, and whether it is on the heal index. */
async function listing(fixture: CounterFixture, key: string): Promise<{ bestEffort: boolean; listed: boolean }> {
    const read = await fixture.reader.send(
        new GetItemCommand({
            TableName: fixture.countersTableName,
            Key: { pk: { S: key }, sk: { S: bestEffortSortKey(fixture.layout) } },
            ConsistentRead: true,
        }),
    );
    return { bestEffort: read.Item !== undefined, listed: read.Item?.[A.healShard] !== undefined && read.Item?.[A.dueAt] !== undefined };
}

describe("who puts a key on the heal index", () => {
    const engine = useEngine();

    it("utilization: creates and deletes that keep best-effort exact leave the key off the index, after the consumer too", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate" });

        // Act
        await fixture.client.create("k", "a");
        await fixture.client.create("k", "b");
        await fixture.client.delete("k", "a");
        await fixture.emulator.drain();

        // Assess
        assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: false });
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 1, eventual: 1, live: 1, counted: 1, softDeleted: 0 });
        fixture.close();
    });

    it("utilization: an increment the call could not send marks the key when the call ends", async () => {
        // Prepare: a client of 2 attempts whose increments are all refused (throttled: certainly not applied; a throttled
        // increment is repeated, so every attempt is).
        const fixture = await counterFixture(engine(), { placement: "separate" });
        let refused = 0;
        const throttleIncrement: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const input = args.input as UpdateItemCommandInput;
            if (context.commandName === "UpdateItemCommand" && input.UpdateExpression?.startsWith("ADD #count")) {
                refused++;
                throw new ProvisionedThroughputExceededException({ message: "throttled", $metadata: {} });
            }
            return next(args);
        };
        fixture.clientDynamo.middlewareStack.add(throttleIncrement, { step: "initialize", name: "throttleIncrement" });
        const client = new HybridCounterClient({
            ...fixture.layout,
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            dynamodb: fixture.clientDynamo,
            attempts: 2,
        });

        // Act
        const answer = await client.create("k", "a");

        // Assess: created, best-effort one low (utilization's safe side), and the key due for a heal.
        assert.deepEqual(answer, { created: true });
        assert.equal(refused, 2);
        assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: true });
        assert.deepEqual(await fixture.client.count("k"), { bestEffort: 0, eventual: 0, value: 0 });
        fixture.close();
    });

    it("utilization: the consumer marks a key whose live item another writer deleted or replaced", async () => {
        // Prepare: two keys with an exact best-effort of 1 each, off the index.
        const fixture = await counterFixture(engine(), { placement: "separate" });
        await fixture.client.create("deleted", "a");
        await fixture.client.create("replaced", "a");
        await fixture.emulator.drain();
        assert.deepEqual(await listing(fixture, "deleted"), { bestEffort: true, listed: false });

        // Act: another writer hard-deletes one item (TTL would do the same) and overwrites the other without the token.
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "deleted" }, sk: { S: "a" } } }));
        await fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: { pk: { S: "replaced" }, sk: { S: "a" } } }));
        await fixture.emulator.drain();

        // Assess
        assert.deepEqual(await listing(fixture, "deleted"), { bestEffort: true, listed: true });
        assert.deepEqual(await listing(fixture, "replaced"), { bestEffort: true, listed: true });
        fixture.close();
    });

    it("the consumer does not create a best-effort item for a key only other writers write", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate" });
        await fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: { pk: { S: "other" }, sk: { S: "a" } } }));
        await fixture.emulator.drain();

        // Act
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "other" }, sk: { S: "a" } } }));
        await fixture.emulator.drain();

        // Assess: the removal is counted, and there is no best-effort to heal.
        assert.deepEqual(await listing(fixture, "other"), { bestEffort: false, listed: false });
        assert.deepEqual(await fixture.snapshot("other"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        fixture.close();
    });

    for (const clientDeletes of [false, true]) {
        const when = clientDeletes ? "the client deleted before the consumer read it" : "it removes";
        it(`utilization: the consumer marks the key of a late put attempt ${when}`, async () => {
            // Prepare: x created, deleted and removed; the create's first attempt is recorded as sent.
            const fixture = await counterFixture(engine(), { placement: "separate" });
            const puts = recordPuts(fixture.clientDynamo);
            await fixture.client.create("k", "x");
            await fixture.client.delete("k", "x");
            await fixture.emulator.drain();
            assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: false });

            // Act: the attempt lands again (and the client deletes it: a second decrement for the life); the consumer reads.
            await landAgain(fixture.reader, puts[0]!);
            if (clientDeletes) {
                assert.deepEqual(await fixture.client.delete("k", "x"), { deleted: true });
            }
            await fixture.emulator.drain();

            // Assess: no item, best-effort as the deletes left it, and the key due for the heal that restores it.
            assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: true });
            assert.deepEqual(await fixture.snapshot("k"), {
                bestEffort: clientDeletes ? -1 : 0,
                eventual: 0,
                live: 0,
                counted: 0,
                softDeleted: 0,
            });
            fixture.close();
        });
    }

    it("a mark that lands between a heal's read and its write makes the heal lose its race, and stays", async () => {
        // Prepare: a counted client item; a heal reads the key (its truth counts the item) and waits.
        const fixture = await counterFixture(engine(), { placement: "separate" });
        await fixture.client.create("k", "a");
        await fixture.emulator.drain();
        const options = {
            config: fixture.config,
            dynamodb: fixture.reader,
            mode: "utilization" as const,
            quietWindowMs: 1_000,
            now: () => Date.now() + 60_000,
        };
        const read = await readForHeal("k", options);
        assert.equal(read.plan.action, "heal");

        // Act: another writer deletes the item and the consumer marks the key; then the heal writes.
        await fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "k" }, sk: { S: "a" } } }));
        await fixture.emulator.drain();
        const written = await writeHeal(read, options);

        // Assess: the heal changed nothing, and the key is still due (a later heal sets best-effort to 0).
        assert.equal(written.outcome, "raced");
        assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: true });
        assert.equal((await healKey("k", options)).after, 0);
        fixture.close();
    });

    it("utilization: a delete of a client item another writer moved out of the selection marks the key", async () => {
        // Prepare: x created under an attribute selection; another writer archives it; the consumer marks the key and a
        // heal takes x's unit out of best-effort (0).
        const fixture = await counterFixture(engine(), {
            placement: "separate",
            layout: { selection: { kind: "attribute", name: "type", value: "order" } },
        });
        await fixture.client.create("k", "x");
        await fixture.reader.send(
            new UpdateItemCommand({
                TableName: fixture.tableName,
                Key: { pk: { S: "k" }, sk: { S: "x" } },
                UpdateExpression: "SET #type = :archived",
                ExpressionAttributeNames: { "#type": "type" },
                ExpressionAttributeValues: { ":archived": { S: "archived" } },
            }),
        );
        await fixture.emulator.drain();
        const options = {
            config: fixture.config,
            dynamodb: fixture.reader,
            mode: "utilization" as const,
            quietWindowMs: 1_000,
            now: () => Date.now() + 60_000,
        };
        assert.equal((await healKey("k", options)).after, 0);
        assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: false });

        // Act: the client deletes x (its decrement is for a unit the heal already took).
        assert.deepEqual(await fixture.client.delete("k", "x"), { deleted: true });

        // Assess: best-effort is one below the items, and the key is due for the heal that restores it.
        assert.deepEqual(await fixture.client.count("k"), { bestEffort: -1, eventual: 0, value: 0 });
        assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: true });
        assert.equal((await healKey("k", options)).after, 0);
        fixture.close();
    });

    it("strict: a reservation puts the key on the index (a call that dies after it holds a slot)", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate", mode: "strict" });

        // Act
        const answer = await fixture.client.tryCreate("k", "a", 5);

        // Assess
        assert.equal(answer.created, true);
        assert.deepEqual(await listing(fixture, "k"), { bestEffort: true, listed: true });
        fixture.close();
    });
});
