/**
 * The heal's arithmetic for one best-effort shard (runtime/heal/plan.ts): old lives from the table, young ones from the
 * ledger's entries, stale entries removed, and what is left for a later heal. Pure.
 */
import { strict as assert } from "node:assert";
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { planShardHeal, type LifeView } from "../runtime/heal/plan";

const NOW = 100;

/** A best-effort item holding `count` and the entries given by period. */
function shard(count: number, entries: Record<number, number> = {}): Record<string, AttributeValue> {
    return {
        count: { N: String(count) },
        hc_g: { N: "4" },
        ...Object.fromEntries(Object.entries(entries).map(([p, v]) => [`hc_y_${p}`, { N: String(v) }])),
    };
}

const life = (period: number | undefined, more: Partial<LifeView> = {}): LifeView => ({
    live: true,
    counted: true,
    period,
    claimInFlight: false,
    ...more,
});
const lives = (n: number, period: number | undefined, more: Partial<LifeView> = {}): LifeView[] =>
    Array.from({ length: n }, () => life(period, more));

describe("the heal's plan for one shard", () => {
    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: counts the old live client lives from the table, not their tombstones, and corrects from the count read`, () => {
            const plan = planShardHeal(
                mode,
                "count",
                shard(9),
                [...lives(3, NOW - 2), ...lives(2, NOW - 40), life(NOW - 3, { live: false })],
                NOW,
            );

            assert.deepEqual(plan, { target: 5, correction: -4, stale: [], unsettled: [], claimsInFlight: 0 });
        });

        it(`${mode}: takes the young lives from their entries, whatever the table shows, and names a young period that disagrees`, () => {
            // Period 100: two live, the entry holds 2. Period 99: one live, the entry holds 3 (two held slots, or
            // increments of lives a delete already ended).
            const plan = planShardHeal(mode, "count", shard(5, { [NOW]: 2, [NOW - 1]: 3 }), [...lives(2, NOW), life(NOW - 1)], NOW);

            assert.deepEqual(plan, { target: 5, correction: 0, stale: [], unsettled: [NOW - 1], claimsInFlight: 0 });
        });

        it(`${mode}: removes the stale entries, whatever they hold, moving nothing into the target for them`, () => {
            const item = shard(6, { [NOW - 2]: 4, [NOW - 9]: -1, [NOW]: 1 });

            const plan = planShardHeal(mode, "count", item, [life(NOW), ...lives(2, NOW - 2)], NOW);

            assert.equal(plan.target, 3, "2 old lives from the table, 1 young from its entry");
            assert.equal(plan.correction, -3);
            assert.deepEqual(
                [...plan.stale].sort((a, b) => a.name.localeCompare(b.name)),
                [{ name: `hc_y_${NOW - 9}` }, { name: `hc_y_${NOW - 2}` }],
            );
            assert.deepEqual(plan.unsettled, []);
        });

        it(`${mode}: names a young entry no live life of its period stands for (a -1 whose +1 is still to come)`, () => {
            const plan = planShardHeal(mode, "count", shard(-1, { [NOW]: -1 }), [life(NOW, { live: false })], NOW);

            assert.deepEqual(plan, { target: -1, correction: 0, stale: [], unsettled: [NOW], claimsInFlight: 0 });
        });

        it(`${mode}: plans from nothing for a shard never written`, () => {
            const plan = planShardHeal(mode, "count", undefined, lives(2, NOW - 5), NOW);

            assert.deepEqual(plan, { target: 2, correction: 2, stale: [], unsettled: [], claimsInFlight: 0 });
        });
    }

    it("utilization: leaves out an old life whose delete's claim is in flight, and counts it for a later heal", () => {
        const plan = planShardHeal("utilization", "count", shard(3), [...lives(2, NOW - 5), life(NOW - 5, { claimInFlight: true })], NOW);

        assert.deepEqual(plan, { target: 2, correction: -1, stale: [], unsettled: [], claimsInFlight: 1 });
    });

    it("strict: counts an old life whatever claim it carries (a strict delete soft-deletes first)", () => {
        const plan = planShardHeal("strict", "count", shard(3), [...lives(2, NOW - 5), life(NOW - 5, { claimInFlight: true })], NOW);

        assert.deepEqual(plan, { target: 3, correction: 0, stale: [], unsettled: [], claimsInFlight: 0 });
    });

    it("utilization: counts only client lives; strict also another writer's items once flagged, never one not flagged yet", () => {
        const others = [life(undefined, { counted: true }), life(undefined, { counted: true }), life(undefined, { counted: false })];

        assert.equal(planShardHeal("utilization", "count", shard(0), [...others, life(NOW - 4)], NOW).target, 1);
        assert.equal(planShardHeal("strict", "count", shard(0), [...others, life(NOW - 4)], NOW).target, 3);
    });

    it("strict: holds a slot for each young live life its entry misses (a token another writer set); utilization does not", () => {
        const young = lives(3, NOW);

        assert.deepEqual(planShardHeal("strict", "count", shard(1, { [NOW]: 1 }), young, NOW), {
            target: 3,
            correction: 2,
            stale: [],
            unsettled: [NOW],
            claimsInFlight: 0,
        });
        assert.deepEqual(planShardHeal("utilization", "count", shard(1, { [NOW]: 1 }), young, NOW), {
            target: 1,
            correction: 0,
            stale: [],
            unsettled: [NOW],
            claimsInFlight: 0,
        });
    });
});
