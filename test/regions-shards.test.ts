/**
 * Regions with sharded keys (runtime/regions/, runtime/shards/) on DynamoDB Local, each region's replicas tables of
 * their own (support/regions-replicas.ts): count() reads every region's every shard, and a strict sharded key admits
 * in each region up to its share of the limit, over its shards.
 */
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { Replicas } from "./support/regions-replicas";

describe("regions with sharded keys (DynamoDB Local, one table per replica)", function () {
    const engine = useEngine();
    let r: Replicas | undefined;
    afterEach(() => r?.close());

    it("count() sums every region's 16 shards, 4 regions, in every replica once replicated", async () => {
        // Prepare
        const regions = ["us-east-1", "eu-west-1", "ap-southeast-2", "sa-east-1"];
        r = await Replicas.create(engine(), { regions, counterShards: 16 });

        // Act: each region creates lives of its own (their ids spread over the shards); one is deleted.
        for (const [i, region] of regions.entries()) {
            for (let n = 0; n < 3 + i; n++) {
                assert.deepEqual(await r.region(region).client.create("h", `${region}-${n}`), { created: true });
            }
        }
        assert.deepEqual(await r.region("sa-east-1").client.delete("h", "sa-east-1-0"), { deleted: true });
        await r.quiesce();

        // Assess
        for (const region of regions) {
            const value = await r.region(region).client.count("h");
            assert.deepEqual(value.regions, [
                { region: "ap-southeast-2", bestEffort: 5, eventual: 5 },
                { region: "eu-west-1", bestEffort: 4, eventual: 4 },
                { region: "sa-east-1", bestEffort: 5, eventual: 5 },
                { region: "us-east-1", bestEffort: 3, eventual: 3 },
            ]);
            assert.deepEqual([value.bestEffort, value.eventual, value.value], [17, 17, 17]);
        }
        const live = (await r.items("us-east-1", "h")).filter((i) => i["deleted"]?.BOOL !== true);
        assert.equal(live.length, 17);
    });

    it("strict: admits in each region up to its share of the limit, over its 4 shards", async () => {
        // Prepare: limit 5 over [eu-west-1, us-east-1] (sorted): shares 3 and 2.
        r = await Replicas.create(engine(), { regions: ["us-east-1", "eu-west-1"], mode: "strict", counterShards: 4 });

        // Act
        const admitted: Record<string, number> = {};
        for (const region of ["us-east-1", "eu-west-1"]) {
            admitted[region] = 0;
            for (let n = 0; n < 6; n++) {
                const result = await r.region(region).client.tryCreate("q", `${region}-${n}`, 5);
                assert.ok(result.created || result.reason === "limit", JSON.stringify(result));
                admitted[region] += result.created ? 1 : 0;
            }
        }
        await r.quiesce();

        // Assess
        assert.deepEqual(admitted, { "us-east-1": 2, "eu-west-1": 3 });
        assert.deepEqual((await r.region("eu-west-1").client.count("q")).regions, [
            { region: "eu-west-1", bestEffort: 3, eventual: 3 },
            { region: "us-east-1", bestEffort: 2, eventual: 2 },
        ]);
    });
});
