/**
 * The checker at the seams: for each fix where two parties meet (the settler's heal and a client delete,
 * a backfill and the settler, another writer moving items, a client's late put attempt and the consumer), a
 * small history that keeps the contract, and the same history against a mutant that reverses the fix, which
 * the checker must reject. The mutants
 * change requests on their way to DynamoDB Local (middleware on one party's client), so the system under
 * test is otherwise the one the package ships.
 */
import type { BatchGetItemCommandInput, TransactWriteItemsCommandInput, UpdateItemCommandInput } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { bestEffortUpdate, dueUpdate } from "../runtime/shared/best-effort-marks";
import { bestEffortSortKey, DEFAULT_LAYOUT } from "../runtime/shared/config";
import { shardOfPartitionKey } from "../runtime/shards/layout";
import { generateHistory, LONGEST_ID, type FuzzEvent, type History } from "./fuzz/history";
import { runHistory, type FuzzClients, FUZZ_ENGINE } from "./fuzz/run";
import { rewrite, staleBackfillFlagKept } from "./fuzz/mutants";
import { TAKE_BACKFILL_UNIT } from "../runtime/client/resource-writes";
import { useEngine } from "./support/engine";
import { sharpens } from "./support/sharpens";

const consume: FuzzEvent = { op: "consume", max: 25, overlap: 0, crash: "none" };
const settle: FuzzEvent = { op: "settle", keyBudget: 200, auditSegments: 0 };

function strictHistory(selection: History["selection"], events: FuzzEvent[], limit = 1): History {
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
    };
}

/** Mutant: a heal that lowers the count opens no new epoch (the heal of issue 19, items 3 and 4, before its fix). */
function healWithoutEpoch({ settler }: FuzzClients): void {
    rewrite<UpdateItemCommandInput>(settler, "UpdateItemCommand", (input) => {
        const opens = ", #epoch = if_not_exists(#epoch, :zero) + :one, #epochAt = :epochAt";
        if (input.UpdateExpression?.includes(opens)) {
            input.UpdateExpression = input.UpdateExpression.replace(opens, "");
            delete input.ExpressionAttributeNames!["#epoch"];
            delete input.ExpressionAttributeNames!["#epochAt"];
            for (const name of [":zero", ":one", ":epochAt"]) {
                delete input.ExpressionAttributeValues![name];
            }
        }
    });
}

/**
 * Mutant: a strict delete takes a backfill's unit whatever epoch flagged it, and the consumer keeps the flag of an
 * ended life when it counts a later one (test/fuzz/mutants.ts). Either guard alone keeps a re-put id from giving its
 * unit back twice: the flag is gone before the delete, or the delete refuses a flag of an earlier epoch.
 */
function takeAnyEpochOfAStaleFlag(clients: FuzzClients): void {
    takeAnyEpoch(clients);
    staleBackfillFlagKept(clients.pipeline);
}

/** Mutant: a strict delete takes a backfill's unit whatever epoch flagged it. */
function takeAnyEpoch({ api }: FuzzClients): void {
    rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
        if (input.UpdateExpression === TAKE_BACKFILL_UNIT) {
            input.ConditionExpression = "attribute_exists(#be)";
            delete input.ExpressionAttributeValues;
        }
    });
}

/** Mutant: a strict backfill adds its units without the marks a client write leaves (version, last write, heal shard). */
function backfillWithoutHealMarks({ backfill }: FuzzClients): void {
    rewrite<TransactWriteItemsCommandInput>(backfill, "TransactWriteItemsCommand", (input) => {
        for (const action of input.TransactItems ?? []) {
            const update = action.Update;
            if (update?.UpdateExpression === bestEffortUpdate(":n", true, true)) {
                update.UpdateExpression = "ADD #count :n";
                for (const name of ["#version", "#lv", "#ledger", "#writtenAt", "#heal", "#due", "#marks"]) {
                    delete update.ExpressionAttributeNames![name];
                }
                for (const name of [":one", ":now", ":shard"]) {
                    delete update.ExpressionAttributeValues![name];
                }
            }
        }
    });
}

/** Mutant: a strict backfill skips the items the consumer (or the settler's audit) counted before it: no flag-only action. */
function backfillWithoutFlagOnly({ backfill }: FuzzClients): void {
    rewrite<TransactWriteItemsCommandInput>(backfill, "TransactWriteItemsCommand", (input) => {
        const actions = input.TransactItems ?? [];
        const flagOnly = actions.filter((a) => a.Update?.UpdateExpression === "SET #be = :epoch");
        if (flagOnly.length === 0) {
            return;
        }
        input.TransactItems = actions.filter((a) => !flagOnly.includes(a));
        for (const action of input.TransactItems) {
            const n = action.Update?.ExpressionAttributeValues?.[":n"];
            if (n?.N !== undefined && action.Update?.UpdateExpression?.includes("#version")) {
                n.N = String(Number(n.N) - flagOnly.length);
            }
        }
    });
}

/**
 * Mutant: the consumer counts a late put of a removed life (issue 19, item 10a, before its fix): it reads its
 * markers without hc_life, and counts an INSERT without the condition that the marker does not name its life.
 */
function countLatePuts({ pipeline }: FuzzClients): void {
    rewrite<BatchGetItemCommandInput>(pipeline, "BatchGetItemCommand", (input) => {
        for (const request of Object.values(input.RequestItems ?? {})) {
            if (request.ProjectionExpression === undefined) {
                request.ProjectionExpression = "#sk, #state, #seq";
                request.ExpressionAttributeNames = { "#sk": DEFAULT_LAYOUT.sortKey, "#state": "hc_state", "#seq": "hc_seq" };
            }
        }
    });
    rewrite<TransactWriteItemsCommandInput>(pipeline, "TransactWriteItemsCommand", (input) => {
        for (const action of input.TransactItems ?? []) {
            const update = action.Update;
            if (update?.ConditionExpression?.includes(":insertedLife")) {
                update.ConditionExpression = update.ConditionExpression.replace(
                    " AND (attribute_not_exists(#lifeSeq) OR #life <> :insertedLife OR #lifeSeq >= :insertedSeq)",
                    "",
                );
                delete update.ExpressionAttributeValues![":insertedLife"];
                delete update.ExpressionAttributeValues![":insertedSeq"];
            }
        }
    });
}

/**
 * Mutant: a strict delete takes a repeated life's release whatever its marker says (issue 19, seed 160, before its
 * fix), so a delete of a late attempt that landed after the life was removed gives the life's slot back a second time.
 */
function releaseRepeatedLifeTwice({ api }: FuzzClients): void {
    rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
        if (input.UpdateExpression?.startsWith("SET #released = :released") === true) {
            input.ConditionExpression = "attribute_not_exists(#released) OR attribute_exists(#released)";
            delete input.ExpressionAttributeValues![":pending"];
        }
    });
}

/** Whether an UpdateItem writes a best-effort item (of any shard). */
function writesBestEffort(input: UpdateItemCommandInput): boolean {
    return input.Key?.[DEFAULT_LAYOUT.sortKey]?.S === bestEffortSortKey(DEFAULT_LAYOUT);
}

/**
 * Mutant: a sharded strict reservation takes the call's whole limit in each shard it tries, not the shard's stored
 * quota (runtime/shards/reservation.ts): every shard admits up to the limit, so the key passes it.
 */
function reserveWholeLimitPerShard(limit: number): (clients: FuzzClients) => void {
    return ({ api }) =>
        rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
            if (writesBestEffort(input) && input.ConditionExpression?.startsWith("#quotaLimit = :limit AND ")) {
                input.ConditionExpression = "attribute_not_exists(#count) OR #count < :limit";
                input.ExpressionAttributeValues![":limit"] = { N: String(limit) };
                delete input.ExpressionAttributeNames!["#quotaLimit"];
                delete input.ExpressionAttributeNames!["#quota"];
                delete input.ExpressionAttributeValues![":zero"];
            }
        });
}

/**
 * Mutant: a release goes to shard 0 (the key's own best-effort item) instead of the life's home shard: the sums stay
 * exact, but shard 0 gives back units it never held and admits lives past what it counts, while the home keeps its unit.
 */
function releaseToShardZero({ api }: FuzzClients): void {
    rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
        const partition = input.Key?.[DEFAULT_LAYOUT.partitionKey];
        if (writesBestEffort(input) && Number(input.ExpressionAttributeValues?.[":delta"]?.N ?? 0) < 0 && partition?.S !== undefined) {
            partition.S = shardOfPartitionKey(partition.S, 3).key;
        }
    });
}

/**
 * Mutant: the consumer never puts a key on the heal index (issue 20, before the consumer marked the keys of changes
 * the client did not make): its mark's condition can never hold.
 */
function consumerNeverMarks({ pipeline }: FuzzClients): void {
    rewrite<UpdateItemCommandInput>(pipeline, "UpdateItemCommand", (input) => {
        if (input.UpdateExpression === dueUpdate()) {
            input.ConditionExpression = "attribute_exists(#count) AND attribute_not_exists(#count)";
        }
    });
}

describe("the checker at the seams: each fix kept as a mutant it rejects", function () {
    const engine = useEngine(FUZZ_ENGINE);

    it("rejects a heal that opens no epoch: a delete after an item moved out of the selection releases twice", async () => {
        // Prepare: a reservation; another writer moves the item out of an attribute selection; the settler heals
        // the key to 0; the client deletes the item (the heal absorbed its unit, so the slot must stay held).
        const history = strictHistory("attribute", [
            { op: "tryCreate", key: "k0", id: "i0" },
            { op: "otherFlip", key: "k0", id: "i0", status: "archived" },
            settle,
            { op: "delete", key: "k0", id: "i0" },
            { op: "tryCreate", key: "k0", id: "i1" },
            { op: "tryCreate", key: "k0", id: "i2" },
        ]);

        // Act / Assess
        await sharpens(engine(), history, healWithoutEpoch, /strict bound broken/);
    });

    it("rejects a delete that takes a backfill's unit of an earlier epoch: a re-put id gives its unit back twice", async () => {
        // Prepare: another writer's item is backfilled (a unit, flagged); the writer deletes it and the settler
        // heals the key to 0 (a new epoch); the writer puts the id again; the client deletes it.
        const history = strictHistory("prefix", [
            { op: "otherPut", key: "k0", id: "i0" },
            { op: "backfill", runId: "a", pageSize: 5 },
            { op: "otherDelete", key: "k0", id: "i0" },
            consume,
            settle,
            { op: "otherPut", key: "k0", id: "i0" },
            consume,
            { op: "delete", key: "k0", id: "i0" },
        ]);

        // Act / Assess
        await sharpens(engine(), history, takeAnyEpochOfAStaleFlag, /strict bound broken/);
        // The epoch guard alone (the flag kept) holds too.
        assert.deepEqual(
            (await runHistory(engine(), history, { mutate: (clients) => staleBackfillFlagKept(clients.pipeline) })).violations,
            [],
        );
    });

    it("rejects a backfill that leaves no heal marks: its units outlive the items, and the heal cannot prove the key quiet", async () => {
        // Prepare: two items of another writer, backfilled into best-effort, then deleted by that writer.
        const history = strictHistory(
            "prefix",
            [
                { op: "otherPut", key: "k0", id: "i0" },
                { op: "otherPut", key: "k0", id: "i1" },
                { op: "backfill", runId: "a", pageSize: 5 },
                { op: "otherDelete", key: "k0", id: "i0" },
                { op: "otherDelete", key: "k0", id: "i1" },
                consume,
                settle,
            ],
            2,
        );

        // Act / Assess: the final heal skips the key as unversioned, best-effort stays 2 with nothing live.
        await sharpens(
            engine(),
            history,
            backfillWithoutHealMarks,
            /after the final heal \(skipped \(unversioned\)\): k0 best-effort 2 != 0/,
        );
    });

    it("rejects a backfill without its flag-only action: items the consumer counted first never get their unit", async () => {
        // Prepare: another writer's items, counted by the consumer before any backfill runs (as the settler's
        // audit would), then a backfill; the checker's own backfill after the drain meets them counted too.
        const history = strictHistory(
            "prefix",
            [
                { op: "otherPut", key: "k0", id: "i0" },
                { op: "otherPut", key: "k0", id: "i1" },
                consume,
                { op: "backfill", runId: "a", pageSize: 5 },
            ],
            2,
        );

        // Act / Assess
        await sharpens(
            engine(),
            history,
            backfillWithoutFlagOnly,
            /after the last backfill: k0 has 2 live items without the token and without a unit/,
        );
    });

    for (const mode of ["utilization", "strict"] as const) {
        it(`rejects a consumer that counts a late put (${mode}): a put attempt held past its call lands after the delete and the removal`, async () => {
            // Prepare: the create's first put attempt is held (the call times out and its repeat creates the item);
            // the item is counted, deleted and removed; then the held attempt lands and the consumer reads it.
            const history: History = {
                ...strictHistory("client", [
                    { op: "tryCreate", key: "k0", id: "i0", late: true },
                    consume,
                    { op: "delete", key: "k0", id: "i0" },
                    consume,
                    { op: "land" },
                    consume,
                ]),
                mode,
            };

            // Act / Assess
            await sharpens(
                engine(),
                history,
                countLatePuts,
                /after the drain: k0 has 1 late put attempts that brought a removed life back/,
            );
        });
    }

    it("rejects a strict delete that releases a repeated life twice: its late attempt lands after TTL removed it", async () => {
        // Prepare (seed 160, shrunk): the create's first put attempt is held and its repeat creates the life; a delete
        // releases its slot and TTL hard-deletes the soft-deleted item before the consumer reads it; the held attempt
        // lands (the same life again) and is deleted; then two creates at limit 2 and a count. The landing runs beside
        // the events after it: under seed 4's schedule it lands before the second delete.
        const history = {
            ...strictHistory(
                "client",
                [
                    { op: "tryCreate", key: "k0", id: "i0", late: true },
                    { op: "delete", key: "k0", id: "i0" },
                    { op: "ttlDelete", key: "k0", id: "i0" },
                    { op: "land" },
                    { op: "delete", key: "k0", id: "i0" },
                    { op: "tryCreate", key: "k0", id: "i1" },
                    { op: "tryCreate", key: "k0", id: "i2" },
                    { op: "count", key: "k0" },
                    consume,
                ],
                2,
            ),
            seed: 4,
        };

        // Act / Assess
        await sharpens(engine(), history, releaseRepeatedLifeTwice, /k0 strict bound broken: \d client-written live items/);
    });

    it("rejects a consumer that leaves the heal index alone: another writer deletes a client item (utilization)", async () => {
        // Prepare: a client item, counted; another writer hard-deletes it; the consumer reads the removal. Best-effort
        // is then above the live items until a heal, and only the consumer saw why.
        const history: History = {
            ...strictHistory("client", [
                { op: "create", key: "k0", id: "i0" },
                consume,
                { op: "otherDelete", key: "k0", id: "i0" },
                consume,
            ]),
            mode: "utilization",
        };

        // Act / Assess
        await sharpens(
            engine(),
            history,
            consumerNeverMarks,
            /before the final heal: k0 best-effort 1 != 0, and the heal index does not list it/,
        );
    });

    it("rejects a sharded reservation that takes the whole limit in each shard: the key passes its limit", async () => {
        // Prepare: 3 shards under a limit of 2 (quotas 1, 1, 0); four creates, one after another.
        const history: History = {
            ...strictHistory(
                "client",
                ["i0", "i1", "i2", "i3"].map((id): FuzzEvent => ({ op: "tryCreate", key: "k0", id })),
                2,
            ),
            counterShards: 3,
        };

        // Act / Assess: as shipped two creates pass; the mutant admits two in each shard with a quota.
        await sharpens(
            engine(),
            history,
            reserveWholeLimitPerShard(2),
            /k0 strict bound broken: \d client-written live items \(\d live\), best-effort \d, limit 2/,
        );
    });

    it("rejects a release sent to shard 0 instead of the life's home: shard 0 admits lives its best-effort does not hold", async () => {
        // Prepare: 3 shards under a limit of 3 (a quota of 1 each): three lives, one homed in each shard (the client takes
        // the shards in turn), deleted; then three creates. The mutant's releases all land in shard 0, which goes below
        // zero while the other shards keep their units: the new lives all go to shard 0, past what it counts.
        const history: History = {
            ...strictHistory(
                "client",
                [
                    ...["i0", "i1", "i2"].map((id): FuzzEvent => ({ op: "tryCreate", key: "k0", id })),
                    ...["i0", "i1", "i2"].map((id): FuzzEvent => ({ op: "delete", key: "k0", id })),
                    ...["i3", "i4", "i5"].map((id): FuzzEvent => ({ op: "tryCreate", key: "k0", id })),
                ],
                3,
            ),
            counterShards: 3,
        };

        // Act / Assess: the key's sums stay within the bound; shard 0's does not.
        await sharpens(
            engine(),
            history,
            releaseToShardZero,
            /k0 shard 0 strict bound broken: \d client-written live items homed there > best-effort -?\d/,
        );
    });

    it("counts an id exactly as long as a marker allows, through every party", async () => {
        // Prepare: the longest id, created, moved by another writer, healed and deleted.
        const history: History = {
            ...strictHistory("attribute", [
                { op: "tryCreate", key: "k0", id: LONGEST_ID },
                consume,
                { op: "otherFlip", key: "k0", id: LONGEST_ID, status: "archived" },
                consume,
                { op: "otherFlip", key: "k0", id: LONGEST_ID, status: "active" },
                settle,
                consume,
                { op: "delete", key: "k0", id: LONGEST_ID },
            ]),
        };

        // Act
        const result = await runHistory(engine(), history);

        // Assess: nothing parked, nothing lost, every heal exact.
        assert.deepEqual(result.violations, []);
        assert.equal(result.stats.fatal, 0);
        assert.equal(result.stats.settles, 1);
    });

    it("the generator gives the suite's seeds settler runs, selection moves, TTL deletes and the longest id", () => {
        // Prepare / Act
        const histories = Array.from({ length: 40 }, (_, i) => generateHistory({ seed: 101 + i, ops: 150 }));
        const events = histories.flatMap((h) => h.events);

        // Assess
        assert.ok(
            histories.some((h) => h.selection === "attribute"),
            "no attribute history",
        );
        for (const op of ["settle", "otherFlip", "ttlDelete"] as const) {
            assert.ok(
                events.some((e) => e.op === op),
                `no ${op} event`,
            );
        }
        assert.ok(
            events.some((e) => e.op === "settle" && e.keyBudget === 1),
            "no settler run with a budget below the due keys",
        );
        assert.ok(
            events.some((e) => "id" in e && e.id === LONGEST_ID),
            "no event with the longest id",
        );
        for (const h of histories) {
            const ops = new Set(h.events.map((e) => e.op));
            assert.ok(h.selection === "attribute" || !ops.has("otherFlip"), `seed ${h.seed} moves items without an attribute selection`);
            assert.ok(!(h.selection !== "client" && ops.has("ttlDelete")), `seed ${h.seed} has a TTL delete beside other writers`);
        }
    });
});
