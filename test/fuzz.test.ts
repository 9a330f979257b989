/**
 * The model-based checker in every `npm test`: a few seeds chosen to cover the swarm's dimensions (asserted below),
 * each a random history of every party on DynamoDB Local checked against the contract (test/fuzz/run.ts), and every
 * mutant (test/fuzz/mutants.ts) with a seed that rejects it. A failing seed is shrunk and printed as a reproduction.
 * `npm run fuzz` runs many more seeds (docs/checker.md).
 */
import { strict as assert } from "node:assert";
import { generateHistory, type GenerateOptions, type History } from "./fuzz/history";
import { MUTANTS } from "./fuzz/mutants";
import { lateAttemptUnderRetokenedTombstone, oldLifeDeletesUnderHeals } from "./fuzz/targeted";
import { FUZZ_ENGINE, runHistory } from "./fuzz/run";
import { reproduction, shrinkHistory } from "./fuzz/shrink";
import { boundProblems, delta } from "./fuzz/model";
import { useEngine } from "./support/engine";
import type { FuzzSystem } from "./fuzz/system";

/** Seeds of every npm test: together they cover the dimensions asserted below. */
const SEEDS = [6, 7, 24, 25, 28, 42, 48, 53];
const OPS = 150;

/**
 * A seed (and its options) that rejects each mutant, found with `npm run fuzz -- --mutants`; or, for a guard no random
 * seed reaches, a targeted history (test/fuzz/targeted.ts) on a seed whose schedule does.
 */
type MutantHistory =
    { readonly seed: number; readonly options: GenerateOptions } | { readonly seed: number; readonly targeted: (seed: number) => History };
const MUTANT_SEEDS: Readonly<Record<keyof typeof MUTANTS, MutantHistory>> = {
    consumerBlindToMarks: { seed: 1, options: { ops: 80 } },
    noSkippedRead: { seed: 1, options: { ops: 150 } },
    healWriteRepeats: { seed: 24, options: { ops: 200, faultRate: 0.2 } },
    healWithoutGeneration: { seed: 24, options: { ops: 200, faultRate: 0.2 } },
    decrementToBase: { seed: 1, options: { ops: 80 } },
    deleteDespiteFailedDecrement: { seed: 3, options: { ops: 150 } },
    releaseWithoutGeneration: { seed: 3, targeted: oldLifeDeletesUnderHeals },
    healBlindToReleases: { seed: 8, options: { ops: 200, mode: "strict", faultRate: 0.2 } },
    backfillCountsFromTable: { seed: 5, options: { ops: 150 } },
    putOverAnything: { seed: 1, options: { ops: 80 } },
    admitPastLimit: { seed: 8, options: { ops: 150, mode: "strict" } },
    staleEntriesKept: { seed: 1, options: { ops: 80 } },
    thresholdsWithoutOutbox: { seed: 1, options: { ops: 80 } },
    auditBlind: { seed: 6, options: { ops: 80 } },
    dropAfterWrite: { seed: 26, options: { ops: 150, faultRate: 0.2 } },
    tombstoneDatedByTokenOnly: { seed: 1, targeted: lateAttemptUnderRetokenedTombstone },
    uncappedPastCaps: { seed: 10556, options: { ops: 150 } },
};

/** A shrunk history kept as a test: what its seed drew, on the client's selection and a counters table of its own. */
function kept(fields: Omit<History, "selection" | "placement" | "preexisting">): History {
    return { selection: "client", placement: "separate", preexisting: [], ...fields };
}

describe("the model-based checker", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("the seeds of every npm test cover both modes, each selection in each mode, 1, 3 and 8 shards in each mode, both horizons and placements, healing, bursts and changing settings", () => {
        // Prepare / Act
        const histories = SEEDS.map((seed) => generateHistory(seed, { ops: OPS }));
        const each = <T>(pick: (h: (typeof histories)[number]) => T) => new Set(histories.map(pick));

        // Assess
        for (const mode of ["utilization", "strict"] as const) {
            const ofMode = histories.filter((h) => h.mode === mode);
            assert.deepEqual(new Set(ofMode.map((h) => h.selection)), new Set(["client", "prefix", "attribute"]), mode);
            assert.deepEqual(new Set(ofMode.map((h) => h.counterShards)), new Set([1, 3, 8]), mode);
        }
        assert.deepEqual(
            each((h) => h.profile.horizon),
            new Set(["short", "long"]),
        );
        assert.deepEqual(
            each((h) => h.placement),
            new Set(["separate", "same-table"]),
        );
        assert.deepEqual(
            each((h) => h.profile.healing),
            new Set([true, false]),
        );
        assert.deepEqual(
            each((h) => h.profile.bursts),
            new Set([true, false]),
        );
        assert.deepEqual(
            each((h) => h.profile.settings),
            new Set([true, false]),
        );
        const ops = new Set(histories.flatMap((h) => h.events.map((e) => e.op)));
        for (const op of [
            "advance",
            "setLimit",
            "setDefault",
            "pause",
            "resume",
            "burst",
            "backfill",
            "otherPut",
            "otherFlip",
            "ttlDelete",
            "land",
            "redrive",
            "invalid",
        ] as const) {
            assert.ok(ops.has(op), `no seed has a ${op} event`);
        }
    });

    for (const seed of SEEDS) {
        it(`seed ${seed} keeps the contract`, async () => {
            // Prepare
            const history = generateHistory(seed, { ops: OPS });

            // Act
            const result = await runHistory(engine(), history);

            // Assess
            if (result.violations.length > 0) {
                const shrunk = await shrinkHistory(engine(), history, result, { maxRuns: 20 });
                assert.fail(reproduction(shrunk.history, shrunk.result));
            }
            assert.equal(result.stats.events, OPS);
            assert.ok(result.stats.requests > OPS, `only ${result.stats.requests} requests ran`);
        });
    }

    it("strict, seed 39 at 20 % faults, shrunk: a life whose tombstone the table's TTL removed, brought back by its late put attempt, holds no slot, and its delete's release is allowed for", async () => {
        // Prepare: i1's first put attempt is held past its call (which put it again); i1 is deleted, TTL removes its
        // tombstone, and the held attempt lands
        const history = kept({
            seed: 39,
            mode: "strict",
            counterShards: 8,
            faultRate: 0.2,
            concurrency: 5,
            profile: { horizon: "short", settings: true, bursts: false, healing: false },
            limits: {},
            defaultLimit: 3,
            events: [
                { op: "tryCreate", key: "k0", id: "i3", limit: 2 },
                { op: "tryCreate", key: "k0", id: "i1", late: true, limit: 2 },
                { op: "count", key: "k0" },
                { op: "tryCreate", key: "k0", id: "i0" },
                { op: "tryCreate", key: "k0", id: "i0" },
                { op: "tryCreate", key: "k0", id: "i3" },
                { op: "delete", key: "k0", id: "i1" },
                { op: "redrive" },
                { op: "settle", keyBudget: 2 },
                { op: "tryCreate", key: "k0", id: "i3" },
                { op: "ttlDelete", key: "k0", id: "i1" },
            ],
        });

        // Act
        const result = await runHistory(engine(), history);

        // Assess
        assert.deepEqual(result.violations, []);
        assert.equal(result.stats.resurrected, 1, "the late attempt brought i1 back");
    });

    it("utilization, seed 3 at 20 % faults, shrunk: a heal judges lives by its clock before its shard read, however late it reads the items: young lives other writers ended keep their entry's units, as the allowance says", async () => {
        // Prepare: a heal reads the shard, then its read of the items fails until the clock has moved hours; i2 and i3,
        // young at the shard read, were retokened by another writer meanwhile
        const history = kept({
            seed: 3,
            mode: "utilization",
            counterShards: 1,
            faultRate: 0.2,
            concurrency: 5,
            profile: { horizon: "long", settings: false, bursts: false, healing: false },
            limits: { k0: 1 },
            events: [
                { op: "create", key: "k0", id: "i0" },
                { op: "create", key: "k0", id: "i1" },
                { op: "delete", key: "k0", id: "i3" },
                { op: "count", key: "k0" },
                { op: "ttlDelete", key: "k0", id: "i3" },
                { op: "tryCreate", key: "k0", id: "i1" },
                { op: "count", key: "k0" },
                { op: "tryCreate", key: "k0", id: "i0" },
                { op: "advance", ms: 21600000 },
                { op: "delete", key: "k0", id: "i1" },
                { op: "tryCreate", key: "k0", id: "i2" },
                { op: "redrive" },
                { op: "tryCreate", key: "k0", id: "i3" },
                { op: "create", key: "k0", id: "i2" },
                { op: "settle", keyBudget: 1 },
                { op: "delete", key: "k0", id: "i3" },
                { op: "create", key: "k0", id: "i0" },
                { op: "create", key: "k0", id: "i1" },
                { op: "count", key: "k0" },
                { op: "create", key: "k0", id: "i0" },
                { op: "land" },
                { op: "otherGrow", key: "k0", id: "i0" },
                { op: "tryCreate", key: "k0", id: "i1" },
                { op: "tryCreate", key: "k0", id: "i3" },
                { op: "tryCreate", key: "k0", id: "i0" },
                { op: "settle", keyBudget: 50 },
                { op: "tryCreate", key: "k0", id: "i1" },
                { op: "create", key: "k0", id: "i0" },
                { op: "delete", key: "k0", id: "i2" },
                { op: "delete", key: "k0", id: "i3" },
                { op: "count", key: "k0" },
                { op: "delete", key: "k0", id: "i1" },
                { op: "delete", key: "k0", id: "i0" },
                { op: "create", key: "k0", id: "i2" },
                { op: "delete", key: "k0", id: "i2" },
                { op: "count", key: "k0" },
                { op: "tryCreate", key: "k0", id: "i0" },
                { op: "count", key: "k0" },
                { op: "create", key: "k0", id: "i3" },
                { op: "count", key: "k0" },
                { op: "tryCreate", key: "k0", id: "i2" },
                { op: "consume", max: 11, overlap: 0, crash: "none" },
                { op: "create", key: "k0", id: "i1" },
                { op: "delete", key: "k0", id: "i1" },
                { op: "advance", ms: 3600000 },
                { op: "consume", max: 3, overlap: 0, crash: "before" },
                { op: "tryCreate", key: "k0", id: "i3" },
                { op: "create", key: "k0", id: "i3" },
                { op: "tryCreate", key: "k0", id: "i0" },
                { op: "redrive" },
                { op: "invalid", call: "count", key: "k0", field: "id" },
                { op: "otherRetoken", key: "k0", id: "i2" },
                { op: "otherRetoken", key: "k0", id: "i3" },
                { op: "consume", max: 1, overlap: 0, crash: "none" },
                { op: "settle", keyBudget: 2 },
                { op: "advance", ms: 21600000 },
                { op: "create", key: "k0", id: "i1" },
                { op: "otherRetoken", key: "k0", id: "i1" },
                { op: "advance", ms: 21600000 },
            ],
        });

        // Act
        const result = await runHistory(engine(), history);

        // Assess
        assert.deepEqual(result.violations, []);
        assert.ok(result.stats.healWrites > 0, "a heal wrote");
    });

    for (const [name, entry] of Object.entries(MUTANT_SEEDS)) {
        const { seed } = entry;
        it(`rejects the mutant ${name}: ${MUTANTS[name as keyof typeof MUTANTS].description}`, async () => {
            // Prepare
            const history = "targeted" in entry ? entry.targeted(seed) : generateHistory(seed, entry.options);

            // Act
            const result = await runHistory(engine(), history, { mutant: MUTANTS[name as keyof typeof MUTANTS].mutate });
            const clean = await runHistory(engine(), history);

            // Assess: the mutant is what breaks the contract, not the history
            assert.ok(
                result.violations.length > 0,
                `seed ${seed} no longer rejects ${name}: find another with npm run fuzz -- --mutant ${name}`,
            );
            assert.deepEqual(clean.violations, [], `seed ${seed} fails without ${name} too`);
        });
    }

    it("names a seed for every mutant", () => {
        assert.deepEqual(Object.keys(MUTANT_SEEDS).sort(), Object.keys(MUTANTS).sort());
    });
});

describe("the checker's model (test/fuzz/model.ts)", () => {
    const system = {
        config: {
            sortKey: "sk",
            counterPrefix: "#counter#",
            tokenAttribute: "counter_token",
            deletedAttribute: "deleted",
            countAttribute: "count",
            selection: { kind: "client" },
            mode: "utilization",
        },
        generation: "g1",
        shards: 1,
    } as unknown as FuzzSystem;
    const item = (id: string, extra: Record<string, unknown> = {}) => ({
        sk: { S: id },
        counter_token: { S: `t-${id}` },
        hc_counted: { S: "g1" },
        ...extra,
    });

    it("moves eventual by counts(new) - counts(old): a flag, a soft delete, another generation, a counter item", () => {
        const record = (oldImage: unknown, newImage: unknown) => ({ dynamodb: { OldImage: oldImage, NewImage: newImage } }) as never;
        assert.equal(delta(record(undefined, item("a")), system), 1);
        assert.equal(delta(record(item("a"), item("a", { deleted: { BOOL: true } })), system), -1);
        assert.equal(delta(record(undefined, item("a", { hc_counted: { S: "g2" } })), system), 0);
        assert.equal(delta(record({ sk: { S: "a" }, counter_token: { S: "t" } }, item("a")), system), 1);
        assert.equal(delta(record(undefined, item("#counter#eventual")), system), 0);
    });

    it("holds utilization to the live lives plus the allowance, and strict to at least the owned lives less those brought back without a slot", () => {
        const state = (units: number) => ({ items: [], shards: [{ count: { N: String(units) } }], eventual: undefined });
        const allowed = (over: number, under: number) => ({ over: () => over, under: () => under });
        assert.deepEqual(boundProblems(state(2), system, [1], allowed(1, 5)), []);
        assert.equal(boundProblems(state(3), system, [1], allowed(1, 5)).length, 1);
        const strict = { ...system, config: { ...system.config, mode: "strict" } } as FuzzSystem;
        assert.deepEqual(boundProblems(state(1), strict, [1], allowed(5, 0)), []);
        assert.equal(boundProblems(state(0), strict, [1], allowed(5, 0)).length, 1);
        assert.deepEqual(boundProblems(state(0), strict, [1], allowed(0, 1)), []);
        assert.equal(boundProblems(state(-1), strict, [1], allowed(0, 1)).length, 1);
    });
});
