/**
 * The hot-key ceiling's pure parts (bench/hot-key-ceiling-plan.ts): the search over offered rates, given a
 * function from rate to throttled share; the row it reports; the bound it checks; its flags; and, on DynamoDB Local,
 * the requests and units a refused strict create costs. No clock: the measurement itself is
 * `npm run bench -- --scenario hot-key-ceiling`.
 */
import { strict as assert } from "node:assert";
import { BenchUsageError, parseOptions } from "../bench/run";
import {
    boundHolds,
    ceilingChartSvg,
    ceilingRow,
    nextRate,
    parseShards,
    searchCeiling,
    THROTTLED_SHARE_LIMIT,
    type CeilingStep,
    type SearchResult,
} from "../bench/hot-key-ceiling-plan";
import { componentArgs, firstRate, measureRefusals } from "../bench/hot-key-ceiling";
import { useEngine } from "./support/engine";
import { runWorkload, type WorkloadTarget } from "../local/harness/workload";

/** A step whose throttled share is 0 up to `ceiling` and grows past it, as a partition's bucket does. */
function stepAt(ceiling: number) {
    const measured: number[] = [];
    const measure = async (rate: number): Promise<CeilingStep> => {
        measured.push(rate);
        return {
            offeredOpsPerSec: rate,
            sustainedOpsPerSec: rate,
            throttledBestEffortShare: rate <= ceiling ? 0 : Math.min(1, (rate - ceiling) / rate),
            exact: true,
            boundViolations: 0,
            apiErrors: 0,
            countRcu: 1,
        };
    };
    return { measure, measured };
}

const share = (step: CeilingStep) => step.throttledBestEffortShare;

describe("the hot-key ceiling: its search over offered rates", () => {
    it("doubles while nothing is refused, halves while nothing is accepted, then bisects", () => {
        // Assess
        assert.equal(nextRate(undefined, undefined, 1.25), 2.5);
        assert.equal(nextRate(2.5, undefined, 2.5), 5);
        assert.equal(nextRate(undefined, 1.25, 1.25), 0.625);
        assert.equal(nextRate(2.5, 5, 5), 3.75);
    });

    it("finds a ceiling between two doublings to within its resolution, and reports the highest rate accepted", async () => {
        // Prepare
        const { measure, measured } = stepAt(3.3);

        // Act
        const search = await searchCeiling(measure, share, { startRate: 1.25, maxSteps: 10, resolution: 0.1 });

        // Assess: 1.25, 2.5 accepted; 5 refused; 3.75 refused; 3.125 accepted; 3.4375 refused: within 10%.
        assert.deepEqual(measured, [1.25, 2.5, 5, 3.75, 3.125, 3.4375]);
        assert.equal(search.best?.rate, 3.125);
        assert.deepEqual(
            search.steps.map((s) => s.accepted),
            [true, true, false, false, true, false],
        );
    });

    it("stops after maxSteps measurements, keeping the best rate so far", async () => {
        // Prepare
        const { measure, measured } = stepAt(1_000);

        // Act
        const search = await searchCeiling(measure, share, { startRate: 1, maxSteps: 4 });

        // Assess
        assert.deepEqual(measured, [1, 2, 4, 8]);
        assert.equal(search.best?.rate, 8);
    });

    it("refuses a rate at a share of exactly 1% and accepts one just under it", async () => {
        // Prepare
        const shares = new Map([
            [1, THROTTLED_SHARE_LIMIT - 0.0001],
            [2, THROTTLED_SHARE_LIMIT],
        ]);

        // Act
        const search = await searchCeiling(
            async (rate) => rate,
            (rate) => shares.get(rate) ?? 1,
            { startRate: 1, maxSteps: 2 },
        );

        // Assess
        assert.deepEqual(
            search.steps.map((s) => [s.rate, s.accepted]),
            [
                [1, true],
                [2, false],
            ],
        );
    });

    it("halves down to its floor when even the first rate is refused, and accepts nothing above the ceiling", async () => {
        // Prepare
        const { measure, measured } = stepAt(0.2);

        // Act
        const search = await searchCeiling(measure, share, { startRate: 1, maxSteps: 10, minRate: 0.25 });

        // Assess
        assert.deepEqual(measured, [1, 0.5, 0.25]);
        assert.equal(search.best, undefined);
    });

    it("starts at half the shards' rate: a create's best-effort write costs 1 WCU on one shard, the consumer's lands per batch", () => {
        // Assess
        assert.equal(firstRate(10), 5);
        assert.equal(firstRate(1_000), 500);
        assert.equal(firstRate(10, 16), 80);
    });
});

describe("the hot-key ceiling: its rows", () => {
    const step = (rate: number, throttled: number): CeilingStep => ({
        offeredOpsPerSec: rate,
        sustainedOpsPerSec: rate * 0.98765,
        throttledBestEffortShare: throttled,
        exact: true,
        boundViolations: 0,
        apiErrors: 0,
        countRcu: 1,
    });

    it("reports the highest accepted step in the issue's shape, rounded", () => {
        // Prepare
        const search: SearchResult<CeilingStep> = {
            best: { rate: 2.5, result: step(2.5, 0.004321) },
            steps: [
                { rate: 2.5, share: 0.004321, accepted: true, result: step(2.5, 0.004321) },
                { rate: 5, share: 0.2, accepted: false, result: step(5, 0.2) },
            ],
        };

        // Act
        const row = ceilingRow("utilization", 1, search);

        // Assess
        assert.deepEqual(row, {
            mode: "utilization",
            shards: 1,
            sustainedOpsPerSec: 2.47,
            throttledBestEffortShare: 0.0043,
            exact: true,
            boundViolations: 0,
            apiErrors: 0,
            countRcu: 1,
        });
        assert.deepEqual(Object.keys(row), [
            "mode",
            "shards",
            "sustainedOpsPerSec",
            "throttledBestEffortShare",
            "exact",
            "boundViolations",
            "apiErrors",
            "countRcu",
        ]);
    });

    it("reports a sustained rate of 0, with the lowest step's figures, when no rate was accepted", () => {
        // Prepare
        const search: SearchResult<CeilingStep> = {
            best: undefined,
            steps: [
                { rate: 1, share: 0.5, accepted: false, result: step(1, 0.5) },
                { rate: 0.5, share: 0.1, accepted: false, result: step(0.5, 0.1) },
            ],
        };

        // Act
        const row = ceilingRow("strict", 1, search);

        // Assess
        assert.equal(row.sustainedOpsPerSec, 0);
        assert.equal(row.throttledBestEffortShare, 0.1);
    });
});

describe("the hot-key ceiling: the bound it observes", () => {
    it("utilization: best-effort never above live", () => {
        // Assess
        assert.equal(boundHolds("utilization", { bestEffort: 3, live: 3 }, 10), true);
        assert.equal(boundHolds("utilization", { bestEffort: 2, live: 3 }, 10), true);
        assert.equal(boundHolds("utilization", { bestEffort: 4, live: 3 }, 10), false);
    });

    it("strict: live never above best-effort, best-effort never above the limit", () => {
        // Assess
        assert.equal(boundHolds("strict", { bestEffort: 3, live: 3 }, 10), true);
        assert.equal(boundHolds("strict", { bestEffort: 4, live: 3 }, 10), true);
        assert.equal(boundHolds("strict", { bestEffort: 2, live: 3 }, 10), false);
        assert.equal(boundHolds("strict", { bestEffort: 11, live: 3 }, 10), false);
    });
});

describe("the hot-key ceiling: its flags and its shard counts", () => {
    it("takes --partition-wcu, --shards, --step-seconds and --max-steps, with defaults", () => {
        // Act
        const given = parseOptions([
            "--scenario",
            "hot-key-ceiling",
            "--partition-wcu",
            "20",
            "--shards",
            "1",
            "--step-seconds",
            "4",
            "--max-steps",
            "3",
            "--json",
        ]);
        const defaults = parseOptions(["--scenario", "hot-key-ceiling"]);

        // Assess
        assert.notEqual(given, "help");
        assert.notEqual(defaults, "help");
        if (given === "help" || defaults === "help") return;
        assert.deepEqual(given.ceiling, { partitionWcu: 20, shards: [1], stepSeconds: 4, maxSteps: 3, seed: 1 });
        assert.deepEqual(defaults.ceiling, { partitionWcu: 10, shards: [1, 4, 16], stepSeconds: 10, maxSteps: 6, seed: 1 });
        assert.deepEqual(defaults.scenarios, { approaches: false, hotTenant: false, backfill: false, healing: false });
    });

    it("refuses a shard count above the component's most, naming the flag", () => {
        for (const shards of ["17", "1,4,32"]) {
            // Assess
            assert.throws(
                () => parseOptions(["--scenario", "hot-key-ceiling", "--shards", shards]),
                (error: unknown) =>
                    error instanceof BenchUsageError &&
                    /^--shards \d+: a key's counting spreads over at most 16 shards/.test(error.message),
                shards,
            );
        }
    });

    it("refuses a malformed value or a flag of another scenario, naming the flag", () => {
        for (const [args, flag] of [
            [["--scenario", "hot-key-ceiling", "--shards", "two"], "--shards"],
            [["--scenario", "hot-key-ceiling", "--shards", "0"], "--shards"],
            [["--scenario", "hot-key-ceiling", "--partition-wcu", "0"], "--partition-wcu"],
            [["--scenario", "hot-key-ceiling", "--step-seconds", "1"], "--step-seconds"],
            [["--scenario", "hot-key-ceiling", "--max-steps", "x"], "--max-steps"],
            [["--scenario", "hot-key-ceiling", "--ops", "100"], "--ops"],
            [["--scenario", "hot-key-ceiling", "--no-parity"], "--no-parity"],
            [["--partition-wcu", "10"], "--partition-wcu"],
            [["--scenario", "hot-tenant", "--shards", "1"], "--shards"],
        ] as const) {
            // Assess
            assert.throws(
                () => parseOptions([...args]),
                (error: unknown) => error instanceof BenchUsageError && error.message.startsWith(flag),
                args.join(" "),
            );
        }
    });

    it("parses a list of shard counts once each", () => {
        // Assess
        assert.deepEqual(parseShards(undefined), [1, 4, 16]);
        assert.deepEqual(parseShards("1,1"), [1]);
        assert.deepEqual(parseShards("16, 3,16"), [16, 3]);
    });

    it("passes a mode and a shard count to the component (1 shard: today's args)", () => {
        // Assess
        assert.deepEqual(componentArgs("strict", 1), { counterMode: "strict" });
        assert.deepEqual(componentArgs("utilization", 4), { counterMode: "utilization", counterShards: 4 });
    });
});

describe("the hot-key ceiling: the workload's pace", () => {
    /** A target that records its calls and answers at once. */
    const recording = () => {
        const calls: string[] = [];
        const target: WorkloadTarget = {
            create: async (_key, id) => (calls.push(id), { created: true, count: null }),
            tryCreate: async (_key, id) => (calls.push(id), { created: true, count: null }),
            delete: async () => ({ deleted: false }),
        };
        return { calls, target };
    };

    it("asks stop after each worker's slot, so a caller that waited past the end issues nothing", async () => {
        // Prepare: slots are released by hand; the step ends after the second.
        const { calls, target } = recording();
        const waiting: Array<() => void> = [];
        let released = 0;
        const pace = () => new Promise<void>((resolve) => waiting.push(resolve));
        const release = async () => {
            released++;
            waiting.shift()!();
            await new Promise((r) => setImmediate(r));
        };

        // Act
        const run = runWorkload(target, {
            ops: 100,
            keys: ["k"],
            concurrency: 4,
            deleteRatio: 0,
            seed: 1,
            pace,
            stop: () => released > 2,
        });
        await new Promise((r) => setImmediate(r));
        await release();
        await release();
        const waitingAtTheEnd = waiting.length;
        while (waiting.length > 0) {
            await release();
        }
        const result = await run;

        // Assess: four workers waited for slots at once; only the two released before the end issued a call.
        assert.equal(waitingAtTheEnd, 4);
        assert.equal(result.ops, 2);
        assert.deepEqual(calls, ["item-1-0", "item-1-1"]);
    });

    it("never issues more than ops, however many workers waited for a slot at once", async () => {
        // Prepare
        const { calls, target } = recording();

        // Act
        const result = await runWorkload(target, {
            ops: 3,
            keys: ["k"],
            concurrency: 8,
            deleteRatio: 0,
            seed: 1,
            pace: () => new Promise((r) => setImmediate(r)),
        });

        // Assess
        assert.equal(result.ops, 3);
        assert.equal(calls.length, 3);
    });
});

describe("the hot-key ceiling: strict mode's cost at its limit (DynamoDB Local)", function () {
    const engine = useEngine({ parity: false });

    it("an unsharded key refuses with one conditional write; 3 shards with one refused write and one serializable read of the caps", async () => {
        // Act
        const one = await measureRefusals(engine(), 1);
        const three = await measureRefusals(engine(), 3);
        // Assess
        assert.deepEqual(one, {
            shards: 1,
            limit: 32,
            requestsPerRefusal: 1,
            writeUnitsPerRefusal: 1,
            readUnitsPerRefusal: 0,
            exact: true,
        });
        assert.deepEqual(three, {
            shards: 3,
            limit: 32,
            requestsPerRefusal: 2,
            writeUnitsPerRefusal: 1,
            // A transactional read bills 2 RCU per item: the three shards' caps read at once (runtime/shards/caps.ts).
            readUnitsPerRefusal: 6,
            exact: true,
        });
    });
});

describe("the hot-key ceiling: its chart", () => {
    it("draws one group per shard count with a bar per mode, labelled with its rate", () => {
        // Prepare
        const row = (mode: "utilization" | "strict", shards: number, rate: number) => ({
            mode,
            shards,
            sustainedOpsPerSec: rate,
            throttledBestEffortShare: 0,
            exact: true,
            boundViolations: 0,
            apiErrors: 0,
            countRcu: shards,
        });
        // Act
        const svg = ceilingChartSvg({
            partitionWcu: 10,
            rows: [row("utilization", 1, 2), row("strict", 1, 2), row("utilization", 16, 43.4), row("strict", 16, 40)],
        });
        // Assess
        assert.deepEqual(
            [...svg.matchAll(/<text [^>]*text-anchor="middle">([^<]+)<\/text>/g)].map((m) => m[1]),
            ["2", "2", "1 shard", "43.4", "40", "16 shards"],
        );
        assert.equal([...svg.matchAll(/<rect [^>]*fill="#1f77b4"/g)].length, 2);
        assert.equal([...svg.matchAll(/<rect [^>]*fill="#d62728"/g)].length, 2);
    });
});
