/**
 * The checker's settler runs that start while API calls are in flight (test/fuzz/history.ts, a `busy` settle): the
 * clock's move past the quiet window takes those calls past their deadline (A1) and their requests still waiting past
 * a request's lifetime, which the scheduler refuses as DynamoDB refuses an expired signature (A2). The heal then holds
 * by the assumptions the package states, not because the checker waited for quiet keys. A heal that does not wait
 * for the window (test/fuzz/mutants.ts, `healIgnoresQuietWindow`) must be rejected: on a short history written for it
 * and on a history the generator draws from a seed. So must each mutant of the heal of a busy key
 * (test/fuzz/busy-mutants.ts), on a short history whose seed lands the race it opens: a key written during the run is
 * healed there, not skipped.
 */
import { strict as assert } from "node:assert";
import { generateHistory, type FuzzEvent, type History } from "./fuzz/history";
import { healIgnoresQuietWindow } from "./fuzz/mutants";
import { healIgnoresClaims, healWithoutLedger, releaseIgnoresEpoch } from "./fuzz/busy-mutants";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";
import { FUZZ_ENGINE } from "./fuzz/run";
import { useEngine } from "./support/engine";
import { sharpens } from "./support/sharpens";

const consume: FuzzEvent = { op: "consume", max: 25, overlap: 0, crash: "none" };
const tryCreate = (id: string): FuzzEvent => ({ op: "tryCreate", key: "k0", id });
const STRICT_BROKEN = /k\d strict bound broken: \d+ client-written live items/;
const UTILIZATION_BROKEN = /k\d best-effort \d+ > live \d+ client-written items/;
const create = (id: string): FuzzEvent => ({ op: "create", key: "k0", id });
const del = (id: string): FuzzEvent => ({ op: "delete", key: "k0", id });
const busy = (auditSegments = 0): FuzzEvent => ({ op: "settle", keyBudget: 200, auditSegments, busy: true });
const quiet: FuzzEvent = { op: "settle", keyBudget: 200, auditSegments: 0 };
const short = (seed: number, mode: History["mode"], events: FuzzEvent[]): History => ({
    seed,
    mode,
    selection: "client",
    placement: "separate",
    faultRate: 0,
    concurrency: 3,
    limits: { k0: 9 },
    preexisting: [],
    events,
});

describe("the checker's settler runs beside calls in flight", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("a short history: a call that starts during the run reserves; the shipped heal keeps its unit, the mutant breaks the bound", async () => {
        // Prepare: strict, limit 5; a create, then a settler run that does not wait, and two creates that start during it.
        // The scheduler's seed 6 releases a create's reservation before the heal's read and its put after the heal's write.
        const history: History = {
            seed: 6,
            mode: "strict",
            selection: "client",
            placement: "separate",
            faultRate: 0,
            concurrency: 3,
            limits: { k0: 5 },
            preexisting: [],
            events: [
                tryCreate("i0"),
                consume,
                { op: "settle", keyBudget: 200, auditSegments: 0, busy: true },
                tryCreate("i1"),
                tryCreate("i2"),
                consume,
            ],
        };

        // Act / Assess
        await sharpens(engine(), history, (clients) => healIgnoresQuietWindow(clients.settler), STRICT_BROKEN);
    });

    it("seed 15 (strict, 200 events): runs start with calls in flight, requests expire, the bound holds; the mutant is rejected", async () => {
        // Prepare
        const history = generateHistory({ seed: 15, ops: 200, mode: "strict", selection: "client", counterShards: 1 });
        assert.ok(history.events.some((e) => e.op === "settle" && e.busy === true));

        // Act: the sound run keeps the contract, the mutant breaks the bound
        const { sound } = await sharpens(engine(), history, (clients) => healIgnoresQuietWindow(clients.settler), STRICT_BROKEN);

        // Assess
        assert.ok(sound.stats.busySettles > 0, JSON.stringify(sound.stats));
        assert.ok(sound.stats.expired > 0, JSON.stringify(sound.stats));
    });

    it("a heal of the busy key that counts recent lives from the table (no ledger) is rejected: a reservation's put was in flight", async () => {
        // Seed 6 releases the reservation of a tryCreate that starts during the run before the heal's read, and its put
        // after the heal's write.
        const history = short(6, "strict", [tryCreate("i0"), consume, busy(), tryCreate("i1"), tryCreate("i2"), consume]);
        await sharpens(engine(), history, (clients) => healWithoutLedger(clients.settler), STRICT_BROKEN);
    });

    it("a strict release that ignores the heal epoch is rejected: the busy heal had already counted its item gone", async () => {
        // Seed 11 lands a heal of the busy key between a delete's soft delete and its release.
        const history = short(11, "strict", [tryCreate("i0"), tryCreate("i1"), consume, quiet, del("i0"), busy(), del("i1"), consume]);
        await sharpens(engine(), history, (clients) => releaseIgnoresEpoch(clients.api), STRICT_BROKEN);
    });

    it("a utilization heal that does not see delete claims is rejected: it counted an item whose decrement had landed", async () => {
        // Seed 22 lands the audit's heal of the busy key between a delete's decrement and its soft delete.
        const history = short(22, "utilization", [
            create("i0"),
            create("i1"),
            create("i2"),
            consume,
            quiet,
            tryCreate("i3"),
            busy(2),
            del("i0"),
            del("i1"),
            del("i2"),
            consume,
        ]);
        await sharpens(
            engine(),
            history,
            (clients) => healIgnoresClaims(clients.settler, DEFAULT_LAYOUT.tokenAttribute),
            UTILIZATION_BROKEN,
        );
    });
});
