/** The ledger of recent lives (runtime/ledger/): entry names, periods, the fold boundary, the heal's truth. Pure. */
import { strict as assert } from "node:assert";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HybridCounterClient } from "../runtime/client/client";
import { ConfigurationError } from "../runtime/shared/errors";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";
import { uuidv7 } from "../runtime/shared/tokens";
import {
    DEFAULT_LEDGER_PERIOD_MS,
    foldBoundary,
    ledgerAttribute,
    ledgerEntries,
    ledgerPeriodMs,
    OLD_LEDGER_ENTRY,
    splitEntries,
    type LedgerEntry,
} from "../runtime/ledger/ledger";
import { ledgerTruth, recentShares } from "../runtime/ledger/truth";

const T0 = Date.UTC(2026, 0, 1);
const entry = (start: number, length: number, units: number): LedgerEntry => ({
    name: `hc_n_${start / 1000}_${length / 1000}`,
    start,
    end: start + length,
    units,
});

describe("the ledger of recent lives", () => {
    it("names a life's entry by the period that holds its token, and the oldest entry for a token without a time", () => {
        assert.equal(ledgerAttribute(uuidv7(T0 + 59_999), 60_000), `hc_n_${T0 / 1000}_60`);
        assert.equal(ledgerAttribute(uuidv7(T0 + 60_000), 60_000), `hc_n_${T0 / 1000 + 60}_60`);
        assert.equal(ledgerAttribute(uuidv7(T0 + 1_500), 1_000), `hc_n_${T0 / 1000 + 1}_1`);
        // Units without a client token go to the entry at the epoch, which every heal folds.
        assert.equal(ledgerAttribute("not-a-token", 60_000), OLD_LEDGER_ENTRY);
        assert.equal(ledgerAttribute(undefined, 60_000), "hc_n_0_1");
        assert.equal(foldBoundary(ledgerEntries({ [OLD_LEDGER_ENTRY]: { N: "3" } }), T0), T0);
    });

    it("writes with a tenth of the deployed window, in whole seconds, or a minute when the window is not known", () => {
        assert.equal(ledgerPeriodMs(600), 60_000);
        assert.equal(ledgerPeriodMs(371), 37_000);
        assert.equal(ledgerPeriodMs(4), 1_000);
        assert.equal(ledgerPeriodMs(undefined), DEFAULT_LEDGER_PERIOD_MS);
    });

    it("reads the entries of an item, oldest first, and nothing else", () => {
        const item = {
            [`hc_n_${T0 / 1000 + 60}_60`]: { N: "2" },
            [`hc_n_${T0 / 1000}_60`]: { N: "-1" },
            hc_n_bad: { N: "5" },
            hc_version: { N: "9" },
        };
        assert.deepEqual(ledgerEntries(item), [entry(T0, 60_000, -1), entry(T0 + 60_000, 60_000, 2)]);
    });

    it("folds at the latest instant no entry straddles, whatever periods its writers used", () => {
        const entries = [entry(T0, 60_000, 1), entry(T0 + 60_000, 60_000, 1), entry(T0 + 30_000, 120_000, 1)];
        // T0 + 90 s is inside the second entry and the 120 s one (from T0 + 30 s): the boundary moves back to T0 + 30 s,
        // which the first entry holds, so to T0.
        assert.equal(foldBoundary(entries, T0 + 90_000), T0);
        assert.equal(foldBoundary(entries, T0 + 150_000), T0 + 150_000);
        const { folded, kept } = splitEntries(entries, T0 + 150_000);
        assert.deepEqual(
            [folded.map((e) => e.name), kept.map((e) => e.name)],
            [[entry(T0, 60_000, 1).name, entry(T0 + 60_000, 60_000, 1).name, entry(T0 + 30_000, 120_000, 1).name], []],
        );
    });

    it("strict over shards: the recent term is the key's max(units, items), each shard keeping its units and the uncovered items going where items outnumber units", () => {
        const shard = (recentUnits: number, recentItems: number) => ({ recentUnits, recentItems });
        // A life whose token moved from shard 0 to shard 1: its unit stays in 0, its item is in 1. Counted once.
        assert.deepEqual(recentShares([shard(1, 0), shard(0, 1), shard(0, 0)]), [1, 0, 0]);
        // Its release landed in the new home: the key holds nothing.
        assert.deepEqual(recentShares([shard(1, 0), shard(-1, 0)]), [1, -1]);
        // A copy with a client token (two items, one unit): the extra item is counted where it outnumbers its units.
        assert.deepEqual(recentShares([shard(1, 1), shard(0, 0), shard(0, 1)]), [1, 0, 1]);
        // Reservations whose puts are in flight keep their units; items counted with no unit fill shards in order.
        assert.deepEqual(recentShares([shard(2, 0), shard(0, 3), shard(0, 2)]), [2, 3, 0]);
        // Unsharded in effect: one shard's share is max(units, items).
        for (const [units, items] of [
            [3, 1],
            [1, 3],
            [0, 0],
        ] as const) {
            assert.deepEqual(recentShares([shard(units, items)]), [Math.max(units, items)]);
        }
    });

    it("the heal's truth: old lives from the table, recent ones as the kept entries hold them", () => {
        const layout = DEFAULT_LAYOUT;
        const item = (id: string, at: number, extra = {}) => ({
            pk: { S: "k" },
            sk: { S: id },
            counter_token: { S: uuidv7(at) },
            ...extra,
        });
        const claimed = (at: number) => ({ counter_token_delete: { S: uuidv7(at) } });
        const B = T0 + 600_000;
        const now = B + 600_000;
        const items = [
            item("old", T0),
            item("old-claimed-now", T0, claimed(now - 1_000)), // a delete may be between its decrement and soft delete
            item("old-claim-ended", T0, claimed(T0 + 1)), // its delete ended long ago: the item is live for good
            item("old-deleted", T0, { deleted: { BOOL: true } }),
            item("recent", B + 1),
            item("recent-2", B + 2),
        ];
        const kept = [entry(B, 60_000, 1)];
        const input = { items, markers: [], kept, boundary: B, now, horizonMs: 600_000, layout };
        // Strict: 3 old live items, and max(1 unit, 2 recent items) (an item no unit backs only raises).
        assert.deepEqual(ledgerTruth({ ...input, mode: "strict" }), { truth: 5, old: 3, recentUnits: 1, recentItems: 2, youngest: B + 2 });
        // Utilization: the claimed item left out, and the recent lives as the entries hold them.
        assert.deepEqual(ledgerTruth({ ...input, mode: "utilization" }), {
            truth: 3,
            old: 2,
            recentUnits: 1,
            recentItems: 2,
            // The claimed item keeps the key listed until its claim is older than the horizon.
            youngest: now - 1_000,
        });
    });

    it("the client refuses a ledger period outside 1..86400 s, naming the field", () => {
        const base = {
            ...DEFAULT_LAYOUT,
            tableName: "orders",
            countersTableName: "orders",
            dynamodb: new DynamoDBClient({ region: "us-east-1" }),
        };
        for (const ledgerPeriodSeconds of [0, 1.5, 86_401, "60" as unknown as number]) {
            assert.throws(
                () => new HybridCounterClient({ ...base, ledgerPeriodSeconds }),
                (e: unknown) =>
                    e instanceof ConfigurationError && e.problems.includes("[ledgerPeriodSeconds] must be an integer from 1 to 86400"),
            );
        }
        assert.doesNotThrow(() => new HybridCounterClient({ ...base, ledgerPeriodSeconds: 1 }));
    });
});
