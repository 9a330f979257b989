/**
 * The young ledger stays small whatever the traffic (docs/design/core.md, `hc_y_<period>`: "one per period of the last
 * two, plus stale ones until the next write or heal: a handful"), on DynamoDB Local with no settler running: every
 * client write removes the stale entries it saw and no -1 of an old life makes one, so months of creates and an
 * offboarding of hundreds of old lives leave a few entries; and a heal's write stays within DynamoDB's 4 KB
 * expressions however many it finds, removing at most 100 and keeping the key listed for the rest.
 */
import { strict as assert } from "node:assert";
import { BatchWriteItemCommand, UpdateItemCommand, type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { ledgerOf } from "./support/heal-probes";
import { HybridCounterClient } from "../runtime/client/client";
import { clientConfigOf } from "../runtime/shared/config";
import { healKey } from "../runtime/heal/heal";
import { countedFlag } from "../runtime/shared/selection";
import { bestEffortKey } from "../runtime/shared/keys";
import { newToken } from "../runtime/shared/tokens";

const KEY = "k";

/** Runs `work` over `items`, `concurrency` at a time. */
async function inParallel<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<unknown>): Promise<void> {
    let next = 0;
    await Promise.all(
        Array.from({ length: concurrency }, async () => {
            while (next < items.length) {
                await work(items[next++]!);
            }
        }),
    );
}

describe("the young ledger stays small (DynamoDB Local, no settler)", function () {
    const engine = useEngine();
    let f: CounterFixture;

    afterEach(() => f?.close());

    const entries = async () => Object.keys((await ledgerOf(f, KEY)).entries).length;

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: creates and deletes over 16 periods leave at most three entries after every call`, async () => {
            // Prepare
            f = await counterFixture(engine(), { mode });
            let most = 0;
            let made = 0;

            // Act: each period, four creates and a delete of a life made six periods before (old: its entry is gone)
            for (let period = 0; period < 16; period++) {
                for (let i = 0; i < 4; i++) {
                    assert.deepEqual(await f.client.create(KEY, `p${period}-${i}`), { created: true });
                    most = Math.max(most, await entries());
                    made++;
                }
                if (period >= 6) {
                    assert.deepEqual(await f.client.delete(KEY, `p${period - 6}-0`), { deleted: true });
                    most = Math.max(most, await entries());
                    made--;
                }
                f.clock.advance(f.config.periodMs);
            }

            // Assess
            assert.ok(most <= 3, `at most 3 entries at once (saw ${most})`);
            const ledger = await ledgerOf(f, KEY);
            assert.equal(ledger.count, made, "best-effort exact: no write was lost");
            assert.ok(Object.keys(ledger.entries).length <= 3, JSON.stringify(ledger.entries));
        });
    }

    it("utilization: an offboarding deletes 200 lives of 20 old periods, four at a time: no -1 of an old life makes an entry, and best-effort ends exact", async () => {
        // Prepare: ten lives in each of 20 periods, two periods old
        f = await counterFixture(engine(), { mode: "utilization" });
        const ids: string[] = [];
        for (let period = 0; period < 20; period++) {
            await inParallel([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 5, async (i) => {
                const id = `p${period}-${i}`;
                assert.deepEqual(await f.client.create(KEY, id), { created: true });
                ids.push(id);
            });
            f.clock.advance(f.config.periodMs);
        }
        f.clock.advance(2 * f.config.periodMs);
        const before = Object.keys((await ledgerOf(f, KEY)).entries);
        const seen = new Set<string>();

        // Act
        await inParallel(ids, 4, async (id) => {
            assert.deepEqual(await f.client.delete(KEY, id), { deleted: true });
            Object.keys((await ledgerOf(f, KEY)).entries).forEach((name) => seen.add(name));
        });

        // Assess: the entries are the creates' own, fewer and fewer; none of the deletes' periods appears
        assert.ok(before.length <= 3, `the creates left a handful: ${before.join(", ")}`);
        assert.deepEqual(
            [...seen].filter((name) => !before.includes(name)),
            [],
            "no delete made an entry",
        );
        const left = await ledgerOf(f, KEY);
        assert.deepEqual({ count: left.count, entries: left.entries }, { count: 0, entries: {} });
    });

    it("utilization: 240 API hosts at once each delete a life of its own old period: each -1 goes to the count, and no entry appears", async () => {
        // Prepare: one life in each of 240 old periods, their entries folded into the count long ago; each delete
        // from a host of its own (a client that saw nothing before)
        f = await counterFixture(engine(), { mode: "utilization" });
        const start = Date.now() - 300 * f.config.periodMs;
        const ids = Array.from({ length: 240 }, (_, period) => `p${period}`);
        await seedLives(ids, (i) => start + i * f.config.periodMs);
        await setBestEffort({ count: 240 });

        // Act
        await inParallel(ids, 16, async (id) => {
            const host = new HybridCounterClient({ ...clientConfigOf(f.config), dynamodb: f.clientDynamo, deadlineMs: 60_000 });
            assert.deepEqual(await host.delete(KEY, id), { deleted: true });
        });

        // Assess
        const left = await ledgerOf(f, KEY);
        assert.deepEqual({ count: left.count, entries: left.entries }, { count: 0, entries: {} });
    });

    it("a heal that finds 240 stale entries removes at most 100 per write, each write's expressions under 4 KB, and keeps the key listed until none is left", async () => {
        // Prepare: 240 stale entries (a key written in 240 periods by hosts that never wrote it again, no heal)
        f = await counterFixture(engine(), { mode: "utilization" });
        const period = Math.floor(Date.now() / f.config.periodMs);
        await setBestEffort({ count: 0, entries: Array.from({ length: 240 }, (_, i) => period - 10 - i) });
        const settler = engine().dynamodb();
        const writes: Array<{ removed: number; bytes: number }> = [];
        const record: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const input = args.input as { UpdateExpression?: string; ConditionExpression?: string };
            if (context.commandName === "UpdateItemCommand" && input.UpdateExpression?.startsWith("ADD #c :corr")) {
                const removed = (input.UpdateExpression.split(" REMOVE ")[1] ?? "").split(",").filter((name) => name.trim() !== "").length;
                writes.push({
                    removed,
                    bytes: Buffer.byteLength(input.UpdateExpression) + Buffer.byteLength(input.ConditionExpression ?? ""),
                });
            }
            return next(args);
        };
        settler.middlewareStack.add(record, { step: "initialize" });
        const left: number[] = [];
        const dueAgain: Array<number | undefined> = [];

        // Act
        try {
            for (let run = 0; run < 3; run++) {
                const result = await healKey(KEY, { config: f.config, dynamodb: settler });
                left.push(await entries());
                dueAgain.push(result.dueAgainAt);
            }
        } finally {
            settler.destroy();
        }

        // Assess
        assert.deepEqual(left, [140, 40, 0]);
        assert.deepEqual(
            writes.map((w) => w.removed),
            [100, 100, 40],
        );
        assert.ok(
            writes.every((w) => w.bytes < 4096),
            JSON.stringify(writes),
        );
        assert.deepEqual(
            dueAgain.map((at) => at !== undefined),
            [true, true, false],
            "listed again while entries are left",
        );
    });

    /** Puts live client lives of `ids` in the table, flagged, with tokens at `timeOf(i)`. */
    async function seedLives(ids: readonly string[], timeOf: (i: number) => number): Promise<void> {
        for (let at = 0; at < ids.length; at += 25) {
            const puts = ids.slice(at, at + 25).map((id, i) => ({
                PutRequest: {
                    Item: {
                        ...countedFlag(f.config),
                        pk: { S: KEY },
                        sk: { S: id },
                        [f.config.tokenAttribute]: { S: newToken(timeOf(at + i)) },
                    },
                },
            }));
            await f.reader.send(new BatchWriteItemCommand({ RequestItems: { [f.config.tableName]: puts } }));
        }
    }

    /** Sets shard 0's count, and zero-valued entries of `entries` periods. */
    async function setBestEffort(state: { count: number; entries?: readonly number[] }): Promise<void> {
        const names: Record<string, string> = { "#c": f.config.countAttribute };
        const values: Record<string, { N: string }> = { ":n": { N: String(state.count) }, ":z": { N: "0" } };
        const sets = ["#c = :n"];
        (state.entries ?? []).forEach((p, i) => {
            names[`#e${i}`] = `hc_y_${p}`;
            sets.push(`#e${i} = :z`);
        });
        await f.reader.send(
            new UpdateItemCommand({
                TableName: f.config.countersTableName,
                Key: bestEffortKey(f.config, KEY, 0),
                UpdateExpression: `SET ${sets.join(", ")}`,
                ExpressionAttributeNames: names,
                ExpressionAttributeValues: (state.entries ?? []).length > 0 ? values : { ":n": values[":n"]! },
            }),
        );
    }
});
