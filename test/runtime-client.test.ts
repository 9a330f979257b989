import {
    InternalServerError,
    ProvisionedThroughputExceededException,
    ScanCommand,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { useEngine } from "./support/engine";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { HybridCounterClient } from "../runtime/client/client";
import { ConfigurationError } from "../runtime/shared/config";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { counterFixture } from "./support/counter-fixture";

describe("HybridCounterClient on DynamoDB Local", () => {
    const engine = useEngine();

    describe("rejects bad input before writing anything", () => {
        const cases: Array<[string, (c: HybridCounterClient) => Promise<unknown>, string, string]> = [
            ["empty key", (c) => c.create("", "a"), "key", "[key] must be a non-empty string"],
            ["non-string key", (c) => c.create(7 as unknown as string, "a"), "key", "[key] must be a non-empty string"],
            ["oversized key", (c) => c.create("k".repeat(2049), "a"), "key", "[key] must be at most 2048 bytes"],
            ["empty id", (c) => c.create("k", ""), "id", "[id] must be a non-empty string"],
            [
                "oversized id",
                (c) => c.create("k", "é".repeat(506)),
                "id",
                `[id] must be at most 1010 bytes: its marker's sort key ("#counter#item#" + id) must fit DynamoDB's 1024-byte limit (got 1012 bytes)`,
            ],
            [
                "id in the counter namespace",
                (c) => c.create("k", "#counter#best-effort"),
                "id",
                '[id] must not start with the reserved prefix "#counter#"',
            ],
            [
                "reserved attribute",
                (c) => c.create("k", "a", { deleted: false }),
                "attributes.deleted",
                "[attributes.deleted] is reserved by the counter and cannot be set",
            ],
            [
                "key attribute",
                (c) => c.create("k", "a", { pk: "other" }),
                "attributes.pk",
                "[attributes.pk] is reserved by the counter and cannot be set",
            ],
            [
                "unstorable value",
                (c) => c.create("k", "a", { when: () => 1 }),
                "attributes.when",
                "[attributes.when] cannot be stored: a function is not a DynamoDB value",
            ],
            [
                "nested function",
                (c) => c.create("k", "a", { nested: { deeper: [Symbol("s")] } }),
                "attributes.nested",
                "[attributes.nested] cannot be stored: a symbol is not a DynamoDB value",
            ],
            [
                "attributes not an object",
                (c) => c.create("k", "a", [] as unknown as Record<string, unknown>),
                "attributes",
                "[attributes] must be an object of attribute names to values",
            ],
            ["negative limit", (c) => c.tryCreate("k", "a", -1), "limit", "[limit] must be a non-negative safe integer"],
            ["fractional limit", (c) => c.tryCreate("k", "a", 1.5), "limit", "[limit] must be a non-negative safe integer"],
            ["NaN limit", (c) => c.tryCreate("k", "a", Number.NaN), "limit", "[limit] must be a non-negative safe integer"],
            ["delete with empty id", (c) => c.delete("k", ""), "id", "[id] must be a non-empty string"],
            ["count with empty key", (c) => c.count(""), "key", "[key] must be a non-empty string"],
        ];
        for (const mode of ["utilization", "strict"] as const) {
            for (const [name, call, field, message] of cases) {
                it(`${mode}: ${name}`, async () => {
                    const fixture = await counterFixture(engine(), { mode });
                    const error = await call(fixture.client).then(
                        () => assert.fail("expected an InvalidArgumentError"),
                        (e: unknown) => e,
                    );
                    assert.ok(error instanceof InvalidArgumentError, String(error));
                    assert.equal(error.field, field);
                    assert.equal(error.message, message);
                    const items = await fixture.reader.send(new ScanCommand({ TableName: fixture.tableName }));
                    assert.equal(items.Count, 0, "nothing was written");
                    fixture.close();
                });
            }
        }
    });

    it("rejects bad options, naming every field", () => {
        const dynamodb = engine().dynamodb();
        assert.throws(
            () =>
                new HybridCounterClient({
                    tableName: "x",
                    dynamodb,
                    mode: "exact" as never,
                    attempts: 0,
                    sortKey: "pk",
                }),
            (e: unknown) =>
                e instanceof ConfigurationError &&
                e.problems.join(" | ") ===
                    '[sortKey] must differ from [partitionKey] (both are "pk") | [tableName] must be a table name of 3 to 255 characters | [countersTableName] must be set: the counters table the component deploys (its clientConfig\'s countersTableName), or the same name as [tableName] for the same-table placement | [mode] must be "utilization" or "strict" | [attempts] must be an integer from 1 to 20',
        );
        dynamodb.destroy();
    });

    it("refuses the removed processedAttribute, naming it", () => {
        const dynamodb = engine().dynamodb();
        const options = { tableName: "orders", countersTableName: "orders-counters", dynamodb, processedAttribute: "counter_processed" };

        assert.throws(
            () => new HybridCounterClient(options as ConstructorParameters<typeof HybridCounterClient>[0]),
            (e: unknown) =>
                e instanceof ConfigurationError &&
                e.problems.join(" | ") ===
                    "[processedAttribute] was removed: nothing reads or writes it (the stream consumer keeps its idempotency in markers); drop it",
        );
        dynamodb.destroy();
    });

    it("create: a second create of the same id answers created: false and counts once", async () => {
        const fixture = await counterFixture(engine());
        assert.deepEqual(await fixture.client.create("k", "a", { name: "first" }), { created: true });
        assert.deepEqual(await fixture.client.create("k", "a", { name: "second" }), { created: false });
        assert.deepEqual(await fixture.client.count("k"), { bestEffort: 1, eventual: 0, value: 1 });
        fixture.close();
    });

    it("create: a retried put whose first attempt committed is recognised, and the counter is sent exactly once", async () => {
        const fixture = await counterFixture(engine());
        // Every attempt commits and then loses its response: the SDK retries each write.
        const stats = injectFaults(fixture.clientDynamo, { rate: 1, kinds: ["500-after"], random: seededRandom(1), reads: false });

        const result = await fixture.client.create("k", "a");

        assert.deepEqual(result, { created: true });
        assert.ok(stats.injected["500-after"] >= 2);
        stats.rate = 0;
        assert.deepEqual(await fixture.client.count("k"), { bestEffort: 1, eventual: 0, value: 1 });
        fixture.close();
    });

    it("delete: a missing or already deleted id answers deleted: false and leaves best-effort alone", async () => {
        const fixture = await counterFixture(engine());
        await fixture.client.create("k", "a");
        assert.deepEqual(await fixture.client.delete("k", "missing"), { deleted: false });
        assert.deepEqual(await fixture.client.delete("k", "a"), { deleted: true });
        assert.deepEqual(await fixture.client.delete("k", "a"), { deleted: false });
        assert.deepEqual(await fixture.client.count("k"), { bestEffort: 0, eventual: 0, value: 0 });
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 1 });
        fixture.close();
    });

    for (const mode of ["utilization", "strict"] as const) {
        it(`delete (${mode}): a soft delete whose response is lost while the consumer removes the item neither overcounts nor releases twice`, async () => {
            const fixture = await counterFixture(engine(), { mode });
            await fixture.client.create("k", "a");
            await fixture.client.create("k", "b");
            await fixture.emulator.drain();
            // The soft delete commits; before the SDK retries it, the consumer counts it and hard-deletes the item.
            let attempts = 0;
            const loseResponse: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
                const softDelete =
                    context.commandName === "UpdateItemCommand" &&
                    (args.input as { UpdateExpression?: string }).UpdateExpression?.includes("#deleted");
                if (softDelete) {
                    attempts++;
                }
                const result = await next(args);
                if (softDelete && attempts === 1) {
                    await fixture.emulator.drain();
                    throw new InternalServerError({ $metadata: { httpStatusCode: 500 }, message: "Internal server error" });
                }
                return result;
            };
            fixture.clientDynamo.middlewareStack.add(loseResponse, {
                step: "deserialize",
                name: "loseSoftDeleteResponse",
                priority: "high",
            });

            const result = await fixture.client.delete("k", "a");

            assert.deepEqual(result, { deleted: true });
            assert.equal(attempts, 2, "the SDK retried the soft delete and found the item gone");
            assert.deepEqual(await fixture.snapshot("k"), {
                bestEffort: mode === "utilization" ? 1 : 2,
                eventual: 1,
                live: 1,
                counted: 1,
                softDeleted: 0,
            });
            fixture.close();
        });
    }

    it("delete (utilization): a retried soft delete never lands on a newer item that reused the id", async () => {
        const fixture = await counterFixture(engine());
        const other = new HybridCounterClient({
            tableName: fixture.tableName,
            countersTableName: fixture.tableName,
            dynamodb: fixture.reader,
        });
        await fixture.client.create("k", "a");
        await fixture.emulator.drain();
        // The soft delete commits and loses its response; the consumer removes the item and another caller
        // creates the same id again before the SDK retries.
        let attempts = 0;
        const reuse: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const softDelete =
                context.commandName === "UpdateItemCommand" &&
                (args.input as { UpdateExpression?: string }).UpdateExpression?.includes("#deleted");
            attempts += softDelete ? 1 : 0;
            const result = await next(args);
            if (softDelete && attempts === 1) {
                await fixture.emulator.drain();
                assert.deepEqual(await other.create("k", "a", { life: 2 }), { created: true });
                throw new InternalServerError({ $metadata: { httpStatusCode: 500 }, message: "Internal server error" });
            }
            return result;
        };
        fixture.clientDynamo.middlewareStack.add(reuse, { step: "deserialize", name: "reuseId", priority: "high" });

        const result = await fixture.client.delete("k", "a");

        assert.deepEqual(result, { deleted: true });
        assert.equal(attempts, 2);
        await fixture.emulator.drain();
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 1, eventual: 1, live: 1, counted: 1, softDeleted: 0 });
        fixture.close();
    });

    it("tryCreate (strict): a put that committed and lost its response is recognised by a read before any repeat", async () => {
        const fixture = await counterFixture(engine(), { mode: "strict" });
        let puts = 0;
        const lose: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            if (context.commandName !== "PutItemCommand") {
                return next(args);
            }
            if (++puts === 1) {
                await next(args);
                throw new InternalServerError({ $metadata: { httpStatusCode: 500 }, message: "Internal server error" });
            }
            throw new ProvisionedThroughputExceededException({ $metadata: { httpStatusCode: 400 }, message: "throttled" });
        };
        fixture.clientDynamo.middlewareStack.add(lose, { step: "deserialize", name: "losePut", priority: "high" });
        const client = new HybridCounterClient({
            tableName: fixture.tableName,
            countersTableName: fixture.tableName,
            dynamodb: fixture.clientDynamo,
            mode: "strict",
            attempts: 2,
        });

        const result = await client.tryCreate("k", "a", 1);

        assert.deepEqual(result, { created: true, count: 1 });
        assert.equal(puts, 1, "the read found the item: the put was not sent again");
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 1, eventual: 0, live: 1, counted: 0, softDeleted: 0 });
        fixture.close();
    });

    it("tryCreate (strict): a put in doubt that then failed every attempt keeps its slot and returns the put's error", async () => {
        const fixture = await counterFixture(engine(), { mode: "strict" });
        let puts = 0;
        const fail: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            if (context.commandName !== "PutItemCommand") {
                return next(args);
            }
            // A 500 may follow a commit the client cannot see; the throttle after it certainly wrote nothing.
            if (++puts === 1) {
                throw new InternalServerError({ $metadata: { httpStatusCode: 500 }, message: "Internal server error" });
            }
            throw new ProvisionedThroughputExceededException({ $metadata: { httpStatusCode: 400 }, message: "throttled" });
        };
        fixture.clientDynamo.middlewareStack.add(fail, { step: "deserialize", name: "failPut", priority: "high" });
        const client = new HybridCounterClient({
            tableName: fixture.tableName,
            countersTableName: fixture.tableName,
            dynamodb: fixture.clientDynamo,
            mode: "strict",
            attempts: 2,
        });

        const error = await client.tryCreate("k", "a", 1).then(
            () => assert.fail("the put's own error is returned"),
            (e: unknown) => e as Error,
        );

        assert.equal(error.name, "ProvisionedThroughputExceededException");
        assert.equal(puts, 2);
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 1, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        assert.deepEqual(await fixture.client.tryCreate("k", "b", 1), { created: false, count: 1, reason: "limit" });
        fixture.close();
    });

    it("delete: a TransactionConflictException on the soft delete is retried inside the call", async () => {
        const fixture = await counterFixture(engine());
        for (let i = 0; i < 20; i++) {
            await fixture.client.create("k", `r${i}`);
        }
        const stats = injectFaults(fixture.clientDynamo, { rate: 0.5, kinds: ["conflict"], random: seededRandom(9) });

        for (let i = 0; i < 20; i++) {
            assert.deepEqual(await fixture.client.delete("k", `r${i}`), { deleted: true });
        }

        assert.ok(stats.injected.conflict > 5);
        const s = await fixture.snapshot("k");
        assert.equal(s.softDeleted, 20);
        assert.ok(s.bestEffort <= 0, "decrements retried on conflict can only undercount");
        fixture.close();
    });

    it("tryCreate (utilization): answers limit with the count it saw", async () => {
        const fixture = await counterFixture(engine());
        assert.deepEqual(await fixture.client.tryCreate("k", "a", 2), { created: true, count: 1 });
        assert.deepEqual(await fixture.client.tryCreate("k", "b", 2), { created: true, count: 2 });
        assert.deepEqual(await fixture.client.tryCreate("k", "c", 2), { created: false, count: 2, reason: "limit" });
        assert.deepEqual(await fixture.client.tryCreate("k", "a", 3), { created: false, count: 2, reason: "exists" });
        assert.deepEqual(await fixture.client.tryCreate("k", "c", 0), { created: false, count: 2, reason: "limit" });
        fixture.close();
    });

    it("tryCreate (strict): reserves before creating, gives the slot back for an existing id", async () => {
        const fixture = await counterFixture(engine(), { mode: "strict" });
        assert.deepEqual(await fixture.client.tryCreate("k", "a", 2), { created: true, count: 1 });
        assert.deepEqual(await fixture.client.tryCreate("k", "a", 2), { created: false, count: 1, reason: "exists" });
        assert.deepEqual(await fixture.client.tryCreate("k", "b", 2), { created: true, count: 2 });
        assert.deepEqual(await fixture.client.tryCreate("k", "c", 2), { created: false, count: 2, reason: "limit" });
        assert.deepEqual(await fixture.client.delete("k", "a"), { deleted: true });
        assert.deepEqual(await fixture.client.tryCreate("k", "c", 2), { created: true, count: 2 });
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 2, eventual: 0, live: 2, counted: 0, softDeleted: 1 });
        fixture.close();
    });

    it("tryCreate (strict): a counter that cannot be reserved answers unavailable and writes no item", async () => {
        const fixture = await counterFixture(engine(), { mode: "strict" });
        const failures: string[] = [];
        const client = new HybridCounterClient({
            tableName: fixture.tableName,
            countersTableName: fixture.tableName,
            dynamodb: fixture.clientDynamo,
            mode: "strict",
            attempts: 1,
            onBestEffortFailure: (f) => failures.push(`${f.operation} ${(f.error as Error).name}`),
        });
        const stats = injectFaults(fixture.clientDynamo, { rate: 1, kinds: ["500-before"], random: seededRandom(2) });

        const result = await client.tryCreate("k", "a", 5);

        assert.deepEqual(result, { created: false, count: null, reason: "unavailable" });
        assert.deepEqual(failures, ["reserve InternalServerError"]);
        stats.rate = 0;
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        fixture.close();
    });

    it("the resource write's own error is returned unchanged", async () => {
        const fixture = await counterFixture(engine());
        const client = new HybridCounterClient({
            tableName: fixture.tableName,
            countersTableName: fixture.tableName,
            dynamodb: fixture.clientDynamo,
            attempts: 3,
        });
        const stats = injectFaults(fixture.clientDynamo, { rate: 1, kinds: ["throttle"], random: seededRandom(3), reads: false });

        const error = await client.create("k", "a").then(
            () => assert.fail("expected the put's throttling error"),
            (e: unknown) => e as Error,
        );

        assert.equal(error.name, "ProvisionedThroughputExceededException");
        assert.equal(stats.injected.throttle, 3, "one HTTP attempt per client attempt: the SDK does not retry client writes");
        stats.rate = 0;
        assert.deepEqual(await fixture.snapshot("k"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        fixture.close();
    });
});
