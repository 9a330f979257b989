/**
 * Backfill, reconcile and the heal index per region (runtime/regions/) on DynamoDB Local: each region counts the items
 * it owns into its own counter items, and lists only its own keys for the settler.
 */
import { QueryCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfill } from "../runtime/backfill/backfill";
import { reconcileKey } from "../runtime/heal/reconcile";
import { dueKeys } from "../runtime/heal/settle";
import { useEngine } from "./support/engine";
import { putOwnedItems, regionsFixture, type RegionsFixture } from "./support/regions-fixture";

const HOME = "us-east-1";
const MEMBER = "eu-west-1";

/** Items of `key` the test writes: 3 unstamped, 2 stamped by the home, 2 by the member, 1 by a region not a member. */
const seed = (fixture: RegionsFixture, key: string) => putOwnedItems(fixture, key, HOME, MEMBER, ["ap-south-1"]);

describe("backfill, reconcile and the heal index per region on DynamoDB Local", () => {
    const engine = useEngine();

    it("backfills in each region the items it owns, the home adopting every unstamped one", async () => {
        // Prepare
        const fixture = await regionsFixture(engine(), [HOME, MEMBER]);
        await seed(fixture, "b");

        // Act
        const member = await backfill({ config: fixture.side(MEMBER).config, dynamodb: fixture.reader, runId: "r" });
        const home = await backfill({ config: fixture.side(HOME).config, dynamodb: fixture.reader, runId: "r" });

        // Assess: 2 in the member; 3 unstamped + 2 stamped + 1 stamped by a non-member in the home.
        assert.deepEqual([member.status, member.total.counted], ["complete", 2]);
        assert.deepEqual([home.status, home.total.counted], ["complete", 6]);
        assert.equal((await fixture.counters("b", MEMBER)).eventual, 2);
        assert.equal((await fixture.counters("b", HOME)).eventual, 6);
        // Each region's run keeps its checkpoints under its own prefix: the two runs of one id did not meet.
        for (const region of [HOME, MEMBER]) {
            const checkpoints = await fixture.reader.send(
                new QueryCommand({
                    TableName: fixture.countersTableName,
                    KeyConditionExpression: "pk = :p",
                    ExpressionAttributeValues: { ":p": { S: `#counter#@${region}#backfill#r` } },
                }),
            );
            assert.ok((checkpoints.Items ?? []).length > 0, region);
        }
    });

    it("reconciles in each region the items it owns, and only those", async () => {
        // Prepare: the items are in the table, no consumer ran.
        const fixture = await regionsFixture(engine(), [HOME, MEMBER]);
        await seed(fixture, "r");
        const fatal = { park: async () => true };

        // Act
        const member = await reconcileKey("r", { config: fixture.side(MEMBER).config, dynamodb: fixture.reader, fatal });
        const home = await reconcileKey("r", { config: fixture.side(HOME).config, dynamodb: fixture.reader, fatal });

        // Assess
        assert.deepEqual([member.found, member.counted, member.incomplete], [2, 2, false]);
        assert.deepEqual([home.found, home.counted, home.incomplete], [6, 6, false]);
        assert.equal((await fixture.counters("r", MEMBER)).eventual, 2);
        assert.equal((await fixture.counters("r", HOME)).eventual, 6);
        // Run again: nothing left to count in either region.
        assert.equal((await reconcileKey("r", { config: fixture.side(MEMBER).config, dynamodb: fixture.reader, fatal })).found, 0);
        assert.equal((await reconcileKey("r", { config: fixture.side(HOME).config, dynamodb: fixture.reader, fatal })).found, 0);
    });

    it("lists a key on the heal index only for the region whose units a delete elsewhere left behind", async () => {
        // Prepare: a life of the member's, deleted in the home.
        const fixture = await regionsFixture(engine(), [HOME, MEMBER]);
        await fixture.side(MEMBER).client.create("d", "m0");
        await fixture.side(HOME).client.create("d", "h0");
        assert.deepEqual(await fixture.side(HOME).client.delete("d", "m0"), { deleted: true });

        // Act
        await fixture.drain();

        // Assess: the member's settler finds the key due; the home's finds nothing of it (its unit moved with its life).
        const cutoff = Date.now() + 60_000;
        const listed = async (region: string) =>
            (await dueKeys(fixture.reader, fixture.countersTableName, fixture.side(region).config, cutoff, 100)).keys;
        assert.deepEqual(await listed(MEMBER), ["d"]);
        assert.deepEqual(await listed(HOME), []);
        assert.equal((await fixture.counters("d", MEMBER)).bestEffort, 1);
        assert.equal((await fixture.counters("d", MEMBER)).eventual, 0);
    });
});
