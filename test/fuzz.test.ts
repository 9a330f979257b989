/**
 * The model-based checker in the suite: a fixed set of seeds, each a random history of concurrent
 * callers, consumer invocations, redeliveries, redrives, reconciliations, backfills, settler runs on a
 * virtual clock and injected faults (and, for the seeds that count by sort-key prefix or by attribute, other
 * writers, selection moves and items that were there before the counter; for the others, TTL deletes), over
 * 1, 3 or 8 shards per key (sharded seeds also split consumer batches into two groups run at once), run
 * on DynamoDB Local and checked against the contract (test/fuzz/run.ts says what is checked). A failing seed is shrunk
 * and printed as a reproduction. `npm run fuzz:suite` runs the suite's other seeds too; `npm run fuzz` runs many more.
 */
import type { DynamoDBClient, TransactWriteItemsCommandInput, UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { generateHistory, type History } from "./fuzz/history";
import { runHistory, FUZZ_ENGINE } from "./fuzz/run";
import { callProblems, newLedger } from "./fuzz/calls";
import { DeadlineExceededError } from "../runtime/shared/errors";
import { reproduction, shrinkHistory } from "./fuzz/shrink";
import { rewrite } from "./fuzz/mutants";
import { useEngine } from "./support/engine";

/**
 * Seeds that run in every `npm test`, the fewest that cover what the suite's seeds cover (asserted below): each shard
 * count in both modes (utilization: 106 over 1, 101 over 3, 105 over 8; strict: 102 over 1, 113 over 3, 124 over 8), the
 * three selections, both placements and every fault rate the generator picks.
 */
const SEEDS = [101, 102, 105, 106, 113, 124];
/** The suite's other seeds: `npm run fuzz:suite` (HYBRID_COUNTER_FUZZ_SUITE=full) runs them too. */
const MORE_SEEDS = [103, 104, 107, 108, 109, 110, 111, 112, 118];
const RUN = process.env.HYBRID_COUNTER_FUZZ_SUITE === "full" ? [...SEEDS, ...MORE_SEEDS] : SEEDS;
const OPS = 150;

/** True when the transaction's marker updates include one for an item without a client token (another writer's). */
function countsAnOtherWritersItem(input: TransactWriteItemsCommandInput): boolean {
    return (input.TransactItems ?? []).some(
        (action) =>
            action.Update?.ExpressionAttributeValues?.[":target"]?.S === "counted" &&
            action.Update.ExpressionAttributeNames?.["#life"] === undefined,
    );
}

describe("model-based checker", function () {
    const engine = useEngine(FUZZ_ENGINE);

    for (const seed of RUN) {
        it(`seed ${seed} keeps the contract`, async () => {
            // Prepare
            const history = generateHistory({ seed, ops: OPS });

            // Act
            const result = await runHistory(engine(), history);

            // Assess
            if (result.violations.length > 0) {
                const shrunk = await shrinkHistory(engine(), history, result, { maxRuns: 30 });
                assert.fail(reproduction(shrunk.history, shrunk.result));
            }
            // Every event ran; the paths a history takes (fuzz/paths.ts) insert some beside the OPS drawn.
            assert.ok(result.stats.events >= OPS, `only ${result.stats.events} events`);
            assert.ok(result.stats.requests > OPS / 2, `only ${result.stats.requests} requests ran`);
        });
    }

    it("the seeds of every npm test cover both modes, the three selections, other writers, backfills, settler runs and items there before", () => {
        // Prepare / Act
        const histories = SEEDS.map((seed) => generateHistory({ seed, ops: OPS }));
        const ops = new Set(histories.flatMap((h) => h.events.map((e) => e.op)));

        // Assess
        assert.deepEqual(new Set(histories.map((h) => h.mode)), new Set(["utilization", "strict"]));
        assert.deepEqual(new Set(histories.map((h) => h.selection)), new Set(["client", "prefix", "attribute"]));
        assert.deepEqual(new Set(histories.map((h) => h.placement)), new Set(["separate", "same-table"]));
        assert.deepEqual(new Set(histories.map((h) => h.faultRate)), new Set([0.05, 0.1, 0.2]));
        for (const mode of ["utilization", "strict"] as const) {
            assert.deepEqual(
                new Set(histories.filter((h) => h.mode === mode).map((h) => h.counterShards ?? 1)),
                new Set([1, 3, 8]),
                `the ${mode} seeds do not run every shard count`,
            );
        }
        assert.ok(
            histories.every((h) => (h.counterShards ?? 1) === 1 || h.placement === "separate"),
            "a sharded seed keeps its counters in the user's table",
        );
        assert.ok(
            histories.some((h) => h.events.some((e) => e.op === "consume" && e.split === true)),
            "no seed splits a consumer batch",
        );
        for (const op of ["otherPut", "otherDelete", "backfill", "settle", "otherFlip", "ttlDelete", "land"] as const) {
            assert.ok(ops.has(op), `no seed has a ${op} event`);
        }
        assert.ok(
            histories.some((h) => h.events.some((e) => (e.op === "create" || e.op === "tryCreate") && e.late === true)),
            "no seed holds a put attempt past its call",
        );
        assert.ok(
            histories.some((h) => (h.preexisting ?? []).length > 0),
            "no seed has items from before the counter",
        );
        for (const h of histories.filter((h) => h.selection === "client")) {
            assert.ok(
                !h.events.some((e) => e.op === "otherPut" || e.op === "otherDelete" || e.op === "otherFlip"),
                `client seed ${h.seed} has other writers`,
            );
            assert.deepEqual(h.preexisting, []);
        }
    });

    it("every seed's history is the same history again", () => {
        // Prepare / Act
        const a = generateHistory({ seed: 7, ops: 60 });
        const b = generateHistory({ seed: 7, ops: 60 });
        const c = generateHistory({ seed: 8, ops: 60 });

        // Assess
        assert.deepEqual(a, b);
        assert.notDeepEqual(a, c);
    });

    it("lets a utilization delete take the unit of a life another writer moved out of the selection before the call, when its soft delete did not end it (seed 190004)", () => {
        // Prepare: the delete decremented for an archived client life; another writer replaced the item before its soft
        // delete, so the call ended no life.
        const decremented = (mode: "utilization" | "strict", endedBeforeMine?: number) => {
            const ledger = newLedger({ op: "delete", key: "k", id: "a" }, 0);
            ledger.bestEffort = -1;
            return callProblems(ledger, {
                answer: { deleted: false },
                thrown: undefined,
                mode,
                endedMine: 0,
                ...(endedBeforeMine === undefined ? {} : { endedBeforeMine }),
                elapsedMs: 10,
                deadlineMs: 10_000,
            });
        };

        // Act / Assess
        assert.deepEqual(decremented("utilization", 1), []);
        assert.deepEqual(decremented("utilization"), [
            "moved best-effort -1 for 0 client-counted live items (0 ended by other writers) with no fault, no reported failure and no error",
        ]);
        assert.deepEqual(decremented("strict", 1), [
            "moved best-effort -1 for 0 client-counted live items: below the live count",
            "moved best-effort -1 for 0 client-counted live items (0 ended by other writers) with no fault, no reported failure and no error",
        ]);
    });

    it("allows DeadlineExceededError from a delete (or a strict create) once its deadline has passed, and from nothing else", () => {
        // Prepare
        const error = new DeadlineExceededError("soft delete", 10_000);
        const ending = (op: "delete" | "create" | "tryCreate", mode: "utilization" | "strict", elapsedMs: number) =>
            callProblems(newLedger({ op, key: "k", id: "a" }, 0), {
                answer: undefined,
                thrown: error,
                mode,
                endedMine: 0,
                elapsedMs,
                deadlineMs: 10_000,
            });

        // Act / Assess
        assert.deepEqual(ending("delete", "utilization", 10_000), []);
        assert.deepEqual(ending("create", "strict", 12_000), []);
        assert.deepEqual(ending("delete", "strict", 9_999), [
            "threw DeadlineExceededError: the call's deadline of 10000 ms passed before its soft delete could be sent 9999 ms after it started, before its deadline of 10000 ms",
        ]);
        assert.equal(ending("create", "utilization", 12_000).length, 1);
        assert.equal(ending("tryCreate", "strict", 12_000).length, 1);
    });

    it("a seed's shard count changes none of its other draws but the placement and the split invocations", () => {
        // Prepare: seed 101 draws 3 shards.
        const sharded = generateHistory({ seed: 101, ops: OPS });
        const unsharded = generateHistory({ seed: 101, ops: OPS, counterShards: 1 });

        // Act
        const { counterShards, placement, events, ...rest } = sharded;
        const { placement: unshardedPlacement, events: unshardedEvents, ...unshardedRest } = unsharded;

        // Assess
        assert.equal(counterShards, 3);
        assert.equal(placement, "separate");
        assert.equal(unsharded.counterShards, undefined);
        assert.deepEqual(rest, unshardedRest);
        assert.deepEqual(
            events.map((e) => (e.op === "consume" ? { op: e.op, max: e.max, overlap: e.overlap, crash: e.crash } : e)),
            unshardedEvents,
        );
        assert.ok(["separate", "same-table"].includes(unshardedPlacement));
    });

    it("catches a best-effort write applied twice", async () => {
        // Prepare: a mutant that doubles every best-effort increment.
        const history: History = { ...generateHistory({ seed: 5, ops: 40, mode: "utilization", faultRate: 0, counterShards: 1 }) };
        const mutate = ({ api }: { api: DynamoDBClient }) =>
            rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
                const delta = input.ExpressionAttributeValues?.[":delta"];
                if (delta?.N === "1") {
                    delta.N = "2";
                }
            });

        // Act
        const result = await runHistory(engine(), history, { mutate });

        // Assess
        const overcount = result.violations.find((v) => /best-effort \d+ > live \d+/.test(v));
        assert.ok(overcount, `the checker missed the overcount: ${result.violations.join("; ")}`);
    });

    it("catches an eventual counter that counts a creation twice", async () => {
        // Prepare: a mutant consumer whose transactions add twice the net change.
        const history = generateHistory({ seed: 6, ops: 40, mode: "utilization", faultRate: 0, counterShards: 1 });
        const mutate = ({ pipeline }: { pipeline: DynamoDBClient }) =>
            rewrite<TransactWriteItemsCommandInput>(pipeline, "TransactWriteItemsCommand", (input) => {
                for (const action of input.TransactItems ?? []) {
                    const delta = action.Update?.ExpressionAttributeValues?.[":delta"];
                    if (delta?.N !== undefined) {
                        delta.N = String(2 * Number(delta.N));
                    }
                }
            });

        // Act
        const result = await runHistory(engine(), history, { mutate });

        // Assess
        assert.ok(
            result.violations.some((v) => /eventual \d+ != (\d+ items counted|live \d+)/.test(v)),
            `the checker missed the double count: ${result.violations.join("; ")}`,
        );
    });

    it("catches a consumer that counts another writer's item twice", async () => {
        // Prepare: a history with other writers, and a mutant consumer whose transactions double the
        // change when one of their markers counts an item without the client's token.
        const history = generateHistory({ seed: 6, ops: 40, mode: "utilization", faultRate: 0, selection: "prefix", counterShards: 1 });
        assert.ok(
            history.events.some((e) => e.op === "otherPut"),
            "the history has no other writer's put",
        );
        const mutate = ({ pipeline }: { pipeline: DynamoDBClient }) =>
            rewrite<TransactWriteItemsCommandInput>(pipeline, "TransactWriteItemsCommand", (input) => {
                if (!countsAnOtherWritersItem(input)) {
                    return;
                }
                for (const action of input.TransactItems ?? []) {
                    const delta = action.Update?.ExpressionAttributeValues?.[":delta"];
                    if (delta?.N !== undefined) {
                        delta.N = String(2 * Number(delta.N));
                    }
                }
            });

        // Act
        const result = await runHistory(engine(), history, { mutate });

        // Assess
        assert.ok(
            result.violations.some((v) => /eventual \d+ != (\d+ items counted|live \d+)/.test(v)),
            `the checker missed the double count: ${result.violations.join("; ")}`,
        );
    });

    it("catches a backfill whose marker writes lose their condition", async () => {
        // Prepare: two items of another writer, a backfill and a consumer invocation at once. Under this
        // seed's schedule the backfill reads the markers before the consumer writes them and commits
        // after: only the marker condition (attribute_not_exists(hc_state)) keeps it from counting again.
        const history: History = {
            seed: 15,
            mode: "utilization",
            selection: "prefix",
            placement: "separate",
            faultRate: 0,
            concurrency: 3,
            limits: { k0: 5 },
            preexisting: [],
            events: [
                { op: "otherPut", key: "k0", id: "i0" },
                { op: "otherPut", key: "k0", id: "i1" },
                { op: "backfill", runId: "a", pageSize: 5 },
                { op: "consume", max: 25, overlap: 0, crash: "none" },
            ],
        };
        const mutate = ({ backfill }: { backfill: DynamoDBClient }) =>
            rewrite<TransactWriteItemsCommandInput>(backfill, "TransactWriteItemsCommand", (input) => {
                for (const action of input.TransactItems ?? []) {
                    if (action.Update?.ConditionExpression === "attribute_not_exists(#state)") {
                        delete action.Update.ConditionExpression;
                    }
                }
            });

        // Act
        const sound = await runHistory(engine(), history);
        const result = await runHistory(engine(), history, { mutate });

        // Assess: the history keeps the contract; the mutant counts the consumer's two items again.
        assert.deepEqual(sound.violations, []);
        assert.ok(sound.stats.backfillAlreadyCounted > 0, "the backfill met no item the consumer had counted");
        assert.ok(
            result.violations.some((v) => /k0 eventual 4 != 2 items counted/.test(v)),
            `the checker missed the double count: ${result.violations.join("; ")}`,
        );
    });

    it("catches a strict release given twice while other writers run", async () => {
        // Prepare: a strict history with other writers, and a client whose releases take two slots back.
        const history = generateHistory({ seed: 8, ops: 60, mode: "strict", faultRate: 0, selection: "prefix", counterShards: 1 });
        assert.ok(
            history.events.some((e) => e.op === "otherPut" || e.op === "otherDelete"),
            "the history has no other writer",
        );
        const mutate = ({ api }: { api: DynamoDBClient }) =>
            rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
                const delta = input.ExpressionAttributeValues?.[":delta"];
                if (delta?.N === "-1") {
                    delta.N = "-2";
                }
            });

        // Act
        const result = await runHistory(engine(), history, { mutate });

        // Assess
        assert.ok(
            result.violations.some((v) => /strict bound broken: \d+ client-written live items/.test(v)),
            `the checker missed the lost slot: ${result.violations.join("; ")}`,
        );
    });

    it("keeps the contract on the shrunk reproduction of a backfill's unit released twice (fuzz seed 1030)", async () => {
        // Prepare: an item from before the counter, counted into best-effort by a strict backfill, deleted
        // through the client, put again by another writer over the soft-deleted item, deleted again.
        const history: History = {
            seed: 1030,
            selection: "prefix",
            preexisting: [{ key: "k0", id: "i0" }],
            mode: "strict",
            placement: "same-table",
            faultRate: 0,
            concurrency: 1,
            limits: { k0: 0 },
            events: [
                { op: "backfill", runId: "a", pageSize: 3 },
                { op: "delete", key: "k0", id: "i3" },
                { op: "redrive" },
                { op: "delete", key: "k0", id: "i0" },
                { op: "tryCreate", key: "k0", id: "i2" },
                { op: "otherPut", key: "k0", id: "i0" },
                { op: "delete", key: "k0", id: "i0" },
            ],
        };

        // Act
        const result = await runHistory(engine(), history);

        // Assess: before the fix, the second delete released the unit again (best-effort -1, below the client's items).
        assert.deepEqual(result.violations, []);
        assert.equal(result.stats.backfillCounted, 1);
    });

    it("counts a held put attempt as live once the consumer counted it, its life unnamed by the marker (fuzz seed 285)", async () => {
        // Prepare: a create whose first put attempt is held; its repeat creates the life, a delete soft-deletes it and
        // another writer's put replaces the soft-deleted item before the consumer reads any of it, so the batch that
        // shows the life ends with a change that has none and the marker never names it. The client deletes the other
        // writer's item and the consumer removes it; then the held attempt lands and a settler run heals the key. The
        // consumer counts the attempt (docs/limits.md: it recognises only the life its marker names), and so does the heal.
        const consume = { op: "consume", max: 25, overlap: 0, crash: "none" } as const;
        const history: History = {
            seed: 285,
            mode: "utilization",
            selection: "prefix",
            placement: "separate",
            faultRate: 0,
            concurrency: 1,
            limits: { k0: 5 },
            preexisting: [],
            events: [
                { op: "create", key: "k0", id: "i0", late: true },
                { op: "delete", key: "k0", id: "i0" },
                { op: "otherPut", key: "k0", id: "i0" },
                consume,
                { op: "delete", key: "k0", id: "i0" },
                consume,
                { op: "land" },
                { op: "settle", keyBudget: 200, auditSegments: 0 },
            ],
        };

        // Act
        const result = await runHistory(engine(), history);

        // Assess: before the fix, the checker kept taking the attempt for one the consumer removes, left it out of the
        // live items, and flagged the heal that counted it (best-effort 1 > live 0 client-written items).
        assert.deepEqual(result.violations, []);
        assert.equal(result.stats.held, 1);
        assert.equal(result.stats.latePutsAfterAnotherLife, 1);
    });

    it("keeps the contract when the consumer has removed the backfilled life before the other writer puts the id again", async () => {
        // Prepare: another writer's item, counted into best-effort by a strict backfill; the client deletes
        // it and the consumer removes it; the other writer puts the id again and the consumer counts that
        // life; the client deletes it; then two creates under a limit of 1.
        const consume = { op: "consume", max: 25, overlap: 0, crash: "none" } as const;
        const history: History = {
            seed: 1,
            mode: "strict",
            selection: "prefix",
            placement: "separate",
            faultRate: 0,
            concurrency: 1,
            limits: { k0: 1 },
            preexisting: [],
            events: [
                { op: "otherPut", key: "k0", id: "i0" },
                { op: "backfill", runId: "a", pageSize: 5 },
                { op: "delete", key: "k0", id: "i0" },
                consume,
                { op: "otherPut", key: "k0", id: "i0" },
                consume,
                { op: "delete", key: "k0", id: "i0" },
                consume,
                { op: "tryCreate", key: "k0", id: "i1" },
                { op: "tryCreate", key: "k0", id: "i2" },
            ],
        };

        // Act
        const result = await runHistory(engine(), history);

        // Assess: before the fix, the second delete released a slot again and both creates passed the limit of 1.
        assert.deepEqual(result.violations, []);
    });
});
