/**
 * Stored limits as the client and the operator see them (runtime/limits/limits.ts, runtime/client/client.ts,
 * runtime/ops/limits.ts) on DynamoDB Local, through the counter fixture: a key's own limit, else the counter's default,
 * else none; `tryCreate` without a limit runs under it in every mode (a sharded strict key included), a lowered limit
 * refuses until deletes bring the key under it and a raised one admits; bad limits and usage ranges are refused naming
 * the argument, before anything is written.
 */
import { GetItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { listLimits } from "../runtime/ops/limits";
import { LIMIT_ATTRIBUTE } from "../runtime/limits/limits";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { defaultLimitKey, limitKey } from "../runtime/shared/keys";
import type { CounterMode } from "../runtime/shared/config";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { recordRequests } from "./support/stream-harness";

/** Tries `n` creates of `key` without a limit; returns how many were created. */
async function tryCreates(f: CounterFixture, key: string, prefix: string, n: number): Promise<number> {
    let created = 0;
    for (let i = 0; i < n; i++) {
        const result = await f.client.tryCreate(key, `${prefix}${i}`);
        assert.ok(result.created || result.reason === "limit", JSON.stringify(result));
        created += result.created ? 1 : 0;
    }
    return created;
}

async function deleteAll(f: CounterFixture, key: string, ids: readonly string[]): Promise<void> {
    for (const id of ids) {
        assert.deepEqual(await f.client.delete(key, id), { deleted: true }, id);
    }
}

/** The item at `key` in the counters table (undefined: none). */
async function counterItem(f: CounterFixture, key: Record<string, AttributeValue>) {
    return (await f.reader.send(new GetItemCommand({ TableName: f.config.countersTableName, Key: key, ConsistentRead: true }))).Item;
}

describe("stored limits on DynamoDB Local", function () {
    const engine = useEngine();
    let f: CounterFixture | undefined;
    afterEach(() => f?.close());

    it("getLimit: the key's own limit, else the default, else none; setLimit and setDefaultLimit store one item each, null removes it, and the operator lists what the client stored", async () => {
        // Prepare
        f = await counterFixture(engine());
        const client = f.client;

        // Act + Assess
        assert.deepEqual(await client.getLimit("k"), { limit: undefined, source: "none" });
        await client.setDefaultLimit(10);
        assert.deepEqual(await client.getLimit("k"), { limit: 10, source: "default" });
        await client.setLimit("k", 3);
        await client.setLimit("z", 0);
        assert.deepEqual(await client.getLimit("k"), { limit: 3, source: "key" });
        assert.deepEqual(await client.getLimit("z"), { limit: 0, source: "key" }, "0 is a limit, not none");
        assert.deepEqual(await client.getLimit("other"), { limit: 10, source: "default" });
        assert.equal((await counterItem(f, limitKey(f.config, "k")))?.[LIMIT_ATTRIBUTE]?.N, "3");
        assert.equal((await counterItem(f, defaultLimitKey(f.config)))?.[LIMIT_ATTRIBUTE]?.N, "10");
        assert.deepEqual(await listLimits(f.reader, f.config), {
            default: 10,
            keys: [
                { key: "k", limit: 3 },
                { key: "z", limit: 0 },
            ],
        });
        await client.setLimit("k", null);
        assert.deepEqual(await client.getLimit("k"), { limit: 10, source: "default" });
        assert.equal(await counterItem(f, limitKey(f.config, "k")), undefined, "the key's item is gone");
        await client.setDefaultLimit(null);
        assert.deepEqual(await client.getLimit("k"), { limit: undefined, source: "none" });
        assert.deepEqual(await listLimits(f.reader, f.config), { keys: [{ key: "z", limit: 0 }] });
    });

    it("refuses a bad limit naming [limit], and a bad key or usage range naming its argument, before anything is written", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict" });
        const requests = recordRequests(f.clientDynamo);
        const client = f.client;
        const refusal = async (call: () => Promise<unknown>) =>
            call().then(
                () => assert.fail("expected an InvalidArgumentError"),
                (error: unknown) => {
                    assert.ok(error instanceof InvalidArgumentError, String(error));
                    return error.message;
                },
            );

        // Act + Assess
        for (const limit of [-1, 1.5, Number.NaN, Infinity, 2 ** 53, "3" as unknown as number]) {
            assert.equal(
                await refusal(() => client.setLimit("k", limit)),
                `[limit] must be a non-negative safe integer (got ${JSON.stringify(limit)})`,
            );
            assert.equal(
                await refusal(() => client.setDefaultLimit(limit)),
                `[limit] must be a non-negative safe integer (got ${JSON.stringify(limit)})`,
            );
            assert.equal(
                await refusal(() => client.tryCreate("k", "a", limit)),
                `[limit] must be a non-negative safe integer (got ${JSON.stringify(limit)})`,
            );
        }
        assert.match(await refusal(() => client.setLimit("", 3)), /^\[key\] /);
        assert.match(await refusal(() => client.getLimit("a\u0000b")), /^\[key\] /);
        assert.match(
            await refusal(() => client.usage("k", { from: "2026-1-01", to: "2026-01-02" })),
            /^\[from\] must be a UTC day as YYYY-MM-DD/,
        );
        assert.match(
            await refusal(() => client.usage("k", { from: "2026-01-01", to: "tomorrow" })),
            /^\[to\] must be a UTC day as YYYY-MM-DD/,
        );
        assert.equal(
            await refusal(() => client.usage("k", { from: "2026-01-03", to: "2026-01-02" })),
            "[from] must not be after [to] (2026-01-03 > 2026-01-02)",
        );
        assert.deepEqual(requests, []);
    });

    for (const mode of ["utilization", "strict"] as CounterMode[]) {
        it(`${mode}: tryCreate without a limit runs under the key's stored limit, else the default; a lowered limit refuses until deletes bring the key under it, a raised one admits`, async () => {
            // Prepare: a default of 2, and key "k" with a limit of its own of 3.
            f = await counterFixture(engine(), { mode });
            await f.client.setDefaultLimit(2);
            await f.client.setLimit("k", 3);

            // Act + Assess: each key fills to its own limit.
            assert.equal(await tryCreates(f, "k", "a", 5), 3);
            assert.equal(await tryCreates(f, "d", "a", 5), 2);
            await f.drain();
            assert.deepEqual(await f.client.tryCreate("k", "x"), { created: false, count: 3, reason: "limit" });

            // Act + Assess: lowered to 1, "k" refuses until two deletes bring it to 0, then admits one.
            await f.client.setLimit("k", 1);
            await deleteAll(f, "k", ["a0"]);
            await f.drain();
            assert.equal(await tryCreates(f, "k", "b", 1), 0, "at 2 lives, over the lowered limit");
            await deleteAll(f, "k", ["a1"]);
            await f.drain();
            assert.equal(await tryCreates(f, "k", "c", 1), 0, "at 1 life, at the lowered limit");
            await deleteAll(f, "k", ["a2"]);
            await f.drain();
            assert.equal(await tryCreates(f, "k", "d", 3), 1);

            // Act + Assess: raised to 4, it admits three more; the default raised to 3 admits one more on "d".
            await f.client.setLimit("k", 4);
            await f.client.setDefaultLimit(3);
            await f.drain();
            assert.equal(await tryCreates(f, "k", "e", 5), 3);
            assert.equal(await tryCreates(f, "d", "e", 5), 1);
            await f.drain();
            assert.deepEqual(await f.client.count("k"), { bestEffort: 4, eventual: 4, value: 4 });
            assert.deepEqual(await f.client.count("d"), { bestEffort: 3, eventual: 3, value: 3 });
        });
    }

    it("strict, a key sharded over 4 partitions: tryCreate without a limit runs under the stored one over the shards' sum; lowered, it refuses until deletes bring the sum under it; raised, it admits", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict", counterShards: 4 });
        await f.client.setLimit("k", 5);

        // Act + Assess
        assert.equal(await tryCreates(f, "k", "a", 8), 5);
        await f.client.setLimit("k", 3);
        await deleteAll(f, "k", ["a0", "a1"]);
        assert.equal(await tryCreates(f, "k", "b", 2), 0, "3 lives: at the lowered limit");
        await deleteAll(f, "k", ["a2"]);
        assert.equal(await tryCreates(f, "k", "c", 3), 1, "2 lives: one slot under it");
        await f.client.setLimit("k", 6);
        assert.equal(await tryCreates(f, "k", "d", 5), 3);
        await f.drain();
        assert.deepEqual(await f.client.count("k"), { bestEffort: 6, eventual: 6, value: 6 });
    });

    it("strict: create, which takes no limit, ignores the stored one", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict" });
        await f.client.setLimit("k", 1);
        await f.client.setDefaultLimit(1);

        // Act
        const created = [await f.client.create("k", "a"), await f.client.create("k", "b")];

        // Assess
        assert.deepEqual(created, [{ created: true }, { created: true }]);
        assert.deepEqual(await f.client.tryCreate("k", "c"), { created: false, count: 2, reason: "limit" });
    });
});
