/**
 * Strict mode over the regions of a global table (runtime/regions/caps.ts) on DynamoDB Local, each region's replicas
 * tables of their own, replicated when the test says (support/regions-replicas.ts). Each region admits under a cap of
 * its own and raises it to its share only when it sees every other region within its share, so the sum over regions
 * of max(count, cap) stays within the limit through a limit lowered in one region and a member added by the
 * documented procedure (docs/design/global-tables.md).
 */
import { strict as assert } from "node:assert";
import { capFor, regionShare } from "../runtime/regions/caps";
import { useEngine } from "./support/engine";
import { Replicas, regionsSetting } from "./support/regions-replicas";

const HOME = "us-east-1";
const MEMBER = "eu-west-1";
const THIRD = "ap-southeast-2";

/** Each region's best-effort as its own replica holds it, summed; and the live lives in the home's replica. */
async function totals(r: Replicas, regions: readonly string[]): Promise<{ bestEffort: number; live: number }> {
    let bestEffort = 0;
    for (const name of regions) {
        bestEffort += (await r.counters(name, "k", name)).bestEffort;
    }
    const live = (await r.items(HOME, "k")).filter((i) => i["deleted"]?.BOOL !== true).length;
    return { bestEffort, live };
}

/** Tries `n` creates of `key` in `region` under the stored limit; returns how many were created. */
async function tryCreates(r: Replicas, region: string, prefix: string, n: number): Promise<number> {
    let created = 0;
    for (let i = 0; i < n; i++) {
        created += (await r.region(region).client.tryCreate("k", `${prefix}${i}`)).created ? 1 : 0;
    }
    return created;
}

describe("strict mode over regions (DynamoDB Local, one table per replica)", function () {
    const engine = useEngine();
    let r: Replicas | undefined;
    afterEach(() => r?.close());

    it("splits a limit into shares over the sorted members that sum to it (0 for a region not a member), and a region takes its share only when every other is within its own", () => {
        // Prepare
        const three = regionsSetting(HOME, [HOME, MEMBER, THIRD], HOME);

        // Assess: sorted ap-southeast-2, eu-west-1, us-east-1; the first L mod 3 take one more.
        assert.deepEqual(
            [THIRD, MEMBER, HOME].map((region) => regionShare(7, three, region)),
            [3, 2, 2],
        );
        assert.equal(regionShare(7, three, "sa-east-1"), 0);
        for (let members = 1; members <= 3; members++) {
            const setting = regionsSetting(HOME, [HOME, MEMBER, THIRD].slice(0, members), HOME);
            for (let limit = 0; limit <= 30; limit++) {
                assert.equal(
                    setting.members.reduce((sum, m) => sum + regionShare(limit, setting, m.region), 0),
                    limit,
                );
            }
        }
        assert.equal(
            capFor(
                7,
                three,
                new Map([
                    [THIRD, { count: 3, cap: 3 }],
                    [MEMBER, { count: 1, cap: 2 }],
                ]),
            ),
            2,
        );
        assert.equal(capFor(7, three, new Map([[THIRD, { count: 2, cap: 4 }]])), 0, "a cap over its share holds the others back");
        assert.equal(capFor(7, three, new Map([[THIRD, { count: 4, cap: 0 }]])), 0, "so does a count over it");
    });

    it("admits in each region up to its share of the stored limit, and no more", async () => {
        // Prepare: limit 7 over three members, stored in the home and replicated.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER, THIRD], mode: "strict" });
        await r.region(HOME).client.setLimit("k", 7);
        await r.quiesce();

        // Act
        const created = [await tryCreates(r, THIRD, "t", 5), await tryCreates(r, MEMBER, "m", 5), await tryCreates(r, HOME, "h", 5)];
        await r.quiesce();

        // Assess
        assert.deepEqual(created, [3, 2, 2]);
        assert.deepEqual(await totals(r, [HOME, MEMBER, THIRD]), { bestEffort: 7, live: 7 });
        assert.deepEqual(
            await r.region(HOME).client.tryCreate("k", "h9"),
            { created: false, count: 2, reason: "limit" },
            "this region's count",
        );
    });

    it("a limit removed and set again: a region that created past its share meanwhile makes the others refuse under their caps until it is back within it", async () => {
        // Prepare: limit 4 over two members, each region at its cap of 2; the limit removed, and the home creates 3 more
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER], mode: "strict" });
        await r.region(HOME).client.setLimit("k", 4);
        await r.quiesce();
        assert.deepEqual([await tryCreates(r, HOME, "h", 2), await tryCreates(r, MEMBER, "m", 1)], [2, 1]);
        await r.region(HOME).client.setLimit("k", null);
        await r.quiesce();
        assert.equal(await tryCreates(r, HOME, "u", 3), 3);
        await r.region(HOME).client.setLimit("k", 4);
        await r.quiesce();

        // Act: the member still holds a cap of 2 under the same limit, with room for one
        const member = await r.region(MEMBER).client.tryCreate("k", "m9");
        for (const id of ["h0", "h1", "u0", "u1"]) {
            await r.region(HOME).client.delete("k", id);
        }
        await r.quiesce();
        const afterDeletes = await r.region(MEMBER).client.tryCreate("k", "m10");
        await r.quiesce();

        // Assess
        assert.deepEqual(member, { created: false, count: 1, reason: "limit" }, "the home holds 5 of a limit of 4");
        assert.equal(afterDeletes.created, true, "the home back at 1, within its share of 2");
        assert.deepEqual(await totals(r, [HOME, MEMBER]), { bestEffort: 3, live: 3 });
    });

    it("answers a refusal with this region's best-effort as its count, also when other regions hold it back (docs/client.md)", async () => {
        // Prepare: limit 4, each region at its share of 2; the member lowers it to 2, replicated.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER], mode: "strict" });
        await r.region(HOME).client.setLimit("k", 4);
        await r.quiesce();
        assert.equal(await tryCreates(r, HOME, "h", 2), 2);
        assert.equal(await tryCreates(r, MEMBER, "m", 3), 2);
        await r.region(MEMBER).client.setLimit("k", 2);
        await r.quiesce();

        // Act: the home, over its new share of 1 while the member is over its own, refuses.
        const refused = await r.region(HOME).client.tryCreate("k", "h9");

        // Assess
        assert.deepEqual(refused, { created: false, count: 2, reason: "limit" });
    });

    it("a raised limit moves a region's cap and the region admits up to its new share", async () => {
        // Prepare: limit 4 (2 per region); the home takes one slot, which arms its cap.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER], mode: "strict" });
        await r.region(HOME).client.setLimit("k", 4);
        assert.equal(await tryCreates(r, HOME, "h", 1), 1);

        // Act: the limit raised to 6 (3 per region).
        await r.region(HOME).client.setLimit("k", 6);
        const answers = [];
        for (let i = 0; i < 3; i++) {
            answers.push(await r.region(HOME).client.tryCreate("k", `g${i}`));
        }

        // Assess
        assert.deepEqual(answers, [
            { created: true, count: 2 },
            { created: true, count: 3 },
            { created: false, count: 3, reason: "limit" },
        ]);
    });

    it("a limit lowered in one region refuses in every region once replicated, until deletes bring each within its new share", async () => {
        // Prepare: limit 8 (4 per region); 3 lives in each.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER], mode: "strict" });
        await r.region(HOME).client.setLimit("k", 8);
        await r.quiesce();
        assert.equal(await tryCreates(r, HOME, "h", 3), 3);
        assert.equal(await tryCreates(r, MEMBER, "m", 3), 3);
        await r.quiesce();

        // Act: the home lowers it to 4 and refuses at once; the member has not seen it yet and admits under the limit
        // it reads.
        await r.region(HOME).client.setLimit("k", 4);
        assert.equal(await tryCreates(r, HOME, "h3-", 1), 0, "the home, over its new share of 2");
        assert.equal(await tryCreates(r, MEMBER, "m3-", 2), 1, "the member, under the old limit, fills its old share");
        assert.ok((await totals(r, [HOME, MEMBER])).bestEffort <= 8, "within the limit before it");
        await r.quiesce();

        // Assess: once replicated, both regions refuse (each sees the other over its share of 4).
        for (const name of [MEMBER, HOME]) {
            const refused = await r.region(name).client.tryCreate("k", `${name}-9`);
            assert.deepEqual([refused.created, refused.reason], [false, "limit"], name);
        }
        assert.deepEqual(await totals(r, [HOME, MEMBER]), { bestEffort: 7, live: 7 });

        // Act: deletes bring the home to 1 and the member to 2 (its share); replicated.
        for (const id of ["h0", "h1"]) {
            assert.deepEqual(await r.region(HOME).client.delete("k", id), { deleted: true });
        }
        for (const id of ["m0", "m1"]) {
            assert.deepEqual(await r.region(MEMBER).client.delete("k", id), { deleted: true });
        }
        await r.quiesce();
        const afterDeletes = [await tryCreates(r, MEMBER, "m5-", 2), await tryCreates(r, HOME, "h5-", 2)];
        await r.quiesce();

        // Assess: the member is at its share; the home takes the one slot left of its own; the sum is the limit.
        assert.deepEqual(afterDeletes, [0, 1]);
        assert.deepEqual(await totals(r, [HOME, MEMBER]), { bestEffort: 4, live: 4 });
    });

    it("a member added by the documented procedure (every existing region takes the new list, then the new region serves once their writes replicated) keeps the sum within the limit", async () => {
        // Prepare: two members at their shares of 6; the third region has replicas and no deployment yet.
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER, THIRD], members: [HOME, MEMBER], mode: "strict" });
        await r.region(HOME).client.setLimit("k", 6);
        await r.quiesce();
        assert.equal(await tryCreates(r, HOME, "h", 4), 3);
        assert.equal(await tryCreates(r, MEMBER, "m", 4), 3);
        await r.quiesce();

        // Act: the existing regions take the new list; their strict calls write caps for it; replicated; then the new
        // region's deployment serves.
        const members = [HOME, MEMBER, THIRD];
        r.deploy(HOME, members);
        r.deploy(MEMBER, members);
        assert.equal(await tryCreates(r, HOME, "h4-", 1), 0, "the home, over its new share of 2, refuses");
        assert.equal(await tryCreates(r, MEMBER, "m4-", 1), 0, "so does the member");
        await r.quiesce();
        r.deploy(THIRD, members);
        const third = await tryCreates(r, THIRD, "t", 2);
        await r.quiesce();

        // Assess: the new region refuses while the others are over their new shares; the sum never passed 6.
        assert.equal(third, 0);
        assert.deepEqual(await totals(r, members), { bestEffort: 6, live: 6 });

        // Act: each existing region deletes down to its new share; replicated; every region tries to create.
        assert.deepEqual(await r.region(HOME).client.delete("k", "h0"), { deleted: true });
        assert.deepEqual(await r.region(MEMBER).client.delete("k", "m0"), { deleted: true });
        await r.quiesce();
        const created = [await tryCreates(r, THIRD, "t2-", 3), await tryCreates(r, HOME, "h6-", 1), await tryCreates(r, MEMBER, "m6-", 1)];
        await r.quiesce();

        // Assess: the new region took its share, the others stay at theirs: the sum is the limit.
        assert.deepEqual(created, [2, 0, 0]);
        assert.deepEqual(await totals(r, members), { bestEffort: 6, live: 6 });
    });
});
