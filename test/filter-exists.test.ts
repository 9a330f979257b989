/**
 * local/aws/filter.ts, Lambda's event filtering as the local twin applies it: `{"exists": false}` on a leaf whose
 * parent path is absent, as AWS evaluates it on the flattened leaf path, against the documented examples and the
 * patterns of a multi-region counter's stream mappings.
 */
import * as assert from "node:assert/strict";
import { regionalFilterPatterns } from "../components/regions";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";
import { matches, matchesAny, parsePattern } from "../local/aws/filter";

describe("Lambda event filtering (local/aws/filter.ts): exists false", () => {
    it("matches the documented examples: a field that is absent, not one that is present", () => {
        // Prepare: EventBridge's content-filtering example, and Lambda's `"State": [{"exists": false}]`.
        const cCount = parsePattern('{"detail":{"c-count":[{"exists":false}]}}');
        const state = parsePattern('{"State":[{"exists":false}]}');

        // Act + Assess
        assert.equal(matches({ detail: { "d-count": 5 } }, cCount), true);
        assert.equal(matches({ detail: { "c-count": 5 } }, cCount), false);
        assert.equal(matches({ State: "CREATED" }, state), false);
        assert.equal(matches({ Other: 1 }, state), true);
    });

    it("matches an absent leaf whose parent is absent too, and exists true never does", () => {
        // Prepare
        const absent = parsePattern('{"detail":{"c-count":[{"exists":false}]}}');
        const present = parsePattern('{"detail":{"c-count":[{"exists":true}]}}');
        const deep = parsePattern('{"dynamodb":{"NewImage":{"hc_region":{"S":[{"exists":false}]}}}}');

        // Act + Assess
        assert.equal(matches({ source: "x" }, absent), true);
        assert.equal(matches({ source: "x" }, present), false);
        assert.equal(matches({ dynamodb: { NewImage: { pk: { S: "k" } } } }, deep), true, "no stamp");
        assert.equal(matches({ dynamodb: { NewImage: { hc_region: { S: "eu-west-1" } } } }, deep), false, "a stamp");
        assert.equal(matches({ dynamodb: {} }, deep), true, "no image at all");
    });

    it("keeps every other rule false on an absent parent: a value, a prefix, anything-but, numeric", () => {
        for (const rule of ['"x"', '{"prefix":"x"}', '{"anything-but":["x"]}', '{"numeric":[">",0]}', '{"exists":true}']) {
            // Act + Assess
            assert.equal(matches({}, parsePattern(`{"a":{"b":[${rule}]}}`)), false, rule);
        }
    });

    it("delivers each record to exactly its owner's mapping among a multi-region counter's regions", () => {
        // Prepare: the home's and a member's patterns, and one record per kind of owner.
        const members = [
            { region: "us-east-1", role: "home" as const },
            { region: "eu-west-1", role: "member" as const },
        ];
        const patterns = (current: string) =>
            regionalFilterPatterns(DEFAULT_LAYOUT, { current, members }, "hc_region").map((p) => parsePattern(p));
        const image = (stamp?: string) => ({
            pk: { S: "k" },
            sk: { S: "i" },
            counter_token: { S: "t" },
            ...(stamp === undefined ? {} : { hc_region: { S: stamp } }),
        });
        const insert = (stamp?: string) => ({ eventName: "INSERT", dynamodb: { NewImage: image(stamp) } });
        const remove = (stamp?: string) => ({ eventName: "REMOVE", dynamodb: { OldImage: image(stamp) } });
        const owners = (record: unknown) => ["us-east-1", "eu-west-1"].filter((r) => matchesAny(record, patterns(r)));

        // Act + Assess
        assert.deepEqual(owners(insert("us-east-1")), ["us-east-1"]);
        assert.deepEqual(owners(insert("eu-west-1")), ["eu-west-1"]);
        assert.deepEqual(owners(insert()), ["us-east-1"], "no stamp: home");
        assert.deepEqual(owners(insert("ap-south-1")), ["us-east-1"], "a removed region's stamp: home");
        assert.deepEqual(owners(remove("eu-west-1")), ["eu-west-1"]);
        assert.deepEqual(owners(remove()), ["us-east-1"]);
        // Another writer's PutItem dropped the stamp: both regions must see the record (one uncounts, one counts).
        assert.deepEqual(owners({ eventName: "MODIFY", dynamodb: { OldImage: image("eu-west-1"), NewImage: image() } }), [
            "us-east-1",
            "eu-west-1",
        ]);
        // An item no one counts (no token) reaches no region.
        assert.deepEqual(owners({ eventName: "INSERT", dynamodb: { NewImage: { pk: { S: "k" }, sk: { S: "i" } } } }), []);
    });
});
