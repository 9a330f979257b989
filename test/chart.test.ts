import { strict as assert } from "node:assert";
import { chartSvg, niceStep, niceTicks, stepPath } from "../local/twin/chart";
import { worstKeys } from "../local/twin/twin";
import { crossingMark } from "../local/twin/report";
import type { KeySnapshot } from "../local/harness/observe";

describe("the twin's chart", () => {
    it("puts axis ticks on round numbers", () => {
        assert.equal(niceStep(47, 5), 10);
        assert.equal(niceStep(0.9, 6), 0.2);
        assert.deepEqual(niceTicks(0, 47, 5), [0, 10, 20, 30, 40, 50]);
        assert.deepEqual(niceTicks(0, 61_234, 6), [0, 20_000, 40_000, 60_000, 80_000]);
        assert.deepEqual(niceTicks(-3, 7, 5), [-4, -2, 0, 2, 4, 6, 8]);
    });

    it("draws steps between observations and stops at the last one", () => {
        const d = stepPath(
            [
                [0, 0],
                [10, 5],
                [20, 3],
            ],
            (x) => x,
            (y) => 100 - y,
        );
        assert.equal(d, "M0.0,100.0 H10.0 V95.0 H20.0 V97.0");
    });

    it("charts one panel per key with a legend", () => {
        const svg = chartSvg("t", [
            { title: "tenant-001", series: [{ name: "eventual", color: "#1f77b4", points: [[0, 1] as const, [1000, 2] as const] }] },
            { title: "tenant-002", series: [{ name: "eventual", color: "#1f77b4", points: [[0, 0] as const] }] },
        ]);
        assert.equal((svg.match(/<path /g) ?? []).length, 2);
        assert.equal((svg.match(/>eventual</g) ?? []).length, 2);
        assert.ok(svg.includes(">tenant-001<") && svg.includes(">tenant-002<"));
    });

    it("marks a key's threshold crossings: a dashed line at each crossing's time, labelled with its fraction and direction", () => {
        // Prepare
        const started = 1_000_000;
        const up = crossingMark({ id: "k:7:0.8:up", key: "k", threshold: 0.8, direction: "up", count: 8, time: started + 2_000 }, started);
        const down = crossingMark(
            { id: "k:9:1:down", key: "k", threshold: 1, direction: "down", count: 9, time: started + 4_000 },
            started,
        );

        // Act
        const svg = chartSvg("t", [
            {
                title: "k",
                series: [{ name: "eventual", color: "#1f77b4", points: [[0, 0] as const, [5_000, 9] as const] }],
                marks: [up, down],
            },
        ]);

        // Assess
        assert.deepEqual(up, { x: 2_000, label: "80%↑", color: "#e377c2" });
        assert.deepEqual(down, { x: 4_000, label: "100%↓", color: "#17becf" });
        assert.equal((svg.match(/stroke-dasharray="3,3"/g) ?? []).length, 2);
        assert.ok(svg.includes(">80%↑<") && svg.includes(">100%↓<"));
        assert.equal((svg.match(/<path /g) ?? []).length, 1);
    });

    it("picks the worst keys: not exact at the end first, then the most lag during the run", () => {
        const snap = (live: number, eventual: number, bestEffort = live): KeySnapshot => ({
            live,
            eventual,
            bestEffort,
            counted: eventual,
            softDeleted: 0,
        });
        const samples = new Map([
            ["a", [{ t: 0, s: snap(1, 1) }]],
            [
                "b",
                [
                    { t: 0, s: snap(9, 2) },
                    { t: 1, s: snap(9, 9) },
                ],
            ],
            ["c", [{ t: 0, s: snap(3, 2) }]],
            ["d", [{ t: 0, s: snap(4, 4, 6) }]],
        ]);
        assert.deepEqual(worstKeys(["a", "b", "c", "d"], samples, 3), ["d", "c", "b"]);
    });
});
