/**
 * The checker's settler runs that start while API calls are in flight (test/fuzz/history.ts, a `busy` settle): the
 * clock's move past the quiet window takes those calls past their deadline (A1) and their requests still waiting past
 * a request's lifetime, which the scheduler refuses as DynamoDB refuses an expired signature (A2). The heal then holds
 * by the assumptions the package states, not because the checker waited for quiet keys. A heal that does not wait
 * for the window (test/fuzz/mutants.ts, `healIgnoresQuietWindow`) must be rejected: on a short history written for it
 * and on a history the generator draws from a seed.
 */
import { strict as assert } from "node:assert";
import { generateHistory, type FuzzEvent, type History } from "./fuzz/history";
import { healIgnoresQuietWindow } from "./fuzz/mutants";
import { FUZZ_ENGINE } from "./fuzz/run";
import { useEngine } from "./support/engine";
import { sharpens } from "./support/sharpens";

const consume: FuzzEvent = { op: "consume", max: 25, overlap: 0, crash: "none" };
const tryCreate = (id: string): FuzzEvent => ({ op: "tryCreate", key: "k0", id });
const STRICT_BROKEN = /k\d strict bound broken: \d+ client-written live items/;

describe("the checker's settler runs beside calls in flight", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("a short history: a call that starts during the run reserves; the shipped heal skips its key, the mutant breaks the bound", async () => {
        // Prepare: strict, limit 5; a create, then a settler run that does not wait, and two creates that start during it.
        // The scheduler's seed 10 releases a create's reservation before the heal's read and its put after the heal's write.
        const history: History = {
            seed: 10,
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

    it("seed 6 (strict, 200 events): runs start with calls in flight, requests expire, the bound holds; the mutant is rejected", async () => {
        // Prepare
        const history = generateHistory({ seed: 6, ops: 200, mode: "strict", selection: "client", counterShards: 1 });
        assert.ok(history.events.some((e) => e.op === "settle" && e.busy === true));

        // Act: the sound run keeps the contract, the mutant breaks the bound
        const { sound } = await sharpens(engine(), history, (clients) => healIgnoresQuietWindow(clients.settler), STRICT_BROKEN);

        // Assess
        assert.ok(sound.stats.busySettles > 0, JSON.stringify(sound.stats));
        assert.ok(sound.stats.expired > 0, JSON.stringify(sound.stats));
    });
});
