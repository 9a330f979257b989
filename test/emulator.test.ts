import { PutItemCommand, UpdateItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { DescribeStreamCommand, type DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import {
    LAMBDA_DEFAULTS,
    LAMBDA_IDLE_POLL_INTERVAL_MS,
    MappingEmulator,
    validateSettings,
    type MappingSettings,
    type OnFailureRecord,
    type StreamInvokeEvent,
} from "../local/aws/mapping-emulator";
import { createCounterTable } from "../local/engine/table";

let tables = 0;

describe("the event source mapping emulator, on DynamoDB Local's real stream", () => {
    let engine: LocalEngine;
    let dynamodb: DynamoDBClient;
    before(async () => {
        engine = await startEngine();
        dynamodb = engine.dynamodb();
    });
    after(async () => {
        dynamodb.destroy();
        await engine.stop();
    });

    /** A table with `n` inserted items r0..r(n-1) under key k, and an emulator over its stream. */
    async function setup(
        n: number,
        settings: Partial<MappingSettings>,
        invoke: (e: StreamInvokeEvent) => Promise<unknown>,
        now?: () => number,
    ) {
        const tableName = `emulator-${++tables}`;
        const { streamArn } = await createCounterTable(dynamodb, tableName);
        for (let i = 0; i < n; i++) {
            await dynamodb.send(
                new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: `r${i}` }, n: { N: String(i) } } }),
            );
        }
        const failures: OnFailureRecord[] = [];
        const batches: string[][] = [];
        const emulator = new MappingEmulator({
            streams: engine.streams(),
            streamArn,
            settings: { ...LAMBDA_DEFAULTS, ...settings },
            invoke: async (event) => {
                batches.push(event.Records.map((r) => r.dynamodb!.Keys!.sk!.S!));
                return invoke(event);
            },
            onFailure: (r) => {
                failures.push(r);
            },
            now,
        });
        return { tableName, streamArn, emulator, failures, batches };
    }

    const fail = async (): Promise<never> => {
        throw new Error("function error");
    };

    it("retries a failing batch maximumRetryAttempts times, then sends metadata only to the on-failure destination", async () => {
        const { emulator, failures, batches, streamArn } = await setup(5, { batchSize: 10, maximumRetryAttempts: 2 }, fail);

        await emulator.drain();

        assert.equal(batches.length, 3, "one attempt and two retries");
        assert.equal(failures.length, 1);
        const f = failures[0]!;
        assert.deepEqual(Object.keys(f).sort(), ["DDBStreamBatchInfo", "requestContext", "responseContext", "timestamp", "version"]);
        assert.equal(f.requestContext.condition, "RetryAttemptsExhausted");
        assert.equal(f.requestContext.approximateInvokeCount, 3);
        assert.equal(f.responseContext.functionError, "Unhandled");
        assert.equal(f.DDBStreamBatchInfo.batchSize, 5);
        assert.equal(f.DDBStreamBatchInfo.streamArn, streamArn);
        assert.match(f.DDBStreamBatchInfo.shardId, /^shardId-/);
        assert.ok(BigInt(f.DDBStreamBatchInfo.startSequenceNumber) < BigInt(f.DDBStreamBatchInfo.endSequenceNumber));
        assert.equal(JSON.stringify(f).includes('"r0"'), false, "no record content travels");
    });

    it("bisects a failing batch until the bad record is alone, delivering the rest", async () => {
        const { emulator, failures, batches } = await setup(
            8,
            { batchSize: 8, maximumRetryAttempts: 3, bisectBatchOnFunctionError: true },
            async (event) => {
                if (event.Records.some((r) => r.dynamodb!.Keys!.sk!.S === "r5")) {
                    throw new Error("poison");
                }
            },
        );

        await emulator.drain();

        assert.deepEqual(batches.slice(0, 4), [
            ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"],
            ["r0", "r1", "r2", "r3"],
            ["r4", "r5", "r6", "r7"],
            ["r4", "r5"],
        ]);
        assert.equal(failures.length, 1);
        assert.equal(failures[0]!.DDBStreamBatchInfo.batchSize, 1);
        assert.equal(failures[0]!.DDBStreamBatchInfo.startSequenceNumber, failures[0]!.DDBStreamBatchInfo.endSequenceNumber);
        const delivered = new Set(batches.filter((b) => !b.includes("r5")).flat());
        assert.deepEqual([...delivered].sort(), ["r0", "r1", "r2", "r3", "r4", "r6", "r7"]);
        assert.equal(emulator.stats.bisections, 3);
    });

    it("checkpoints at the lowest reported sequence number and redelivers from there", async () => {
        let calls = 0;
        const { emulator, batches, failures } = await setup(
            6,
            { batchSize: 6, maximumRetryAttempts: 5, reportBatchItemFailures: true },
            async (event) => {
                calls++;
                if (calls === 1) {
                    return {
                        batchItemFailures: [
                            { itemIdentifier: event.Records[4]!.dynamodb!.SequenceNumber },
                            { itemIdentifier: event.Records[2]!.dynamodb!.SequenceNumber },
                        ],
                    };
                }
                return { batchItemFailures: [] };
            },
        );

        await emulator.drain();

        assert.deepEqual(batches, [
            ["r0", "r1", "r2", "r3", "r4", "r5"],
            ["r2", "r3", "r4", "r5"],
        ]);
        assert.deepEqual(failures, []);
        assert.equal(emulator.stats.partialFailures, 1);
    });

    it("treats an empty or unknown itemIdentifier as a failure of the whole batch", async () => {
        let calls = 0;
        const { emulator, batches } = await setup(3, { batchSize: 3, maximumRetryAttempts: 5, reportBatchItemFailures: true }, async () => {
            calls++;
            return calls === 1
                ? { batchItemFailures: [{ itemIdentifier: "" }] }
                : calls === 2
                  ? { batchItemFailures: [{ itemIdentifier: "123" }] }
                  : {};
        });

        await emulator.drain();

        assert.deepEqual(batches, [
            ["r0", "r1", "r2"],
            ["r0", "r1", "r2"],
            ["r0", "r1", "r2"],
        ]);
    });

    it("ignores the response when ReportBatchItemFailures is off", async () => {
        const { emulator, batches } = await setup(3, { batchSize: 3, reportBatchItemFailures: false }, async (event) => ({
            batchItemFailures: [{ itemIdentifier: event.Records[0]!.dynamodb!.SequenceNumber }],
        }));

        await emulator.drain();

        assert.deepEqual(batches, [["r0", "r1", "r2"]]);
    });

    it("discards records older than maximumRecordAgeInSeconds to the on-failure destination without invoking", async () => {
        let clock = Date.now();
        const { emulator, batches, failures } = await setup(
            4,
            { batchSize: 10, maximumRecordAgeInSeconds: 60 },
            async () => undefined,
            () => clock,
        );
        await emulator.poll();
        clock += 3_600_000;

        await emulator.drain();

        assert.deepEqual(batches, []);
        assert.equal(failures.length, 1);
        assert.equal(failures[0]!.requestContext.condition, "RecordAgeExceeded");
        assert.equal(failures[0]!.DDBStreamBatchInfo.batchSize, 4);
    });

    it("waits for the batching window unless the batch is full", async () => {
        let clock = Date.now();
        const { emulator, batches } = await setup(
            3,
            { batchSize: 10, maximumBatchingWindowInSeconds: 5 },
            async () => undefined,
            () => clock,
        );
        await emulator.poll();
        assert.equal(await emulator.deliver(), 0, "three records wait for the window");
        clock += 5_000;
        assert.equal(await emulator.deliver(), 1);
        assert.deepEqual(batches, [["r0", "r1", "r2"]]);
    });

    it("drops records that match no filter pattern, never invoking for them", async () => {
        const { emulator, batches, tableName } = await setup(
            4,
            {
                batchSize: 10,
                filterPatterns: [JSON.stringify({ eventName: ["MODIFY"], dynamodb: { NewImage: { flag: { BOOL: [true] } } } })],
            },
            async () => undefined,
        );
        await dynamodb.send(
            new UpdateItemCommand({
                TableName: tableName,
                Key: { pk: { S: "k" }, sk: { S: "r1" } },
                UpdateExpression: "SET flag = :t",
                ExpressionAttributeValues: { ":t": { BOOL: true } },
            }),
        );

        await emulator.drain();

        assert.deepEqual(batches, [["r1"]]);
        assert.equal(emulator.stats.recordsFiltered, 4);
    });

    it("with a parallelization factor keeps each item's records in order across concurrent batches", async () => {
        const seen: Array<[string, number]> = [];
        const { emulator, batches, tableName } = await setup(0, { batchSize: 3, parallelizationFactor: 4 }, async (event) => {
            for (const r of event.Records) {
                seen.push([r.dynamodb!.Keys!.sk!.S!, Number(r.dynamodb!.NewImage!.n!.N)]);
            }
        });
        for (let round = 0; round < 3; round++) {
            for (let i = 0; i < 8; i++) {
                await dynamodb.send(
                    new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: `r${i}` }, n: { N: String(round) } } }),
                );
            }
        }

        await emulator.drain();

        assert.equal(seen.length, 24);
        for (let i = 0; i < 8; i++) {
            assert.deepEqual(
                seen.filter(([sk]) => sk === `r${i}`).map(([, n]) => n),
                [0, 1, 2],
                `r${i} in order`,
            );
        }
        assert.ok(batches.length >= 4, "records were spread over lanes");
    });

    it("reads one page per poll, so writes that keep arriving never hold back delivery", async () => {
        const { emulator, batches, tableName } = await setup(3, { batchSize: 100 }, async () => undefined);
        // Every GetRecords answer is followed by a new write: a reader that reads until the shard answers
        // empty would never stop to invoke.
        let written = 3;
        const streams = (emulator as unknown as { options: { streams: DynamoDBStreamsClient } }).options.streams;
        streams.middlewareStack.add(
            (next, context) => async (args) => {
                const result = await next(args);
                if (context.commandName === "GetRecordsCommand" && written < 40) {
                    const i = written++;
                    await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: `r${i}` } } }));
                }
                return result;
            },
            { step: "initialize", name: "writeAfterEveryRead" },
        );

        const read = await emulator.poll();
        const invoked = await emulator.deliver();

        assert.equal(read, 3);
        assert.equal(emulator.stats.getRecordsCalls, 1);
        assert.equal(invoked, 1);
        assert.deepEqual(batches, [["r0", "r1", "r2"]]);
    });

    it("runs the function in the background while the next page is read, one batch at a time per lane", async () => {
        let release: () => void = () => undefined;
        let running = 0;
        let mostAtOnce = 0;
        const { emulator, batches, tableName } = await setup(2, { batchSize: 100 }, async () => {
            running++;
            mostAtOnce = Math.max(mostAtOnce, running);
            await new Promise<void>((r) => (release = r));
            running--;
        });
        await emulator.poll();
        emulator.start();
        await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: "r2" } } }));

        const readWhileInvoking = await emulator.poll();
        emulator.start();
        assert.equal(batches.length, 1, "the lane waits for its running invocation");
        release();
        for (let i = 0; i < 100 && batches.length < 2; i++) {
            await new Promise((r) => setTimeout(r, 10));
        }
        release();
        await emulator.settled();

        assert.equal(readWhileInvoking, 1);
        assert.deepEqual(batches, [["r0", "r1"], ["r2"]]);
        assert.equal(emulator.stats.invocations, 2);
        assert.equal(mostAtOnce, 1);
        assert.equal(emulator.backlog, 0);
    });

    it("after an empty answer waits Lambda's polling interval before reading the shard again; drain does not wait", async () => {
        const tableName = `emulator-${++tables}`;
        const { streamArn } = await createCounterTable(dynamodb, tableName);
        const batches: string[][] = [];
        const emulator = new MappingEmulator({
            streams: engine.streams(),
            streamArn,
            settings: LAMBDA_DEFAULTS,
            idlePollIntervalMs: 60_000,
            invoke: async (event) => {
                batches.push(event.Records.map((r) => r.dynamodb!.Keys!.sk!.S!));
            },
        });
        assert.equal(await emulator.poll(), 0);
        await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: "r0" } } }));

        const deferred = await emulator.poll();
        const callsWhileDeferred = emulator.stats.getRecordsCalls;
        await emulator.drain();

        assert.equal(deferred, 0);
        assert.equal(callsWhileDeferred, 1);
        assert.deepEqual(batches, [["r0"]]);
        assert.equal(LAMBDA_IDLE_POLL_INTERVAL_MS, 250);
    });

    it("does not read a shard whose lanes already hold a full batch", async () => {
        const { emulator, tableName } = await setup(3, { batchSize: 2 }, async () => undefined);
        await emulator.poll();
        await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: "r3" } } }));

        const read = await emulator.poll();

        assert.equal(read, 0);
        assert.equal(emulator.stats.getRecordsCalls, 1);
        assert.equal(emulator.backlog, 3);
    });

    it("reports every delivered record it read, and the engine's GetRecords figures", async () => {
        const reads: Array<[string, number]> = [];
        const tableName = `emulator-${++tables}`;
        const { streamArn } = await createCounterTable(dynamodb, tableName);
        await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: "r0" } } }));
        await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: "skip" } } }));
        const emulator = new MappingEmulator({
            streams: engine.streams(),
            streamArn,
            settings: { ...LAMBDA_DEFAULTS, filterPatterns: [JSON.stringify({ dynamodb: { Keys: { sk: { S: ["r0"] } } } })] },
            invoke: async () => undefined,
            onRead: (record, at) => reads.push([record.dynamodb!.Keys!.sk!.S!, at]),
        });
        const before = Date.now();

        await emulator.drain();

        assert.deepEqual(
            reads.map(([sk]) => sk),
            ["r0"],
        );
        assert.ok(reads[0]![1] >= before && reads[0]![1] <= Date.now());
        assert.equal(emulator.stats.shardsSeen, 1);
        assert.ok(emulator.stats.getRecordsCalls >= 2, "one page with the records, one empty answer");
        assert.ok(emulator.stats.getRecordsMaxMs <= emulator.stats.getRecordsMs);
    });

    it("under a tumbling window names the shard, the window and the state in every event", async () => {
        // Prepare
        const clock = Date.parse("2026-03-01T10:00:30.000Z");
        const events: StreamInvokeEvent[] = [];
        const { emulator, streamArn } = await setup(
            3,
            { batchSize: 10, tumblingWindowInSeconds: 60 },
            async (event) => (events.push(event), { state: {}, batchItemFailures: [] }),
            () => clock,
        );
        const streams = engine.streams();
        const shards = await streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
        streams.destroy();

        // Act
        await emulator.drain();

        // Assess
        assert.equal(events.length, 1);
        const { Records, ...rest } = events[0]!;
        assert.deepEqual(
            Records.map((r) => r.dynamodb!.Keys!.sk!.S),
            ["r0", "r1", "r2"],
        );
        assert.deepEqual(rest, {
            shardId: shards.StreamDescription!.Shards![0]!.ShardId,
            eventSourceARN: streamArn,
            window: { start: "2026-03-01T10:00:00.000Z", end: "2026-03-01T10:01:00.000Z" },
            state: {},
            isFinalInvokeForWindow: false,
            isWindowTerminatedEarly: false,
        });
    });

    it("under a tumbling window takes an answer without a state for a failed invocation", async () => {
        // Prepare
        const clock = Date.parse("2026-03-01T10:00:10.000Z");
        const { emulator, batches, failures } = await setup(
            2,
            { batchSize: 10, tumblingWindowInSeconds: 60, maximumRetryAttempts: 1 },
            async () => ({ batchItemFailures: [] }),
            () => clock,
        );

        // Act
        await emulator.drain();

        // Assess: the first attempt and its one retry, then the on-failure destination.
        assert.deepEqual(batches, [
            ["r0", "r1"],
            ["r0", "r1"],
        ]);
        assert.deepEqual(
            failures.map((f) => [f.requestContext.condition, f.responseContext.functionError, f.DDBStreamBatchInfo.batchSize]),
            [["RetryAttemptsExhausted", "Unhandled", 2]],
        );
        assert.equal(emulator.stats.functionErrors, 2);
    });

    it("closes a window that has ended with a final invocation of its own before delivering in the next", async () => {
        // Prepare
        let clock = Date.parse("2026-03-01T10:00:10.000Z");
        const events: StreamInvokeEvent[] = [];
        const { emulator, tableName } = await setup(
            1,
            { batchSize: 10, tumblingWindowInSeconds: 60 },
            async (event) => (events.push(event), { state: {} }),
            () => clock,
        );
        await emulator.drain();
        clock += 60_000;
        await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: "later" } } }));

        // Act
        await emulator.drain();

        // Assess
        assert.deepEqual(
            events.map((e) => [e.Records.map((r) => r.dynamodb!.Keys!.sk!.S).join(","), e.window!.start, e.isFinalInvokeForWindow]),
            [
                ["r0", "2026-03-01T10:00:00.000Z", false],
                ["", "2026-03-01T10:00:00.000Z", true],
                ["later", "2026-03-01T10:01:00.000Z", false],
            ],
        );
        assert.equal(emulator.stats.invocations, 3);
    });

    it("rejects settings Lambda would reject, naming each", () => {
        assert.deepEqual(
            validateSettings({
                ...LAMBDA_DEFAULTS,
                batchSize: 0,
                parallelizationFactor: 11,
                maximumRecordAgeInSeconds: 30,
                filterPatterns: ["[]"],
                tumblingWindowInSeconds: 901,
            }),
            [
                "[batchSize] must be an integer from 1 to 10000",
                "[parallelizationFactor] must be an integer from 1 to 10",
                "[maximumRecordAgeInSeconds] must be an integer from 60 to 604800 or -1",
                "[tumblingWindowInSeconds] must be an integer from 1 to 900",
                "[filterPatterns[0]] [pattern] must be a JSON object",
            ],
        );
        assert.deepEqual(validateSettings({ ...LAMBDA_DEFAULTS, tumblingWindowInSeconds: 900 }), []);
    });
});
