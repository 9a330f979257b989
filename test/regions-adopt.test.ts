/**
 * Adoption per region (runtime/backfill/, runtime/ops/reconcile.ts, runtime/regions/ownership.ts) on DynamoDB Local,
 * each region's replicas tables of their own (support/regions-replicas.ts): each region's backfill flags the items it
 * owns (its stamp, or the home's for an unstamped item, never a stamp no member wrote for another region), its stream
 * counts each once, and a reconcile in a region sets only that region's eventual counter.
 */
import { strict as assert } from "node:assert";
import { PutItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { backfill, type BackfillReport } from "../runtime/backfill/backfill";
import { reconcileKey } from "../runtime/ops/reconcile";
import { eventualKey } from "../runtime/shared/keys";
import { useEngine } from "./support/engine";
import { Replicas } from "./support/regions-replicas";

const HOME = "us-east-1";
const MEMBER = "eu-west-1";
const STRANGER = "sa-east-1";

/** Items another writer put in the home's replica before the counter: 3 unstamped, 2 the home's, 2 the member's, 1 a stranger's. */
async function seedOwnedItems(r: Replicas): Promise<void> {
    const stamps: Record<string, string | undefined> = {
        x0: undefined,
        x1: undefined,
        x2: undefined,
        h0: HOME,
        h1: HOME,
        m0: MEMBER,
        m1: MEMBER,
        g0: STRANGER,
    };
    for (const [id, stamp] of Object.entries(stamps)) {
        await r.region(HOME).writer.send(
            new PutItemCommand({
                TableName: r.region(HOME).tableName,
                Item: {
                    pk: { S: "k" },
                    sk: { S: id },
                    counter_token: { S: `before-${id}` },
                    ...(stamp === undefined ? {} : { hc_region: { S: stamp } }),
                },
            }),
        );
    }
    await r.replicate();
}

async function backfillIn(r: Replicas, name: string): Promise<BackfillReport> {
    const region = r.region(name);
    return backfill({
        config: region.config,
        dynamodb: region.ops,
        segments: 2,
        readUnitsPerSecond: Infinity,
        writeUnitsPerSecond: Infinity,
    });
}

describe("adoption per region (DynamoDB Local, one table per replica)", function () {
    const engine = useEngine();
    let r: Replicas | undefined;
    afterEach(() => r?.close());

    it("each region's backfill flags the items it owns (the home every unstamped one, nobody a stranger's) and its stream counts them once; a second run flags nothing", async () => {
        // Prepare
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER] });
        await seedOwnedItems(r);

        // Act
        const home = await backfillIn(r, HOME);
        const member = await backfillIn(r, MEMBER);
        await r.quiesce();

        // Assess: what each flagged, and each region's eventual in both replicas.
        assert.deepEqual([home.status, home.total.counted, home.total.alreadyCounted, home.total.skipped], ["complete", 5, 0, 3]);
        assert.deepEqual([member.status, member.total.counted, member.total.alreadyCounted, member.total.skipped], ["complete", 2, 0, 6]);
        for (const replica of [HOME, MEMBER]) {
            assert.equal((await r.counters(replica, "k", HOME)).eventual, 5, replica);
            assert.equal((await r.counters(replica, "k", MEMBER)).eventual, 2, replica);
            const items = await r.items(replica, "k");
            const stranger = items.find((i) => i["sk"]!.S === "g0");
            assert.equal(stranger?.["hc_counted"], undefined, "no member flags a stranger's item");
        }

        // Act + Assess: a second run in each region flags nothing new.
        const again = [await backfillIn(r, HOME), await backfillIn(r, MEMBER)];
        assert.deepEqual(
            again.map((report) => [report.total.counted, report.total.alreadyCounted]),
            [
                [0, 5],
                [0, 2],
            ],
        );
        await r.quiesce();
        assert.equal((await r.counters(HOME, "k", HOME)).eventual, 5);
        assert.equal((await r.counters(MEMBER, "k", MEMBER)).eventual, 2);
    });

    it("a reconcile in a region corrects its own eventual from the items it owns and leaves every other region's", async () => {
        // Prepare: adopted in both regions; then the member's eventual is off in its replica (records lost).
        r = await Replicas.create(engine(), { regions: [HOME, MEMBER] });
        await seedOwnedItems(r);
        await backfillIn(r, HOME);
        await backfillIn(r, MEMBER);
        await r.quiesce();
        const member = r.region(MEMBER);
        await r.reader.send(
            new UpdateItemCommand({
                TableName: member.countersTableName,
                Key: eventualKey(member.config, "k"),
                UpdateExpression: "SET #c = :n",
                ExpressionAttributeNames: { "#c": "count" },
                ExpressionAttributeValues: { ":n": { N: "9" } },
            }),
        );

        // Act
        const inMember = await reconcileKey("k", { config: member.config, dynamodb: member.ops });
        const inHome = await reconcileKey("k", { config: r.region(HOME).config, dynamodb: r.region(HOME).ops });
        await r.quiesce();

        // Assess
        assert.deepEqual(inMember, { key: "k", outcome: "corrected", eventualBefore: 9, eventualAfter: 2, items: 2, unflagged: 0 });
        assert.deepEqual(inHome, { key: "k", outcome: "exact", eventualBefore: 5, eventualAfter: 5, items: 5, unflagged: 0 });
        for (const replica of [HOME, MEMBER]) {
            assert.equal((await r.counters(replica, "k", MEMBER)).eventual, 2, replica);
            assert.equal((await r.counters(replica, "k", HOME)).eventual, 5, replica);
        }
    });
});
