/**
 * The settler always finishes (runtime/heal/settle.ts), on DynamoDB Local with the consumer applying the stream: a
 * key nobody listed is found by the audit, a listed key is healed within ceil(listed / budget) runs once its lives
 * are old, a key whose heal failed stays listed, and a run stops between keys (and a heal between shards) on a signal.
 */
import { strict as assert } from "node:assert";
import type { DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware } from "@smithy/types";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { clockTo, ledgerOf, listedAt, periodNow } from "./support/heal-probes";
import { labelOf, refuseRequests } from "./support/heal-traffic";
import { settle } from "../runtime/heal/settle";
import { healKey } from "../runtime/heal/heal";
import { homeShard } from "../runtime/shards/layout";
import { SETTLER_ENV, settlerConfigFromEnv, settlerEnvironment } from "../runtime/heal/settler-config";
import { ConfigurationError, counterEnvironment, DEFAULT_LAYOUT, ENV } from "../runtime/shared/config";

describe("the settler always finishes (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture;
    let settler: DynamoDBClient | undefined;

    afterEach(() => {
        f?.close();
        settler?.destroy();
        settler = undefined;
    });

    /** Creates `id` under `key` with its +1 refused: best-effort one short, the key listed by the call. */
    async function createDrifting(key: string, id: string): Promise<void> {
        const refusing = refuseRequests(f.clientDynamo, f.config, (label) => label === "+1");
        try {
            assert.deepEqual(await f.client.create(key, id), { created: true });
        } finally {
            refusing.stop();
        }
        assert.deepEqual(refusing.refused, ["+1"]);
    }

    /** Calls `onDone(label)` after each request of `client` the counter labels, once answered. */
    function onAnswered(client: DynamoDBClient, onDone: (label: string) => void): void {
        const watch: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const output = await next(args);
            onDone(labelOf(f.config, context.commandName ?? "", args.input as Record<string, unknown>));
            return output;
        };
        client.middlewareStack.add(watch, { step: "deserialize", name: "heal-settle-watch" });
    }

    it("utilization: a young life whose +1 and mark were both lost is found by the audit, listed, and healed once old", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "utilization" });
        const period = periodNow(f);
        const refusing = refuseRequests(f.clientDynamo, f.config, (label) => label === "+1" || label === "mark due");
        assert.deepEqual(await f.client.create("k", "x"), { created: true });
        refusing.stop();
        await f.drain();
        assert.deepEqual(refusing.refused, ["+1", "mark due"]);
        assert.equal(await listedAt(f, "k"), undefined, "nobody listed the key");

        // Act
        const first = await f.settle();
        const listed = await listedAt(f, "k");
        clockTo(f, period + 2);
        const second = await f.settle();

        // Assess
        assert.equal(first.auditHealed, 1);
        assert.equal(first.drift, 0, "a young life is the ledger's: its lost +1 waits until it is old");
        assert.equal(listed, (period + 2) * f.config.periodMs);
        assert.deepEqual([second.due, second.healed, second.drift, second.auditHealed], [1, 1, 1, 0]);
        assert.equal((await f.snapshot("k")).bestEffort, 1);
        assert.equal(await listedAt(f, "k"), undefined);
    });

    it("strict: an old life whose release and mark were both lost holds a slot until the settler's audit finds the key and heals it", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict" });
        await f.client.create("k", "x");
        f.clock.advance(2 * f.config.periodMs);
        const refusing = refuseRequests(f.clientDynamo, f.config, (label) => label === "-1" || label === "mark due");
        assert.deepEqual(await f.client.delete("k", "x"), { deleted: true });
        refusing.stop();
        await f.drain();
        assert.deepEqual(refusing.refused, ["-1", "mark due"]);
        const held = await f.snapshot("k");

        // Act
        const report = await f.settle();

        // Assess
        assert.deepEqual([held.bestEffort, held.eventual, held.live, await listedAt(f, "k")], [1, 0, 0, undefined]);
        assert.deepEqual([report.due, report.auditHealed, report.drift], [0, 1, 1]);
        assert.equal((await f.snapshot("k")).bestEffort, 0);
    });

    it("utilization: stale entries alone make the audit heal a key whose count is right, removing them", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "utilization" });
        const period = periodNow(f);
        await f.client.create("k", "x");
        await f.drain();
        const young = await f.settle();
        f.clock.advance(2 * f.config.periodMs);

        // Act
        const old = await f.settle();

        // Assess
        assert.equal(young.auditHealed, 0, "a key exact with young entries only looks fine");
        assert.deepEqual([old.auditHealed, old.drift], [1, 0]);
        assert.deepEqual(await ledgerOf(f, "k"), { count: 1, entries: {}, gen: 1 });
        assert.notEqual(period, periodNow(f));
    });

    it("ten listed keys and a budget of 3: four runs heal every one once their lives are old, oldest first, three per run", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "utilization" });
        const keys = Array.from({ length: 10 }, (_, i) => `k${i}`);
        for (const key of keys) {
            await createDrifting(key, "x");
            f.clock.advance(1_000);
        }
        await f.drain();
        f.clock.advance(2 * f.config.periodMs);

        // Act
        const runs = [];
        const listedAfter = [];
        for (let run = 0; run < Math.ceil(keys.length / 3); run++) {
            runs.push(await f.settle({ keyBudget: 3 }));
            const listed = await Promise.all(keys.map((k) => listedAt(f, k)));
            listedAfter.push(keys.filter((_, i) => listed[i] !== undefined).join(" "));
        }

        // Assess
        assert.deepEqual(
            runs.map((r) => [r.due, r.healed, r.corrected]),
            [
                [3, 3, 3],
                [3, 3, 3],
                [3, 3, 3],
                [1, 1, 1],
            ],
        );
        assert.deepEqual(listedAfter, ["k3 k4 k5 k6 k7 k8 k9", "k6 k7 k8 k9", "k9", ""]);
        for (const key of keys) {
            const s = await f.snapshot(key);
            assert.deepEqual([s.bestEffort, s.eventual], [1, 1], key);
        }
    });

    it("a key whose heal failed stays listed as it was, and is healed by a later run", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "utilization" });
        await createDrifting("good", "x");
        await createDrifting("bad", "x");
        await f.drain();
        f.clock.advance(2 * f.config.periodMs);
        const due = await listedAt(f, "bad");
        settler = engine().dynamodb();
        const refusing = refuseRequests(
            settler,
            f.config,
            (label, input) => label === "read items" && input.ExpressionAttributeValues?.[":pk"]?.S === "bad",
        );

        // Act
        const failing = await settle({ config: f.config, dynamodb: settler });
        const stillListed = await listedAt(f, "bad");
        refusing.stop();
        const later = await settle({ config: f.config, dynamodb: settler });

        // Assess
        assert.deepEqual(failing.failedKeys, ["bad"]);
        assert.deepEqual([failing.due, failing.healed], [2, 1]);
        assert.equal(stillListed, due);
        assert.deepEqual([later.due, later.healed, later.failedKeys], [1, 1, []]);
        assert.equal((await f.snapshot("bad")).bestEffort, 1);
        assert.equal(await listedAt(f, "bad"), undefined);
    });

    it("a heal stops between shards on its signal: the shards not healed leave the key listed, due at once", async () => {
        // Prepare: three shards, each with two lives whose +1 was refused
        f = await counterFixture(engine(), { mode: "utilization", counterShards: 3 });
        const ids = Array.from({ length: 30 }, (_, i) => `i${i}`);
        const perShard = [0, 1, 2].map((shard) => ids.filter((id) => homeShard(id, 3) === shard).slice(0, 2));
        for (const id of perShard.flat()) {
            await createDrifting("k", id);
        }
        f.clock.advance(2 * f.config.periodMs);
        settler = engine().dynamodb();
        const stop = new AbortController();
        onAnswered(settler, (label) => label === "heal write" && stop.abort());

        // Act
        const stopped = await healKey("k", { config: f.config, dynamodb: settler, signal: stop.signal });
        const listed = await listedAt(f, "k");
        const whole = await healKey("k", { config: f.config, dynamodb: settler });

        // Assess
        assert.deepEqual(
            perShard.map((s) => s.length),
            [2, 2, 2],
        );
        assert.equal(stopped.healed, false);
        assert.deepEqual(stopped.shards, [{ shard: 0, before: 0, after: 2 }]);
        assert.ok(listed !== undefined && listed <= Date.now(), "listed, due now");
        assert.deepEqual(whole.shards, [
            { shard: 0, before: 2, after: 2 },
            { shard: 1, before: 0, after: 2 },
            { shard: 2, before: 0, after: 2 },
        ]);
        assert.equal(whole.healed, true);
        assert.equal(await listedAt(f, "k"), undefined);
    });

    it("a run stops between keys on its signal: the keys not healed stay listed, and the audit does not start", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "utilization" });
        const keys = Array.from({ length: 8 }, (_, i) => `k${i}`);
        for (const key of keys) {
            await createDrifting(key, "x");
        }
        f.clock.advance(2 * f.config.periodMs);
        settler = engine().dynamodb();
        const stop = new AbortController();
        let relisted = 0;
        // The run heals four keys at once: stop once the first four are done.
        onAnswered(settler, (label) => label === "relist" && ++relisted === 4 && stop.abort());

        // Act
        const report = await settle({ config: f.config, dynamodb: settler, signal: stop.signal });

        // Assess
        assert.deepEqual([report.due, report.healed, report.corrected, report.audited, report.failedKeys], [8, 4, 4, 0, []]);
        const listed = await Promise.all(keys.map((key) => listedAt(f, key)));
        assert.equal(listed.filter((at) => at !== undefined).length, 4);
    });
});

describe("the settler's configuration", () => {
    const env = {
        ...counterEnvironment({
            ...DEFAULT_LAYOUT,
            tableName: "orders",
            countersTableName: "orders-counters",
            mode: "strict",
            periodMs: 900_000,
            counterShards: 4,
        }),
        [ENV.metricsNamespace]: "Orders",
    };

    it("reads the counter's variables and the run's budgets, 200 keys and 100 audited items by default", () => {
        const config = settlerConfigFromEnv(env);

        assert.deepEqual(
            [config.mode, config.periodMs, config.counterShards, config.keyBudget, config.auditItems, config.metricsNamespace],
            ["strict", 900_000, 4, 200, 100, "Orders"],
        );
        assert.deepEqual(settlerConfigFromEnv(settlerEnvironment({ ...config, keyBudget: 50, auditItems: 20 })), {
            ...config,
            keyBudget: 50,
            auditItems: 20,
        });
    });

    it("names every bad variable", () => {
        assert.throws(
            () => settlerConfigFromEnv({ ...env, [ENV.counterMode]: "exact", [SETTLER_ENV.keyBudget]: "0", [SETTLER_ENV.auditItems]: "x" }),
            (e: unknown) =>
                e instanceof ConfigurationError &&
                e.problems.join(" | ") ===
                    `[${ENV.counterMode}] must be "utilization" or "strict" (got "exact") | [${SETTLER_ENV.keyBudget}] must be an integer from 1 to 10000 (got "0") | [${SETTLER_ENV.auditItems}] must be an integer from 1 to 10000 (got "x")`,
        );
    });
});
