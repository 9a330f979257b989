/**
 * A strict backfill's transaction includes the key's best-effort item, and DynamoDB refuses a plain write to an item
 * that a pending transaction includes with TransactionConflictException (DynamoDB Local never does, so it is
 * injected here with the real error shape, on the client's best-effort writes only). The client must never surface
 * it: a write that is safe to repeat is repeated, one that is sent once is absorbed and reported, and the mode's
 * bound holds.
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
    async function conflicted(mode: "strict" | "utilization") {
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
                throw faultError("conflict", "UpdateItemCommand", args.input);
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
            onBestEffortFailure: (failure) => failures.push(failure),
        });
        return { fixture, client, conflicts, failures };
    }

    it("utilization: an increment that meets it is absorbed and reported (best-effort stays below live); a decrement is repeated", async () => {
        // Prepare
        const { fixture, client, conflicts, failures } = await conflicted("utilization");

        // Act: the create's increment (sent once) meets a conflict; then the delete's decrement meets one on its first attempt.
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
        assert.deepEqual(
            failures.map((f) => [f.operation, (f.error as Error).name]),
            [["increment", "TransactionConflictException"]],
        );
        assert.deepEqual([afterCreate.bestEffort, afterCreate.clientLive], [0, 1]);
        assert.deepEqual([afterDelete.bestEffort, afterDelete.clientLive], [0, 1], "the decrement was repeated once, not lost");
        fixture.close();
    });

    it("strict: a reserve and a touch that meet it are repeated; a release that meets it is absorbed, holding the slot", async () => {
        // Prepare
        const { fixture, client, conflicts, failures } = await conflicted("strict");

        // Act: the reserve's first attempt conflicts; then the delete's touch conflicts once, and its release (sent once) too.
        conflicts.next = { "1": 1 };
        const created = await client.tryCreate("k", "a", 1);
        const refused = await client.tryCreate("k", "b", 1);
        conflicts.next = { "0": 1, "-1": 1 };
        const deleted = await client.delete("k", "a");
        const afterDelete = await fixture.observe("k");

        // Assess
        assert.equal(created.created, true);
        assert.deepEqual([refused.created, refused.reason], [false, "limit"]);
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(conflicts.injected, 3);
        assert.deepEqual(
            failures.map((f) => [f.operation, (f.error as Error).name]),
            [["release", "TransactionConflictException"]],
        );
        assert.deepEqual([afterDelete.bestEffort, afterDelete.clientLive], [1, 0], "the slot is held back, never freed twice");
        fixture.close();
    });
});
