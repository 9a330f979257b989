/**
 * A heal of a sharded key writes the shards it heals in one TransactWriteItems, over best-effort items the client
 * writes with plain UpdateItems. On DynamoDB a client write that meets that transaction is refused with
 * TransactionConflictException; the parity layer raises it on DynamoDB Local too, and holds the heal's transaction
 * open (local/engine/transaction-window.ts) so that the meeting is staged, not timed. The client's writes sent once
 * (a utilization increment, a strict release) must not fail for it: each is repeated, committed once, and the count
 * ends exact where it used to end an undercount or a held slot.
 */
import {
    PutItemCommand,
    UpdateItemCommand,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import type { BestEffortFailure } from "../runtime/client/best-effort";
import { HybridCounterClient } from "../runtime/client/client";
import { healKey, type HealResult } from "../runtime/heal/heal";
import { bestEffortMarkNames, bestEffortMarkValues, bestEffortUpdate } from "../runtime/shared/best-effort-marks";
import { bestEffortSortKey, countersTable } from "../runtime/shared/config";
import { shardPartitionKey } from "../runtime/shards/layout";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";
import { N, Q, T0, tokenIn } from "./support/shard-heal";

/** A gate a middleware waits at: `reached` when the request arrives, `open()` to let it go on. */
function gate() {
    let reach!: () => void;
    let open!: () => void;
    const reached = new Promise<void>((resolve) => (reach = resolve));
    const opened = new Promise<void>((resolve) => (open = resolve));
    return { reached, open, wait: async () => (reach(), await opened) };
}

/** Stops the first request of `dynamodb` that `matches` at `g` (initialize step: before the request is sent). */
function stopAt(
    dynamodb: DynamoDBClient,
    g: ReturnType<typeof gate>,
    matches: (command: string, input: Record<string, unknown>) => boolean,
) {
    let armed = true;
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (armed && matches(context.commandName ?? "", args.input as Record<string, unknown>)) {
            armed = false;
            await g.wait();
        }
        return next(args);
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: `gate${Math.random()}` });
}

/** The client's best-effort write adding `delta` (":delta"), as best-effort.ts sends it. */
const bestEffortWrite = (fixture: CounterFixture, delta: string) => (command: string, input: Record<string, unknown>) =>
    command === "UpdateItemCommand" &&
    (input.Key as Record<string, { S?: string }>)?.[fixture.layout.sortKey]?.S === bestEffortSortKey(fixture.layout) &&
    (input.ExpressionAttributeValues as Record<string, { N?: string }>)?.[":delta"]?.N === delta;

describe("a client write that meets a sharded heal's transaction never fails (DynamoDB Local, parity layer)", function () {
    const engine = useEngine({ parity: true });

    async function setup(mode: "strict" | "utilization") {
        const fixture = await counterFixture(engine(), { placement: "separate", counterShards: N, mode });
        const dynamodb = engine().dynamodb();
        const failures: BestEffortFailure[] = [];
        const client = new HybridCounterClient({
            ...fixture.layout,
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            counterShards: N,
            dynamodb,
            mode,
            deadlineMs: 60_000,
            onBestEffortFailure: (failure) => failures.push(failure),
        });
        /** A best-effort write of shard `shard` as a client sends it (ADD, version, clock; strict: the heal index). */
        const shardWrite = (shard: number, amount: number) =>
            fixture.reader.send(
                new UpdateItemCommand({
                    TableName: countersTable(fixture.config),
                    Key: {
                        [fixture.layout.partitionKey]: { S: shardPartitionKey("k", shard) },
                        [fixture.layout.sortKey]: { S: bestEffortSortKey(fixture.layout) },
                    },
                    UpdateExpression: bestEffortUpdate(":amount", mode === "strict"),
                    ExpressionAttributeNames: { "#count": fixture.layout.countAttribute, ...bestEffortMarkNames(mode === "strict") },
                    ExpressionAttributeValues: {
                        ":amount": { N: String(amount) },
                        ...bestEffortMarkValues(shardPartitionKey("k", shard), Date.now(), mode === "strict"),
                    },
                }),
            );
        const healDynamo = engine().dynamodb();
        const heal = () => healKey("k", { config: fixture.config, dynamodb: healDynamo, mode, quietWindowMs: Q, now: () => T0 });
        /** Holds the next transaction over this key's best-effort shard items. */
        const holdHeal = () =>
            engine().parity!.holdTransactions((t) => t.items.length > 1 && t.items.every((i) => i.table === countersTable(fixture.config)));
        return { fixture, client, dynamodb, failures, shardWrite, heal, healDynamo, holdHeal };
    }

    it("utilization: an increment that meets the heal's transaction is repeated after it, and counts its item", async () => {
        // Prepare: every shard one item short (an item of the key whose increment was lost), so the heal raises all
        // three in one transaction, which the parity layer holds open.
        const { fixture, client, failures, shardWrite, heal, holdHeal } = await setup("utilization");
        for (let shard = 0; shard < N; shard++) {
            await shardWrite(shard, 0);
            await fixture.reader.send(
                new PutItemCommand({
                    TableName: fixture.tableName,
                    Item: { pk: { S: "k" }, sk: { S: `lost-${shard}` }, [fixture.layout.tokenAttribute]: { S: tokenIn(shard) } },
                }),
            );
        }
        const hold = holdHeal();
        const healing = heal();
        await hold.held;

        // Act: a create while the transaction is pending: its put passes (not in the transaction), its increment
        // (sent once) meets the transaction.
        const creating = client.create("k", "new");
        await hold.met;
        hold.release();
        const healed: HealResult = await healing;
        const created = await creating;
        const after = await fixture.observe("k");

        // Assess: the heal committed (the refused increment wrote nothing), the increment landed after it, nothing
        // was absorbed, and best-effort counts every live item.
        assert.deepEqual(created, { created: true });
        assert.equal(healed.outcome, "healed");
        assert.deepEqual(failures, [], "no client write failed");
        assert.deepEqual([after.bestEffort, after.clientLive], [N + 1, N + 1]);
        assert.ok(engine().parity!.stats.conflicts.writes >= 1);
        fixture.close();
    });

    it("strict: a release that meets the heal's transaction is repeated after it; the slot is freed, not held", async () => {
        // Prepare: two items created under the limit, and one held slot in every shard (releases that were lost), so
        // the heal lowers all three shards in one transaction.
        const { fixture, client, dynamodb, failures, shardWrite, heal, healDynamo, holdHeal } = await setup("strict");
        assert.equal((await client.tryCreate("k", "a", 10)).created, true);
        assert.equal((await client.tryCreate("k", "b", 10)).created, true);
        for (let shard = 0; shard < N; shard++) {
            await shardWrite(shard, 1);
        }
        const before = await fixture.observe("k");
        // The heal reads every shard and the items, then stops before its transaction; the delete's touch and soft
        // delete land after that read (so the heal's condition fails, as its argument requires of any call whose
        // release can meet its transaction), and its release stops until the transaction is pending.
        const healWrites = gate();
        stopAt(healDynamo, healWrites, (command) => command === "TransactWriteItemsCommand");
        const release = gate();
        stopAt(dynamodb, release, bestEffortWrite(fixture, "-1"));
        const healing = heal();
        await healWrites.reached;
        const deleting = client.delete("k", "a");
        await release.reached;
        const hold = holdHeal();
        healWrites.open();
        await hold.held;

        // Act: the release meets the pending transaction.
        release.open();
        await hold.met;
        hold.release();
        const healed = await healing;
        const deleted = await deleting;
        const after = await fixture.observe("k");

        // Assess: the heal changed nothing (the touch landed after its read); the release was repeated once and freed
        // the slot: best-effort is exactly one below what it was, with the three lost releases' slots still held.
        assert.deepEqual(deleted, { deleted: true });
        assert.equal(healed.outcome, "raced");
        assert.deepEqual(failures, [], "no client write failed");
        assert.deepEqual([before.bestEffort, before.clientLive], [2 + N, 2]);
        assert.deepEqual([after.bestEffort, after.clientLive], [1 + N, 1]);
        fixture.close();
    });
});
