/**
 * A strict limit over a key spread over 3 best-effort shards (runtime/shards/caps.ts), on DynamoDB Local: the caps keep
 * the key's sum within the limit however the calls interleave, a lowered stored limit refuses until the sum is under
 * it, and a raised one admits up to it.
 */
import { strict as assert } from "node:assert";
import type { ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { boundBroken } from "./support/heal-probes";
import { Traffic } from "./support/heal-traffic";
import { seededRandom } from "../local/engine/faults";
import { homeShard } from "../runtime/shards/layout";

const KEY = "k";

describe("a strict limit over 3 shards (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture;

    afterEach(() => f?.close());

    /** Creates under the stored limit until refused; returns how many were created. */
    async function fill(prefix: string): Promise<number> {
        for (let n = 0; ; n++) {
            const result = await f.client.tryCreate(KEY, `${prefix}${n}`);
            if (!result.created) {
                assert.equal(result.reason, "limit");
                return n;
            }
        }
    }

    it("count() reads every shard with one strongly consistent Query each, sent at once, and sums them", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "utilization", counterShards: 3 });
        for (let i = 0; i < 9; i++) {
            await f.client.create(KEY, `i${i}`);
        }
        const queries: Array<{ consistent: boolean; partition: string }> = [];
        let inFlight = 0;
        let most = 0;
        const watch: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const input = args.input as { ConsistentRead?: boolean; ExpressionAttributeValues?: Record<string, { S?: string }> };
            if (context.commandName === "QueryCommand") {
                queries.push({ consistent: input.ConsistentRead === true, partition: input.ExpressionAttributeValues?.[":pk"]?.S ?? "" });
            }
            most = Math.max(most, ++inFlight);
            try {
                return await next(args);
            } finally {
                inFlight--;
            }
        };
        f.clientDynamo.middlewareStack.add(watch, { step: "initialize" });

        // Act
        const value = await f.client.count(KEY);

        // Assess
        const s = await f.snapshot(KEY);
        assert.deepEqual(queries, [
            { consistent: true, partition: KEY },
            { consistent: true, partition: `${KEY}\u00001` },
            { consistent: true, partition: `${KEY}\u00002` },
        ]);
        assert.equal(most, 3, "the three Queries were in flight together");
        assert.equal(value.bestEffort, 9);
        assert.deepEqual(
            s.shards.map((shard) => shard.bestEffort),
            s.shards.map((shard) => shard.live),
        );
        assert.ok(
            s.shards.every((shard) => shard.live > 0),
            JSON.stringify(s.shards),
        );
        await assert.rejects(f.client.count("a\u00001"), {
            name: "InvalidArgumentError",
            message: "[key] must not contain U+0000 (it separates a key from its shard number)",
        });
    });

    it("12 creates interleaved request by request fill a limit of 8 exactly, never taking the sum past it nor a shard below its live items", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict", counterShards: 3 });
        await f.client.setLimit(KEY, 8);
        const traffic = new Traffic(f.config);
        traffic.watch(f.clientDynamo, "api");
        const random = seededRandom(6);
        const ids = Array.from({ length: 12 }, (_, i) => `i${i}`);
        const calls = ids.map((id) => traffic.run(() => f.client.tryCreate(KEY, id)));

        // Act
        let steps = 0;
        for (;;) {
            await traffic.quiet();
            if (traffic.running === 0) {
                break;
            }
            await traffic.release(traffic.pending[Math.floor(random() * traffic.pending.length)]!);
            await traffic.quiet();
            steps++;
            const s = await f.snapshot(KEY);
            assert.ok(s.bestEffort <= 8, `step ${steps}: the shards sum to ${s.bestEffort} (after ${traffic.recent(4)})`);
            assert.equal(await boundBroken(f, KEY, 8), undefined, `step ${steps} (after ${traffic.recent(4)})`);
        }
        const results = await Promise.all(calls);

        // Assess
        const created = results.filter((r) => r.created).length;
        assert.ok(
            traffic.log.some((e) => e.label === "write caps"),
            "the caps moved room between shards",
        );
        assert.equal(created, 8, "the key filled to its limit: no room was lost between the shards");
        assert.deepEqual(
            results.filter((r) => !r.created),
            [1, 2, 3, 4].map(() => ({ created: false, count: 8, reason: "limit" })),
        );
        const s = await f.snapshot(KEY);
        assert.equal(s.live, created);
    });

    it("30 creates sent at once admit at most the limit of 10, and the room left is still there for the next creates", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict", counterShards: 3 });
        await f.client.setLimit(KEY, 10);

        // Act
        const burst = await Promise.all(Array.from({ length: 30 }, (_, i) => f.client.tryCreate(KEY, `b${i}`)));
        const after = await f.snapshot(KEY);
        const more = await fill("m");

        // Assess
        const created = burst.filter((r) => r.created).length;
        assert.ok(created <= 10, `${created} created at once`);
        assert.equal(await boundBroken(f, KEY, 10), undefined);
        assert.equal(after.live, created);
        assert.equal(created + more, 10, "no room was lost: the later creates fill the key to its limit exactly");
        const s = await f.snapshot(KEY);
        assert.deepEqual([s.bestEffort, s.live], [10, 10]);
        assert.ok(
            s.shards.every((shard) => shard.live > 0),
            `every shard took lives: ${JSON.stringify(s.shards)}`,
        );
    });

    it("a lowered stored limit refuses until the key's sum is under it; a raised one admits up to it", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict", counterShards: 3 });
        await f.client.setLimit(KEY, 10);
        assert.equal(await fill("a"), 10);
        const ids = Array.from({ length: 10 }, (_, n) => `a${n}`);

        // Act
        await f.client.setLimit(KEY, 6);
        const atTen = await f.client.tryCreate(KEY, "x1");
        for (const id of ids.slice(0, 4)) {
            assert.deepEqual(await f.client.delete(KEY, id), { deleted: true });
        }
        const atSix = await f.client.tryCreate(KEY, "x2");
        assert.deepEqual(await f.client.delete(KEY, ids[4]!), { deleted: true });
        const underSix = await f.client.tryCreate(KEY, "x3");
        const atSixAgain = await f.client.tryCreate(KEY, "x4");
        await f.client.setLimit(KEY, 9);
        const raised = await fill("r");

        // Assess
        assert.deepEqual(atTen, { created: false, count: 10, reason: "limit" });
        assert.deepEqual(atSix, { created: false, count: 6, reason: "limit" });
        assert.equal(underSix.created, true);
        assert.deepEqual(atSixAgain, { created: false, count: 6, reason: "limit" });
        assert.equal(raised, 3);
        const s = await f.snapshot(KEY);
        assert.deepEqual([s.bestEffort, s.live], [9, 9]);
        assert.deepEqual(
            s.shards.map((shard) => shard.bestEffort),
            s.shards.map((shard) => shard.live),
        );
    });

    it("a reservation under no limit takes its shard's cap tag away: the same limit set again re-arms the caps from the counts, and refuses at the limit", async () => {
        // Prepare: caps armed for a limit of 10 with one life (room in every shard); the limit removed, and 11 more
        // lives made in shard 0 alone, far past its cap, while shards 1 and 2 keep room under theirs
        f = await counterFixture(engine(), { mode: "strict", counterShards: 3 });
        const inShard = (shard: number, count: number) =>
            Array.from({ length: 200 }, (_, n) => `s${shard}-${n}`)
                .filter((id) => homeShard(id, 3) === shard)
                .slice(0, count);
        await f.client.setLimit(KEY, 10);
        assert.equal((await f.client.tryCreate(KEY, "first")).created, true);
        await f.client.setLimit(KEY, null);
        for (const id of inShard(0, 11)) {
            assert.equal((await f.client.tryCreate(KEY, id)).created, true);
        }

        // Act: the same limit again, with the key at 12
        await f.client.setLimit(KEY, 10);
        const attempts = [];
        for (const id of [...inShard(1, 2), ...inShard(2, 2)]) {
            attempts.push(await f.client.tryCreate(KEY, id));
        }

        // Assess
        assert.deepEqual(
            attempts,
            attempts.map(() => ({ created: false, count: 12, reason: "limit" })),
            "shards 1 and 2 refuse: their caps from the first arming still had room",
        );
        const s = await f.snapshot(KEY);
        assert.deepEqual([s.bestEffort, s.live], [12, 12]);
    });
});
