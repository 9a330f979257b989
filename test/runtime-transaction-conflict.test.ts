/**
 * A strict backfill's transaction, and a sharded heal's, include the key's best-effort item, and DynamoDB refuses a
 * plain write to an item that a pending transaction includes with TransactionConflictException, a 400 that wrote
 * nothing (injected here with the real error shape on the client's best-effort writes only, attempt by attempt; the
 * parity layer raises it for a real transaction: test/runtime-heal-conflict.test.ts). The client must never surface
 * it: every write repeats it, even one sent once (an increment, a release: only a refusal is repeated, so it commits
 * at most once); a write refused on every attempt is absorbed and reported, and the mode's bound holds. Throttling is
 * such a refusal too (DynamoDB refuses before serving): a write sent once repeats it the same way.
 */
import { type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { faultError } from "../local/engine/faults";
import type { BestEffortFailure } from "../runtime/client/best-effort";
import { HybridCounterClient } from "../runtime/client/client";
import { bestEffortSortKey } from "../runtime/shared/config";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

describe("a TransactionConflict on the client's best-effort write never reaches the caller (DynamoDB Local)", function () {
    const engine = useEngine();

    /**
     * A client of `mode` whose best-effort writes meet a TransactionConflictException: `conflicts.next[delta]` of
     * the next writes that add `delta` ("1" an increment or reserve, "0" a touch, "-1" a decrement or release).
     */
    async function conflicted(mode: "strict" | "utilization", attempts?: number, kind: "conflict" | "throttle" = "conflict") {
        const fixture: CounterFixture = await counterFixture(engine(), { mode, placement: "separate" });
        const dynamodb = engine().dynamodb();
        const conflicts = { next: {} as Record<string, number>, injected: 0 };
        const bestEffortKey = bestEffortSortKey(fixture.config);
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const input = args.input as {
                Key?: Record<string, { S?: string }>;
                ExpressionAttributeValues?: Record<string, { N?: string }>;
            };
            const delta = input.ExpressionAttributeValues?.[":delta"]?.N ?? "";
            if (context.commandName === "UpdateItemCommand" && input.Key?.sk?.S === bestEffortKey && (conflicts.next[delta] ?? 0) > 0) {
                conflicts.next[delta]!--;
                conflicts.injected++;
                throw faultError(kind, "UpdateItemCommand", args.input);
            }
            return next(args);
        };
        dynamodb.middlewareStack.add(middleware, { step: "initialize", name: "bestEffortConflicts" });
        const failures: BestEffortFailure[] = [];
        const client = new HybridCounterClient({
            ...fixture.layout,
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            dynamodb,
            mode,
            ...(attempts === undefined ? {} : { attempts }),
            onBestEffortFailure: (failure) => failures.push(failure),
        });
        return { fixture, client, conflicts, failures };
    }

    it("utilization: an increment and a decrement that meet it are repeated; nothing is absorbed, the count is exact", async () => {
        // Prepare
        const { fixture, client, conflicts, failures } = await conflicted("utilization");

        // Act: the create's increment (committed at most once) meets a conflict; then the delete's decrement meets one.
        conflicts.next = { "1": 1 };
        const created = await client.create("k", "a");
        const afterCreate = await fixture.observe("k");
        assert.equal((await client.create("k", "b")).created, true);
        conflicts.next = { "-1": 1 };
        const deleted = await client.delete("k", "b");
        const afterDelete = await fixture.observe("k");

        // Assess
        assert.deepEqual(created, { created: true });
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(conflicts.injected, 2);
        assert.deepEqual(failures, []);
        assert.deepEqual([afterCreate.bestEffort, afterCreate.clientLive], [1, 1], "the increment was repeated once");
        assert.deepEqual([afterDelete.bestEffort, afterDelete.clientLive], [1, 1], "the decrement was repeated once, not lost");
        fixture.close();
    });

    it("utilization: an increment refused on every attempt is absorbed and reported (best-effort stays below live)", async () => {
        // Prepare: 3 attempts per write.
        const { fixture, client, conflicts, failures } = await conflicted("utilization", 3);

        // Act
        conflicts.next = { "1": 3 };
        const created = await client.create("k", "a");
        const after = await fixture.observe("k");

        // Assess
        assert.deepEqual(created, { created: true });
        assert.equal(conflicts.injected, 3);
        assert.deepEqual(
            failures.map((f) => [f.operation, (f.error as Error).name]),
            [["increment", "TransactionConflictException"]],
        );
        assert.deepEqual([after.bestEffort, after.clientLive], [0, 1]);
        fixture.close();
    });

    it("strict: a reserve, a touch and a release that meet it are repeated; the slot is freed once", async () => {
        // Prepare
        const { fixture, client, conflicts, failures } = await conflicted("strict");

        // Act: the reserve's first attempt conflicts; then the delete's touch conflicts once, and its release too.
        conflicts.next = { "1": 1 };
        const created = await client.tryCreate("k", "a", 1);
        const refused = await client.tryCreate("k", "b", 1);
        conflicts.next = { "0": 1, "-1": 1 };
        const deleted = await client.delete("k", "a");
        const afterDelete = await fixture.observe("k");
        const again = await client.tryCreate("k", "c", 1);

        // Assess
        assert.equal(created.created, true);
        assert.deepEqual([refused.created, refused.reason], [false, "limit"]);
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(conflicts.injected, 3);
        assert.deepEqual(failures, []);
        assert.deepEqual([afterDelete.bestEffort, afterDelete.clientLive], [0, 0], "the slot is freed once, not held");
        assert.equal(again.created, true);
        fixture.close();
    });

    it("throttling: an increment and a strict release sent once are repeated, not absorbed (the throttled attempt wrote nothing)", async () => {
        // Prepare: a client of each mode whose best-effort writes are throttled.
        const utilization = await conflicted("utilization", undefined, "throttle");
        const strict = await conflicted("strict", undefined, "throttle");
        assert.equal((await strict.client.tryCreate("k", "a", 1)).created, true);

        // Act: the utilization create's increment is throttled twice; the strict delete's release once.
        utilization.conflicts.next = { "1": 2 };
        const created = await utilization.client.create("k", "a");
        const afterCreate = await utilization.fixture.observe("k");
        strict.conflicts.next = { "-1": 1 };
        const deleted = await strict.client.delete("k", "a");
        const afterDelete = await strict.fixture.observe("k");
        const again = await strict.client.tryCreate("k", "b", 1);

        // Assess: before, each was sent once and absorbed (best-effort 0 under a live item; a slot held until a heal).
        assert.deepEqual([created, deleted], [{ created: true }, { deleted: true }]);
        assert.deepEqual([utilization.conflicts.injected, strict.conflicts.injected], [2, 1]);
        assert.deepEqual([...utilization.failures, ...strict.failures], []);
        assert.deepEqual([afterCreate.bestEffort, afterCreate.clientLive], [1, 1], "the increment was repeated");
        assert.deepEqual([afterDelete.bestEffort, afterDelete.clientLive], [0, 0], "the slot was freed once");
        assert.equal(again.created, true);
        utilization.fixture.close();
        strict.fixture.close();
    });

    it("strict: a release refused on every attempt is absorbed and reported, holding the slot", async () => {
        // Prepare: 3 attempts per write.
        const { fixture, client, conflicts, failures } = await conflicted("strict", 3);
        assert.equal((await client.tryCreate("k", "a", 1)).created, true);

        // Act
        conflicts.next = { "-1": 3 };
        const deleted = await client.delete("k", "a");
        const after = await fixture.observe("k");

        // Assess
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(conflicts.injected, 3);
        assert.deepEqual(
            failures.map((f) => [f.operation, (f.error as Error).name]),
            [["release", "TransactionConflictException"]],
        );
        assert.deepEqual([after.bestEffort, after.clientLive], [1, 0], "the slot is held back, never freed twice");
        fixture.close();
    });
});
