/**
 * What the client answers (runtime/client/client.ts, docs/client.md), on DynamoDB Local: one mode per counter, the
 * answers of create, tryCreate and delete in each case, the same answers when a response is lost, and the arguments
 * it refuses before writing anything. Each answer is checked with what it left in the tables.
 */
import { strict as assert } from "node:assert";
import { DeleteItemCommand, DynamoDBClient, ScanCommand } from "@aws-sdk/client-dynamodb";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { itemOf, ledgerOf, listedAt } from "./support/heal-probes";
import { refuseRequests, Traffic } from "./support/heal-traffic";
import { HybridCounterClient, type BestEffortFailure } from "../runtime/client/client";
import { MAX_ITEM_BYTES } from "../runtime/client/arguments";
import { clientConfigOf, ConfigurationError } from "../runtime/shared/config";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { countedFlag } from "../runtime/shared/selection";
import { itemSize } from "../runtime/shared/item-size";
import { newToken } from "../runtime/shared/tokens";

const rejection = (work: Promise<unknown>): Promise<unknown> =>
    work.then(
        (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value)}`),
        (error: unknown) => error,
    );

describe("the client's mode is the counter's", () => {
    const dynamodb = new DynamoDBClient({ region: "us-east-1" });
    after(() => dynamodb.destroy());
    const deployed = { tableName: "orders", countersTableName: "orders-counters", dynamodb };

    it("refuses a mode other than clientConfig's with ConfigurationError naming [mode]", () => {
        for (const [counterMode, mode] of [
            ["utilization", "strict"],
            ["strict", "utilization"],
        ] as const) {
            const error = (() => {
                try {
                    new HybridCounterClient({ ...deployed, counterMode, mode });
                } catch (e) {
                    return e;
                }
                return assert.fail("expected a ConfigurationError");
            })();
            assert.ok(error instanceof ConfigurationError);
            assert.deepEqual(error.problems, [
                `[mode] must be the counter's own mode, "${counterMode}" (clientConfig.counterMode), not "${mode}": the settler heals by the deployed mode, and a client of the other mode would break its bound`,
            ]);
        }
    });

    it("takes clientConfig's mode, the same mode given again, or a mode given alone; utilization by default", () => {
        assert.equal(new HybridCounterClient({ ...deployed, counterMode: "strict" }).mode, "strict");
        assert.equal(new HybridCounterClient({ ...deployed, counterMode: "strict", mode: "strict" }).mode, "strict");
        assert.equal(new HybridCounterClient({ ...deployed, mode: "strict" }).mode, "strict");
        assert.equal(new HybridCounterClient(deployed).mode, "utilization");
        assert.throws(() => new HybridCounterClient({ ...deployed, mode: "exact" as never }), {
            name: "ConfigurationError",
            message: /\[mode\] must be "utilization" or "strict" \(got "exact"\)/,
        });
    });
});

describe("the client's answers (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture;

    afterEach(() => f?.close());

    const scanCount = async (table: string) => (await f.reader.send(new ScanCommand({ TableName: table }))).Count;
    const state = async (key = "k") => {
        const s = await f.snapshot(key);
        return { bestEffort: s.bestEffort, live: s.live, softDeleted: s.softDeleted };
    };

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: refuses bad arguments with InvalidArgumentError naming them, before writing anything`, async () => {
            f = await counterFixture(engine(), { mode, layout: { selection: { kind: "sortKeyPrefix", prefix: "order#" } } });
            const client = f.client;
            const cases: Array<[() => Promise<unknown>, string, string]> = [
                [() => client.create("", "order#1"), "key", "[key] must be a non-empty string"],
                [() => client.create("k", ""), "id", "[id] must be a non-empty string"],
                [() => client.create("k", "#counter#best-effort"), "id", '[id] must not start with the reserved prefix "#counter#"'],
                [() => client.create("k", "invoice#1"), "id", '[id] must start with the counted prefix "order#"'],
                [
                    () => client.create("k", "order#1", { deleted: false }),
                    "attributes.deleted",
                    "[attributes.deleted] is reserved by the counter and cannot be set",
                ],
                [
                    () => client.create("k", "order#1", { hc_counted: "x" }),
                    "attributes.hc_counted",
                    "[attributes.hc_counted] is reserved by the counter and cannot be set",
                ],
                [
                    () => client.create("k", "order#1", { when: () => 1 }),
                    "attributes.when",
                    "[attributes.when] cannot be stored: a function is not a DynamoDB value",
                ],
                [() => client.tryCreate("k", "order#1", -1), "limit", "[limit] must be a non-negative safe integer (got -1)"],
                [() => client.delete("k", ""), "id", "[id] must be a non-empty string"],
                [() => client.count(""), "key", "[key] must be a non-empty string"],
            ];
            for (const [call, field, message] of cases) {
                const error = await rejection(call());
                assert.ok(error instanceof InvalidArgumentError, String(error));
                assert.deepEqual([error.field, error.message], [field, message]);
            }
            assert.equal(await scanCount(f.config.tableName), 0);
            assert.equal(await scanCount(f.config.countersTableName), 0);
        });

        it(`${mode}: create answers created: true once per id, false while the id holds a life, and counts it once`, async () => {
            f = await counterFixture(engine(), { mode });

            const first = await f.client.create("k", "a");
            const again = await f.client.create("k", "a");

            assert.deepEqual([first, again], [{ created: true }, { created: false }]);
            assert.deepEqual(await state(), { bestEffort: 1, live: 1, softDeleted: 0 });
            assert.equal(await listedAt(f, "k"), undefined, "a call that kept best-effort exact lists nothing");
        });

        it(`${mode}: delete answers true for a live item, false for a missing or deleted one, moving best-effort once`, async () => {
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "a");

            const results = [await f.client.delete("k", "a"), await f.client.delete("k", "a"), await f.client.delete("k", "missing")];

            assert.deepEqual(results, [{ deleted: true }, { deleted: false }, { deleted: false }]);
            assert.deepEqual(await state(), { bestEffort: 0, live: 0, softDeleted: 1 });
            assert.equal(await listedAt(f, "k"), undefined);
        });

        it(`${mode}: delete answers false when another writer removed the item between its read and its write, and moves nothing`, async () => {
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "a");
            const traffic = new Traffic(f.config);
            traffic.watch(f.clientDynamo, "api");
            const deleting = traffic.run(() => f.client.delete("k", "a"));
            await traffic.step("read item", "api");
            await traffic.until(mode === "strict" ? "soft delete" : "claim", "api");

            await f.reader.send(new DeleteItemCommand({ TableName: f.config.tableName, Key: { pk: { S: "k" }, sk: { S: "a" } } }));
            await traffic.drain();

            assert.deepEqual(await deleting, { deleted: false });
            assert.deepEqual(await state(), { bestEffort: 1, live: 0, softDeleted: 0 });
            assert.equal(
                traffic.log.some((e) => e.label === "-1"),
                false,
                "no -1 nor release was sent",
            );
            await f.drain();
            assert.ok((await listedAt(f, "k")) !== undefined, "the consumer listed the key for the other writer's delete");
        });
    }

    it("utilization tryCreate: created with the count it saw plus one, limit and exists with the count it saw", async () => {
        f = await counterFixture(engine(), { mode: "utilization" });

        const answers = [
            await f.client.tryCreate("k", "a", 2),
            await f.client.tryCreate("k", "a", 2),
            await f.client.tryCreate("k", "b", 2),
            await f.client.tryCreate("k", "c", 2),
        ];

        assert.deepEqual(answers, [
            { created: true, count: 1 },
            { created: false, count: 1, reason: "exists" },
            { created: true, count: 2 },
            { created: false, count: 2, reason: "limit" },
        ]);
        assert.deepEqual(await state(), { bestEffort: 2, live: 2, softDeleted: 0 });
    });

    it("strict tryCreate: created with its slot's count, limit with best-effort's, exists giving the slot back; a limit of 0 writes nothing", async () => {
        f = await counterFixture(engine(), { mode: "strict" });

        const zero = await f.client.tryCreate("k", "a", 0);
        const written = [await scanCount(f.config.tableName), await scanCount(f.config.countersTableName)];
        const answers = [
            await f.client.tryCreate("k", "a", 2),
            await f.client.tryCreate("k", "a", 2),
            await f.client.tryCreate("k", "b", 2),
            await f.client.tryCreate("k", "c", 2),
        ];

        assert.deepEqual(zero, { created: false, count: 0, reason: "limit" });
        assert.deepEqual(written, [0, 0]);
        assert.deepEqual(answers, [
            { created: true, count: 1 },
            { created: false, count: 1, reason: "exists" },
            { created: true, count: 2 },
            { created: false, count: 2, reason: "limit" },
        ]);
        assert.deepEqual(await state(), { bestEffort: 2, live: 2, softDeleted: 0 });
    });

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode} tryCreate: a counter it cannot ${mode === "strict" ? "reserve" : "read"} answers unavailable, writes no item, and reports the failure and an EMF line`, async () => {
            f = await counterFixture(engine(), { mode });
            const failures: string[] = [];
            const lines: string[] = [];
            const client = new HybridCounterClient({
                ...clientConfigOf(f.config),
                dynamodb: f.clientDynamo,
                onBestEffortFailure: (failure: BestEffortFailure) =>
                    failures.push(`${failure.key} ${failure.operation} ${(failure.error as Error).name}`),
                metrics: { namespace: "Orders", sink: (line) => lines.push(line) },
            });
            refuseRequests(f.clientDynamo, f.config, (label) => label === (mode === "strict" ? "+1" : "read counters"));

            const result = await client.tryCreate("k", "a", 5);

            assert.deepEqual(result, { created: false, count: null, reason: "unavailable" });
            assert.equal(await itemOf(f, "k", "a"), undefined);
            const operation = mode === "strict" ? "reserve" : "read";
            assert.deepEqual(failures, [`k ${operation} AccessDeniedException`]);
            assert.equal(lines.length, 1);
            const emf = JSON.parse(lines[0]!) as Record<string, unknown>;
            assert.deepEqual([emf[mode === "strict" ? "ReserveFailures" : "ReadFailures"], emf.Unavailable], [1, 1]);
        });
    }

    it("utilization: a second delete of an id meets the first's claim and answers false; the key moves once", async () => {
        f = await counterFixture(engine(), { mode: "utilization" });
        await f.client.create("k", "a");
        const traffic = new Traffic(f.config);
        traffic.watch(f.clientDynamo, "api");
        const first = traffic.run(() => f.client.delete("k", "a"));
        await traffic.step("claim", "api");
        const minus = await traffic.pin("-1", "api");

        const second = traffic.run(() => f.client.delete("k", "a"));
        await traffic.step("read item", "api");
        await traffic.step("claim", "api");
        const secondAnswer = await second;
        await traffic.release(minus);
        await traffic.drain();

        assert.deepEqual([await first, secondAnswer], [{ deleted: true }, { deleted: false }]);
        assert.deepEqual(
            traffic.log.map((e) => `${e.label}${e.error === undefined ? "" : ` -> ${e.error}`}`),
            ["read item", "claim", "read item", "claim -> ConditionalCheckFailedException", "-1", "soft delete"],
        );
        assert.deepEqual(await state(), { bestEffort: 0, live: 0, softDeleted: 1 });
    });

    it("utilization: a delete whose -1 fails leaves the item live and returns the error: best-effort never counts more than the live items", async () => {
        f = await counterFixture(engine(), { mode: "utilization" });
        await f.client.create("k", "a");
        refuseRequests(f.clientDynamo, f.config, (label) => label === "-1");

        const outcome = await f.client.delete("k", "a").then(
            (answer) => ({ answer }),
            (error: unknown) => ({ error: (error as Error).name }),
        );

        const s = await f.snapshot("k");
        assert.ok(
            s.bestEffort <= s.clientLive,
            `best-effort ${s.bestEffort} > live ${s.clientLive} after the delete answered ${JSON.stringify(outcome)}`,
        );
        assert.deepEqual(outcome, { error: "AccessDeniedException" });
        assert.deepEqual(await state(), { bestEffort: 1, live: 1, softDeleted: 0 });
    });

    it("utilization: a put whose answer was lost after it committed is recognised by a read, and its +1 is sent once", async () => {
        f = await counterFixture(engine(), { mode: "utilization" });
        const traffic = new Traffic(f.config);
        traffic.watch(f.clientDynamo, "api");
        const creating = traffic.run(() => f.client.create("k", "a"));

        await traffic.step("put", "api", "lose");
        await traffic.drain();

        assert.deepEqual(await creating, { created: true });
        assert.deepEqual(
            traffic.log.map((e) => `${e.label}${e.fault === undefined ? "" : ` (${e.fault})`}`),
            ["put (lose)", "read item", "+1"],
        );
        assert.deepEqual(await state(), { bestEffort: 1, live: 1, softDeleted: 0 });
    });

    it("strict: a put in doubt whose repeat is refused throws the put's own error, keeps its slot, and lists the key", async () => {
        f = await counterFixture(engine(), { mode: "strict" });
        const traffic = new Traffic(f.config);
        traffic.watch(f.clientDynamo, "api");
        const creating = traffic.run(() => f.client.create("k", "a"));

        await traffic.step("put", "api", "late"); // on the wire: the caller sees a 500 and cannot tell
        await traffic.step("read item", "api");
        await traffic.step("put", "api", "refuse");
        await traffic.drain();

        const error = await rejection(creating);
        assert.equal((error as Error).name, "AccessDeniedException");
        assert.deepEqual(await state(), { bestEffort: 1, live: 0, softDeleted: 0 });
        assert.ok((await listedAt(f, "k")) !== undefined);
    });

    describe("item size: every item the client creates can be deleted", () => {
        // The soft delete adds "deleted" (7 + 1 bytes) and "counter_token_delete" (20 + 36).
        const headroom = 8 + 56;

        for (const mode of ["utilization", "strict"] as const) {
            it(`${mode}: the largest item that leaves room for the soft delete is created and deleted; one byte more is refused before anything is written`, async () => {
                f = await counterFixture(engine(), { mode });
                const shape = (blob: number) => ({
                    ...countedFlag(f.config),
                    pk: { S: "k" },
                    sk: { S: "a" },
                    counter_token: { S: newToken() },
                    blob: { S: "x".repeat(blob) },
                });
                const largest = MAX_ITEM_BYTES - headroom - itemSize(shape(0));

                const tooLarge = await rejection(f.client.create("k", "b", { blob: "x".repeat(largest + 1) }));
                const written = await scanCount(f.config.tableName);
                const created = await f.client.create("k", "a", { blob: "x".repeat(largest) });
                const deleted = await f.client.delete("k", "a");

                assert.ok(tooLarge instanceof InvalidArgumentError);
                assert.equal(tooLarge.field, "attributes");
                assert.equal(
                    tooLarge.message,
                    `[attributes] make the item ${MAX_ITEM_BYTES - headroom + 1} bytes; at most ${MAX_ITEM_BYTES - headroom} bytes leave room for the counter's own attributes (${headroom} bytes) under DynamoDB's ${MAX_ITEM_BYTES}-byte item limit`,
                );
                assert.equal(written, 0);
                assert.deepEqual([created, deleted], [{ created: true }, { deleted: true }]);
                assert.equal(itemSize((await itemOf(f, "k", "a"))!), MAX_ITEM_BYTES, "the tombstone fills the item limit exactly");
                assert.deepEqual((await ledgerOf(f, "k")).count, 0);
            });
        }
    });
});
