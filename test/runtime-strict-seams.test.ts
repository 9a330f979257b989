/**
 * Strict mode where a backfill, the heal, another writer and a client delete meet (DynamoDB Local, no faults).
 * Each case is a reproduction of a seam where the bound `live client items <= best-effort <= limit` broke.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfill } from "../runtime/backfill/backfill";
import { HybridCounterClient } from "../runtime/client/client";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey } from "../runtime/shared/config";
import { healKey } from "../runtime/heal/heal";
import type { ItemSelection } from "../runtime/shared/selection";
import { reconcileKey } from "../runtime/heal/reconcile";
import { LEDGER_CLOCK_SKEW_MS, reservedInEpoch } from "../runtime/shared/strict-ledger";
import { newToken } from "../runtime/shared/tokens";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

const WINDOW_MS = 600_000;
/** Two tryCreate calls at a limit of 1 on a key that holds no unit: the first creates, the second is refused. */
const ONE_CREATE_AT_LIMIT_ONE = [
    [true, undefined],
    [false, "limit"],
];

async function twoCreatesAtLimitOne(client: HybridCounterClient, first: string, second: string) {
    const outcomes = [await client.tryCreate("k", first, 1), await client.tryCreate("k", second, 1)];
    return outcomes.map((c) => [c.created, c.reason]);
}

describe("strict mode where backfill, heal, other writers and deletes meet (DynamoDB Local)", function () {
    const engine = useEngine();

    async function strictFixture(
        selection: ItemSelection = { kind: "sortKeyPrefix", prefix: "o" },
    ): Promise<{ fixture: CounterFixture; client: HybridCounterClient }> {
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate", layout: { selection } });
        const client = new HybridCounterClient({
            ...fixture.layout,
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            dynamodb: fixture.clientDynamo,
            mode: "strict",
        });
        return { fixture, client };
    }

    const otherPut = (fixture: CounterFixture, id: string) =>
        fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: { pk: { S: "k" }, sk: { S: id } } }));
    const otherDelete = (fixture: CounterFixture, id: string) =>
        fixture.reader.send(new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "k" }, sk: { S: id } } }));
    /** A heal whose clock reads the window past now: every write of this test is older than it. */
    const healLater = (fixture: CounterFixture) =>
        healKey("k", {
            config: fixture.config,
            dynamodb: fixture.reader,
            mode: "strict",
            quietWindowMs: WINDOW_MS,
            now: () => Date.now() + WINDOW_MS + 1,
        });

    it("a strict backfill's units heal once their items are gone: its best-effort write lists the key on the heal index", async () => {
        // Prepare: 5 items from before the counter, backfilled in strict mode.
        const { fixture, client } = await strictFixture();
        const ids = ["o1", "o2", "o3", "o4", "o5"];
        for (const id of ids) {
            await otherPut(fixture, id);
        }
        const report = await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });
        const bestEffort = await fixture.reader.send(
            new GetItemCommand({
                TableName: fixture.countersTableName,
                Key: { pk: { S: "k" }, sk: { S: bestEffortSortKey(fixture.config) } },
                ConsistentRead: true,
            }),
        );

        // Act: another writer (or TTL) deletes them all; the settler heals the key once it is quiet.
        for (const id of ids) {
            await otherDelete(fixture, id);
        }
        const healed = await healLater(fixture);
        const created = await client.tryCreate("k", "o9", 5);

        // Assess
        assert.equal(report.total.counted, 5);
        assert.equal(bestEffort.Item?.count?.N, "5");
        assert.ok(bestEffort.Item?.[A.writtenAt]?.N !== undefined, "the backfill's write carries its time");
        assert.ok(bestEffort.Item?.[A.healShard]?.S !== undefined, "and puts the key on the heal index");
        assert.deepEqual([healed.outcome, healed.before, healed.after], ["healed", 5, 0]);
        assert.equal(created.created, true, "the limit counts the one live item, not the 5 gone ones");
        fixture.close();
    });

    it("a heal that absorbs a backfilled unit leaves the flag no power: a later life's delete releases nothing", async () => {
        // Prepare: another writer's X, counted into best-effort by a strict backfill (its marker flagged).
        const { fixture, client } = await strictFixture();
        await otherPut(fixture, "oX");
        await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });

        // Act: another writer deletes X; the heal absorbs its unit; another writer puts X again; the client deletes it.
        await otherDelete(fixture, "oX");
        const healed = await healLater(fixture);
        await otherPut(fixture, "oX");
        const deleted = await client.delete("k", "oX");
        const afterDelete = (await client.count("k")).bestEffort;
        const creates = await twoCreatesAtLimitOne(client, "o1", "o2");

        // Assess: the unit was given back once (by the heal), so the limit of 1 admits one create.
        assert.deepEqual([healed.outcome, healed.after], ["healed", 0]);
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(afterDelete, 0, "the delete of a later life releases nothing");
        assert.deepEqual(creates, ONE_CREATE_AT_LIMIT_ONE);
        fixture.close();
    });

    it("an item another writer moves out of an attribute selection: after the heal absorbs its unit, the client's delete releases nothing", async () => {
        // Prepare: strict, counting items whose status is active; the client creates x at a limit of 1.
        const { fixture, client } = await strictFixture({ kind: "attribute", name: "status", value: "active" });
        assert.equal((await client.tryCreate("k", "x", 1)).created, true);

        // Act: another writer archives x; the heal absorbs its unit; the client deletes x, then creates twice at limit 1.
        await fixture.reader.send(
            new UpdateItemCommand({
                TableName: fixture.tableName,
                Key: { pk: { S: "k" }, sk: { S: "x" } },
                UpdateExpression: "SET #status = :archived",
                ExpressionAttributeNames: { "#status": "status" },
                ExpressionAttributeValues: { ":archived": { S: "archived" } },
            }),
        );
        const healed = await healLater(fixture);
        const deleted = await client.delete("k", "x");
        const afterDelete = (await client.count("k")).bestEffort;
        const creates = await twoCreatesAtLimitOne(client, "y", "z");

        // Assess: x's unit was given back once, by the heal; the limit of 1 admits one create.
        assert.deepEqual([healed.outcome, healed.after], ["healed", 0]);
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(afterDelete, 0, "the delete releases nothing");
        assert.deepEqual(creates, ONE_CREATE_AT_LIMIT_ONE);
        fixture.close();
    });

    it("after a heal that lowered the count, a delete of an item made before it holds its slot until the next heal", async () => {
        // Prepare: a held slot (a reservation whose item another writer removed), healed away.
        const { fixture, client } = await strictFixture();
        assert.equal((await client.tryCreate("k", "o1", 3)).created, true);
        assert.equal((await client.tryCreate("k", "o2", 3)).created, true);
        await otherDelete(fixture, "o2");
        const healed = await healLater(fixture);

        // Act: the client deletes o1, made before the heal; a later heal runs.
        const deleted = await client.delete("k", "o1");
        const afterDelete = (await client.count("k")).bestEffort;
        const healedAgain = await healLater(fixture);

        // Assess
        assert.deepEqual([healed.before, healed.after], [2, 1]);
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(afterDelete, 1, "o1's unit is part of the heal's truth: held, not released");
        assert.deepEqual([healedAgain.outcome, healedAgain.after], ["healed", 0]);
        fixture.close();
    });

    it("a reservation is a unit of the current epoch in epoch 0, or when its call began past the epoch's opening by more than the skew", () => {
        const at = (ms: number) => newToken(ms);
        const opened = 1_700_000_000_000;
        assert.equal(reservedInEpoch(at(opened - 1_000), { epoch: 0, openedAt: 0 }), true);
        assert.equal(reservedInEpoch(at(opened + LEDGER_CLOCK_SKEW_MS + 1), { epoch: 3, openedAt: opened }), true);
        assert.equal(reservedInEpoch(at(opened + LEDGER_CLOCK_SKEW_MS), { epoch: 3, openedAt: opened }), false);
        assert.equal(reservedInEpoch(at(opened - 1_000), { epoch: 3, openedAt: opened }), false);
        assert.equal(reservedInEpoch("not-a-uuidv7", { epoch: 3, openedAt: opened }), false);
    });

    it("a strict backfill that meets items the settler's reconciliation counted first still gives them their units", async () => {
        // Prepare: a tenant adopted with 4 items, at a limit of 4; the settler's audit reconciles the key first.
        const { fixture, client } = await strictFixture();
        for (const id of ["o1", "o2", "o3", "o4"]) {
            await otherPut(fixture, id);
        }
        const reconciled = await reconcileKey("k", { config: fixture.config, dynamodb: fixture.reader, fatal: { park: async () => true } });

        // Act
        const report = await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });
        const created = await client.tryCreate("k", "o5", 4);
        const observed = await fixture.observe("k");

        // Assess: best-effort holds the 4 items, so the limit refuses a fifth; eventual counted each once.
        assert.equal(reconciled.counted, 4);
        assert.equal(report.total.counted, 0);
        assert.deepEqual([created.created, created.reason], [false, "limit"]);
        assert.deepEqual([observed.bestEffort, observed.eventual], [4, 4]);
        fixture.close();
    });

    it("a strict backfill adds no unit for an item carrying the client's token: its reserve already holds one", async () => {
        // Prepare: the client creates 3 items; the consumer has not counted them yet.
        const { fixture, client } = await strictFixture();
        for (const id of ["o1", "o2", "o3"]) {
            assert.equal((await client.tryCreate("k", id, 10)).created, true);
        }

        // Act: a strict backfill meets them first.
        const report = await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "strict", segments: 1 });
        const afterBackfill = (await client.count("k")).bestEffort;
        await fixture.emulator.drain();
        const observed = await fixture.observe("k");

        // Assess: each item holds one unit, and the eventual count is exact.
        assert.equal(report.total.counted, 3);
        assert.equal(afterBackfill, 3);
        assert.equal(observed.bestEffort, 3);
        assert.equal(observed.eventual, 3);
        fixture.close();
    });
});
