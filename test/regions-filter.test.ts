/**
 * Each region's stream filter (components/regions/filter.ts), for every selection, and the bound the component keeps
 * on it: at most 5 patterns of at most 4,096 characters (Lambda's limits), refused naming [regions.members] past it.
 */
import * as assert from "node:assert/strict";
import { COUNTER_REGIONS_VARIABLE } from "../policy/index";
import { FILTER_LIMITS, REGIONS_ENV, filterLengthProblems, regionalFilterPatterns, type RegionsSetting } from "../components/regions";
import { hybridCounterArgsProblems } from "../components/validation";
import { DEFAULT_LAYOUT, type CounterTableLayout } from "../runtime/shared/config";

const MEMBERS: RegionsSetting["members"] = [
    { region: "us-east-1", role: "home" },
    { region: "eu-west-1", role: "member" },
];
const at = (current: string): RegionsSetting => ({ current, members: MEMBERS });

describe("each region's stream filter", () => {
    it("adds the owner's condition to the image the selection names: attribute", () => {
        // Prepare
        const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, selection: { kind: "attribute", name: "kind", value: "order" } };
        const kind = '"kind":{"S":["order"]}';

        // Act + Assess
        assert.deepEqual(regionalFilterPatterns(layout, at("eu-west-1"), "hc_region"), [
            `{"dynamodb":{"NewImage":{${kind},"hc_region":{"S":["eu-west-1"]}}}}`,
            `{"dynamodb":{"OldImage":{${kind},"hc_region":{"S":["eu-west-1"]}}}}`,
        ]);
        assert.deepEqual(regionalFilterPatterns(layout, at("us-east-1"), "stamp"), [
            `{"dynamodb":{"NewImage":{${kind},"stamp":{"S":[{"anything-but":["eu-west-1"]}]}}}}`,
            `{"dynamodb":{"NewImage":{${kind},"stamp":{"S":[{"exists":false}]}}}}`,
            `{"dynamodb":{"OldImage":{${kind},"stamp":{"S":[{"anything-but":["eu-west-1"]}]}}}}`,
            `{"dynamodb":{"OldImage":{${kind},"stamp":{"S":[{"exists":false}]}}}}`,
        ]);
    });

    it("adds the owner's condition on each image beside the keys' prefix: sortKeyPrefix", () => {
        // Prepare
        const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, selection: { kind: "sortKeyPrefix", prefix: "order#" } };
        const keys = '"Keys":{"sk":{"S":[{"prefix":"order#"}]}}';

        // Act + Assess
        assert.deepEqual(regionalFilterPatterns(layout, at("eu-west-1"), "hc_region"), [
            `{"dynamodb":{${keys},"NewImage":{"hc_region":{"S":["eu-west-1"]}}}}`,
            `{"dynamodb":{${keys},"OldImage":{"hc_region":{"S":["eu-west-1"]}}}}`,
        ]);
        assert.equal(regionalFilterPatterns(layout, at("us-east-1"), "hc_region").length, 4);
    });

    it("stays within Lambda's limits with ten regions and every name at its longest", () => {
        // Prepare: ten members, 255-byte attribute names.
        const long = (c: string) => c.repeat(255);
        const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, tokenAttribute: long("t") };
        const members: RegionsSetting["members"] = Array.from({ length: 10 }, (_, i) => ({
            region: `ap-southeast-${i + 1}`,
            role: i === 0 ? "home" : "member",
        }));

        // Act
        const home = regionalFilterPatterns(layout, { current: "ap-southeast-1", members }, long("r"));

        // Assess
        assert.equal(home.length, 4);
        assert.ok(Math.max(...home.map((p) => p.length)) < 1_200, String(Math.max(...home.map((p) => p.length))));
        assert.deepEqual(filterLengthProblems(layout, { current: "ap-southeast-2", members }, long("r")), []);
    });

    it("refuses, naming [regions.members], a setting whose home filter would pass 4,096 characters", () => {
        // Prepare: 500 members; the home's anything-but lists 499 of them, about 10 characters each.
        const members = Array.from({ length: 500 }, (_, i) => ({
            region: `us-${String.fromCharCode(97 + (i % 26))}${String.fromCharCode(97 + Math.floor(i / 26))}-1`,
            role: i === 0 ? ("home" as const) : ("member" as const),
        }));
        const args = {
            tableArn: "arn:aws:dynamodb:us-ab-1:123456789012:table/orders",
            regions: { current: members[1]!.region, members, countersTableName: "orders-counters" },
        };
        const longest = Math.max(
            ...regionalFilterPatterns(DEFAULT_LAYOUT, { current: members[0]!.region, members }, "hc_region").map((p) => p.length),
        );

        // Act
        const problems = hybridCounterArgsProblems(args);

        // Assess
        assert.ok(longest > FILTER_LIMITS.patternCharacters);
        assert.deepEqual(problems, [
            `[regions.members] makes the home region's stream filter 4 patterns, the longest ${longest} characters (us-aa-1): ` +
                "Lambda takes at most 5 patterns of 4096 characters",
        ]);
    });

    it("names its environment variable as the policy pack reads it", () => {
        // Assess
        assert.equal(REGIONS_ENV.regions, COUNTER_REGIONS_VARIABLE);
    });
});
