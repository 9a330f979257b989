/**
 * The client on a sharded key (runtime/shards/): every unit of best-effort sits in its item's home shard, count()
 * reads every shard at once for 1 RCU each, and strict mode keeps `live <= best-effort <= limit` over the sum while
 * refusing only when the key as a whole is full.
 */
import { GetItemCommand, QueryCommand, UpdateItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { HybridCounterClient } from "../runtime/client/client";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { COUNTER_ATTRIBUTES as A, bestEffortSortKey } from "../runtime/shared/config";
import { homeShard, lifeShard, shardPartitionKey } from "../runtime/shards/layout";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";

const SHARDS = 3;

/** Counts the commands `dynamodb` sends, by name, and sums the read units their answers report. */
function meterCommands(dynamodb: DynamoDBClient): { sent: Map<string, number>; readUnits: number } {
    const meter = { sent: new Map<string, number>(), readUnits: 0 };
    dynamodb.middlewareStack.add(
        (next, context) => async (args) => {
            const name = context.commandName ?? "";
            meter.sent.set(name, (meter.sent.get(name) ?? 0) + 1);
            const input = args.input as { ReturnConsumedCapacity?: string };
            if (name === "QueryCommand" && input.ReturnConsumedCapacity === undefined) {
                input.ReturnConsumedCapacity = "TOTAL";
            }
            const result = await next(args);
            const consumed = (result.output as { ConsumedCapacity?: { CapacityUnits?: number } }).ConsumedCapacity;
            meter.readUnits += name === "QueryCommand" ? (consumed?.CapacityUnits ?? 0) : 0;
            return result;
        },
        { step: "initialize", name: "commandMeter" },
    );
    return meter;
}

/** Each shard's best-effort count, read directly. */
async function shardCounts(fixture: CounterFixture, key: string): Promise<number[]> {
    const counts: number[] = [];
    for (let shard = 0; shard < SHARDS; shard++) {
        const item = await fixture.reader.send(
            new GetItemCommand({
                TableName: fixture.countersTableName,
                Key: { pk: { S: shardPartitionKey(key, shard) }, sk: { S: bestEffortSortKey(fixture.layout) } },
                ConsistentRead: true,
            }),
        );
        counts.push(Number(item.Item?.count?.N ?? "0"));
    }
    return counts;
}

/** Each shard's stored limit and quota (runtime/shards/quotas.ts). */
async function storedQuotas(fixture: CounterFixture, key: string): Promise<Array<{ limit: number; quota: number }>> {
    const stored = [];
    for (let shard = 0; shard < SHARDS; shard++) {
        const item = await fixture.reader.send(
            new GetItemCommand({
                TableName: fixture.countersTableName,
                Key: { pk: { S: shardPartitionKey(key, shard) }, sk: { S: bestEffortSortKey(fixture.layout) } },
                ConsistentRead: true,
            }),
        );
        stored.push({ limit: Number(item.Item?.[A.quotaLimit]?.N), quota: Number(item.Item?.[A.quota]?.N) });
    }
    return stored;
}

/** Each live item's home shard, from its token. */
async function homes(fixture: CounterFixture, key: string): Promise<number[]> {
    const page = await fixture.reader.send(
        new QueryCommand({
            TableName: fixture.tableName,
            KeyConditionExpression: "pk = :k",
            ExpressionAttributeValues: { ":k": { S: key } },
            ConsistentRead: true,
        }),
    );
    const counts = new Array<number>(SHARDS).fill(0);
    for (const item of page.Items ?? []) {
        if (item.deleted?.BOOL !== true) {
            counts[homeShard(item.sk!.S!, item.counter_token?.S, SHARDS)]!++;
        }
    }
    return counts;
}

describe("the client on a sharded key (DynamoDB Local)", function () {
    const engine = useEngine();

    it("utilization: each create's unit lands in its token's shard, each delete takes it from there, count() sums the shards", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: SHARDS });
        // Act
        for (let i = 0; i < 24; i++) {
            assert.deepEqual(await fixture.client.create("tenant", `r${i}`), { created: true });
        }
        for (let i = 0; i < 9; i++) {
            assert.deepEqual(await fixture.client.delete("tenant", `r${i}`), { deleted: true });
        }
        // Assert: per shard, best-effort == the live items homed there
        const perShard = await shardCounts(fixture, "tenant");
        assert.deepEqual(perShard, await homes(fixture, "tenant"));
        assert.equal(
            perShard.reduce((a, b) => a + b, 0),
            15,
        );
        assert.ok(perShard.filter((n) => n > 0).length > 1, `the units spread over more than one shard (${perShard})`);
        const value = await fixture.client.count("tenant");
        assert.equal(value.bestEffort, 15);
        fixture.close();
    });

    it("count() sends one Query per shard, all at once, for 1 RCU each", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: SHARDS });
        for (let i = 0; i < 6; i++) {
            await fixture.client.create("reads", `r${i}`);
        }
        const dynamodb = engine().dynamodb();
        const meter = meterCommands(dynamodb);
        const client = new HybridCounterClient({
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            counterShards: SHARDS,
            dynamodb,
        });
        // Act
        const value = await client.count("reads");
        // Assert
        assert.equal(value.bestEffort, 6);
        assert.deepEqual([...meter.sent], [["QueryCommand", SHARDS]]);
        assert.ok(meter.readUnits <= SHARDS, `${meter.readUnits} RCU for ${SHARDS} shards`);
        fixture.close();
        dynamodb.destroy();
    });

    it("strict: admits exactly the limit, each shard within its stored quota, and refuses with the key's count", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: SHARDS, mode: "strict" });
        const limit = 7;
        // Act
        const results = [];
        for (let i = 0; i < 12; i++) {
            results.push(await fixture.client.tryCreate("strict", `r${i}`, limit));
        }
        // Assert
        assert.equal(results.filter((r) => r.created).length, limit);
        for (const refused of results.filter((r) => !r.created)) {
            assert.deepEqual(refused, { created: false, count: limit, reason: "limit" });
        }
        const perShard = await shardCounts(fixture, "strict");
        const stored = await storedQuotas(fixture, "strict");
        assert.deepEqual(
            stored.map((s) => s.limit),
            [limit, limit, limit],
        );
        assert.equal(
            stored.reduce((sum, s) => sum + s.quota, 0),
            limit,
        );
        assert.ok(
            perShard.every((count, s) => count <= stored[s]!.quota),
            `${perShard} within ${stored.map((s) => s.quota)}`,
        );
        assert.deepEqual(perShard, await homes(fixture, "strict"));
        fixture.close();
    });

    it("strict: a full home shard falls back to another, and the item's token is homed where its slot is", async () => {
        // Prepare: two units in shard 0 already (a writer that knows no limit put them there)
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: SHARDS, mode: "strict" });
        await fixture.reader.send(
            new UpdateItemCommand({
                TableName: fixture.countersTableName,
                Key: { pk: { S: shardPartitionKey("fallback", 0) }, sk: { S: bestEffortSortKey(fixture.layout) } },
                UpdateExpression: "ADD #c :two",
                ExpressionAttributeNames: { "#c": "count" },
                ExpressionAttributeValues: { ":two": { N: "2" } },
            }),
        );
        // Act
        const created = [];
        for (let i = 0; i < 4; i++) {
            created.push(await fixture.client.tryCreate("fallback", `r${i}`, 6));
        }
        const refused = await fixture.client.tryCreate("fallback", "r4", 6);
        // Assert
        assert.ok(created.every((r) => r.created));
        assert.deepEqual(refused, { created: false, count: 6, reason: "limit" });
        const counts = await shardCounts(fixture, "fallback");
        const homed = await homes(fixture, "fallback");
        assert.deepEqual(
            counts,
            homed.map((n, s) => n + (s === 0 ? 2 : 0)),
        );
        assert.equal(
            homed.reduce((a, b) => a + b, 0),
            4,
        );
        fixture.close();
    });

    it("strict: when a slot is freed after the last refusal, the snapshot finds it and the call creates through a rearm", async () => {
        // Prepare: every shard at its stored quota (the key at 3 under 3)
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: SHARDS, mode: "strict" });
        for (let i = 0; i < 3; i++) {
            assert.equal((await fixture.client.tryCreate("freed", `r${i}`, 3)).created, true);
        }
        const idIn = new Map<number, string>();
        const page = await fixture.reader.send(
            new QueryCommand({
                TableName: fixture.tableName,
                KeyConditionExpression: "pk = :k",
                ExpressionAttributeValues: { ":k": { S: "freed" } },
            }),
        );
        for (const item of page.Items ?? []) {
            idIn.set(lifeShard(item.counter_token!.S!, SHARDS), item.sk!.S!);
        }
        const dynamodb = engine().dynamodb();
        const meter = meterCommands(dynamodb);
        let refusals = 0;
        let freedShard = -1;
        // A delete frees one unit in the first shard the call tried, just after the call's last refusal.
        dynamodb.middlewareStack.add(
            (next) => async (args) => {
                const input = args.input as { Key?: Record<string, { S?: string }>; ConditionExpression?: string };
                try {
                    return await next(args);
                } catch (error) {
                    // The client's single-attempt writes wrap DynamoDB's error at this step (runtime/shared/retry.ts).
                    const name = ((error as { original?: Error }).original ?? (error as Error)).name;
                    if (name === "ConditionalCheckFailedException" && input.ConditionExpression?.includes(":limit")) {
                        refusals++;
                        const shard = Number(input.Key!.pk!.S!.split("\u0000")[1] ?? "0");
                        if (refusals === 1) {
                            freedShard = shard;
                        }
                        if (refusals === SHARDS) {
                            assert.deepEqual(await fixture.client.delete("freed", [...idIn.values()][0]!), { deleted: true });
                        }
                    }
                    throw error;
                }
            },
            { step: "initialize", name: "freeOnLastRefusal" },
        );
        const client = new HybridCounterClient({
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            counterShards: SHARDS,
            mode: "strict",
            dynamodb,
        });
        // Act
        const result = await client.tryCreate("freed", "late", 3);
        // Assert: created after one snapshot and one rearm, and the key holds 3 again
        assert.equal(refusals, SHARDS);
        assert.ok(freedShard >= 0);
        assert.equal(result.created, true);
        assert.equal(meter.sent.get("TransactGetItemsCommand"), 1);
        assert.equal(meter.sent.get("TransactWriteItemsCommand"), 1);
        assert.deepEqual(
            (await shardCounts(fixture, "freed")).reduce((a, b) => a + b, 0),
            3,
        );
        assert.deepEqual(await shardCounts(fixture, "freed"), await homes(fixture, "freed"));
        fixture.close();
        dynamodb.destroy();
    });

    it("strict: concurrent tryCreates on one key admit exactly the limit", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: SHARDS, mode: "strict" });
        // Act
        const results = await Promise.all(Array.from({ length: 24 }, (_, i) => fixture.client.tryCreate("race", `r${i}`, 10)));
        // Assert
        assert.equal(results.filter((r) => r.created).length, 10);
        const counts = await shardCounts(fixture, "race");
        assert.equal(
            counts.reduce((a, b) => a + b, 0),
            10,
        );
        assert.deepEqual(counts, await homes(fixture, "race"));
        fixture.close();
    });

    it("refuses a key holding U+0000, or too long for its shards' partition keys, before anything is written", async () => {
        // Prepare
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: SHARDS });
        // Act / Assert
        for (const key of ["a\u0000b", "k".repeat(2047)]) {
            await assert.rejects(
                fixture.client.create(key, "r"),
                (error: unknown) => error instanceof InvalidArgumentError && error.field === "key",
            );
            await assert.rejects(
                fixture.client.count(key),
                (error: unknown) => error instanceof InvalidArgumentError && error.field === "key",
            );
        }
        assert.deepEqual(await fixture.keys(), []);
        fixture.close();
    });
});
