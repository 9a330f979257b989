/**
 * The checker's multi-region histories (test/fuzz/regions/): one engine, 2 or 3 member regions with their own
 * client, consumer, settler and backfill, no replication (every region's replica is the one table). The shipped
 * counting keeps the model (test/fuzz/regions/truth.ts) on short histories written for it and on histories drawn from
 * seeds; a consumer that counts records it does not own, a region that admits under the key's whole limit instead
 * of its base quota, and a strict delete of another region's life that gives back its own region's unit are rejected. Today's histories are drawn as before: the regions come from a source of
 * their own.
 */
import { strict as assert } from "node:assert";
import { createHash } from "node:crypto";
import { generateHistory, type FuzzEvent } from "./fuzz/history";
import { FUZZ_ENGINE } from "./fuzz/run";
import { FUZZ_REGIONS, generateRegionsHistory, regionalLongestId, type RegionalEvent, type RegionsHistory } from "./fuzz/regions/history";
import { admitsUnderWholeLimit, consumerCountsForeignRecords, foreignLivesReadAsOwn } from "./fuzz/regions/mutants";
import { runRegionsHistory, type RegionsMutation, type RegionsRunResult } from "./fuzz/regions/run";
import { useEngine } from "./support/engine";
import type { LocalEngine } from "../local/engine/engine";
import { FuzzUsageError, parseFuzzArgs, type FuzzOptions } from "../scripts/fuzz";

const at = (region: number, event: FuzzEvent): RegionalEvent => ({ ...event, region });
const consume = (region: number): RegionalEvent => at(region, { op: "consume", max: 25, overlap: 0, crash: "none" });
const short = (mode: RegionsHistory["mode"], regions: number, limit: number, events: RegionalEvent[], concurrency = 2): RegionsHistory => ({
    seed: 5,
    mode,
    selection: "client",
    placement: "separate",
    faultRate: 0,
    concurrency,
    limits: { k0: limit },
    preexisting: [],
    regions,
    events,
});

/** Runs `history` as shipped (it must keep the model) and mutated (it must not, with a violation matching `expected`). */
async function sharpensRegions(
    engine: LocalEngine,
    history: RegionsHistory,
    mutate: RegionsMutation,
    expected: RegExp,
): Promise<RegionsRunResult> {
    const sound = await runRegionsHistory(engine, history);
    const mutant = await runRegionsHistory(engine, history, { mutate });
    assert.deepEqual(sound.violations, []);
    assert.ok(
        mutant.violations.some((v) => expected.test(v)),
        `the checker missed the mutant: ${mutant.violations.join("; ") || "no violation"}`,
    );
    return sound;
}

describe("the checker's multi-region histories", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("leaves today's histories as they were: seed 1's history is the one drawn before regions existed", () => {
        // The digest of generateHistory({ seed: 1, ops: 200 }) as drawn before multi-region histories were added.
        const digest = createHash("sha256")
            .update(JSON.stringify(generateHistory({ seed: 1, ops: 200 })))
            .digest("hex");
        assert.equal(digest, "cab2fc6ac8dad92c9c53a0ccdba821bc500e5064392b1a671cd215e1a8f47c1c");
    });

    it("draws each event's region from the seed, over the base history's mode and limits", () => {
        // Prepare / Act
        const base = generateHistory({ seed: 4, ops: 200, selection: "client", counterShards: 1 });
        const history = generateRegionsHistory({ seed: 4, ops: 200, regions: 3 });
        const again = generateRegionsHistory({ seed: 4, ops: 200, regions: 3 });

        // Assess: the same seed gives the same history; its mode and limits are the base's; every region has events
        assert.deepEqual(again, history);
        assert.equal(history.mode, base.mode);
        assert.deepEqual(history.limits, base.limits);
        const used = new Set(history.events.flatMap((e) => (e.region === undefined ? [] : [e.region])));
        assert.deepEqual([...used].sort(), [0, 1, 2]);
        for (const event of history.events) {
            assert.ok(!["land", "invalid", "otherPut", "otherDelete", "otherFlip", "otherRetoken"].includes(event.op), event.op);
            assert.equal(event.op === "ttlDelete" || event.region !== undefined, true, JSON.stringify(event));
        }
        // An id drawn at the single-region marker limit takes the regional one (the region is in the marker's key).
        assert.ok(regionalLongestId(FUZZ_REGIONS.slice(0, 3)).length < 1024);
        assert.throws(() => generateRegionsHistory({ seed: 4, ops: 10, regions: 4 }), /\[regions\]/);
    });

    it("rejects a consumer that counts records another region owns; the shipped consumers count each item once", async () => {
        // Prepare: lives created in both regions, one of eu-west-1's deleted from us-east-1, each region's consumer run
        // (one event at a time, so the delete follows the create).
        const history = short(
            "utilization",
            2,
            9,
            [
                at(0, { op: "create", key: "k0", id: "i0" }),
                at(1, { op: "create", key: "k0", id: "i1" }),
                at(1, { op: "create", key: "k0", id: "i2" }),
                at(0, { op: "delete", key: "k0", id: "i2" }),
                consume(0),
                consume(1),
            ],
            1,
        );

        // Act / Assess
        const sound = await sharpensRegions(
            engine(),
            history,
            consumerCountsForeignRecords("eu-west-1"),
            /after the drain: k0 eu-west-1 eventual 2 != 1 live items eu-west-1 owns/,
        );
        assert.deepEqual(sound.stats.perRegion, {
            "us-east-1": { calls: 2, eventual: 1, bestEffort: 1 },
            "eu-west-1": { calls: 2, eventual: 1, bestEffort: 1 },
        });
    });

    it("rejects a region that admits under the whole limit: the sum stays within it, the region's base quota does not", async () => {
        // Prepare: limit 3 over 3 regions (a base quota of 1 each); eu-west-1 tries 3 lives.
        const history = short("strict", 3, 3, [
            at(1, { op: "tryCreate", key: "k0", id: "i0" }),
            at(1, { op: "tryCreate", key: "k0", id: "i1" }),
            at(1, { op: "tryCreate", key: "k0", id: "i2" }),
            consume(1),
        ]);

        // Act / Assess: shipped, eu-west-1 admits one; the mutant admits more than its quota
        const sound = await sharpensRegions(
            engine(),
            history,
            admitsUnderWholeLimit("eu-west-1", 3),
            /eu-west-1 best-effort [23] > its base quota 1 of limit 3/,
        );
        assert.equal(sound.stats.perRegion["eu-west-1"]!.bestEffort, 1);
    });

    it("rejects a strict delete of another region's life that gives back a unit of its own region", async () => {
        // Prepare: limit 4 (2 per region); a life in each region; us-east-1 deletes eu-west-1's.
        const history = short(
            "strict",
            2,
            4,
            [
                at(0, { op: "tryCreate", key: "k0", id: "i0" }),
                at(1, { op: "tryCreate", key: "k0", id: "i1" }),
                at(0, { op: "delete", key: "k0", id: "i1" }),
                consume(0),
                consume(1),
            ],
            1,
        );

        // Act / Assess: shipped, eu-west-1's unit stays until its heal; the mutant takes us-east-1's, whose life lives on
        const sound = await sharpensRegions(
            engine(),
            history,
            foreignLivesReadAsOwn("us-east-1"),
            /after #2 delete us-east-1 UpdateItemCommand: k0 us-east-1 owns 1 live client items > its best-effort 0/,
        );
        assert.deepEqual(sound.stats.perRegion, {
            "us-east-1": { calls: 2, eventual: 1, bestEffort: 1 },
            "eu-west-1": { calls: 1, eventual: 0, bestEffort: 0 },
        });
    });

    it("seed 3 (strict, 3 regions, 80 events, faults) keeps the model and replays request for request", async () => {
        // Prepare
        const history = generateRegionsHistory({ seed: 3, ops: 80, mode: "strict", faultRate: 0.1, regions: 3 });

        // Act
        const first = await runRegionsHistory(engine(), history);
        const second = await runRegionsHistory(engine(), history);

        // Assess
        assert.deepEqual(first.violations, []);
        assert.ok(first.stats.faults > 0 && first.stats.observations > 0, JSON.stringify(first.stats));
        assert.equal(Object.values(first.stats.perRegion).filter((r) => r.calls > 0).length, 3);
        assert.equal(second.trace, first.trace);
        assert.equal(second.stats.requests, first.stats.requests);
    });

    it("seed 3 (strict, 3 regions, 80 events) rejects both mutants in the history the seed draws", async () => {
        // Prepare
        const history = generateRegionsHistory({ seed: 3, ops: 80, mode: "strict", faultRate: 0.1, regions: 3 });

        // Act
        const quota = await runRegionsHistory(engine(), history, { mutate: admitsUnderWholeLimit("us-east-1", 3) });
        const foreign = await runRegionsHistory(engine(), history, { mutate: consumerCountsForeignRecords("eu-west-1") });

        // Assess
        assert.ok(
            quota.violations.some((v) => /us-east-1 best-effort \d+ > its base quota \d+ of limit \d+/.test(v)),
            quota.violations.join("; ") || "no violation",
        );
        assert.ok(
            foreign.violations.some((v) => /after the drain: k\d eu-west-1 eventual \d+ != \d+ live items eu-west-1 owns/.test(v)),
            foreign.violations.join("; ") || "no violation",
        );
    });

    it("npm run fuzz -- --regions takes 2 or 3, with the client selection and one shard", () => {
        assert.equal((parseFuzzArgs(["--regions", "3"]) as FuzzOptions).regions, 3);
        assert.equal((parseFuzzArgs([]) as FuzzOptions).regions, undefined);
        assert.throws(
            () => parseFuzzArgs(["--regions", "4"]),
            (e: Error) => e instanceof FuzzUsageError && /--regions/.test(e.message),
        );
        assert.throws(
            () => parseFuzzArgs(["--regions", "1"]),
            (e: Error) => e instanceof FuzzUsageError && /--regions/.test(e.message),
        );
        assert.throws(
            () => parseFuzzArgs(["--regions", "2", "--shards", "3"]),
            (e: Error) => e instanceof FuzzUsageError && /--shards/.test(e.message),
        );
    });
});
