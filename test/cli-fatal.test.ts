/**
 * The fatal queue's commands, run as a user runs them (the built bin against DynamoDB Local and the local SQS
 * server): `fatal list`, `show`, `replay` (applying a batch from the stream, reconciling what a message names, or every
 * key), `replay --to first-dlq`, `delete` of a settled message only, and `redrive`; each message is explained, and
 * every key ends exact.
 */
import { DeleteItemCommand, GetItemCommand, PutItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { ReceiveMessageCommand, SendMessageCommand } from "@aws-sdk/client-sqs";
import { strict as assert } from "node:assert";
import { readThresholdState } from "../runtime/limits/thresholds";
import { DAY_ATTRIBUTE, dayOf, daysBefore, EXPIRES_ATTRIBUTE, usageAttributes } from "../runtime/limits/usage";
import { eventualKey, usageKey } from "../runtime/shared/keys";
import { newToken } from "../runtime/shared/tokens";
import { parsedJson, type Ran } from "./support/cli-bin";
import {
    clientConfigOf,
    counterSystem,
    human,
    jsonFile,
    setEventual,
    useServers,
    without,
    type CounterSystem,
} from "./support/cli-fixture";

const json = parsedJson;

interface Listed {
    id: string;
    receiveCount: number;
    sentAt: string;
    explanation: {
        kind: string;
        remedy: string;
        counterKeys: string[];
        range?: Record<string, string>;
        problem?: string;
        recordsExpireAt?: string;
    };
}

/** A status row's exactness and counts, as [eventual, counted, exact]. */
const counts = (ran: Ran) => {
    const s = json(ran) as { eventual: number; counted: number; exact: boolean };
    return [s.eventual, s.counted, s.exact];
};

describe("operator CLI: the fatal queue (built bin, DynamoDB Local, local SQS server)", function () {
    const servers = useServers();
    const cli = (args: readonly string[]) => servers().cli(args);
    const send = (url: string, body: unknown) =>
        servers().sqsClient.send(
            new SendMessageCommand({ QueueUrl: url, MessageBody: typeof body === "string" ? body : JSON.stringify(body) }),
        );

    /** A batch of `key` Lambda gave up on: the consumer failed on it, and its metadata is returned. */
    async function givenUp(s: CounterSystem, key: string, ids: readonly string[]) {
        s.outage.add(key);
        for (const id of ids) {
            await s.client.create(key, id);
        }
        await s.drain();
        s.outage.delete(key);
        return s.gaveUp.at(-1)!;
    }

    it("a batch Lambda gave up on: list explains it, show prints it, delete refuses it, replay applies it from the stream", async () => {
        // Prepare: a batch the consumer failed on; its metadata reaches the fatal queue (as SQS moves it after the redrive
        // failed it redriveMaxReceiveCount times).
        const s = await counterSystem(servers(), "batch");
        const batch = await givenUp(s, "out", ["o1", "o2"]);
        await send(s.fatal.url, batch);

        // Act
        const statusBefore = await cli(["status", "--key", "out", ...s.flags]);
        const listed = json(await cli(["fatal", "list", ...s.flags])) as Listed[];
        const id = listed[0]!.id;
        const text = await cli(["fatal", "list", ...human(s.flags)]);
        const shown = json(await cli(["fatal", "show", id, ...s.flags])) as { id: string; body: unknown };
        const refused = await cli(["fatal", "delete", id, ...s.flags]);
        const missing = await cli(["fatal", "show", "no-such-id", ...s.flags]);
        const replayed = await cli(["fatal", "replay", ...s.flags]);

        // Assess
        assert.deepEqual(counts(statusBefore), [0, 2, false]);
        assert.equal(listed.length, 1);
        const info = batch.DDBStreamBatchInfo;
        assert.deepEqual(listed[0]!.explanation, {
            kind: "batch-exhausted",
            meaning:
                "Lambda's metadata of a stream batch the redrive failed redriveMaxReceiveCount times: its records are not counted yet, and the stream holds them for 24 hours after they were written.",
            action: "Within 24 h of the write: `fatal replay` applies it from the stream now, or `redrive` moves it back to the first DLQ. After that its records are gone: `fatal replay` turns it into a records-expired message, and the next replay reconciles every key.",
            remedy: "redrive-batch",
            counterKeys: [],
            range: { shardId: info.shardId, startSequenceNumber: info.startSequenceNumber, endSequenceNumber: info.endSequenceNumber },
            problem: "RetryAttemptsExhausted",
            parkedAt: batch.timestamp,
            recordsExpireAt: new Date(Date.parse(info.approximateArrivalOfFirstRecord) + 86_400_000).toISOString(),
        });
        assert.equal(text.code, 0);
        assert.match(
            text.stdout,
            new RegExp(`^message ${id} \\(batch-exhausted, sent [^,]+, received 2 times\\)\\n  means: Lambda's metadata`),
        );
        assert.match(
            text.stdout,
            /\n {2}problem: RetryAttemptsExhausted\n {2}range: shard \S+, \d+ to \d+\n {2}records expire: \S+\n {2}do: Within 24 h/,
        );
        assert.deepEqual([shown.id, shown.body], [id, batch]);
        assert.equal(refused.code, 1);
        assert.match(
            refused.stderr,
            new RegExp(
                `^error: message ${id} is not settled: its records are not applied yet \\(stream shard \\S+ is applied up to none of its records, ` +
                    `not ${info.endSequenceNumber}\\); run \`fatal replay\` or \`reconcile\` first\\n$`,
            ),
        );
        assert.deepEqual(missing, {
            code: 1,
            stdout: "",
            stderr: "error: no message with id no-such-id in the fatal queue (it may be in flight elsewhere, or already deleted)\n",
        });
        assert.deepEqual(replayed, {
            code: 0,
            stderr: `replay: 0/1\nreplay: 1/1 ${id} settled\n`,
            stdout: `${JSON.stringify([{ id, kind: "batch-exhausted", outcome: "settled" }], null, 2)}\n`,
        });
        assert.deepEqual(counts(await cli(["status", "--key", "out", ...s.flags])), [2, 2, true]);
        assert.deepEqual(json(await cli(["fatal", "list", ...s.flags])), []);
    });

    it("replay applies a batch with the functions' thresholds and usage retention, from the stack's outputs in --config", async () => {
        // Prepare: a key with a stored limit of 2 and a day of usage from yesterday on its eventual item; a batch of one
        // create Lambda gave up on; the outputs the component exports, with settings other than the defaults.
        const s = await counterSystem(servers(), "settings");
        await s.client.setLimit("out", 2);
        const yesterday = daysBefore(dayOf(Date.now()), 1);
        await s.admin.send(
            new UpdateItemCommand({
                TableName: s.countersTableName,
                Key: eventualKey(s.config, "out"),
                UpdateExpression: "SET #day = :day",
                ExpressionAttributeNames: { "#day": DAY_ATTRIBUTE },
                ExpressionAttributeValues: { ":day": { M: usageAttributes({ day: yesterday, creates: 0, deletes: 0, peak: 0 }) } },
            }),
        );
        const batch = await givenUp(s, "out", ["o1"]);
        await send(s.fatal.url, batch);
        const outputs = jsonFile({
            clientConfig: clientConfigOf(s),
            fatalDlqUrl: s.fatal.url,
            firstDlqUrl: s.first.url,
            thresholds: [1, 0.5],
            usageRetentionDays: 400,
        });

        // Act
        const replayed = await cli([
            "fatal",
            "replay",
            "--config",
            outputs,
            ...without(s.flags, "--table", "--counters-table", "--mode", "--fatal-queue-url", "--first-dlq-url"),
        ]);

        // Assess: one of two is the band of 0.5 (the default 0.8 needs two); yesterday's item expires 401 days after it
        const eventual = (await s.admin.send(new GetItemCommand({ TableName: s.countersTableName, Key: eventualKey(s.config, "out") })))
            .Item;
        const day = (await s.admin.send(new GetItemCommand({ TableName: s.countersTableName, Key: usageKey(s.config, "out", yesterday) })))
            .Item;
        assert.equal(replayed.code, 0, replayed.stderr);
        assert.deepEqual(
            (JSON.parse(replayed.stdout) as Array<{ outcome: string }>).map((r) => r.outcome),
            ["settled"],
        );
        assert.equal(eventual?.[s.config.countAttribute]?.N, "1");
        assert.equal(readThresholdState(eventual)?.band, 1);
        assert.equal(day?.[EXPIRES_ATTRIBUTE]?.N, String(Date.parse(`${yesterday}T00:00:00Z`) / 1000 + 401 * 86_400));
    });

    it("replay --to first-dlq and redrive move batches back to the first DLQ, and leave what is not a batch", async () => {
        // Prepare: two batches given up on, each in the fatal queue in turn, and a message that is not a batch.
        const s = await counterSystem(servers(), "move");
        const first = await givenUp(s, "m1", ["a"]);
        await send(s.fatal.url, first);
        const replayed = await cli(["fatal", "replay", "--to", "first-dlq", ...s.flags]);
        const second = await givenUp(s, "m2", ["b"]);
        await send(s.fatal.url, second);
        await send(s.fatal.url, { reason: "malformed-redrive-message", problem: "[body] is not JSON" });

        const batchId = (json(await cli(["fatal", "list", ...s.flags])) as Listed[]).find(
            (e) => e.explanation.kind === "batch-exhausted",
        )!.id;

        // Act
        const redriven = await cli(["redrive", ...human(s.flags)]);
        const left = json(await cli(["fatal", "list", ...s.flags])) as Listed[];
        const inFirst = await servers().sqsClient.send(
            new ReceiveMessageCommand({ QueueUrl: s.first.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }),
        );

        // Assess: the first DLQ holds both batches as Lambda sent them, for the redrive function.
        assert.equal(replayed.code, 0, replayed.stderr);
        assert.deepEqual(
            (JSON.parse(replayed.stdout) as Array<{ kind: string; outcome: string }>).map((r) => [r.kind, r.outcome]),
            [["batch-exhausted", "moved-to-first-dlq"]],
        );
        assert.deepEqual(redriven, {
            code: 0,
            stderr: `redrive: 0/1\nredrive: 1/1 ${batchId}\n`,
            stdout: "moved 1 batches to the first DLQ; 1 other messages stay in the fatal DLQ\n",
        });
        assert.deepEqual(
            left.map((e) => e.explanation.kind),
            ["malformed-redrive-message"],
        );
        const byText = (a: unknown, b: unknown) => JSON.stringify(a).localeCompare(JSON.stringify(b));
        assert.deepEqual((inFirst.Messages ?? []).map((m) => JSON.parse(m.Body!) as unknown).sort(byText), [first, second].sort(byText));
        // A first DLQ that refuses: the batch stays in the fatal queue, and the command says why (exit 1).
        await send(s.fatal.url, second);
        const missing = `${servers().sqs.endpoint}/000000000000/no-first-dlq`;
        const refused = await cli(["redrive", ...s.flags, "--first-dlq-url", missing]);
        const refusedReplay = await cli(["fatal", "replay", "--to", "first-dlq", ...human(s.flags), "--first-dlq-url", missing]);
        assert.equal(refused.code, 1);
        const failed = JSON.parse(refused.stdout) as { moved: string[]; left: number; failed: Array<{ id: string; queueError: string }> };
        assert.deepEqual([failed.moved, failed.left, failed.failed.length], [[], 2, 1]);
        assert.match(failed.failed[0]!.queueError, /^QueueDoesNotExist: /);
        assert.equal(refusedReplay.code, 1);
        assert.match(refusedReplay.stdout, /batch-exhausted\s+kept\s+the first DLQ refused it: QueueDoesNotExist: /);
        // The replay settled the rest: the table has nothing a reconcile can change.
        assert.match(refusedReplay.stdout, /malformed-redrive-message\s+settled\s*\n/);
        assert.deepEqual(
            (json(await cli(["fatal", "list", ...s.flags])) as Listed[]).map((e) => e.explanation.kind),
            ["batch-exhausted"],
        );
    });

    it("records-expired and malformed messages: delete takes a settled one, replay reconciles every key, then deletes them", async () => {
        // Prepare: a malformed message on a settled table; then a key whose eventual count lost records, and the
        // records-expired message the consumer parks for them (it cannot name their keys).
        const s = await counterSystem(servers(), "expired");
        await s.client.create("e", "a");
        await s.client.create("e", "b");
        await s.drain();
        await send(s.fatal.url, {
            reason: "malformed-redrive-message",
            problem: "[body] is not JSON",
            parkedAt: "2026-01-01T00:00:00.000Z",
        });
        const [malformed] = json(await cli(["fatal", "list", ...s.flags])) as Listed[];
        const deleted = await cli(["fatal", "delete", malformed!.id, ...human(s.flags)]);
        await setEventual(s, "e", 5);
        await send(s.fatal.url, {
            reason: "records-expired",
            problem: "records of stream shard sh after 10 are gone from the stream",
            detail: { shardId: "sh", streamArn: s.streamArn, startSequenceNumber: "10", endSequenceNumber: "20" },
        });
        await send(s.fatal.url, { reason: "malformed-redrive-message", problem: "[DDBStreamBatchInfo] is missing" });
        const listed = json(await cli(["fatal", "list", ...s.flags])) as Listed[];

        // Act
        const refused = await cli(["fatal", "delete", listed[0]!.id, ...s.flags]);
        const replayed = await cli(["fatal", "replay", ...s.flags]);

        // Assess
        assert.deepEqual(deleted, { code: 0, stderr: "", stdout: `deleted ${malformed!.id} (malformed-redrive-message)\n` });
        assert.deepEqual(
            listed.map((e) => [e.explanation.kind, e.explanation.remedy, e.explanation.range]),
            [
                ["records-expired", "reconcile-all", { shardId: "sh", startSequenceNumber: "10", endSequenceNumber: "20" }],
                ["malformed-redrive-message", "reconcile-all", undefined],
            ],
        );
        assert.deepEqual(refused, {
            code: 1,
            stdout: "",
            stderr:
                `error: message ${listed[0]!.id} is not settled: the message names no key, and 1 key(s) have an eventual count off their ` +
                "items or items not flagged yet (e); run `fatal replay` or `reconcile` first\n",
        });
        assert.equal(replayed.code, 0, replayed.stderr);
        assert.deepEqual(JSON.parse(replayed.stdout), [
            { id: listed[0]!.id, kind: "records-expired", outcome: "settled" },
            { id: listed[1]!.id, kind: "malformed-redrive-message", outcome: "settled" },
        ]);
        assert.deepEqual(counts(await cli(["status", "--key", "e", ...s.flags])), [2, 2, true]);
        assert.deepEqual(json(await cli(["fatal", "list", ...s.flags])), []);
    });

    it("a poison record: its key named, kept while its item cannot be counted, settled once the item is gone", async () => {
        // Prepare: an item whose key no counter can hold (U+0000 separates a key from its shard number); the consumer
        // parks its record.
        const s = await counterSystem(servers(), "poison");
        const key = "bad\u0000key";
        await s.admin.send(
            new PutItemCommand({ TableName: s.tableName, Item: { pk: { S: key }, sk: { S: "p" }, counter_token: { S: newToken() } } }),
        );
        await s.drain();
        const listed = json(await cli(["fatal", "list", ...s.flags])) as Listed[];

        // Act
        const kept = await cli(["fatal", "replay", ...human(s.flags)]);
        await s.admin.send(new DeleteItemCommand({ TableName: s.tableName, Key: { pk: { S: key }, sk: { S: "p" } } }));
        const settled = await cli(["fatal", "replay", ...s.flags]);

        // Assess
        assert.deepEqual(
            listed.map((e) => [e.explanation.kind, e.explanation.remedy, e.explanation.counterKeys, e.explanation.problem]),
            [
                [
                    "poison-record",
                    "reconcile-keys",
                    [key],
                    "[dynamodb.Keys.pk] cannot be a counter key: must not contain U+0000 (it separates a key from its shard number)",
                ],
            ],
        );
        assert.equal(kept.code, 1);
        assert.match(kept.stdout, /poison-record\s+kept\s+key "bad\\u0000key" cannot be counted \(\[key\] must not contain U\+0000/);
        assert.deepEqual(JSON.parse(settled.stdout), [{ id: listed[0]!.id, kind: "poison-record", outcome: "settled" }]);
        assert.equal(settled.code, 0);
        const rest = await servers().sqsClient.send(new ReceiveMessageCommand({ QueueUrl: s.fatal.url, WaitTimeSeconds: 0 }));
        assert.deepEqual(rest.Messages ?? [], []);
    });
});
