/**
 * One strict bound over a sharded key, whatever moves units between its shards (runtime/shards/reservation.ts), on
 * DynamoDB Local: a key adopted at its limit by a strict backfill, a client item whose token another writer rewrote
 * (its home moves) then healed, and a lowered limit, sharded and not. Each fix is kept as a mutant (middleware that
 * reverses it on one party's requests) that the same test must reject.
 */
import { QueryCommand, UpdateItemCommand, type DynamoDBClient, type TransactWriteItemsCommandInput } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { SEEDED_SELECTION, writeItems } from "../local/harness/seed";
import { backfill } from "../runtime/backfill/backfill";
import { healKey } from "../runtime/heal/heal";
import type { ItemSelection } from "../runtime/shared/config";
import { homeShard, lifeShard, tokenHomedIn } from "../runtime/shards/layout";
import { spreadQuotas } from "../runtime/shards/quotas";
import { fromBeforeClients } from "../runtime/backfill/plan";
import { newToken } from "../runtime/shared/tokens";
import { backfillKeepsQuotas, healKeepsQuotas, quotaOfAnyLimit, rewrite } from "./fuzz/mutants";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

/** Mutant: a strict backfill takes every item carrying a token for a client life whose reservation holds its unit. */
function backfillTrustsEveryToken(dynamodb: DynamoDBClient): void {
    rewrite<TransactWriteItemsCommandInput>(dynamodb, "TransactWriteItemsCommand", (input) => {
        const markers = input.TransactItems!.filter((action) => action.Update?.ExpressionAttributeNames?.["#life"] !== undefined);
        let trusted = 0;
        for (const marker of markers) {
            const update = marker.Update!;
            if (update.ExpressionAttributeNames!["#be"] !== undefined) {
                trusted++;
                update.UpdateExpression = update.UpdateExpression!.replace(", #be = :epoch", "");
                delete update.ExpressionAttributeNames!["#be"];
                delete update.ExpressionAttributeValues![":epoch"];
            }
        }
        const bestEffort = input.TransactItems!.find((action) => action.Update?.UpdateExpression?.startsWith("ADD #count :n, #version"));
        const n = bestEffort?.Update?.ExpressionAttributeValues?.[":n"];
        if (n !== undefined) {
            n.N = String(Number(n.N) - trusted);
        }
    });
}

/** The key's live items, with their tokens (undefined: none). */
async function liveItems(fixture: CounterFixture, key: string): Promise<Array<{ id: string; token?: string }>> {
    const page = await fixture.reader.send(
        new QueryCommand({
            TableName: fixture.tableName,
            KeyConditionExpression: "pk = :k",
            ExpressionAttributeValues: { ":k": { S: key } },
            ConsistentRead: true,
        }),
    );
    return (page.Items ?? [])
        .filter((item) => item.deleted?.BOOL !== true)
        .map((item) => ({ id: item.sk!.S!, ...(item.counter_token?.S === undefined ? {} : { token: item.counter_token.S }) }));
}

/** Runs `calls` tryCreates of fresh ids under `limit`, one after another; resolves with how many created. */
async function creates(fixture: CounterFixture, key: string, prefix: string, calls: number, limit: number): Promise<number> {
    let created = 0;
    for (let i = 0; i < calls; i++) {
        created += (await fixture.client.tryCreate(key, `${prefix}${i}`, limit)).created ? 1 : 0;
    }
    return created;
}

describe("stored quotas and items from before the counter (pure)", () => {
    it("spreads the room over the shards above their counts, and arms nothing when the counts pass the limit", () => {
        // Act / Assess
        assert.deepEqual(spreadQuotas([0, 1, 0], 7), [2, 3, 2]);
        assert.deepEqual(spreadQuotas([5, 0, 0, 1], 8), [6, 1, 0, 1]);
        assert.deepEqual(spreadQuotas([2, 2, 2], 6), [2, 2, 2]);
        assert.equal(spreadQuotas([4, 0, 3], 6), undefined);
        for (const counts of [
            [0, 0, 0],
            [9, 0, 1],
            [1, 1, 1, 1, 1],
        ]) {
            const quotas = spreadQuotas(counts, 11)!;
            assert.equal(
                quotas.reduce((a, b) => a + b, 0),
                11,
            );
            assert.ok(quotas.every((quota, s) => quota >= counts[s]!));
        }
    });

    it("an item from before the counter: a token no client made, or a client token made before the clients began", () => {
        // Prepare
        const since = 1_800_000_000_000;
        const skew = 60_000;

        // Act / Assess
        assert.equal(fromBeforeClients("seed-1", undefined), true);
        assert.equal(fromBeforeClients(newToken(since - 1), undefined), false);
        assert.equal(fromBeforeClients(newToken(since - 1), since), true);
        assert.equal(fromBeforeClients(newToken(since + skew - 1), since), true);
        assert.equal(fromBeforeClients(newToken(since + skew), since), false);
    });
});

describe("one strict bound over a sharded key (DynamoDB Local)", function () {
    const engine = useEngine();

    /**
     * A key whose API already runs (one client item), adopted at its limit: `seeded` items from before the counter, then
     * a strict backfill. Resolves with the creates `tryCreate(limit)` then admits out of 30, and the live items.
     */
    async function adoptedAtLimit(
        shards: number,
        options: {
            selection: ItemSelection;
            seed: (i: number) => { id: string; token?: string };
            mutate?: (dynamodb: DynamoDBClient) => void;
        },
    ): Promise<{ created: number; live: number }> {
        const limit = 100;
        const fixture = await counterFixture(engine(), {
            placement: "separate",
            counterShards: shards,
            mode: "strict",
            layout: { selection: options.selection },
        });
        const id = (name: string) => (options.selection.kind === "sortKeyPrefix" ? `${options.selection.prefix}${name}` : name);
        // The API runs before the backfill: its first create arms a sharded key under the limit.
        assert.equal((await fixture.client.tryCreate("tenant", id("first"), limit)).created, true);
        await writeItems(
            fixture.reader,
            fixture.tableName,
            Array.from({ length: limit }, (_, i) => {
                const seeded = options.seed(i);
                return {
                    pk: { S: "tenant" },
                    sk: { S: seeded.id },
                    ...(seeded.token === undefined ? {} : { counter_token: { S: seeded.token } }),
                };
            }),
        );
        const dynamodb = engine().dynamodb();
        options.mutate?.(dynamodb);
        const report = await backfill({
            config: fixture.config,
            dynamodb,
            mode: "strict",
            runId: "adopt",
            readUnitsPerSecond: Infinity,
            writeUnitsPerSecond: Infinity,
        });
        assert.equal(report.total.counted, limit + 1); // the client item too: no consumer ran
        const created = await creates(fixture, "tenant", id("after-"), 30, limit);
        const live = (await liveItems(fixture, "tenant")).length;
        fixture.close();
        dynamodb.destroy();
        return { created, live };
    }

    const prefixed = { selection: SEEDED_SELECTION, seed: (i: number) => ({ id: `order#seed-${i}` }) };

    it("a sharded key adopted at its limit refuses at once, as an unsharded one does; a backfill that keeps the quotas is rejected", async () => {
        // Prepare / Act: 100 items from before the counter (no token, selected by their sort key) and one client item
        const unsharded = await adoptedAtLimit(1, prefixed);
        const sharded = await adoptedAtLimit(16, prefixed);
        const mutant = await adoptedAtLimit(16, { ...prefixed, mutate: backfillKeepsQuotas });

        // Assess: over the limit already (101 live), every tryCreate refuses; the mutant's uneven shards admit
        assert.deepEqual(unsharded, { created: 0, live: 101 });
        assert.deepEqual(sharded, { created: 0, live: 101 });
        assert.ok(mutant.created > 0, `the backfill without its disarm let ${mutant.created} creates pass`);
    });

    /** Under the client selection, items from before the counter that carry a token no client made (another program's). */
    const foreignTokens = {
        selection: { kind: "client" } as ItemSelection,
        seed: (i: number) => ({ id: `seed-${i}`, token: `seed-${i}` }),
    };

    it("items from before the counter that carry a token no client made take a unit: adoption keeps the limit, sharded and not", async () => {
        // Prepare / Act
        const unsharded = await adoptedAtLimit(1, foreignTokens);
        const sharded = await adoptedAtLimit(4, foreignTokens);
        const mutant = await adoptedAtLimit(1, { ...foreignTokens, mutate: backfillTrustsEveryToken });

        // Assess
        assert.deepEqual(unsharded, { created: 0, live: 101 });
        assert.deepEqual(sharded, { created: 0, live: 101 });
        assert.equal(mutant.created, 30, "the backfill that trusts every token leaves best-effort at the client's items alone");
    });

    it("a client delete of an adopted item carrying a token no client made holds its unit until a heal, never giving it back twice", async () => {
        // Prepare: 5 items from before the counter with foreign tokens, backfilled, under a limit of 5
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: 4, mode: "strict" });
        await writeItems(
            fixture.reader,
            fixture.tableName,
            Array.from({ length: 5 }, (_, i) => ({ pk: { S: "k" }, sk: { S: `seed-${i}` }, counter_token: { S: `seed-${i}` } })),
        );
        await backfill({
            config: fixture.config,
            dynamodb: fixture.reader,
            mode: "strict",
            runId: "adopt",
            readUnitsPerSecond: Infinity,
            writeUnitsPerSecond: Infinity,
        });

        // Act: two deletes (one of them twice), creates under the limit, a heal, creates again
        assert.deepEqual(await fixture.client.delete("k", "seed-0"), { deleted: true });
        assert.deepEqual(await fixture.client.delete("k", "seed-1"), { deleted: true });
        assert.deepEqual(await fixture.client.delete("k", "seed-1"), { deleted: false });
        // A token no client made has no age, so no delete can prove it gives the unit back once
        // (runtime/shared/strict-ledger.ts): the unit is held, and the heal gives it back.
        const beforeHeal = await creates(fixture, "k", "early-", 2, 5);
        const later = Date.now() + 3_600_000;
        await healKey("k", { config: fixture.config, dynamodb: fixture.reader, mode: "strict", quietWindowMs: 600_000, now: () => later });
        const afterHeal = await creates(fixture, "k", "new-", 4, 5);

        // Assess: nothing admitted while the units were held; the heal freed exactly the two slots
        assert.equal(beforeHeal, 0);
        assert.equal(afterHeal, 2);
        const live = (await liveItems(fixture, "k")).length;
        assert.equal(live, 5);
        assert.ok((await fixture.client.count("k")).bestEffort >= live);
        fixture.close();
    });

    /**
     * 3 shards, limit 3, three client items; another writer rewrites one item's token (its home moves to another shard),
     * the client deletes it and creates a new one, a heal sets every shard to the items homed there (the new home above
     * its quota), then three more tryCreates. Resolves with what those created, and the live client items.
     */
    async function tokenRewrittenThenHealed(mutate?: (dynamodb: DynamoDBClient) => void): Promise<{ created: number; live: number }> {
        const shards = 3;
        const limit = 3;
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: shards, mode: "strict" });
        assert.equal(await creates(fixture, "k", "a", limit, limit), limit);
        const [moved] = await liveItems(fixture, "k");
        const from = lifeShard(moved!.token!, shards);
        const to = (from + 1) % shards;
        // Another writer rewrites the item's token: its home moves from `from` to `to`.
        await fixture.reader.send(
            new UpdateItemCommand({
                TableName: fixture.tableName,
                Key: { pk: { S: "k" }, sk: { S: moved!.id } },
                UpdateExpression: "SET counter_token = :token",
                ExpressionAttributeValues: { ":token": { S: tokenHomedIn(to, shards) } },
            }),
        );
        assert.deepEqual(await fixture.client.delete("k", moved!.id), { deleted: true });
        assert.equal(await creates(fixture, "k", "b", 1, limit), 1);
        const healer = engine().dynamodb();
        mutate?.(healer);
        const heal = await healKey("k", {
            config: fixture.config,
            dynamodb: healer,
            mode: "strict",
            quietWindowMs: 60_000,
            now: () => Date.now() + 120_000,
        });
        assert.equal(heal.outcome, "healed");
        const created = await creates(fixture, "k", "c", 3, limit);
        const live = (await liveItems(fixture, "k")).filter((item) => item.token !== undefined).length;
        fixture.close();
        healer.destroy();
        return { created, live };
    }

    it("a token another writer rewrote, then a heal: the key stays within its limit; a heal that keeps the quotas is rejected", async () => {
        // Prepare / Act
        const sound = await tokenRewrittenThenHealed();
        const mutant = await tokenRewrittenThenHealed(healKeepsQuotas);

        // Assess
        assert.deepEqual(sound, { created: 0, live: 3 });
        assert.ok(mutant.live > 3, `the heal without its disarm kept the key at ${mutant.live} live client items`);
    });

    /**
     * Under `limit` 6, six client items; every item homed in the fullest shard is deleted, so that shard is empty while
     * the key holds 4 or fewer; then three tryCreates under a lowered limit of 3. Resolves with the key's live items
     * before and what those calls created.
     */
    async function lowered(shards: number, mutate?: (dynamodb: DynamoDBClient) => void): Promise<{ before: number; created: number }> {
        const fixture = await counterFixture(engine(), {
            placement: "separate",
            ...(shards === 1 ? {} : { counterShards: shards }),
            mode: "strict",
        });
        mutate?.(fixture.clientDynamo);
        assert.equal(await creates(fixture, "k", "a", 6, 6), 6);
        const items = await liveItems(fixture, "k");
        const byShard = new Map<number, string[]>();
        for (const item of items) {
            const home = homeShard(item.id, item.token, shards);
            byShard.set(home, [...(byShard.get(home) ?? []), item.id]);
        }
        const fullest = [...byShard.values()].sort((a, b) => b.length - a.length)[0]!;
        // At least 2 go (unsharded: all six are in shard 0; keep 4 then).
        for (const id of fullest.slice(0, shards === 1 ? 2 : fullest.length)) {
            assert.deepEqual(await fixture.client.delete("k", id), { deleted: true });
        }
        const before = (await liveItems(fixture, "k")).length;
        const created = await creates(fixture, "k", "b", 3, 3);
        fixture.close();
        return { before, created };
    }

    it("a lowered limit holds at once, sharded or not; a shard that admits on a quota stored for another limit is rejected", async () => {
        // Prepare / Act
        const unsharded = await lowered(1);
        const sharded = await lowered(3);
        const mutant = await lowered(3, quotaOfAnyLimit);

        // Assess: at or above the lowered limit, nothing is created
        assert.deepEqual(unsharded, { before: 4, created: 0 });
        assert.ok(sharded.before >= 3, `${sharded.before} live before`);
        assert.equal(sharded.created, 0);
        assert.ok(mutant.created > 0, "the mutant admitted nothing");
    });

    it("a lowered limit admits again once the key is below it, and a raised one rearms the quotas", async () => {
        // Prepare: 3 shards, six items under 6
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: 3, mode: "strict" });
        assert.equal(await creates(fixture, "k", "a", 6, 6), 6);
        const items = await liveItems(fixture, "k");

        // Act: four deletes (2 left), creates under 3; then creates under 8
        for (const item of items.slice(0, 4)) {
            await fixture.client.delete("k", item.id);
        }
        const underThree = await creates(fixture, "k", "b", 3, 3);
        const underEight = await creates(fixture, "k", "c", 8, 8);

        // Assess
        assert.equal(underThree, 1);
        assert.equal(underEight, 5);
        assert.equal((await liveItems(fixture, "k")).length, 8);
        assert.equal((await fixture.client.count("k")).bestEffort, 8);
        fixture.close();
    });
});
