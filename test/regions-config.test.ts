/**
 * The regions setting (runtime/regions/): its checks name the field, it travels through every environment the
 * functions read, ownership has exactly one answer per image, and with no regions every key is the single-region one.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfillEnvironment, backfillFromEnv } from "../runtime/backfill/env";
import { HybridCounterClient } from "../runtime/client/client";
import { settlerConfigFromEnv, settlerEnvironment } from "../runtime/heal/settler-config";
import { ownerOf, ownsImage, parseRegions, regionalCounterPrefix, type RegionsConfig } from "../runtime/regions";
import {
    clientConfigFromEnv,
    clientEnvironment,
    ConfigurationError,
    DEFAULT_LAYOUT,
    ENV,
    handlerConfigFromEnv,
} from "../runtime/shared/config";
import { bestEffortKey, eventualKey, settlerCursorKey, streamShardKey, usageKey } from "../runtime/shared/keys";
import { healShard } from "../runtime/heal/index-marks";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { isLive } from "../runtime/shared/selection";

const REGIONS: RegionsConfig = { current: "eu-west-1", members: [{ region: "us-east-1", role: "home" }, { region: "eu-west-1" }] };
const BASE_ENV = {
    [ENV.tableName]: "resources",
    [ENV.countersTableName]: "resources-counters",
    [ENV.fatalQueueUrl]: "https://sqs.local/000000000000/fatal",
};

function problemsOf(run: () => unknown): readonly string[] {
    try {
        run();
    } catch (error) {
        assert.ok(error instanceof ConfigurationError, String(error));
        return error.problems;
    }
    assert.fail("no ConfigurationError");
}

describe("the regions setting", () => {
    it("refuses a bad setting with a problem naming each field", () => {
        assert.deepEqual(
            problemsOf(() => parseRegions("{")),
            ['[regions] must be JSON: {"current":"<region>","members":[{"region":"<region>","role":"home"},...]}'],
        );
        assert.deepEqual(
            problemsOf(() => parseRegions(JSON.stringify({ current: "ap-south-1", members: [{ region: "us-east-1", role: "home" }] }))),
            ['[regions.current] "ap-south-1" must be one of [regions.members] (us-east-1)'],
        );
        assert.deepEqual(
            problemsOf(() =>
                parseRegions(
                    JSON.stringify({
                        current: "us-east-1",
                        members: [
                            { region: "us-east-1", role: "home" },
                            { region: "eu-west-1", role: "home" },
                        ],
                    }),
                ),
            ),
            ['[regions.members] must name exactly one region with role "home" (got 2)'],
        );
        assert.deepEqual(
            problemsOf(() =>
                parseRegions(
                    JSON.stringify({ current: "us-east-1", members: [{ region: "us-east-1" }, { region: "US_EAST#1", role: "boss" }] }),
                ),
            ),
            [
                '[regions.members[1].region] must be an AWS region name such as "us-east-1" (got "US_EAST#1")',
                '[regions.members[1].role] must be "home" or "member" (got "boss")',
                '[regions.members] must name exactly one region with role "home" (got 0)',
            ],
        );
        assert.deepEqual(
            problemsOf(() =>
                parseRegions(
                    JSON.stringify({ current: "us-east-1", members: [{ region: "us-east-1", role: "home" }, { region: "us-east-1" }] }),
                ),
            ),
            ['[regions.members[1].region] lists "us-east-1" twice'],
        );
    });

    it("is read from HYBRID_COUNTER_REGIONS by the handlers and the backfill, and written back by the environments", () => {
        const env = { ...BASE_ENV, [ENV.regions]: JSON.stringify(REGIONS) };
        const config = handlerConfigFromEnv(env);
        assert.deepEqual(config.regions, REGIONS);
        assert.equal(config.regionAttribute, undefined);
        assert.equal(clientEnvironment(config)[ENV.regions], JSON.stringify(REGIONS));
        assert.deepEqual(clientConfigFromEnv(clientEnvironment(config)).regions, REGIONS);
        const backfill = backfillFromEnv(backfillEnvironment({ ...config, regionAttribute: "made_in" }, { segments: 2 }));
        assert.deepEqual(backfill.config.regions, REGIONS);
        assert.equal(backfill.config.regionAttribute, "made_in");
        const settler = settlerConfigFromEnv(
            settlerEnvironment({ ...config, keyBudget: 10, auditItems: 5, metricsNamespace: "HybridCounter" }),
        );
        assert.deepEqual(settler.regions, REGIONS);
    });

    it("refuses regions without a counters table of their own, and a current region that is not a member, by variable", () => {
        assert.deepEqual(
            problemsOf(() =>
                handlerConfigFromEnv({ ...BASE_ENV, [ENV.countersTableName]: undefined, [ENV.regions]: JSON.stringify(REGIONS) }),
            ),
            [
                "[HYBRID_COUNTER_REGIONS] needs a counters table of its own ([countersTableName]): every region's counter items replicate to every member, apart from the user's items",
            ],
        );
        assert.deepEqual(
            problemsOf(() => handlerConfigFromEnv({ ...BASE_ENV, [ENV.regions]: JSON.stringify({ ...REGIONS, current: "eu-central-1" }) })),
            ['[HYBRID_COUNTER_REGIONS.current] "eu-central-1" must be one of [regions.members] (us-east-1, eu-west-1)'],
        );
    });

    it("is checked by the client's constructor, which reserves the stamp for itself", async () => {
        const dynamodb = new DynamoDBClient({ region: "us-east-1", endpoint: "http://127.0.0.1:9" });
        const options = { tableName: "resources", countersTableName: "resources-counters", dynamodb };
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...options, countersTableName: "resources", regions: REGIONS })),
            [
                "[regions] needs a counters table of its own ([countersTableName]): every region's counter items replicate to every member, apart from the user's items",
            ],
        );
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...options, regions: REGIONS, regionAttribute: "pk" })),
            ['[regionAttribute] must differ from [partitionKey] (both are "pk")'],
        );
        const client = new HybridCounterClient({ ...options, regions: REGIONS });
        await assert.rejects(
            client.create("k", "a", { hc_region: "us-east-1" }),
            (error: unknown) => error instanceof InvalidArgumentError,
        );
        dynamodb.destroy();
    });

    it("leaves every counter key, heal shard and environment as it is without regions", () => {
        // Without regions: the counter prefix alone, before each item's kind.
        const sortKey = (key: Record<string, { S?: string }>) => key.sk!.S;
        assert.equal(sortKey(bestEffortKey(DEFAULT_LAYOUT, "k", 0)), "#counter#best-effort");
        assert.equal(sortKey(eventualKey(DEFAULT_LAYOUT, "k")), "#counter#eventual");
        assert.equal(sortKey(usageKey(DEFAULT_LAYOUT, "k", "2026-01-02")), "#counter#usage#2026-01-02");
        assert.equal(sortKey(streamShardKey(DEFAULT_LAYOUT, "shardId-1")), "#counter#shard#shardId-1");
        assert.equal(sortKey(settlerCursorKey(DEFAULT_LAYOUT)), "#counter#cursor");
        assert.match(healShard({}, "k"), /^\d+$/);
        const config = handlerConfigFromEnv(BASE_ENV);
        assert.equal("regions" in config, false);
        assert.equal("regionAttribute" in config, false);
        assert.deepEqual(
            Object.keys(clientEnvironment(config)).filter((name) => name.includes("REGION")),
            [],
        );
        // With regions: every one carries the region, after the counter prefix.
        const scoped = { ...DEFAULT_LAYOUT, regions: REGIONS };
        assert.equal(regionalCounterPrefix(scoped), "#counter#@eu-west-1#");
        assert.equal(sortKey(bestEffortKey(scoped, "k", 0)), "#counter#@eu-west-1#best-effort");
        assert.equal(sortKey(eventualKey(scoped, "k")), "#counter#@eu-west-1#eventual");
        assert.equal(sortKey(usageKey(scoped, "k", "2026-01-02")), "#counter#@eu-west-1#usage#2026-01-02");
        assert.equal(sortKey(streamShardKey(scoped, "shardId-1")), "#counter#@eu-west-1#shard#shardId-1");
        assert.equal(sortKey(settlerCursorKey(scoped)), "#counter#@eu-west-1#cursor");
        assert.equal(healShard(scoped, "k"), `eu-west-1#${healShard({}, "k")}`);
    });

    it("gives every image exactly one owner: its stamp, member or not (a change of the members moves no life), else the home", () => {
        const image = (stamp?: { readonly S: string } | { readonly N: string }) => ({
            pk: { S: "k" },
            sk: { S: "a" },
            counter_token: { S: "t" },
            ...(stamp === undefined ? {} : { hc_region: stamp }),
        });
        assert.equal(ownerOf(image({ S: "eu-west-1" }), REGIONS), "eu-west-1");
        assert.equal(ownerOf(image({ S: "us-east-1" }), REGIONS), "us-east-1");
        // A region removed from the members keeps owning the lives its clients stamped.
        assert.equal(ownerOf(image({ S: "ap-south-1" }), REGIONS), "ap-south-1");
        assert.equal(ownerOf(image(), REGIONS), "us-east-1");
        assert.equal(ownerOf(image({ N: "1" }), REGIONS), "us-east-1");
        const member = { ...DEFAULT_LAYOUT, countersTableName: "resources-counters", regions: REGIONS };
        const home = { ...member, regions: { ...REGIONS, current: "us-east-1" } };
        const removed = { ...member, regions: { ...REGIONS, current: "ap-south-1" } };
        const everyRegion = [member, home, removed];
        for (const stamp of [{ S: "eu-west-1" }, { S: "us-east-1" }, { S: "ap-south-1" }, undefined]) {
            const owners = everyRegion.filter((c) => ownsImage(c, image(stamp)));
            assert.equal(owners.length, 1, JSON.stringify(stamp));
            assert.equal(owners[0]!.regions.current, stamp?.S ?? "us-east-1");
            // The selection counts an image in its owner only.
            assert.deepEqual(
                everyRegion.filter((c) => isLive(image(stamp), c)),
                owners,
                JSON.stringify(stamp),
            );
        }
    });
});
