/**
 * The regions setting (runtime/regions/): its checks name the field, it travels through every environment the
 * functions read, ownership has exactly one answer per image, and with no regions every key is the single-region one.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfillEnvironment, backfillFromEnv } from "../runtime/backfill/env";
import { HybridCounterClient } from "../runtime/client/client";
import { ownerOf, ownsImage, parseRegions, regionalCounterPrefix, type RegionsConfig } from "../runtime/regions";
import {
    bestEffortSortKey,
    clientConfigFromEnv,
    clientEnvironment,
    ConfigurationError,
    DEFAULT_LAYOUT,
    ENV,
    eventualSortKey,
    handlerConfigFromEnv,
    healShard,
    markerSortKey,
    settlerCursorSortKey,
} from "../runtime/shared/config";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { isLive, selectionConditionExpression } from "../runtime/shared/selection";

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
        const backfill = backfillFromEnv(
            backfillEnvironment({ ...config, regionAttribute: "made_in" }, { mode: "utilization", segments: 2 }),
        );
        assert.deepEqual(backfill.config.regions, REGIONS);
        assert.equal(backfill.config.regionAttribute, "made_in");
    });

    it("refuses regions without a counters table of their own, and a stamp attribute that is another field's, by variable", () => {
        assert.deepEqual(
            problemsOf(() =>
                handlerConfigFromEnv({ ...BASE_ENV, [ENV.countersTableName]: undefined, [ENV.regions]: JSON.stringify(REGIONS) }),
            ),
            [
                "[HYBRID_COUNTER_REGIONS] needs a counters table of its own ([countersTableName]): every region's counter items replicate to every member, apart from the user's items",
            ],
        );
        assert.deepEqual(
            problemsOf(() =>
                handlerConfigFromEnv({ ...BASE_ENV, [ENV.regions]: JSON.stringify(REGIONS), [ENV.regionAttribute]: "counter_token" }),
            ),
            ['[HYBRID_COUNTER_REGION_ATTRIBUTE] must differ from [tokenAttribute] (both are "counter_token")'],
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
        // Without regions: the keys the single-region counter has always written, byte for byte.
        assert.equal(bestEffortSortKey(DEFAULT_LAYOUT), "#counter#best-effort");
        assert.equal(eventualSortKey(DEFAULT_LAYOUT), "#counter#eventual");
        assert.equal(markerSortKey(DEFAULT_LAYOUT, "x"), "#counter#item#x");
        assert.equal(settlerCursorSortKey(DEFAULT_LAYOUT), "#counter#settler#cursor");
        assert.match(healShard("k"), /^\d+$/);
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
        assert.equal(bestEffortSortKey(scoped), "#counter#@eu-west-1#best-effort");
        assert.equal(eventualSortKey(scoped), "#counter#@eu-west-1#eventual");
        assert.equal(markerSortKey(scoped, "x"), "#counter#@eu-west-1#item#x");
        assert.equal(settlerCursorSortKey(scoped), "#counter#@eu-west-1#settler#cursor");
        assert.equal(healShard("k", scoped), `eu-west-1#${healShard("k")}`);
    });

    it("gives every image exactly one owner: its stamp when a member's, else the home", () => {
        const image = (stamp?: { readonly S: string } | { readonly N: string }) => ({
            pk: { S: "k" },
            sk: { S: "a" },
            counter_token: { S: "t" },
            ...(stamp === undefined ? {} : { hc_region: stamp }),
        });
        assert.equal(ownerOf(image({ S: "eu-west-1" }), REGIONS), "eu-west-1");
        assert.equal(ownerOf(image({ S: "us-east-1" }), REGIONS), "us-east-1");
        assert.equal(ownerOf(image({ S: "ap-south-1" }), REGIONS), "us-east-1");
        assert.equal(ownerOf(image(), REGIONS), "us-east-1");
        assert.equal(ownerOf(image({ N: "1" }), REGIONS), "us-east-1");
        const member = { ...DEFAULT_LAYOUT, regions: REGIONS };
        const home = { ...DEFAULT_LAYOUT, regions: { ...REGIONS, current: "us-east-1" } };
        for (const stamp of [{ S: "eu-west-1" }, { S: "us-east-1" }, { S: "ap-south-1" }, undefined]) {
            assert.equal(Number(ownsImage(member, image(stamp))) + Number(ownsImage(home, image(stamp))), 1, JSON.stringify(stamp));
            // The selection counts an image in its owner only.
            assert.equal(Number(isLive(image(stamp), member)) + Number(isLive(image(stamp), home)), 1, JSON.stringify(stamp));
        }
        // The same rule as a condition: the member's own stamp; the home's: none, or any but another member's.
        assert.deepEqual(selectionConditionExpression(member).names, { "#selToken": "counter_token", "#selRegion": "hc_region" });
        assert.equal(
            selectionConditionExpression(home).expression,
            "(attribute_type(#selToken, :selS)) AND (attribute_not_exists(#selRegion) OR NOT (#selRegion IN (:selOther0)))",
        );
        assert.equal(selectionConditionExpression(member).expression, "(attribute_type(#selToken, :selS)) AND (#selRegion = :selRegion)");
        assert.equal(selectionConditionExpression(DEFAULT_LAYOUT).expression, "attribute_type(#selToken, :selS)");
    });
});
