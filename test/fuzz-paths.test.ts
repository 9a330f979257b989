/**
 * The checker's histories over the paths a sharded strict key's one bound rests on (test/fuzz/paths.ts): a lowered
 * limit, a key adopted at its limit, a client item's token rewritten by another writer, one id reused many times. Each
 * fix is kept as a mutant (test/fuzz/mutants.ts) the checker must reject: on a short history written for it, which the
 * shipped system passes, and on a history the generator drew from a seed (so `npm run fuzz -- --seeds N` reaches it).
 * A seed's history replays request for request with every path in it.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { generateHistory, type FuzzEvent, type History } from "./fuzz/history";
import {
    backfillKeepsQuotas,
    healKeepsQuotas,
    itemWithoutHeadroom,
    markPerLife,
    oversizedDeleteThrows,
    lateItemKept,
    staleBackfillFlagKept,
    healLeavesEmptyShardsOut,
    quotaOfAnyLimit,
} from "./fuzz/mutants";
import { pathsTaken, THOUSANDS } from "./fuzz/paths";
import { runHistory, type FuzzClients, FUZZ_ENGINE } from "./fuzz/run";
import { useEngine } from "./support/engine";
import { sharpens } from "./support/sharpens";

const consume: FuzzEvent = { op: "consume", max: 25, overlap: 0, crash: "none" };
const settle: FuzzEvent = { op: "settle", keyBudget: 200, auditSegments: 0 };

function tryCreate(id: string, limit?: number): FuzzEvent {
    return { op: "tryCreate", key: "k0", id, ...(limit === undefined ? {} : { limit }) };
}

function strictHistory(selection: History["selection"], limit: number, counterShards: number, events: FuzzEvent[]): History {
    return {
        seed: 1,
        mode: "strict",
        selection,
        placement: "separate",
        faultRate: 0,
        concurrency: 1,
        limits: { k0: limit },
        preexisting: [],
        events,
        ...(counterShards === 1 ? {} : { counterShards }),
    };
}

/**
 * Utilization, 3 shards: a create whose first put attempt is held; its repeat creates the life, the consumer reads it,
 * the client deletes it and the consumer reads that (the marker shows the life removed). The held attempt lands
 * (released before the count's reads); the batch with its INSERT fails until it goes to the first DLQ, so the consumer
 * cannot remove the item before the settler run the audit brings to the key (event #11). Then `after`.
 */
function lateInFirstDlq(selection: History["selection"], after: FuzzEvent[] = []): History {
    const failing: FuzzEvent = { op: "consume", max: 25, overlap: 0, crash: "before" };
    return {
        ...strictHistory(selection, 3, 3, [
            { op: "create", key: "k0", id: "i0", late: true },
            consume,
            { op: "delete", key: "k0", id: "i0" },
            consume,
            consume,
            { op: "land" },
            { op: "count", key: "k0" },
            failing,
            failing,
            failing,
            failing,
            { op: "settle", keyBudget: 200, auditSegments: 1 },
            ...after,
        ]),
        mode: "utilization",
    };
}

/** The mutant on one party's client. */
function on(party: keyof FuzzClients, mutant: (dynamodb: DynamoDBClient) => void): (clients: FuzzClients) => void {
    return (clients) => mutant(clients[party]);
}

const ADMITTED_PAST = /admitted under limit \d+ with best-effort \d+ after it/;
const REFUSED_WRITE = /DynamoDB refused a write of the counting as written: ValidationException/;
const THREW_REFUSAL =
    /threw ValidationException: Item size to update has exceeded the maximum allowed size although none of its requests met a fault/;
const HEALED_LATE =
    /after #11 settle \w+: k0 shard \d best-effort 1 > live 0 client-written items homed there \+ 0 ended by other writers$/;
const BELOW_UNLISTED = /before the final heal: k0 best-effort 0 != 1, and the heal index does not list it/;
const LATE_BACK = /after the drain: k0 has 1 late put attempts that brought a removed life back/;
const MARKER_GREW = /at the end: the marker of [kr]\d\/\S+ is \d+ bytes \(bound 4096\) with [1-9]\d* attributes outside its fixed set/;

describe("the checker's histories over lowered limits, adoption at the limit, token rewrites and reused ids", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("rejects a backfill that keeps the stored quotas: a sharded key adopted at its limit admits past it", async () => {
        // Prepare: 3 shards, limit 3; a first tryCreate arms the key's quotas (2 left to spread); three items from before
        // the counter, all in shard 0 (i3, i5, i9: their ids' shard), are adopted by a backfill (the key is then above
        // its limit, and a shard with room under its quota is left); three more tryCreates.
        const history: History = {
            ...strictHistory("prefix", 3, 3, [
                tryCreate("i0"),
                { op: "backfill", runId: "a", pageSize: 5 },
                tryCreate("i1"),
                tryCreate("i2"),
                tryCreate("i6"),
            ]),
            preexisting: ["i3", "i5", "i9"].map((id) => ({ key: "k0", id })),
        };

        // Act / Assess
        await sharpens(engine(), history, on("backfill", backfillKeepsQuotas), ADMITTED_PAST);
    });

    it("rejects a heal that keeps the stored quotas: after another writer rewrote a token, the quotas admit past the limit", async () => {
        // Prepare: 3 shards, limit 3, three client items; another writer moves one item's home; the client deletes it and
        // creates another; the settler heals (the new home rises); three more tryCreates.
        const history = strictHistory("client", 3, 3, [
            tryCreate("i0"),
            tryCreate("i1"),
            tryCreate("i2"),
            { op: "otherRetoken", key: "k0", id: "i0", shift: 1 },
            { op: "delete", key: "k0", id: "i0" },
            tryCreate("i3"),
            consume,
            settle,
            tryCreate("i4"),
            tryCreate("i5"),
            tryCreate("i6"),
        ]);

        // Act / Assess
        await sharpens(engine(), history, on("settler", healKeepsQuotas), ADMITTED_PAST);
    });

    it("rejects a reservation on a quota stored for any limit: a lowered limit passes", async () => {
        // Prepare: 3 shards; six items under a limit of 6 (every shard at its quota); three deletes (the shards they leave
        // have room under their quotas); then the tenant's plan is lowered to 3 while the key holds 3.
        const history = strictHistory("client", 6, 3, [
            ...["i0", "i1", "i2", "i3", "i4", "i5"].map((id) => tryCreate(id)),
            ...["i0", "i1", "i2"].map((id): FuzzEvent => ({ op: "delete", key: "k0", id })),
            ...["i6", "i7", "i8"].map((id) => tryCreate(id, 3)),
        ]);

        // Act / Assess
        await sharpens(engine(), history, on("api", quotaOfAnyLimit), ADMITTED_PAST);
    });

    it("rejects a marker that takes one attribute per life: one id created and deleted in quick succession", async () => {
        // Prepare: twelve young lives of one id.
        const cycles = Array.from({ length: 12 }, (): FuzzEvent[] => [tryCreate("i0"), { op: "delete", key: "k0", id: "i0" }]).flat();
        const history = strictHistory("client", 1, 1, [...cycles, consume]);

        // Act / Assess
        await sharpens(engine(), history, on("api", markPerLife), MARKER_GREW);
    });

    it("rejects a client that leaves an item near 400 KB no room for its soft delete: the counting's write is refused", async () => {
        // Prepare: 3 shards; an item as large as the client accepts, created, deleted and consumed (the consumer removes
        // it), then created again under another id and deleted; a create one byte larger, refused before any write.
        const big = (id: string): FuzzEvent => ({ op: "tryCreate", key: "k0", id, big: true });
        const history = strictHistory("client", 2, 3, [
            big("i0"),
            { op: "invalid", call: "tryCreate", key: "k0", field: "attributes", tooBig: true },
            consume,
            { op: "delete", key: "k0", id: "i0" },
            consume,
            big("i1"),
            { op: "delete", key: "k0", id: "i1" },
            consume,
        ]);

        // Act / Assess
        await sharpens(engine(), history, on("api", itemWithoutHeadroom), REFUSED_WRITE);
    });

    for (const mode of ["utilization", "strict"] as const) {
        it(`rejects a ${mode} delete that gives up on an item another writer grew past 400 KB: the delete removes it`, async () => {
            // Prepare: attribute selection; an item as large as the client accepts, grown by another writer's flip (its
            // status becomes two bytes longer), deleted by the client; another writer's item put at 400 KB, the client's
            // delete of it; consumed, healed (to the consumer the removals are other writers' deletes). A settler run
            // before each delete moves the clock on: a 400 KB write takes 400 of its partition's 1,000 write units a second.
            const history: History = {
                ...strictHistory("attribute", 3, 1, [
                    { op: "tryCreate", key: "k0", id: "i0", big: true },
                    { op: "otherFlip", key: "k0", id: "i0", status: "archived" },
                    settle,
                    { op: "delete", key: "k0", id: "i0" },
                    { op: "otherPut", key: "k0", id: "i1", big: true },
                    settle,
                    { op: "delete", key: "k0", id: "i1" },
                    consume,
                    settle,
                    consume,
                ]),
                mode,
            };

            // Act / Assess
            await sharpens(engine(), history, on("api", oversizedDeleteThrows), THREW_REFUSAL);
        });
    }

    it("rejects a consumer that keeps a late put another writer moved out of the selection in its batch: a move back in counts it", async () => {
        // Prepare: attribute selection, utilization. A create whose first put attempt is held; its repeat creates the
        // life, the consumer reads it, another writer deletes the item, the consumer reads that; the held attempt lands
        // (the life again), another writer moves it out of the selection before the consumer reads the INSERT, and back
        // in after.
        const history: History = {
            ...strictHistory("attribute", 3, 1, [
                { op: "create", key: "k0", id: "i0", late: true },
                consume,
                { op: "otherDelete", key: "k0", id: "i0" },
                consume,
                { op: "land" },
                { op: "otherFlip", key: "k0", id: "i0", status: "archived" },
                consume,
                { op: "otherFlip", key: "k0", id: "i0", status: "active" },
                consume,
            ]),
            mode: "utilization",
        };

        // Act / Assess
        await sharpens(engine(), history, on("pipeline", lateItemKept), LATE_BACK);
    });

    it("rejects a settler that heals a key before it purges a late put the key's marker shows removed", async () => {
        // Prepare: the late put in the first DLQ, under a client selection (the marker shows the life removed)
        const history = lateInFirstDlq("client");

        // Act / Assess
        const { sound } = await sharpens(engine(), history, { settlerHealsFirst: true }, HEALED_LATE);
        assert.equal(sound.stats.deadLettered, 1, JSON.stringify(sound.stats));
        assert.equal(sound.stats.latePutsBack, 1, JSON.stringify(sound.stats));
        assert.equal(sound.stats.latePutsAHealMayCount, 0, JSON.stringify(sound.stats));
    });

    it("allows a heal to count a late put no one can tell from a live item yet: under an attribute selection, its INSERT in the first DLQ", async () => {
        // Prepare: the same under an attribute selection, where a marker does not tell a removed life from one moved out
        // of the selection: the settler's reconcile counts the late item and its heal counts it (docs/limits.md), until
        // the consumer reads the INSERT from the redrive and removes it.
        const history = lateInFirstDlq("attribute", [{ op: "redrive" }, consume]);

        // Act
        const result = await runHistory(engine(), history);

        // Assess: the allowance was taken, and the end is exact
        assert.deepEqual(result.violations, []);
        assert.equal(result.stats.latePutsAHealMayCount, 1, JSON.stringify(result.stats));
        assert.equal(result.stats.deadLettered, 1, JSON.stringify(result.stats));
    });

    it("rejects a consumer that keeps the backfill flag of an ended life when another writer puts the id again", async () => {
        // Prepare: strict, prefix selection; an item from before the counter, adopted by a backfill (a unit and its
        // marker's flag); another writer deletes it, the consumer reads that, and a heal takes the unit back; the other
        // writer puts the id again, and the consumer counts the new life. The backfill after the stream must give it a
        // unit: the flag it would find is the ended life's.
        const history: History = {
            ...strictHistory("prefix", 3, 1, [
                { op: "backfill", runId: "a", pageSize: 5 },
                { op: "otherDelete", key: "k0", id: "i2" },
                consume,
                settle,
                { op: "otherPut", key: "k0", id: "i2" },
                consume,
            ]),
            preexisting: [{ key: "k0", id: "i2" }],
        };

        // Act / Assess
        await sharpens(engine(), history, on("pipeline", staleBackfillFlagKept), BELOW_UNLISTED);
    });

    it("rejects a sharded heal that leaves an empty shard out of its transaction: a delete lands there beside it", async () => {
        // Prepare: utilization, 3 shards, two calls at once. Two items; another writer rewrites i0's token to one homed in
        // a shard with no item. A settler run; two counts, then the client deletes i0, whose decrement goes to its new
        // token's shard. Seed 13 lands that decrement and the soft delete after the heal's reads of best-effort and before
        // its partition read, and the heal's write after both.
        const history: History = {
            ...strictHistory("client", 9, 3, [
                { op: "create", key: "k0", id: "i0" },
                { op: "create", key: "k0", id: "i1" },
                consume,
                { op: "otherRetoken", key: "k0", id: "i0", shift: 2 },
                consume,
                { op: "settle", keyBudget: 200, auditSegments: 1 },
                { op: "count", key: "k0" },
                { op: "count", key: "k0" },
                { op: "delete", key: "k0", id: "i0" },
                consume,
            ]),
            seed: 13,
            mode: "utilization",
            concurrency: 2,
        };

        // Act / Assess
        await sharpens(engine(), history, on("settler", healLeavesEmptyShardsOut), BELOW_UNLISTED);
    });

    it("stream records carry the virtual clock's time: a reused id's ledger values are read before they are sealed, and after", async () => {
        // Prepare: four young lives of one id, consumed (the marker's hc_released names the last, made milliseconds
        // before the records); a settler run moves the clock past the quiet window, longer than a life takes to seal;
        // a fifth life, consumed (its INSERT's time is past the fourth's seal), deleted and consumed.
        const cycles = Array.from({ length: 4 }, (): FuzzEvent[] => [tryCreate("i0"), { op: "delete", key: "k0", id: "i0" }]).flat();
        const history = strictHistory("client", 1, 1, [
            ...cycles,
            consume,
            settle,
            tryCreate("i0"),
            consume,
            { op: "delete", key: "k0", id: "i0" },
            consume,
        ]);

        // Act
        const result = await runHistory(engine(), history);

        // Assess: the consumer read a value not yet sealed (it keeps it: strict-ledger.ts droppableLedger) and a sealed one
        assert.deepEqual(result.violations, []);
        assert.ok(result.stats.ledgerUnsealed > 0, JSON.stringify(result.stats));
        assert.ok(result.stats.ledgerSealed > 0, JSON.stringify(result.stats));
    });

    /**
     * Seeds of `npm run fuzz -- --mode strict --shards 3 --selection <s> --ops <n>` whose histories catch a mutant (the
     * generator's paths reach it): the history each draws, as shipped and against the mutant.
     */
    const SEEDED: Array<{
        name: string;
        selection: History["selection"];
        seed: number;
        ops: number;
        mutate: (clients: FuzzClients) => void;
        expected: RegExp;
    }> = [
        {
            name: "a backfill that keeps the stored quotas",
            selection: "prefix",
            seed: 2,
            ops: 40,
            mutate: on("backfill", backfillKeepsQuotas),
            expected: ADMITTED_PAST,
        },
        {
            name: "a marker that takes one attribute per life",
            selection: "client",
            seed: 2,
            ops: 40,
            mutate: on("api", markPerLife),
            expected: MARKER_GREW,
        },
        {
            name: "a client that leaves an item near 400 KB no room for its soft delete",
            selection: "client",
            seed: 1,
            ops: 40,
            mutate: on("api", itemWithoutHeadroom),
            expected: REFUSED_WRITE,
        },
    ];
    for (const { name, selection, seed, ops, mutate, expected } of SEEDED) {
        it(`seed ${seed} (${selection}, 3 shards, ${ops} events) rejects ${name}`, async () => {
            // Prepare
            const history = generateHistory({ seed, ops, mode: "strict", selection, counterShards: 3 });

            // Act / Assess
            await sharpens(engine(), history, mutate, expected);
        });
    }

    it("seed 43024 (strict attribute, 8 shards, 40 events) keeps the contract: a rearm served again under its ClientRequestToken admits nothing", async () => {
        // Prepare: a tryCreate's rearm commits and hears a 500, a backfill adds units, the SDK's retry of the rearm is
        // answered by DynamoDB's idempotency (nothing applied): the key is then above the limit by the backfill alone.
        const history = generateHistory({ seed: 43024, ops: 40, counterShards: 8 });

        // Act
        const result = await runHistory(engine(), history);

        // Assess
        assert.deepEqual(result.violations, []);
    });

    it("seed 43063 (strict prefix, 8 shards, 40 events) keeps the contract: a delete releases its own life's unit, not an earlier life's flag", async () => {
        // Prepare: the marker of k0/i2 holds a backfill's flag (this epoch) for an earlier, token-less life of the id; the
        // client's life of i2 is deleted. Taking that flag instead of the life's own reservation (a delete that took any
        // flag of its epoch) left this life's slot held with no fault to explain it.
        const history = generateHistory({ seed: 43063, ops: 40, counterShards: 8 });

        // Act
        const result = await runHistory(engine(), history);

        // Assess
        assert.deepEqual(result.violations, []);
    });

    it("seed 25 (strict client, 8 shards, 60 events) keeps the contract: a busy heal counts a life whose token another writer moved once over the key", async () => {
        // Prepare: a settler run starts while calls are in flight and another writer rewrites a recent life's token (its
        // unit stays in its first home). Healed with a max(units, items) per shard, the life counted in both shards and
        // the sum went to 6 over a limit of 5 (runtime/heal/heal.ts, (k)).
        const history = generateHistory({ seed: 25, ops: 60, mode: "strict", selection: "client", counterShards: 8 });
        assert.ok(history.events.some((e) => e.op === "otherRetoken"));

        // Act
        const result = await runHistory(engine(), history);

        // Assess
        assert.deepEqual(result.violations, []);
        assert.ok(result.stats.busySettles > 0, JSON.stringify(result.stats));
    });

    it("seed 230070 (strict client, 8 shards, 200 events) keeps the contract: a late put another writer re-tokened is a life no slot backs", async () => {
        // Prepare: a create's first put attempt lands after its life was deleted and removed, and another writer rewrites
        // the item's token before the consumer removes it; a client delete of the item then gives back a slot another
        // life holds (docs/limits.md). Before the checker knew this, the history had 89 violations from the rewrite on.
        const history = generateHistory({ seed: 230070, ops: 200 });
        assert.deepEqual([history.mode, history.selection, history.counterShards], ["strict", "client", 8]);
        assert.ok(history.events.some((e) => e.op === "otherRetoken"));

        // Act
        const result = await runHistory(engine(), history);

        // Assess
        assert.deepEqual(result.violations, []);
        assert.ok(result.stats.latePutsBack > 0, JSON.stringify(result.stats));
    });

    it("a seed's history with every path replays request for request", async () => {
        // Prepare: seed 214 lowers and raises a limit, adopts a key at its limit, rewrites tokens and reuses one id.
        const history = generateHistory({ seed: 214, ops: 40, mode: "strict", selection: "prefix", counterShards: 3 });
        const taken = pathsTaken(history);
        assert.ok(taken.lowered && taken.raised && taken.adoptedAtLimit && taken.retoken && taken.reuseCycles >= 8, JSON.stringify(taken));

        // Act
        const first = await runHistory(engine(), history);
        const second = await runHistory(engine(), history);

        // Assess
        assert.deepEqual(first.violations, []);
        assert.match(first.trace, /^[0-9a-f]{64}$/);
        assert.equal(second.trace, first.trace);
        assert.equal(second.stats.requests, first.stats.requests);
    });

    it("the generator's seeds take every path, and a seed's shard count changes none of their draws", () => {
        // Prepare / Act
        const histories = Array.from({ length: 40 }, (_, i) => generateHistory({ seed: 101 + i, ops: 150 }));
        const taken = histories.map(pathsTaken);

        // Assess
        for (const path of ["lowered", "raised", "adoptedAtLimit", "retoken"] as const) {
            assert.ok(
                taken.some((t) => t[path]),
                `no seed takes ${path}`,
            );
        }
        assert.ok(
            taken.some((t) => t.reuseCycles >= 8),
            "no seed reuses one id 8 times in a row",
        );
        assert.ok(
            histories.some((h, i) => taken[i]!.adoptedAtLimit && (h.counterShards ?? 1) > 1),
            "no sharded seed adopts a key at its limit",
        );
        assert.ok(
            histories.some((h) => h.events.some((e) => (e.op === "create" || e.op === "tryCreate") && e.big === true)),
            "no seed creates an item near 400 KB",
        );
        assert.ok(
            histories.every(
                (h) => !h.events.some((e) => e.op === "tryCreate" && e.big) || h.events.some((e) => e.op === "invalid" && e.tooBig),
            ),
            "a seed with items near 400 KB tries one byte more",
        );
        for (const seed of [101, 102, 103]) {
            const strip = (h: History) => h.events.map((e) => (e.op === "consume" ? { ...e, split: undefined } : e));
            assert.deepEqual(
                strip(generateHistory({ seed, ops: 150, counterShards: 1 })),
                strip(generateHistory({ seed, ops: 150, counterShards: 8 })),
            );
        }
    });

    it("seed 40 is a history that reuses one id thousands of times: little other traffic, requests of at most 4 virtual ms", () => {
        // Prepare / Act
        const history = generateHistory({ seed: 40, ops: 200 });
        const taken = pathsTaken(history);

        // Assess: its other traffic is small, and its requests take at most THOUSANDS.latencyMs
        assert.ok(taken.reuseCycles >= THOUSANDS.fewest, JSON.stringify(taken));
        assert.equal(history.latencyMs, THOUSANDS.latencyMs);
        assert.ok(history.events.length <= 3 * THOUSANDS.most + THOUSANDS.otherEvents, `${history.events.length} events`);
        assert.deepEqual(generateHistory({ seed: 41, ops: 200 }).latencyMs, undefined, "a seed of the ordinary kind keeps its latencies");
    });
});
