/**
 * The multi-region checker in every `npm test` (test/fuzz/regions/): seeds covering two and three regions, both modes,
 * a region joining the members, limits changed in one region and read elsewhere once replicated, replication that lags
 * and loses writes to later ones, and each replica's TTL; and the regions mutant with a seed that rejects it.
 */
import { strict as assert } from "node:assert";
import { generateRegionsHistory } from "./fuzz/regions/history";
import { REGIONS_MUTANTS } from "./fuzz/regions/mutants";
import { runRegionsHistory } from "./fuzz/regions/run";
import { FUZZ_ENGINE } from "./fuzz/run";
import { useEngine } from "./support/engine";

/** Seeds of every npm test (coverage asserted below). */
const SEEDS = [1, 2, 4, 5, 8];
const OPS = 120;

/** A seed that rejects each regions mutant, found with `npm run fuzz -- --regions 3 --mutant <name>`. */
const MUTANT_SEEDS: Readonly<
    Record<keyof typeof REGIONS_MUTANTS, { readonly seed: number; readonly ops: number; readonly regions: number }>
> = {
    regionRaisesAlone: { seed: 7, ops: 120, regions: 3 },
    regionCapLeftBehind: { seed: 2, ops: 120, regions: 3 },
};

describe("the multi-region checker", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("the seeds of every npm test cover two and three regions, both modes, a joining region, limits changed, two shards and TTL sweeps", () => {
        const histories = SEEDS.map((seed) => generateRegionsHistory(seed, { ops: OPS }));
        assert.deepEqual(new Set(histories.map((h) => h.regions.length)), new Set([2, 3]));
        assert.deepEqual(new Set(histories.map((h) => h.mode)), new Set(["utilization", "strict"]));
        assert.deepEqual(new Set(histories.map((h) => h.counterShards)), new Set([1, 2]));
        assert.ok(
            histories.some((h) => h.members.length < h.regions.length && h.events.some((e) => e.op === "adopt")),
            "no seed adds a member",
        );
        for (const op of ["setLimit", "ttl", "replicate", "advance", "settle", "redrive"] as const) {
            assert.ok(
                histories.some((h) => h.events.some((e) => e.op === op)),
                `no seed has a ${op} event`,
            );
        }
    });

    for (const seed of SEEDS) {
        it(`seed ${seed} keeps the contract in every region`, async () => {
            // Prepare
            const history = generateRegionsHistory(seed, { ops: OPS });

            // Act
            const result = await runRegionsHistory(engine(), history);

            // Assess
            assert.deepEqual(
                result.violations,
                [],
                `replay: npm run fuzz -- --regions ${history.regions.length} --replay ${seed} --ops ${OPS}`,
            );
            assert.ok(result.stats.replicated > 0, "nothing replicated");
        });
    }

    for (const [name, { seed, ops, regions }] of Object.entries(MUTANT_SEEDS)) {
        it(`rejects the mutant ${name}: ${REGIONS_MUTANTS[name as keyof typeof REGIONS_MUTANTS].description}`, async () => {
            // Prepare
            const history = generateRegionsHistory(seed, { ops, regions });

            // Act
            const result = await runRegionsHistory(engine(), history, {
                mutant: REGIONS_MUTANTS[name as keyof typeof REGIONS_MUTANTS].mutate,
            });
            const clean = await runRegionsHistory(engine(), history);

            // Assess: the mutant is what breaks the contract, not the history
            assert.ok(result.violations.length > 0, `seed ${seed} no longer rejects ${name}`);
            assert.deepEqual(clean.violations, [], `seed ${seed} fails without ${name} too`);
        });
    }

    it("replays a seed with the same trace", async () => {
        const history = generateRegionsHistory(3, { ops: 60 });
        const [a, b] = [await runRegionsHistory(engine(), history), await runRegionsHistory(engine(), history)];
        assert.equal(a.trace, b.trace);
        assert.equal(a.stats.requests, b.stats.requests);
    });
});
