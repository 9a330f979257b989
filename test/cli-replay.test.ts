/**
 * What `fatal replay` runs (runtime/ops/fatal-replay.ts `replayFatal`), called as the CLI calls it, on the failures a
 * local server cannot make by itself: a fatal queue that refuses what the replay parks (reported with the queue's
 * error, the message kept, nothing dropped), and a stream that no longer holds a batch's records (a records-expired
 * message stands in its place). Against DynamoDB Local and the local SQS server.
 */
import { DynamoDBStreamsClient, TrimmedDataAccessException } from "@aws-sdk/client-dynamodb-streams";
import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from "@aws-sdk/client-sqs";
import { strict as assert } from "node:assert";
import { replayFatal } from "../runtime/ops/fatal-replay";
import { reconcileKeys } from "../runtime/ops/reconcile-all";
import { readKeyStatus } from "../runtime/ops/status-read";
import { newToken } from "../runtime/shared/tokens";
import { unparkedLines } from "../cli/fatal";
import { counterSystem, useServers, type CounterSystem } from "./support/cli-fixture";

describe("fatal replay, in the process (DynamoDB Local, local SQS server)", function () {
    const servers = useServers();

    /** The fatal queue's messages, read and left in place. */
    async function bodies(s: CounterSystem): Promise<Array<Record<string, unknown>>> {
        const page = await servers().sqsClient.send(
            new ReceiveMessageCommand({ QueueUrl: s.fatal.url, MaxNumberOfMessages: 10, VisibilityTimeout: 0, WaitTimeSeconds: 0 }),
        );
        return (page.Messages ?? []).map((m) => JSON.parse(m.Body!) as Record<string, unknown>);
    }

    const options = (s: CounterSystem, sqs: SQSClient, streams: DynamoDBStreamsClient) => ({
        sqs,
        queueUrl: s.fatal.url,
        partitionKey: s.config.partitionKey,
        config: s.config,
        dynamodb: s.admin,
        streams,
        holdSeconds: 1,
    });

    it("reports what the fatal queue refused while a batch was applied, with the queue's error, and keeps the batch", async () => {
        // Prepare: a batch given up on holds a record no counter can count (its key holds U+0000); the replay's fatal
        // queue refuses every message it is sent.
        const s = await counterSystem(servers(), "refused");
        const key = "bad\u0000key";
        s.outage.add(key);
        await s.admin.send(
            new PutItemCommand({ TableName: s.tableName, Item: { pk: { S: key }, sk: { S: "p" }, counter_token: { S: newToken() } } }),
        );
        await s.drain();
        await servers().sqsClient.send(new SendMessageCommand({ QueueUrl: s.fatal.url, MessageBody: JSON.stringify(s.gaveUp[0]) }));
        const refusing = servers().sqs.client();
        refusing.middlewareStack.add(
            (next, context) => async (args) => {
                if (context.commandName === "SendMessageCommand") {
                    throw Object.assign(new Error("the queue is full"), { name: "OverLimit" });
                }
                return next(args);
            },
            { step: "initialize", name: "refuseSends" },
        );

        // Act
        const results = await replayFatal(options(s, refusing, servers().engine.streams()));
        refusing.destroy();

        // Assess: the batch stays, and the refused message is reported whole, with the queue's error.
        const problem = "[dynamodb.Keys.pk] cannot be a counter key: must not contain U+0000 (it separates a key from its shard number)";
        assert.equal(results.length, 1);
        const { unparked, ...result } = results[0]!;
        assert.deepEqual(result, {
            id: result.id,
            kind: "batch-exhausted",
            outcome: "kept",
            detail: "the fatal queue refused 1 message(s) it led to (listed as unparked); replay again once the queue takes them",
        });
        assert.deepEqual(
            unparked!.map((m) => [m.reason, m.problem, m.counterKey, m.queueError, m.records?.length]),
            [["poison-record", problem, key, "OverLimit: the queue is full", 1]],
        );
        assert.deepEqual(unparkedLines(unparked!), [
            `could not park (the fatal queue refused it: OverLimit: the queue is full): poison-record (key "bad\\u0000key"): ${problem}`,
        ]);
        assert.deepEqual(
            (await bodies(s)).map((b) => Object.keys(b).includes("DDBStreamBatchInfo")),
            [true],
        );
    });

    it("a batch whose records the stream no longer holds: a records-expired message stands in its place", async () => {
        // Prepare: a key counted (the shard's frontier set), then a batch given up on; the stream answers a read after
        // the frontier as it does past its 24 hours.
        const s = await counterSystem(servers(), "expired");
        await s.client.create("before", "a");
        await s.drain();
        s.outage.add("late");
        await s.client.create("late", "b");
        await s.drain();
        await servers().sqsClient.send(new SendMessageCommand({ QueueUrl: s.fatal.url, MessageBody: JSON.stringify(s.gaveUp[0]) }));
        const streams = servers().engine.streams();
        streams.middlewareStack.add(
            (next, context) => async (args) => {
                const input = args.input as { ShardIteratorType?: string };
                if (context.commandName === "GetShardIteratorCommand" && input.ShardIteratorType === "AFTER_SEQUENCE_NUMBER") {
                    throw new TrimmedDataAccessException({ message: "records trimmed (24 h retention)", $metadata: {} });
                }
                return next(args);
            },
            { step: "initialize", name: "trimmed" },
        );

        // Act
        const results = await replayFatal(options(s, servers().sqsClient, streams));
        streams.destroy();

        // Assess: the batch went, a records-expired message took its place; what the stream still held was applied.
        assert.deepEqual(
            results.map((r) => [r.kind, r.outcome, r.detail]),
            [["batch-exhausted", "expired", "the stream no longer holds its records: a records-expired message stands in its place"]],
        );
        assert.deepEqual(
            (await bodies(s)).map((b) => [b.reason, (b.detail as { shardId: string }).shardId]),
            [["records-expired", s.gaveUp[0]!.DDBStreamBatchInfo.shardId]],
        );
        const late = await readKeyStatus("late", { config: s.config, dynamodb: s.admin });
        assert.deepEqual([late.eventual, late.counted, late.exact], [1, 1, true]);
    });

    it("reconciling many keys stops between keys when interrupted: none is started half", async () => {
        const s = await counterSystem(servers(), "abort");
        const controller = new AbortController();
        controller.abort();
        assert.deepEqual(await reconcileKeys(["a", "b"], { config: s.config, dynamodb: s.admin, signal: controller.signal }), {
            results: [],
            notStarted: ["a", "b"],
            incomplete: false,
        });
    });
});
