/**
 * Ids whose marker key cannot fit (issue 19, item 2): the marker's sort key is the id under
 * `${counterPrefix}item#`, and DynamoDB (and DynamoDB Local) refuses a sort key over 1,024 bytes.
 * Such an id is refused by the client before anything is written; a record of one that reaches the
 * stream some other way is parked alone, and the rest of its chunk is counted.
 */
import { PutItemCommand, TransactWriteItemsCommand, TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import { DescribeStreamCommand } from "@aws-sdk/client-dynamodb-streams";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { untimedContext } from "../local/aws/lambda-context";
import { backfill } from "../runtime/backfill/backfill";
import { reconcileKey } from "../runtime/heal/reconcile";
import type { FatalMessage } from "../runtime/stream/fatal";
import { markerSortKey, paddedSequence } from "../runtime/shared/config";
import { isRetryable } from "../runtime/shared/aws-errors";
import { resolveCancellation } from "../runtime/stream/counting";
import { transactionActions, type ItemIntent } from "../runtime/stream/markers";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { markerIdMaxBytes, markerKeyFits } from "../runtime/shared/key-limits";
import { SORT_KEY_MAX_BYTES } from "../runtime/stream/records";
import { useEngine } from "./support/engine";
import { counterFixture, FATAL_QUEUE_URL, type CounterFixture } from "./support/counter-fixture";
import { countTransactions, readStream } from "./support/stream-records";

/** The reproduction's long id: the 1,011-byte id of the issue, whose marker key is 1,011 + 15 bytes. */
const LONG_ID = "L".repeat(1_011);

describe("ids at the marker key's size limit", () => {
    const engine = useEngine();

    it("the limit is the sort key's 1,024 bytes less the marker prefix, in UTF-8 bytes", () => {
        const layout = { counterPrefix: "#counter#" };
        assert.equal(markerIdMaxBytes(layout), SORT_KEY_MAX_BYTES - Buffer.byteLength("#counter#item#"));
        assert.equal(markerKeyFits(layout, "x".repeat(markerIdMaxBytes(layout))), true);
        assert.equal(markerKeyFits(layout, "x".repeat(markerIdMaxBytes(layout) + 1)), false);
        // Three bytes per character: a character count would let this one through.
        const wide = "€".repeat(Math.floor(markerIdMaxBytes(layout) / 3) + 1);
        assert.ok(wide.length < markerIdMaxBytes(layout));
        assert.equal(markerKeyFits(layout, wide), false);
        const long = { counterPrefix: "p".repeat(64) };
        assert.equal(markerIdMaxBytes(long), SORT_KEY_MAX_BYTES - 64 - "item#".length);
        assert.equal(Buffer.byteLength(markerSortKey(long, "x".repeat(markerIdMaxBytes(long)))), SORT_KEY_MAX_BYTES);
    });

    it("DynamoDB Local refuses the marker of an id one byte past the limit, and accepts one at it", async () => {
        const fixture = await counterFixture(engine());
        const max = markerIdMaxBytes(fixture.layout);
        const put = (id: string) =>
            fixture.reader.send(
                new PutItemCommand({
                    TableName: fixture.countersTableName,
                    Item: { pk: { S: "k" }, sk: { S: markerSortKey(fixture.layout, id) } },
                }),
            );
        await put("y".repeat(max));
        await assert.rejects(put("y".repeat(max + 1)), (e: Error) => e.name === "ValidationException");
        fixture.close();
    });

    it("the client refuses an id whose marker cannot fit, naming [id], before anything is written", async () => {
        const fixture = await counterFixture(engine());
        const max = markerIdMaxBytes(fixture.layout);
        for (const call of [
            () => fixture.client.create("c", "z".repeat(max + 1)),
            () => fixture.client.tryCreate("c", "z".repeat(max + 1), 10),
            () => fixture.client.delete("c", "z".repeat(max + 1)),
        ]) {
            await assert.rejects(call(), (e: Error) => {
                assert.ok(e instanceof InvalidArgumentError, `${e.name}: ${e.message}`);
                assert.equal(e.field, "id");
                assert.match(e.message, new RegExp(`at most ${max} bytes`));
                return true;
            });
        }
        assert.deepEqual(await fixture.snapshot("c"), { bestEffort: 0, eventual: 0, live: 0, counted: 0, softDeleted: 0 });
        await fixture.client.create("c", "z".repeat(max));
        fixture.close();
    });

    it("the consumer parks the unmarkable record alone and counts the rest of its chunk (ids a, b and a 1,011-byte id)", async () => {
        const fixture = await counterFixture(engine());
        const transactions = countTransactions(fixture);
        // Written as the client writes them (with a token), around its checks: the client now refuses the long id.
        for (const [n, id] of ["a", LONG_ID, "b"].entries()) {
            await fixture.reader.send(
                new PutItemCommand({
                    TableName: fixture.tableName,
                    Item: {
                        pk: { S: "r" },
                        sk: { S: id },
                        [fixture.layout.tokenAttribute]: { S: `0190a6e4-0000-7000-8000-00000000000${n}` },
                    },
                }),
            );
        }
        const records = await readStream(engine().streams(), fixture.streamArn);
        assert.equal(records.length, 3);

        const response = await fixture.consumer({ Records: records }, untimedContext("consumer"));

        assert.deepEqual(response, { batchItemFailures: [] });
        const s = await fixture.snapshot("r");
        assert.equal(s.eventual, 2, "a and b are counted");
        assert.equal(s.counted, 2);
        assert.equal(transactions.calls, 1, "one transaction for a and b, no retries");
        const parked = fixture.queues
            .messages(FATAL_QUEUE_URL)
            .map((m) => JSON.parse(m.body) as { reason: string; problem: string; records: DynamoDBRecord[] });
        assert.equal(parked.length, 1);
        assert.equal(parked[0]!.reason, "poison-record");
        assert.match(parked[0]!.problem, /^\[dynamodb\.Keys\.sk\] /);
        assert.deepEqual(parked[0]!.records, [JSON.parse(JSON.stringify(records[1]))], "the record travels in full");
        fixture.close();
    });

    it("the redrive, reading the same range from the stream, parks the unmarkable record alone and counts a and b", async () => {
        const fixture = await counterFixture(engine());
        for (const [n, id] of ["a", LONG_ID, "b"].entries()) {
            await fixture.reader.send(
                new PutItemCommand({
                    TableName: fixture.tableName,
                    Item: {
                        pk: { S: "d" },
                        sk: { S: id },
                        [fixture.layout.tokenAttribute]: { S: `0190a6e4-0000-7000-8000-00000000001${n}` },
                    },
                }),
            );
        }
        const streams = engine().streams();
        const records = await readStream(streams, fixture.streamArn);
        const shards = (await streams.send(new DescribeStreamCommand({ StreamArn: fixture.streamArn }))).StreamDescription?.Shards ?? [];
        assert.equal(shards.length, 1);
        const body = JSON.stringify({
            requestContext: { condition: "RetryAttemptsExhausted" },
            DDBStreamBatchInfo: {
                shardId: shards[0]!.ShardId,
                startSequenceNumber: records[0]!.dynamodb!.SequenceNumber,
                endSequenceNumber: records[2]!.dynamodb!.SequenceNumber,
                batchSize: 3,
                streamArn: fixture.streamArn,
            },
        });

        const response = await fixture.redrive({ Records: [{ messageId: "m1", body } as never] }, untimedContext("redrive"));

        assert.deepEqual(response, { batchItemFailures: [] });
        const s = await fixture.snapshot("d");
        assert.deepEqual({ eventual: s.eventual, counted: s.counted }, { eventual: 2, counted: 2 });
        const parked = fixture.queues
            .messages(FATAL_QUEUE_URL)
            .map((m) => JSON.parse(m.body) as { reason: string; records: DynamoDBRecord[] });
        assert.deepEqual(
            parked.map((m) => [m.reason, m.records.map((r) => r.dynamodb?.Keys?.sk?.S?.length)]),
            [["poison-record", [1_011]]],
        );
        fixture.close();
    });

    it("a cancellation for ValidationError parks the refused item, keeps the rest, and is neither contention nor retryable", async () => {
        const fixture = await counterFixture(engine());
        // Intents as the planner would make them if the long id got past it: the engine's own answer is what is resolved.
        const intent = (id: string, n: number): ItemIntent => ({
            id,
            target: "counted",
            expected: "absent",
            seq: paddedSequence(String(n)),
            sequenceNumbers: [String(n)],
        });
        const chunk = [intent("a", 1), intent(LONG_ID, 2), intent("b", 3)];
        const { actions, index } = transactionActions(fixture.config, "v", chunk, Date.now());
        const error = await fixture.reader.send(new TransactWriteItemsCommand({ TransactItems: actions })).then(
            () => undefined,
            (e: unknown) => e,
        );
        assert.ok(error instanceof TransactionCanceledException, String(error));
        assert.equal(error.CancellationReasons?.[index[1]!.marker]?.Code, "ValidationError");
        assert.equal(isRetryable(error), false, "a refusal is not retried");

        const parked: string[] = [];
        const outcome = await resolveCancellation(chunk, index, error.CancellationReasons!, async (i, field, problem) => {
            parked.push(`${i.id.length} [${field}] ${problem}`);
            return true;
        });

        assert.deepEqual(
            outcome.remaining.map((i) => i.id),
            ["a", "b"],
        );
        assert.equal(outcome.contention, false);
        assert.equal(outcome.refused, false);
        assert.equal(parked.length, 1);
        assert.match(parked[0]!, /^1011 \[item\] was refused by DynamoDB \(ValidationError\)/);
        const retry = transactionActions(fixture.config, "v", outcome.remaining, Date.now());
        await fixture.reader.send(new TransactWriteItemsCommand({ TransactItems: retry.actions }));
        assert.equal((await fixture.snapshot("v")).eventual, 2);

        // A refusal of the counter's own action is nothing an item can be parked for: refused, not contention.
        const counterRefused = await resolveCancellation(
            chunk,
            index,
            actions.map((_, i) => ({ Code: i === 0 ? "ValidationError" : "None" })),
            async () => true,
        );
        assert.deepEqual({ refused: counterRefused.refused, contention: counterRefused.contention }, { refused: true, contention: false });
        fixture.close();
    });

    it("a ValidationException is not retryable", () => {
        const e = new Error("One or more parameter values were invalid");
        e.name = "ValidationException";
        assert.equal(isRetryable(e), false);
    });

    /** Items a, b and the 1,011-byte id under key "t", put by another writer (selected by their prefix-free client token). */
    async function unmarkableTable(): Promise<CounterFixture> {
        const fixture = await counterFixture(engine(), { placement: "separate" });
        for (const [n, id] of ["a", LONG_ID, "b"].entries()) {
            await fixture.reader.send(
                new PutItemCommand({
                    TableName: fixture.tableName,
                    Item: {
                        pk: { S: "t" },
                        sk: { S: id },
                        [fixture.layout.tokenAttribute]: { S: `0190a6e4-0000-7000-8000-00000000000${n}` },
                    },
                }),
            );
        }
        return fixture;
    }

    it("backfill skips and reports the unmarkable item and counts the rest of the page", async () => {
        const fixture = await unmarkableTable();

        const report = await backfill({ config: fixture.config, dynamodb: fixture.reader, mode: "utilization", segments: 1 });

        assert.equal(report.status, "complete");
        assert.equal(report.thisCall.counted, 2);
        assert.deepEqual(report.thisCall.unmarkable, [{ counterKey: "t", id: LONG_ID }]);
        const s = await fixture.snapshot("t");
        assert.deepEqual({ eventual: s.eventual, counted: s.counted }, { eventual: 2, counted: 2 });
        fixture.close();
    });

    it("reconcileKey completes for the other items and reports the unmarkable one", async () => {
        const fixture = await unmarkableTable();
        const parked: FatalMessage[] = [];
        const fatal = { park: async (m: FatalMessage) => (parked.push(m), true) };

        const result = await reconcileKey("t", { config: fixture.config, dynamodb: fixture.reader, fatal, timeoutMs: 5_000 });

        assert.deepEqual(result, { key: "t", found: 2, counted: 2, alreadySettled: 0, incomplete: false, unmarkable: [LONG_ID] });
        const s = await fixture.snapshot("t");
        assert.deepEqual({ eventual: s.eventual, counted: s.counted }, { eventual: 2, counted: 2 });
        fixture.close();
    });
});
