/**
 * Counting per region on DynamoDB Local (runtime/regions/ownership.ts, docs/design/global-tables.md): each region's
 * replicas are tables of their own and replication copies writes between them when the test says, last-writer-wins
 * (support/regions-replicas.ts). A life belongs to the region whose client stamped it, else the home; each region
 * counts only its own, into counter items only it writes, and count() sums every region that has counter items.
 */
import { strict as assert } from "node:assert";
import { GetItemCommand, QueryCommand } from "@aws-sdk/client-dynamodb";
import { TOMBSTONE_SETTLED_MS } from "../runtime/stream/effects";
import { HEAL_DUE } from "../runtime/heal/index-marks";
import { streamShardKey, usageKey } from "../runtime/shared/keys";
import { dayOf } from "../runtime/limits/usage";
import type { CounterMode } from "../runtime/shared/config";
import { useEngine } from "./support/engine";
import { Replicas, type Item } from "./support/regions-replicas";

const HOME = "us-east-1";
const MEMBER = "eu-west-1";
const THIRD = "ap-southeast-2";
const DAY = 86_400_000;
/** Two ledger periods and a second: every life made before is old. */
const TWO_PERIODS = 2 * 600_000 + 1_000;

/** The ids of `items` with what the counting reads of them: stamp, and whether soft-deleted. */
function lives(items: readonly Item[]): string[] {
    return items.map((i) => `${i["sk"]!.S}@${i["hc_region"]?.S ?? "-"}${i["deleted"]?.BOOL === true ? " deleted" : ""}`).sort();
}

describe("counting per region with replication (DynamoDB Local, one table per replica)", function () {
    const engine = useEngine();
    let r: Replicas | undefined;
    afterEach(() => r?.close());

    it("counts each life once, in its owner, while writes replicate late, and last-writer-wins between two regions creating one id ends the loser's life in its owner's count", async () => {
        // Prepare: both regions create lives before anything replicates, one id ("x") in each.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER] });
        const home = r.region(HOME);
        const member = r.region(MEMBER);
        for (const id of ["a0", "a1", "a2", "x"]) {
            assert.deepEqual(await home.client.create("k", id), { created: true });
        }
        for (const id of ["b0", "b1", "x"]) {
            assert.deepEqual(await member.client.create("k", id), { created: true });
        }
        assert.deepEqual(await member.client.delete("k", "b0"), { deleted: true });
        await r.consume(HOME);
        await r.consume(MEMBER);

        // Act: replication, later than every write; the member's "x" was written last and wins in both replicas.
        await r.quiesce();

        // Assess: one set of items in both replicas; each region's eventual is the live lives it owns.
        const items = await r.items(HOME, "k");
        // (b0's tombstone is young: it stays until no put attempt of its life can land, for the member's settler.)
        assert.deepEqual(lives(items), [
            "a0@us-east-1",
            "a1@us-east-1",
            "a2@us-east-1",
            "b0@eu-west-1 deleted",
            "b1@eu-west-1",
            "x@eu-west-1",
        ]);
        assert.deepEqual(lives(await r.items(MEMBER, "k")), lives(items));
        for (const replica of [HOME, MEMBER]) {
            assert.equal((await r.counters(replica, "k", HOME)).eventual, 3, `the home's eventual in ${replica}'s replica`);
            assert.equal((await r.counters(replica, "k", MEMBER)).eventual, 2, `the member's eventual in ${replica}'s replica`);
        }
        // The home's best-effort still holds the unit of its "x", which another region's write ended: the key is listed.
        const homeCounters = await r.counters(HOME, "k", HOME);
        assert.equal(homeCounters.bestEffort, 4);
        assert.notEqual(homeCounters.eventualItem?.[HEAL_DUE], undefined, "the home lists the key for its settler");
        assert.equal((await r.counters(MEMBER, "k", MEMBER)).bestEffort, 2);
        assert.deepEqual(await home.client.count("k"), {
            bestEffort: 6,
            eventual: 5,
            value: 4 + 2,
            regions: [
                { region: MEMBER, bestEffort: 2, eventual: 2 },
                { region: HOME, bestEffort: 4, eventual: 3 },
            ],
        });

        // Act: two periods later the home's settler heals the key from its replica.
        r.advance(TWO_PERIODS);
        await r.settle(HOME);
        await r.settle(MEMBER);
        await r.quiesce();

        // Assess: both regions read the same, exact counts; the member's settler removed b0's tombstone.
        assert.deepEqual(lives(await r.items(HOME, "k")), ["a0@us-east-1", "a1@us-east-1", "a2@us-east-1", "b1@eu-west-1", "x@eu-west-1"]);
        for (const region of [home, member]) {
            const value = await region.client.count("k");
            assert.deepEqual([value.bestEffort, value.eventual, value.value], [5, 5, 5], region.name);
        }
        assert.equal((await r.counters(HOME, "k", HOME)).eventualItem?.[HEAL_DUE], undefined, "healed: no longer listed");
    });

    for (const mode of ["utilization", "strict"] as CounterMode[]) {
        it(`${mode}: a delete by another region's client leaves the owner's best-effort holding the unit until the owner's heal, and the owner lists the key`, async () => {
            // Prepare: a life of the home, replicated.
            r = await Replicas.create(engine(), { regions: [HOME, MEMBER], mode });
            await r.region(HOME).client.create("k", "a0");
            await r.region(HOME).client.create("k", "a1");
            await r.quiesce();

            // Act: the member's client deletes it; the soft delete replicates to the owner.
            assert.deepEqual(await r.region(MEMBER).client.delete("k", "a0"), { deleted: true });
            await r.quiesce();

            // Assess: the owner's eventual dropped it; its best-effort kept the unit; the key is listed in the owner.
            const soft = (await r.items(HOME, "k")).find((i) => i["sk"]!.S === "a0");
            assert.equal(soft?.["deleted"]?.BOOL, true, "the young tombstone stays for the settler");
            assert.equal(soft?.["hc_deleted_in"]?.S, MEMBER);
            const owner = await r.counters(HOME, "k", HOME);
            assert.deepEqual([owner.bestEffort, owner.eventual], [2, 1]);
            assert.notEqual(owner.eventualItem?.[HEAL_DUE], undefined);
            const deleter = await r.counters(HOME, "k", MEMBER);
            assert.deepEqual([deleter.bestEffort, deleter.eventual], [0, 0], "the deleting region counts nothing of another's life");
            assert.equal((await r.counters(MEMBER, "k", MEMBER)).bestEffort, 0, "the deleting region moved no unit");
            if (mode === "strict") {
                assert.deepEqual(
                    await r.region(HOME).client.tryCreate("k", "a2", 4),
                    { created: false, count: 2, reason: "limit" },
                    "the held slot refuses (the home's share of 4 is 2)",
                );
            }

            // Act: two periods later the owner's settler heals the key.
            r.advance(TWO_PERIODS);
            await r.settle(HOME);
            await r.quiesce();

            // Assess: the unit is gone, the tombstone removed in both replicas, nothing listed.
            assert.deepEqual(lives(await r.items(HOME, "k")), ["a1@us-east-1"]);
            assert.deepEqual(lives(await r.items(MEMBER, "k")), ["a1@us-east-1"]);
            const healed = await r.counters(HOME, "k", HOME);
            assert.deepEqual([healed.bestEffort, healed.eventual, healed.eventualItem?.[HEAL_DUE]], [1, 1, undefined]);
            if (mode === "strict") {
                assert.deepEqual(await r.region(HOME).client.tryCreate("k", "a2", 4), { created: true, count: 2 });
            }
        });
    }

    /** Two regions; the home's lives "x" and "y", replicated and old (no put attempt of either can land any more). */
    async function oldLivesOfTheHome(): Promise<Replicas> {
        const replicas = await Replicas.create(engine(), { regions: [HOME, MEMBER] });
        await replicas.region(HOME).client.create("k", "x");
        await replicas.region(HOME).client.create("k", "y");
        await replicas.quiesce();
        replicas.advance(TOMBSTONE_SETTLED_MS + 1_000);
        return replicas;
    }

    it("a tombstone that reappears in the owner's replica, a soft delete elsewhere having won last-writer-wins over its removal, is removed by the owner's consumer and counted once", async () => {
        // Prepare: an old life of the home (no put attempt of it can land any more), replicated.
        r = await oldLivesOfTheHome();

        // Act: the owner deletes it and its consumer removes the tombstone; then, before either replicates, the member's
        // client (its replica still showing the life) deletes it too, later.
        assert.deepEqual(await r.region(HOME).client.delete("k", "x"), { deleted: true });
        await r.consume(HOME);
        assert.deepEqual(lives(await r.items(HOME, "k")), ["y@us-east-1"], "the owner's consumer removed its tombstone");
        assert.deepEqual(await r.region(MEMBER).client.delete("k", "x"), { deleted: true });
        await r.replicate({ to: HOME });

        // Assess: the member's soft delete won in the owner's replica: the tombstone is back.
        assert.deepEqual(lives(await r.items(HOME, "k")), ["x@us-east-1 deleted", "y@us-east-1"]);

        // Act
        await r.quiesce();

        // Assess: the owner's consumer removed it again, and that removal reached the member; counted once.
        assert.deepEqual(lives(await r.items(HOME, "k")), ["y@us-east-1"]);
        assert.deepEqual(lives(await r.items(MEMBER, "k")), ["y@us-east-1"]);
        const owner = await r.counters(HOME, "k", HOME);
        assert.deepEqual([owner.bestEffort, owner.eventual], [1, 1]);
        assert.deepEqual(r.fatal, []);
    });

    it("two regions soft-deleting one old life at once: the tombstone that wins last-writer-wins over the owner's own is removed by the owner's consumer", async () => {
        // Prepare
        r = await oldLivesOfTheHome();

        // Act: both regions delete it, each in its own replica; the member's, later, replicates to the owner before the
        // owner's consumer reads its own delete, so the owner's tombstone is replaced by the member's (same life,
        // another delete token), and the removal of the owner's own finds another one.
        assert.deepEqual(await r.region(HOME).client.delete("k", "x"), { deleted: true });
        assert.deepEqual(await r.region(MEMBER).client.delete("k", "x"), { deleted: true });
        await r.replicate({ to: HOME });
        assert.equal((await r.items(HOME, "k")).find((i) => i["sk"]!.S === "x")?.["hc_deleted_in"]?.S, MEMBER);
        await r.quiesce();

        // Assess: no tombstone left in either replica, counted once.
        assert.deepEqual(lives(await r.items(HOME, "k")), ["y@us-east-1"]);
        assert.deepEqual(lives(await r.items(MEMBER, "k")), ["y@us-east-1"]);
        const owner = await r.counters(HOME, "k", HOME);
        // The owner's own delete gave its unit back: no heal is owed, and none is listed.
        assert.deepEqual([owner.bestEffort, owner.eventual, owner.eventualItem?.[HEAL_DUE]], [1, 1, undefined]);
        assert.deepEqual(r.fatal, []);
    });

    it("count() and usage sum every region with counter items: a region removed from the members is still summed", async () => {
        // Prepare: three members, each with lives of its own.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER, THIRD] });
        await r.region(HOME).client.create("k", "h0");
        await r.region(MEMBER).client.create("k", "m0");
        await r.region(MEMBER).client.create("k", "m1");
        for (const id of ["t0", "t1", "t2"]) {
            await r.region(THIRD).client.create("k", id);
        }
        await r.quiesce();

        // Act: the third region leaves the members (the others' deployments take the list without it).
        r.deploy(HOME, [HOME, MEMBER]);
        r.deploy(MEMBER, [HOME, MEMBER]);
        r.deploy(THIRD, [HOME, MEMBER]);
        await r.quiesce();

        // Assess: its lives are still its own, and still summed, in every remaining region.
        for (const name of [HOME, MEMBER]) {
            assert.deepEqual(await r.region(name).client.count("k"), {
                bestEffort: 6,
                eventual: 6,
                value: 6,
                regions: [
                    { region: THIRD, bestEffort: 3, eventual: 3 },
                    { region: MEMBER, bestEffort: 2, eventual: 2 },
                    { region: HOME, bestEffort: 1, eventual: 1 },
                ],
            });
            const today = dayOf(Date.now());
            assert.deepEqual(await r.region(name).client.usage("k", { from: today, to: today }), [
                { day: today, creates: 6, deletes: 0, peak: 6 },
            ]);
        }
    });

    it("TTL in one replica deleting another region's expired progress item and usage day counts nothing twice: its consumer re-reads the stream from its start and the marks skip", async () => {
        // Prepare: the home counts a key over two days (the first day moves to an item of its own), retention 2 days.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER], usageRetentionDays: 2 });
        const home = r.region(HOME);
        r.advance(Date.parse(`${dayOf(Date.now() + DAY)}T12:00:00Z`) - Date.now());
        const first = dayOf(Date.now());
        for (const id of ["a0", "a1", "a2"]) {
            await home.client.create("k", id);
        }
        await home.client.delete("k", "a0");
        await r.quiesce();
        r.advance(DAY);
        await home.client.create("k", "a3");
        await r.quiesce();
        const progressKeys = await progressItemsOf(r, HOME);
        assert.equal(progressKeys.length, 1, "the home's consumer keeps one progress item");
        assert.notEqual(await getItem(r, MEMBER, usageKey(home.config, "k", first)), undefined, "the first day's item, replicated");

        // Act: three days on, the member's replica expires them first; its deletes replicate to the home.
        r.advance(3 * DAY);
        const expired = await r.sweep(MEMBER);
        await r.replicate();

        // Assess: the home's own progress item and first day are gone from its replica.
        assert.ok(
            expired.some((i) => i["sk"]!.S === progressKeys[0]),
            "the member's TTL deleted the home's progress item",
        );
        assert.equal(
            await getItem(r, HOME, { pk: { S: streamShardKey(home.config, "x").pk!.S! }, sk: { S: progressKeys[0]! } }),
            undefined,
        );
        assert.equal(await getItem(r, HOME, usageKey(home.config, "k", first)), undefined);

        // Act: the home writes the key again; its consumer has no frontier and reads its stream from the start.
        const fromStart = r.readsFromStart.get(HOME) ?? 0;
        await home.client.create("k", "a4");
        await r.quiesce();
        assert.ok((r.readsFromStart.get(HOME) ?? 0) > fromStart, "the home's consumer read its stream from the start");

        // Assess: eventual is the live lives, once; the expired day is not written again; today has the one create.
        assert.deepEqual(await r.counters(HOME, "k", HOME).then((c) => [c.eventual, c.bestEffort]), [4, 4]);
        assert.equal(await getItem(r, HOME, usageKey(home.config, "k", first)), undefined);
        const today = dayOf(Date.now());
        assert.deepEqual(await home.client.usage("k", { from: first, to: today }), [{ day: today, creates: 1, deletes: 0, peak: 4 }]);
        assert.equal((await progressItemsOf(r, HOME)).length, 1, "the frontier is written again");
    });
});

/** The sort keys of region `name`'s stream progress items in its own replica. */
async function progressItemsOf(r: Replicas, name: string): Promise<string[]> {
    const region = r.region(name);
    const partition = streamShardKey(region.config, "x").pk!.S!;
    const page = await r.reader.send(
        new QueryCommand({
            TableName: region.countersTableName,
            KeyConditionExpression: "pk = :pk",
            ExpressionAttributeValues: { ":pk": { S: partition } },
            ConsistentRead: true,
        }),
    );
    return (page.Items ?? []).map((i) => i["sk"]!.S!).filter((sk) => sk.startsWith(`#counter#@${name}#`));
}

async function getItem(r: Replicas, name: string, key: Item): Promise<Item | undefined> {
    return (await r.reader.send(new GetItemCommand({ TableName: r.region(name).countersTableName, Key: key, ConsistentRead: true }))).Item;
}
