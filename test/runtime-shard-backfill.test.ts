/**
 * Backfill of a sharded key's counting (counterShards 3, runtime/shards/layout.ts) on DynamoDB Local, without a
 * consumer: a table of items over several keys, with and without the client's token, some already counted by the
 * consumer before the backfill, is adopted, and every shard of every key ends exactly as the layout says:
 *   - each item's marker in its `markerShard`, and no counter item anywhere else;
 *   - each shard's eventual partial == the counted markers of that shard;
 *   - strict mode: each shard's best-effort == the live items homed there (`homeShard`: the client's reservations,
 *     seeded here as a client leaves them, plus the backfill's units), each backfill flag carrying its shard's epoch.
 * A repeated run and a new run change nothing, an aborted run resumes to the same state, runs concurrent with
 * themselves (one run id twice, and another run id) under injected faults end exact, and keys that cannot be
 * sharded are reported as unmarkable and never counted. The planner's grouping is checked as a pure function first.
 */
import {
    PutItemCommand,
    ScanCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type TransactWriteItemsCommandInput,
} from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { createCounterTable, createCountersTable } from "../local/engine/table";
import { SEEDED_SELECTION, writeItems } from "../local/harness/seed";
import { backfill, backfillOptionsProblems, type BackfillReport } from "../runtime/backfill/backfill";
import { BACKFILL_ENV, backfillEnvironment, backfillFromEnv } from "../runtime/backfill/env";
import {
    backfillActions,
    chunkShards,
    markersPerTransaction,
    planPage,
    type BackfillConfig,
    type BackfillMode,
} from "../runtime/backfill/plan";
import {
    COUNTER_ATTRIBUTES as A,
    ConfigurationError,
    DEFAULT_LAYOUT,
    ENV,
    ZERO_SEQ,
    bestEffortSortKey,
    eventualSortKey,
    healShard,
    markerSortKey,
} from "../runtime/shared/config";
import { homeShard, lifeShard, markerShard, shardOfPartitionKey, shardPartitionKey } from "../runtime/shards/layout";
import { newToken } from "../runtime/shared/tokens";
import { useEngine } from "./support/engine";

const SHARDS = 3;
const KEYS = ["acme", "globex", "initech", "umbrella"];
/** Keys a shard count of 3 refuses: one holds U+0000, one leaves no room for a shard's suffix (2,046 bytes at most). */
const UNSHARDABLE = ["bad\u0000key", "k".repeat(2_047)];
/** The heal epoch of each shard of the keys that had heals (strict mode): shard 0 never healed lower. */
const EPOCHS: Record<string, readonly number[]> = { acme: [0, 3, 7], globex: [5, 0, 2] };
const PRE_SEQ = "0".repeat(30) + "1234567890";

let tables = 0;

function configFor(tableName: string, countersTableName: string, counterShards = SHARDS): BackfillConfig {
    return {
        ...DEFAULT_LAYOUT,
        selection: SEEDED_SELECTION,
        tableName,
        countersTableName,
        ...(counterShards === 1 ? {} : { counterShards }),
    };
}

/** One resource item of the seeded table and what the layout says about it. */
interface Resource {
    readonly key: string;
    readonly id: string;
    readonly token?: string;
    /** Live and selected: what the backfill may count. */
    readonly live: boolean;
    /** Counted by the consumer before the backfill ran (its marker and partial are in the table). */
    readonly preCounted: boolean;
}

/** The seeded table: per key, 60 items of every kind; the unshardable keys' live items. */
function resources(): { items: Array<Record<string, AttributeValue>>; resources: Resource[] } {
    const items: Array<Record<string, AttributeValue>> = [];
    const all: Resource[] = [];
    for (const key of KEYS) {
        for (let i = 0; i < 60; i++) {
            if (i % 10 === 0) {
                items.push({ pk: { S: key }, sk: { S: `profile#${i}` } });
                continue;
            }
            const id = `order#${key}-${i}`;
            // A client token (made by the client: items carrying another program's token are from before the counter).
            const token = i % 3 === 0 ? newToken() : undefined;
            const live = i % 10 !== 1;
            const item: Record<string, AttributeValue> = { pk: { S: key }, sk: { S: id } };
            if (token !== undefined) {
                item[DEFAULT_LAYOUT.tokenAttribute] = { S: token };
            }
            if (!live) {
                item[DEFAULT_LAYOUT.deletedAttribute] = { BOOL: true };
            }
            items.push(item);
            all.push({ key, id, ...(token === undefined ? {} : { token }), live, preCounted: live && i % 7 === 2 });
        }
    }
    for (const key of UNSHARDABLE) {
        for (let i = 0; i < 3; i++) {
            items.push({ pk: { S: key }, sk: { S: `order#${i}` } });
        }
    }
    return { items, resources: all };
}

/** The state of one shard of one key, as read from the counters table or as expected. */
interface ShardState {
    eventual: number;
    bestEffort: number;
    /** Markers by id: state, sequence, backfill flag (the epoch) and life. */
    markers: Record<string, { state?: string; seq?: string; be?: string; life?: string }>;
}

function emptyState(): ShardState {
    return { eventual: 0, bestEffort: 0, markers: {} };
}

function epochOf(key: string, shard: number): number {
    return EPOCHS[key]?.[shard] ?? 0;
}

/** What every shard of every key holds once the table is adopted. */
function expectedState(all: readonly Resource[], mode: BackfillMode): Map<string, ShardState> {
    const state = new Map<string, ShardState>();
    const at = (key: string, shard: number) => {
        const name = shardPartitionKey(key, shard);
        const found = state.get(name) ?? emptyState();
        state.set(name, found);
        return found;
    };
    for (const r of all.filter((r) => r.live)) {
        const marker = markerShard(r.id, SHARDS);
        const shard = at(r.key, marker);
        shard.eventual++;
        const unit = mode === "strict" && r.token === undefined;
        shard.markers[r.id] = {
            state: "counted",
            seq: r.preCounted ? PRE_SEQ : ZERO_SEQ,
            ...(unit ? { be: String(epochOf(r.key, homeShard(r.id, r.token, SHARDS))) } : {}),
            ...(r.token === undefined ? {} : { life: r.token }),
        };
        if (mode === "strict") {
            at(r.key, homeShard(r.id, r.token, SHARDS)).bestEffort++;
        }
    }
    return state;
}

describe("backfill of sharded keys (pure)", () => {
    const config = configFor("orders", "orders-counters");
    const item = (sk: string, token?: string) => ({
        pk: { S: "acme" },
        sk: { S: sk },
        ...(token === undefined ? {} : { counter_token: { S: token } }),
    });

    it("groups a page by (key, marker shard), chunked to the transaction limit, each chunk's items sharing their shards", () => {
        // Prepare: 400 items of one key, a third with the client's token.
        const items = Array.from({ length: 400 }, (_, i) => item(`order#${i}`, i % 3 === 0 ? newToken() : undefined));

        for (const mode of ["utilization", "strict"] as const) {
            // Act
            const plan = planPage(items, config, new Set(), mode);

            // Assess: every item once, no chunk over the limit, one marker shard and one home per chunk.
            assert.equal(
                plan.chunks.reduce((n, c) => n + c.items.length, 0),
                400,
            );
            const perShard = [0, 0, 0];
            for (const chunk of plan.chunks) {
                assert.ok(chunk.items.length <= markersPerTransaction(mode, SHARDS));
                const shards = chunkShards(config, chunk.items, mode);
                assert.ok(chunk.items.every((c) => markerShard(c.id, SHARDS) === shards.marker));
                assert.ok(chunk.items.filter((c) => c.life === undefined).every((c) => homeShard(c.id, c.life, SHARDS) === shards.home));
                perShard[shards.marker]! += chunk.items.length;
            }
            const expected = [0, 1, 2].map((s) => items.filter((i) => markerShard(i.sk.S, SHARDS) === s).length);
            assert.deepEqual(perShard, expected);
            // Each shard's items fill as few transactions as the limit allows.
            assert.equal(
                plan.chunks.length,
                expected.reduce((n, e) => n + Math.ceil(e / markersPerTransaction(mode, SHARDS)), 0),
            );
        }
    });

    it("writes the marker shard's partial and markers, and the home shard's best-effort with that shard's heal mark and epoch", () => {
        // Prepare: token-less items of one marker shard (shard 2), and a client item of that shard.
        const ids = Array.from({ length: 40 }, (_, i) => `order#${i}`).filter((id) => markerShard(id, SHARDS) === 2);
        const items = [...ids.slice(0, 2).map((id) => ({ counterKey: "acme", id })), { counterKey: "acme", id: ids[2]!, life: newToken() }];

        // Act
        const actions = backfillActions(config, "acme", items, "strict", 1_700_000_000_000, 7);

        // Assess
        const shard2 = shardPartitionKey("acme", 2);
        assert.equal(shard2, "acme\u00002");
        assert.deepEqual(
            actions.map((a) => [a.Update!.Key!.pk!.S, a.Update!.Key!.sk!.S]),
            [
                [shard2, eventualSortKey(config)],
                [shard2, bestEffortSortKey(config)],
                ...items.map((i) => [shard2, markerSortKey(config, i.id)]),
                // The units may lift shard 2 above its stored quota: every other shard is disarmed too.
                [shardPartitionKey("acme", 0), bestEffortSortKey(config)],
                [shardPartitionKey("acme", 1), bestEffortSortKey(config)],
            ],
        );
        assert.ok(actions[1]!.Update!.UpdateExpression!.endsWith(" REMOVE #quotaLimit, #quota"));
        assert.deepEqual(
            actions.slice(-2).map((a) => a.Update!.UpdateExpression),
            ["REMOVE #quotaLimit, #quota", "REMOVE #quotaLimit, #quota"],
        );
        assert.deepEqual(actions[0]!.Update!.ExpressionAttributeValues, { ":n": { N: "3" } });
        const be = actions[1]!.Update!;
        assert.equal(be.ConditionExpression, "#epoch = :epoch");
        assert.deepEqual(
            [be.ExpressionAttributeValues![":n"], be.ExpressionAttributeValues![":epoch"], be.ExpressionAttributeValues![":shard"]],
            [{ N: "2" }, { N: "7" }, { S: healShard(shard2) }],
        );
        assert.deepEqual(
            actions.slice(2, 5).map((a) => a.Update!.ExpressionAttributeValues![":epoch"]),
            [{ N: "7" }, { N: "7" }, undefined],
        );
    });

    it("one shard is the unsharded layout, transaction for transaction", () => {
        // Prepare
        const unsharded = configFor("orders", "orders-counters", 1);
        const items = Array.from({ length: 250 }, (_, i) => item(`order#${i}`, i % 4 === 0 ? `t-${i}` : undefined));
        const one = { ...unsharded, counterShards: 1 };

        for (const mode of ["utilization", "strict"] as const) {
            // Act
            const plans = [planPage(items, unsharded, new Set(), mode), planPage(items, one, new Set(), mode)];
            const actions = plans.map((plan, i) =>
                plan.chunks.map((c) => backfillActions(i === 0 ? unsharded : one, c.counterKey, c.items, mode, 1, 0)),
            );

            // Assess: one key, one group, the counter key itself everywhere.
            assert.deepEqual(plans[1], plans[0]);
            assert.deepEqual(actions[1], actions[0]);
            assert.deepEqual(
                plans[0]!.chunks.map((c) => c.items.length),
                mode === "strict" ? [98, 98, 54] : [99, 99, 52],
            );
            assert.ok(actions[0]!.flat().every((a) => a.Update!.Key!.pk!.S === "acme"));
        }
    });

    it("refuses a shard count the tables cannot hold, and carries the count through the function's environment", () => {
        // Act
        const sameTable = backfillOptionsProblems({ config: configFor("orders", "orders") });
        const tooMany = backfillOptionsProblems({ config: configFor("orders", "orders-counters", 17) });
        const env = backfillEnvironment(config, { mode: "strict", segments: 2 });
        const unshardedEnv = backfillEnvironment(configFor("orders", "orders-counters", 1), { mode: "strict", segments: 2 });

        // Assess
        assert.deepEqual(sameTable, [
            "[config.counterShards] above 1 needs a counters table of its own: a key's shards are partition keys of the counters table",
        ]);
        assert.deepEqual(tooMany, ["[config.counterShards] must be an integer from 1 to 16 (got 17)"]);
        assert.equal(env[ENV.counterShards], "3");
        assert.equal(backfillFromEnv(env).config.counterShards, 3);
        assert.equal(ENV.counterShards in unshardedEnv, false);
        assert.equal("counterShards" in backfillFromEnv(unshardedEnv).config, false);
        assert.throws(
            () => backfillFromEnv({ ...env, [BACKFILL_ENV.countersTableName]: "orders" }),
            (e: unknown) => e instanceof ConfigurationError && e.message.includes(`[${ENV.counterShards}] above 1 needs a counters table`),
        );
    });
});

describe("backfill of sharded keys on DynamoDB Local (counterShards 3)", function () {
    const engine = useEngine();

    /** The seeded user table and the counters table as the consumer and the client left them before the backfill. */
    async function seeded(mode: BackfillMode): Promise<{ config: BackfillConfig; all: Resource[]; items: number }> {
        const client = engine().dynamodb();
        const n = ++tables;
        const config = configFor(`sbf-user-${n}`, `sbf-counters-${n}`);
        await createCounterTable(client, config.tableName);
        await createCountersTable(client, config.countersTableName, DEFAULT_LAYOUT, { healIndex: true });
        const { items, resources: all } = resources();
        await writeItems(client, config.tableName, items);
        // The consumer counted some items first: their markers in their marker shard, and that shard's partial.
        for (const r of all.filter((r) => r.preCounted)) {
            const pk = shardPartitionKey(r.key, markerShard(r.id, SHARDS));
            await client.send(
                new PutItemCommand({
                    TableName: config.countersTableName,
                    Item: {
                        pk: { S: pk },
                        sk: { S: markerSortKey(config, r.id) },
                        [A.state]: { S: "counted" },
                        [A.seq]: { S: PRE_SEQ },
                        ...(r.token === undefined ? {} : { [A.life]: { S: r.token } }),
                    },
                }),
            );
            await addCount(client, config, pk, eventualSortKey(config), 1);
        }
        if (mode === "strict") {
            // The client's reservations: a unit for each live item carrying its token, in the token's shard.
            for (const r of all.filter((r) => r.live && r.token !== undefined)) {
                await addCount(client, config, shardPartitionKey(r.key, lifeShard(r.token!, SHARDS)), bestEffortSortKey(config), 1);
            }
            // Heals that opened epochs on some shards.
            for (const [key, epochs] of Object.entries(EPOCHS)) {
                for (const [shard, epoch] of epochs.entries()) {
                    if (epoch > 0) {
                        await client.send(
                            new UpdateItemCommand({
                                TableName: config.countersTableName,
                                Key: { pk: { S: shardPartitionKey(key, shard) }, sk: { S: bestEffortSortKey(config) } },
                                UpdateExpression: "SET #epoch = :epoch ADD #count :zero",
                                ExpressionAttributeNames: { "#epoch": A.epoch, "#count": config.countAttribute },
                                ExpressionAttributeValues: { ":epoch": { N: String(epoch) }, ":zero": { N: "0" } },
                            }),
                        );
                    }
                }
            }
        }
        client.destroy();
        return { config, all, items: items.length };
    }

    async function addCount(client: DynamoDBClient, config: BackfillConfig, pk: string, sk: string, n: number): Promise<void> {
        await client.send(
            new UpdateItemCommand({
                TableName: config.countersTableName,
                Key: { pk: { S: pk }, sk: { S: sk } },
                UpdateExpression: "ADD #count :n",
                ExpressionAttributeNames: { "#count": config.countAttribute },
                ExpressionAttributeValues: { ":n": { N: String(n) } },
            }),
        );
    }

    /** Every counting item of the counters table (checkpoints left out), by partition key and sort key. */
    async function countersTable(config: BackfillConfig): Promise<Map<string, Record<string, AttributeValue>>> {
        const reader = engine().dynamodb();
        const found = new Map<string, Record<string, AttributeValue>>();
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await reader.send(
                new ScanCommand({ TableName: config.countersTableName, ConsistentRead: true, ExclusiveStartKey: start }),
            );
            for (const item of page.Items ?? []) {
                if (!item.pk!.S!.startsWith(`${config.counterPrefix}backfill#`)) {
                    found.set(`${item.pk!.S}\u0001${item.sk!.S}`, item);
                }
            }
            start = page.LastEvaluatedKey;
        } while (start);
        reader.destroy();
        return found;
    }

    /** The counters table read back as shards' states; fails on any item outside the layout. */
    async function actualState(
        config: BackfillConfig,
    ): Promise<{ state: Map<string, ShardState>; raw: Map<string, Record<string, AttributeValue>> }> {
        const raw = await countersTable(config);
        const state = new Map<string, ShardState>();
        const markerPrefix = markerSortKey(config, "");
        for (const item of raw.values()) {
            const pk = item.pk!.S!;
            const sk = item.sk!.S!;
            const { key, shard } = shardOfPartitionKey(pk, SHARDS);
            assert.ok(KEYS.includes(key), `a counter item of key ${JSON.stringify(key.slice(0, 20))}: ${pk} ${sk}`);
            const found = state.get(pk) ?? emptyState();
            state.set(pk, found);
            if (sk === eventualSortKey(config)) {
                found.eventual = Number(item[config.countAttribute]?.N ?? "0");
            } else if (sk === bestEffortSortKey(config)) {
                found.bestEffort = Number(item[config.countAttribute]?.N ?? "0");
            } else {
                assert.ok(sk.startsWith(markerPrefix), sk);
                const id = sk.slice(markerPrefix.length);
                assert.equal(markerShard(id, SHARDS), shard, `marker of ${id} in shard ${shard}`);
                found.markers[id] = {
                    ...(item[A.state] ? { state: item[A.state]!.S } : {}),
                    ...(item[A.seq] ? { seq: item[A.seq]!.S } : {}),
                    ...(item[A.beCounted] ? { be: item[A.beCounted]!.N } : {}),
                    ...(item[A.life] ? { life: item[A.life]!.S } : {}),
                };
            }
        }
        return { state, raw };
    }

    /** The exact expected state, and each shard's partial equal to its counted markers. */
    async function assertAdopted(
        config: BackfillConfig,
        all: readonly Resource[],
        mode: BackfillMode,
    ): Promise<Map<string, Record<string, AttributeValue>>> {
        const { state, raw } = await actualState(config);
        const sorted = (m: Map<string, ShardState>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
        assert.deepEqual(sorted(state), sorted(expectedState(all, mode)));
        for (const [pk, shard] of state) {
            const counted = Object.values(shard.markers).filter((m) => m.state === "counted").length;
            assert.equal(shard.eventual, counted, `${JSON.stringify(pk)}: partial ${shard.eventual} != counted markers ${counted}`);
        }
        // Every shard of every key holds markers (the items spread over all three).
        assert.equal([...state.values()].filter((s) => Object.keys(s.markers).length > 0).length, KEYS.length * SHARDS);
        if (mode === "strict") {
            // The backfill's best-effort writes put the shard on the heal index, under the shard's own partition key.
            for (const key of KEYS) {
                for (let shard = 0; shard < SHARDS; shard++) {
                    const pk = shardPartitionKey(key, shard);
                    const be = raw.get(`${pk}\u0001${bestEffortSortKey(config)}`);
                    assert.equal(be?.[A.healShard]?.S, healShard(pk), `heal mark of ${JSON.stringify(pk)}`);
                    assert.equal(Number(be?.[A.epoch]?.N ?? "0"), epochOf(key, shard));
                }
            }
        }
        return raw;
    }

    /** The report's totals for a first run over the whole seeded table. */
    function firstTotals(all: readonly Resource[], items: number) {
        const live = all.filter((r) => r.live);
        const pre = live.filter((r) => r.preCounted).length;
        return { scanned: items, counted: live.length - pre, alreadyCounted: pre, skipped: items - live.length };
    }

    const unmarkable = (report: BackfillReport) =>
        [...(report.thisCall.unmarkable ?? [])].map((u) => `${u.counterKey.slice(0, 8)}|${u.id}`).sort();
    const expectedUnmarkable = UNSHARDABLE.flatMap((key) => [0, 1, 2].map((i) => `${key.slice(0, 8)}|order#${i}`)).sort();

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: every shard exact (partials, markers in their shard${mode === "strict" ? ", best-effort per home, flags with the shard's epoch" : ""}); unshardable keys reported; a repeated and a new run change nothing`, async () => {
            // Prepare
            const { config, all, items } = await seeded(mode);
            const dynamodb = engine().dynamodb();

            // Act
            const first = await backfill({ config, dynamodb, mode, runId: "first", segments: 3, pageSize: 40 });
            const after = await assertAdopted(config, all, mode);
            const again = await backfill({ config, dynamodb, mode, runId: "first" });
            const fresh = await backfill({ config, dynamodb, mode, runId: "second", segments: 2 });

            // Assess
            assert.equal(first.status, "complete");
            assert.deepEqual(first.total, firstTotals(all, items));
            assert.deepEqual(unmarkable(first), expectedUnmarkable);
            assert.deepEqual([again.alreadyComplete, again.thisCall.scanned, again.thisCall.writeUnits], [true, 0, 0]);
            const live = all.filter((r) => r.live).length;
            assert.deepEqual(fresh.total, { scanned: items, counted: 0, alreadyCounted: live, skipped: items - live });
            assert.equal(fresh.thisCall.transactions, 0);
            assert.deepEqual(unmarkable(fresh), expectedUnmarkable);
            assert.deepEqual(await countersTable(config), after);
            dynamodb.destroy();
        });

        it(`${mode}: an aborted run resumes from its checkpoints to the same exact state`, async () => {
            // Prepare
            const { config, all } = await seeded(mode);
            const dynamodb = engine().dynamodb();
            const controller = new AbortController();
            const options = { config, dynamodb, mode, runId: "resumed", segments: 2, pageSize: 15 };

            // Act: stopped after its first checkpoint (the other segment stops between two of its chunks), then resumed.
            const aborted = await backfill({
                ...options,
                signal: controller.signal,
                progressIntervalMs: 0,
                onProgress: () => controller.abort(),
            });
            const stateAtAbort = await actualState(config);
            const resumed = await backfill(options);

            // Assess
            assert.equal(aborted.status, "aborted");
            assert.ok(aborted.segmentsDone < 2);
            assert.ok(stateAtAbort.state.size > 0, "the aborted run counted something");
            assert.deepEqual([resumed.status, resumed.resumed], ["complete", true]);
            const live = all.filter((r) => r.live).length;
            // A page cut off by the abort is repeated: its items are found already counted, never counted twice.
            assert.equal(resumed.total.counted + resumed.total.alreadyCounted, live);
            await assertAdopted(config, all, mode);
            dynamodb.destroy();
        });

        it(`${mode}: runs concurrent with themselves (one run id twice, another run id) under 5% faults end exact`, async () => {
            // Prepare
            const { config, all } = await seeded(mode);
            const clients = [1, 2, 3].map((seed) => {
                const dynamodb = engine().dynamodb();
                return { dynamodb, faults: injectFaults(dynamodb, { rate: 0.05, random: seededRandom(40 + seed) }) };
            });
            const options = { config, mode, segments: 3, pageSize: 10, readUnitsPerSecond: 100_000, writeUnitsPerSecond: 100_000 };

            // Act
            const reports = await Promise.all([
                backfill({ ...options, dynamodb: clients[0]!.dynamodb, runId: "same" }),
                backfill({ ...options, dynamodb: clients[1]!.dynamodb, runId: "same" }),
                backfill({ ...options, dynamodb: clients[2]!.dynamodb, runId: "other" }),
            ]);
            // A runner overtaken on a segment leaves it to the other; a last call of the run sees it complete.
            const last = await backfill({ ...options, dynamodb: clients[0]!.dynamodb, runId: "same" });

            // Assess
            assert.ok(
                clients.some((c) => Object.values(c.faults.injected).reduce((a, b) => a + b, 0) > 0),
                "faults were injected",
            );
            assert.deepEqual(
                reports.map((r) => r.status).filter((s) => s !== "complete" && s !== "overtaken"),
                [],
            );
            assert.equal(reports[2]!.status, "complete");
            assert.equal(last.status, "complete");
            await assertAdopted(config, all, mode);
            clients.forEach((c) => c.dynamodb.destroy());
        });
    }

    it("strict: a heal that moves every shard's epoch before the first transaction commits: every flag carries its shard's new epoch", async () => {
        // Prepare
        const { config, all } = await seeded("strict");
        const dynamodb = engine().dynamodb();
        const moved: Record<string, number[]> = {};
        let healed = false;
        const send = dynamodb.send.bind(dynamodb);
        const healing = Object.assign(Object.create(dynamodb) as DynamoDBClient, {
            send: async (command: { input: unknown; constructor: { name: string } }) => {
                if (!healed && command.constructor.name === "TransactWriteItemsCommand") {
                    healed = true;
                    // The heal: every shard of every key opens an epoch 10 above its own.
                    for (const key of KEYS) {
                        moved[key] = [0, 1, 2].map((shard) => epochOf(key, shard) + 10);
                        for (const [shard, epoch] of moved[key]!.entries()) {
                            await send(
                                new UpdateItemCommand({
                                    TableName: config.countersTableName,
                                    Key: { pk: { S: shardPartitionKey(key, shard) }, sk: { S: bestEffortSortKey(config) } },
                                    UpdateExpression: "SET #epoch = :epoch",
                                    ExpressionAttributeNames: { "#epoch": A.epoch },
                                    ExpressionAttributeValues: { ":epoch": { N: String(epoch) } },
                                }),
                            );
                        }
                    }
                    assert.ok((command.input as TransactWriteItemsCommandInput).TransactItems!.length > 0);
                }
                return (send as (c: unknown) => Promise<unknown>)(command);
            },
        });

        // Act
        const report = await backfill({ config, dynamodb: healing, mode: "strict", runId: "healed", segments: 1, pageSize: 50 });

        // Assess: the state of a run without the heal, but each flag with its shard's moved epoch.
        assert.equal(report.status, "complete");
        assert.ok(report.thisCall.retries > 0, "the first transaction lost to the heal and was sent again");
        const expected = expectedState(all, "strict");
        for (const [pk, shard] of expected) {
            const { key, shard: s } = shardOfPartitionKey(pk, SHARDS);
            for (const marker of Object.values(shard.markers).filter((m) => m.be !== undefined)) {
                marker.be = String(moved[key]![s]!);
            }
        }
        const { state } = await actualState(config);
        const sorted = (m: Map<string, ShardState>) => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
        assert.deepEqual(sorted(state), sorted(expected));
        dynamodb.destroy();
    });
});
