/**
 * Counting per region (runtime/regions/) on DynamoDB Local: two regions' clients write one table, two regions'
 * consumers read its one stream, each counting only the lives its region owns into its own counter items.
 */
import { PutItemCommand, QueryCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { healKey } from "../runtime/heal/heal";
import { COUNTER_ATTRIBUTES as A, DEFAULT_LAYOUT, healShard } from "../runtime/shared/config";
import { newToken } from "../runtime/shared/tokens";
import { useEngine } from "./support/engine";
import { emfTotals } from "./support/stream-records";
import { regionsFixture, type RegionsFixture } from "./support/regions-fixture";

const HOME = "us-east-1";
const MEMBER = "eu-west-1";

/** Another writer's item (or one an earlier client without regions wrote): a token, no stamp. */
async function putUnstamped(fixture: RegionsFixture, key: string, id: string): Promise<void> {
    await fixture.reader.send(
        new PutItemCommand({
            TableName: fixture.tableName,
            Item: { pk: { S: key }, sk: { S: id }, [DEFAULT_LAYOUT.tokenAttribute]: { S: newToken() } },
        }),
    );
}

async function counterSortKeys(fixture: RegionsFixture, key: string): Promise<string[]> {
    const page = await fixture.reader.send(
        new QueryCommand({
            TableName: fixture.countersTableName,
            ConsistentRead: true,
            KeyConditionExpression: "pk = :k",
            ExpressionAttributeValues: { ":k": { S: key } },
        }),
    );
    return (page.Items ?? []).map((item) => item.sk!.S!).sort();
}

describe("counting per region on DynamoDB Local (one engine, no replication)", () => {
    const engine = useEngine();

    it("counts each life once, in the region that owns it, and count() sums the regions to the live items", async () => {
        // Prepare
        const fixture = await regionsFixture(engine(), [HOME, MEMBER]);
        const home = fixture.side(HOME);
        const member = fixture.side(MEMBER);
        for (let i = 0; i < 10; i++) {
            assert.deepEqual(await member.client.create("k", `e${i}`), { created: true });
            assert.deepEqual(await home.client.create("k", `u${i}`), { created: true });
        }
        for (let i = 0; i < 5; i++) {
            await putUnstamped(fixture, "k", `o${i}`);
        }

        // Act: deletes of own lives, of another region's lives, and of unstamped (home-owned) items.
        assert.deepEqual(await home.client.delete("k", "e0"), { deleted: true });
        assert.deepEqual(await home.client.delete("k", "e1"), { deleted: true });
        assert.deepEqual(await member.client.delete("k", "e2"), { deleted: true });
        assert.deepEqual(await home.client.delete("k", "u0"), { deleted: true });
        assert.deepEqual(await member.client.delete("k", "o0"), { deleted: true });
        await fixture.drain();

        // Assess: every stamp is the creating region's; the unstamped items stay unstamped.
        const items = await fixture.items("k");
        for (const item of items) {
            const id = item.sk!.S!;
            assert.equal(item.hc_region?.S, id.startsWith("e") ? MEMBER : id.startsWith("u") ? HOME : undefined, id);
        }
        // The owners' consumers removed every soft-deleted item, the foreign deletes' too.
        assert.deepEqual(
            items.map((item) => item.sk!.S!).filter((id) => ["e0", "e1", "e2", "u0", "o0"].includes(id)),
            [],
        );
        const live = await fixture.liveByOwner("k");
        assert.deepEqual(
            [...live],
            [
                [HOME, 13],
                [MEMBER, 7],
            ],
        );
        // Eventual per region: exactly the live lives it owns (the home's includes the unstamped items).
        const homeCounters = await fixture.counters("k", HOME);
        const memberCounters = await fixture.counters("k", MEMBER);
        assert.equal(homeCounters.eventual, 13);
        assert.equal(memberCounters.eventual, 7);
        // Best-effort: a foreign delete moved no unit (the member's two lives deleted in the home still hold theirs).
        assert.equal(memberCounters.bestEffort, 10 - 1);
        assert.equal(homeCounters.bestEffort, 10 - 1);
        assert.equal(emfTotals(home.metricLines).ForeignDeletes, 2);
        assert.equal(emfTotals(member.metricLines).ForeignDeletes, 1);
        // count() in either region: the sums, and the value as the sum over regions of max(be, ev).
        for (const side of [home, member]) {
            const value = await side.client.count("k");
            assert.equal(value.bestEffort, 18);
            assert.equal(value.eventual, 20);
            assert.equal(value.value, Math.max(9, 13) + Math.max(9, 7));
            assert.deepEqual(value.regions, [
                { region: MEMBER, bestEffort: 9, eventual: 7 },
                { region: HOME, bestEffort: 9, eventual: 13 },
            ]);
        }
        // The owner's consumer put its key on the heal index, under its own region's index shard.
        assert.equal(memberCounters.bestEffortItem?.[A.healShard]?.S, healShard("k", member.config));
        assert.equal(memberCounters.bestEffortItem?.[A.healShard]?.S, `${MEMBER}#${healShard("k")}`);
        assert.equal(homeCounters.bestEffortItem?.[A.healShard]?.S, `${HOME}#${healShard("k")}`);

        // Act: each region heals its own best-effort from the items it owns (clock past the quiet window).
        const later = () => Date.now() + 10 * 60_000;
        for (const side of [member, home]) {
            const healed = await healKey("k", {
                config: side.config,
                dynamodb: fixture.reader,
                mode: "utilization",
                quietWindowMs: 120_000,
                now: later,
            });
            assert.equal(healed.outcome, "healed", side.region);
        }

        // Assess: best-effort now agrees with eventual in every region; the member's heal left the home's item alone.
        assert.deepEqual(await fixture.counters("k", MEMBER).then((c) => [c.bestEffort, c.eventual]), [7, 7]);
        assert.deepEqual(await fixture.counters("k", HOME).then((c) => [c.bestEffort, c.eventual]), [13, 13]);
        const value = await member.client.count("k");
        assert.deepEqual([value.bestEffort, value.eventual, value.value], [20, 20, 20]);
    });

    it("writes every counter item under its region's prefix, and the member's consumer counts no unstamped item", async () => {
        // Prepare
        const fixture = await regionsFixture(engine(), [HOME, MEMBER]);

        // Act
        await fixture.side(MEMBER).client.create("k", "m1");
        await fixture.side(HOME).client.create("k", "h1");
        await putUnstamped(fixture, "k", "x1");
        await fixture.drain();

        // Assess: no counter item without a region; each marker in the owner's region only.
        assert.deepEqual(await counterSortKeys(fixture, "k"), [
            `#counter#@${MEMBER}#best-effort`,
            `#counter#@${MEMBER}#eventual`,
            `#counter#@${MEMBER}#item#m1`,
            `#counter#@${HOME}#best-effort`,
            `#counter#@${HOME}#eventual`,
            `#counter#@${HOME}#item#h1`,
            `#counter#@${HOME}#item#x1`,
        ]);
        assert.equal((await fixture.counters("k", MEMBER)).eventual, 1);
        assert.equal((await fixture.counters("k", HOME)).eventual, 2);
    });
});
