/**
 * Regions with sharded keys (runtime/regions/, runtime/shards/) on DynamoDB Local: count() reads every region's every
 * shard, past one BatchGetItem's 100 keys, and strict mode's sharded reservation keeps each region within its quota.
 */
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { regionsFixture } from "./support/regions-fixture";

describe("regions with sharded keys on DynamoDB Local", () => {
    const engine = useEngine();

    it("sums every region's shards in count(), 4 regions x 16 shards (128 counter items, two BatchGetItem requests)", async () => {
        // Prepare
        const members = ["us-east-1", "eu-west-1", "ap-southeast-2", "sa-east-1"];
        const fixture = await regionsFixture(engine(), members, { counterShards: 16 });

        // Act: each region creates its own lives (a client takes the shards in turn), and one more region's are deleted.
        for (const [i, region] of members.entries()) {
            for (let n = 0; n < 3 + i; n++) {
                assert.deepEqual(await fixture.side(region).client.create("h", `${region}-${n}`), { created: true });
            }
        }
        assert.deepEqual(await fixture.side("sa-east-1").client.delete("h", "sa-east-1-0"), { deleted: true });
        await fixture.drain();

        // Assess: each region's best-effort and eventual over its 16 shards, the last region's read by the second request.
        const value = await fixture.side("us-east-1").client.count("h");
        assert.deepEqual(value.regions, [
            { region: "ap-southeast-2", bestEffort: 5, eventual: 5 },
            { region: "eu-west-1", bestEffort: 4, eventual: 4 },
            { region: "sa-east-1", bestEffort: 5, eventual: 5 },
            { region: "us-east-1", bestEffort: 3, eventual: 3 },
        ]);
        assert.deepEqual([value.bestEffort, value.eventual, value.value], [17, 17, 17]);
        const live = await fixture.liveByOwner("h");
        assert.equal(
            [...live.values()].reduce((sum, n) => sum + n, 0),
            17,
        );
    });

    it("admits in each region up to its base quota of the limit, over its shards", async () => {
        // Prepare: limit 5 over [eu-west-1, us-east-1] (sorted): 3 and 2.
        const fixture = await regionsFixture(engine(), ["us-east-1", "eu-west-1"], { mode: "strict", counterShards: 4 });

        // Act
        const admitted = new Map<string, number>();
        for (const region of ["us-east-1", "eu-west-1"]) {
            for (let n = 0; n < 6; n++) {
                const result = await fixture.side(region).client.tryCreate("q", `${region}-${n}`, 5);
                admitted.set(region, (admitted.get(region) ?? 0) + (result.created ? 1 : 0));
                assert.ok(result.created || result.reason === "limit", JSON.stringify(result));
            }
        }

        // Assess
        assert.deepEqual(
            [...admitted],
            [
                ["us-east-1", 2],
                ["eu-west-1", 3],
            ],
        );
        const value = await fixture.side("eu-west-1").client.count("q");
        assert.deepEqual(value.regions, [
            { region: "eu-west-1", bestEffort: 3, eventual: 0 },
            { region: "us-east-1", bestEffort: 2, eventual: 0 },
        ]);
    });
});
