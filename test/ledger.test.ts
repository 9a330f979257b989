/** The young ledger (runtime/ledger/ledger.ts): periods, entry names, which lives are young, which entries are stale. Pure. */
import { strict as assert } from "node:assert";
import { ENTRY_PREFIX, entriesOf, entryName, entryPeriod, isYoung, periodOf, stalePeriods, youngUnits } from "../runtime/ledger/ledger";

const P = 600_000;

describe("the young ledger", () => {
    it("puts a time in the period that holds it: periods start at multiples of the period", () => {
        assert.equal(periodOf(0, P), 0);
        assert.equal(periodOf(P - 1, P), 0);
        assert.equal(periodOf(P, P), 1);
        assert.equal(periodOf(1_800_000_123_456, P), 3_000_000);
    });

    it("names period p's entry hc_y_<p>, and reads the period back only from such a name", () => {
        assert.equal(ENTRY_PREFIX, "hc_y_");
        assert.equal(entryName(3_000_000), "hc_y_3000000");
        assert.equal(entryPeriod("hc_y_3000000"), 3_000_000);
        for (const other of ["count", "hc_g", "hc_y_x", "hc_y_1.5", "hc_yy_1", `hc_y_${"9".repeat(20)}`]) {
            assert.equal(entryPeriod(other), undefined, other);
        }
    });

    it("reads an item's entries by period, and nothing else of it", () => {
        const item = { pk: { S: "k" }, count: { N: "7" }, hc_g: { N: "3" }, hc_y_10: { N: "2" }, hc_y_11: { N: "-1" }, hc_y_x: { N: "5" } };

        assert.deepEqual(
            [...entriesOf(item)],
            [
                [10, 2],
                [11, -1],
            ],
        );
        assert.deepEqual([...entriesOf(undefined)], []);
    });

    it("holds a life young in its own period and the next, and old from the one after", () => {
        assert.equal(isYoung(10, 10), true);
        assert.equal(isYoung(10, 11), true);
        assert.equal(isYoung(10, 12), false);
        assert.equal(isYoung(11, 10), true, "a life ahead of the reader's clock (skew) is young");
    });

    it("names the stale entries, oldest first, and sums the young ones", () => {
        const entries = new Map([
            [12, 4],
            [7, 1],
            [11, -2],
            [9, 3],
            [10, 6],
        ]);

        assert.deepEqual(stalePeriods(entries, 12), [7, 9, 10]);
        assert.equal(youngUnits(entries, 12), 2);
        assert.deepEqual(stalePeriods(entries, 8), []);
        assert.equal(youngUnits(entries, 8), 12);
    });
});
