/**
 * The operator CLI, run as a user runs it: the built bin (dist/cli/index.js) as a subprocess, against
 * DynamoDB Local and the local SQS server, with exact JSON output and exit codes.
 */
import { PutItemCommand, ScanCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { TrimmedDataAccessException, type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-dynamodb-streams";
import { SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { InitializeMiddleware } from "@smithy/types";
import type { DynamoDBStreamEvent } from "aws-lambda";
import { strict as assert } from "node:assert";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { HybridCounterClient } from "../runtime/client/client";
import { DEFAULT_LAYOUT, type CounterTableLayout, type HandlerConfig } from "../runtime/shared/config";
import { createStreamHandler } from "../runtime/stream/consumer";
import { createRedriveHandler } from "../runtime/stream/redrive";
import { lambdaContext } from "../local/aws/lambda-context";
import { LAMBDA_DEFAULTS, MappingEmulator } from "../local/aws/mapping-emulator";
import { pollQueueOnce, startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { createCounterTable, createCountersTable } from "../local/engine/table";
import { healKey } from "../runtime/heal/heal";
import { markerShard } from "../runtime/shards/layout";
import { buildCli } from "../scripts/bundle-cli";
import { useEngine } from "./support/engine";
import { parsedJson, runBin, type Ran } from "./support/cli-bin";
import { landAgain, recordPuts } from "./support/put-attempts";

let bin = "";

/** Runs the built bin (test/support/cli-bin.ts) in the region every test of this file uses. */
const cli = (args: readonly string[], options: { stdin?: string; env?: Record<string, string> } = {}): Promise<Ran> =>
    runBin(bin, args, { ...options, env: { AWS_REGION: "us-east-1", ...options.env } });
const json = parsedJson;

const exactKey = (key: string, n: number, bestEffort = n) => ({
    key,
    bestEffort,
    eventual: n,
    live: n,
    pendingCreates: 0,
    pendingDeletes: 0,
    malformed: 0,
    heldSlots: 0,
    drift: 0,
    exact: true,
});

describe("operator CLI (built bin, DynamoDB Local, local SQS server)", function () {
    const engine = useEngine();
    let sqsServer: LocalSqs;
    let sqs: SQSClient;
    let tables = 0;

    before(async () => {
        // The bin as the package ships it (npm test builds it too; building here keeps this file runnable alone).
        bin = await buildCli();
        sqsServer = await startLocalSqs();
        sqs = sqsServer.client();
    });
    after(async () => {
        sqs.destroy();
        await sqsServer.stop();
    });

    /** A table, its queues (first DLQ -> fatal after 2 receives, 1 s visibility), and the base flags. */
    async function system(name: string, options: { healIndex?: boolean } = {}) {
        const tableName = `cli-${name}-${++tables}`;
        const admin = engine().dynamodb();
        const { streamArn } = await createCounterTable(admin, tableName, DEFAULT_LAYOUT, "NEW_AND_OLD_IMAGES", options);
        const fatal = await sqsServer.createQueue(`${tableName}-fatal`);
        const first = await sqsServer.createQueue(`${tableName}-first`, {
            VisibilityTimeout: "1",
            RedrivePolicy: JSON.stringify({ deadLetterTargetArn: fatal.arn, maxReceiveCount: 2 }),
        });
        const config: HandlerConfig = { ...DEFAULT_LAYOUT, tableName, fatalQueueUrl: fatal.url, metricsNamespace: "HybridCounterTest" };
        const flags = [
            "--endpoint",
            engine().endpoint,
            "--table",
            tableName,
            "--fatal-queue-url",
            fatal.url,
            "--first-dlq-url",
            first.url,
            "--json",
        ];
        const client = new HybridCounterClient({
            ...DEFAULT_LAYOUT,
            tableName,
            countersTableName: tableName,
            dynamodb: engine().dynamodb(),
        });
        const outage = new Set<string>();
        const consumer = createStreamHandler({ config, dynamodb: engine().dynamodb(), sqs, sink: () => undefined });
        // The stream mapping, without filters (so a malformed flag reaches the consumer) and without retries.
        const emulator = new MappingEmulator({
            streams: engine().streams(),
            streamArn,
            settings: { ...LAMBDA_DEFAULTS, maximumRetryAttempts: 0, reportBatchItemFailures: true },
            invoke: async (event: DynamoDBStreamEvent) => {
                if (event.Records.some((r) => outage.has(r.dynamodb?.Keys?.pk?.S ?? ""))) {
                    throw new Error("consumer outage");
                }
                return consumer(event, lambdaContext("consumer", 10_000));
            },
            onFailure: async (record) => {
                await sqs.send(new SendMessageCommand({ QueueUrl: first.url, MessageBody: JSON.stringify(record) }));
            },
        });
        return { tableName, admin, streamArn, fatal, first, config, flags, client, outage, emulator };
    }

    /** The redrive function on the first DLQ, with its stream reads failing as trimmed records do. */
    function trimmedRedrive(config: HandlerConfig) {
        const streams = engine().streams();
        const trimmed: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = () => async () => {
            throw new TrimmedDataAccessException({ message: "records trimmed (24 h retention)", $metadata: {} });
        };
        streams.middlewareStack.add(trimmed, { step: "initialize", name: "trimmed", priority: "high" });
        return createRedriveHandler({ config, dynamodb: engine().dynamodb(), streams, sqs, sink: () => undefined });
    }

    describe("bad input: one line, exit 2 (usage) or 1 (failure), no stack unless --verbose", () => {
        it("an unknown command", async () => {
            const ran = await cli(["nope"]);
            assert.deepEqual(ran, { code: 2, stdout: "", stderr: "error: unknown command 'nope'\n" });
        });

        it("reconcile without --key or --all", async () => {
            const ran = await cli(["reconcile", "--table", "t"]);
            assert.deepEqual(ran, { code: 2, stdout: "", stderr: "error: --key <key> or --all is required\n" });
        });

        it("status --key without its value", async () => {
            const ran = await cli(["status", "--table", "t", "--key"]);
            assert.deepEqual(ran, { code: 2, stdout: "", stderr: "error: option '--key <key>' argument missing\n" });
        });

        it("no table at all", async () => {
            const ran = await cli(["status"]);
            assert.deepEqual(ran, {
                code: 2,
                stdout: "",
                stderr: "error: --table or --config is required: which table holds the counter?\n",
            });
        });

        it("a malformed config file, and one from stdin", async () => {
            const file = path.join(mkdtempSync(path.join(tmpdir(), "hybrid-counter-config-")), "config.json");
            writeFileSync(file, '{"tableName": "t",');
            const fromFile = await cli(["status", "--config", file]);
            const fromStdin = await cli(["status", "--config", "-"], { stdin: '{"tableName": 42}' });
            const badLayout = await cli(["status", "--config", "-"], { stdin: '{"tableName": "t", "sortKey": "pk"}' });
            assert.equal(fromFile.code, 2);
            assert.match(
                fromFile.stderr,
                new RegExp(`^error: --config: ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} is not JSON \\(.+\\)\\n$`),
            );
            assert.deepEqual(fromStdin, { code: 2, stdout: "", stderr: "error: --config: [tableName] must be a string\n" });
            assert.deepEqual(badLayout, {
                code: 2,
                stdout: "",
                stderr: 'error: --sort-key: must differ from [partitionKey] (both are "pk")\n',
            });
        });

        it("the removed processedAttribute, in a config and as a flag", async () => {
            const inConfig = await cli(["status", "--config", "-"], {
                stdin: '{"tableName": "t", "processedAttribute": "counter_processed"}',
            });
            const asFlag = await cli(["status", "--table", "t", "--processed-attribute", "counter_processed"]);
            assert.deepEqual(inConfig, {
                code: 2,
                stdout: "",
                stderr: "error: --config: [processedAttribute] was removed: nothing reads or writes it (the stream consumer keeps its idempotency in markers); drop it\n",
            });
            assert.deepEqual(asFlag, { code: 2, stdout: "", stderr: "error: unknown option '--processed-attribute'\n" });
        });

        it("an unreachable endpoint: one line, and the stack with --verbose", async () => {
            const args = ["status", "--table", "t", "--key", "k", "--endpoint", "http://127.0.0.1:1"];
            const ran = await cli(args);
            const verbose = await cli([...args, "--verbose"]);
            assert.deepEqual(ran, {
                code: 1,
                stdout: "",
                stderr: "error: could not reach http://127.0.0.1:1 (ECONNREFUSED): check --endpoint, --sqs-endpoint and --region\n",
            });
            assert.equal(verbose.code, 1);
            assert.ok(verbose.stderr.startsWith(ran.stderr), verbose.stderr);
            assert.match(verbose.stderr, /\n\s+at /);
        });

        it("a failing command that builds the AWS clients prints one line, and no SDK Node.js version warning", async () => {
            const ran = await cli(["status", "--table", "t", "--key", "k", "--endpoint", "http://127.0.0.1:1"]);

            assert.equal(ran.code, 1);
            assert.deepEqual(ran.stderr.split("\n"), [
                "error: could not reach http://127.0.0.1:1 (ECONNREFUSED): check --endpoint, --sqs-endpoint and --region",
                "",
            ]);
            assert.doesNotMatch(ran.stderr, /NodeVersionSupportWarning/, `on Node.js ${process.version}`);
        });

        it("prints no runtime warning on the Node.js it supports, with the SDK's warnings switched on", async () => {
            const args = ["status", "--table", "t", "--key", "k", "--endpoint", "http://127.0.0.1:1"];
            const ran = await cli(args, { env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "false" } });

            assert.equal(ran.code, 1);
            assert.equal(
                ran.stderr,
                `error: could not reach http://127.0.0.1:1 (ECONNREFUSED): check --endpoint, --sqs-endpoint and --region\n`,
                `on Node.js ${process.version}`,
            );
        });

        it("a table that does not exist", async () => {
            const ran = await cli(["status", "--table", "no-such-table", "--key", "k", "--endpoint", engine().endpoint]);
            assert.equal(ran.code, 1);
            assert.match(ran.stderr, /^error: table not found: check --table \/ --config and --region \(.+\)\n$/);
        });

        it("a queue URL that does not exist", async () => {
            const ran = await cli(["fatal", "list", "--table", "t", "--fatal-queue-url", `${sqsServer.endpoint}/000000000000/missing`]);
            assert.deepEqual(ran, {
                code: 1,
                stdout: "",
                stderr: "error: the queue does not exist: check --fatal-queue-url / --first-dlq-url (The specified queue does not exist.)\n",
            });
        });

        it("fatal commands without the queue, and a bad --to", async () => {
            const noQueue = await cli(["fatal", "list", "--table", "t"]);
            const badTo = await cli(["fatal", "replay", "--table", "t", "--fatal-queue-url", "http://127.0.0.1:1/q", "--to", "elsewhere"]);
            assert.deepEqual(noQueue, {
                code: 2,
                stdout: "",
                stderr: "error: --fatal-queue-url is required (or fatalDlqUrl in --config)\n",
            });
            assert.deepEqual(badTo, { code: 2, stdout: "", stderr: 'error: --to must be first-dlq (got "elsewhere")\n' });
        });

        it("--help on every command", async () => {
            for (const command of [
                [],
                ["status"],
                ["reconcile"],
                ["fatal"],
                ["fatal", "list"],
                ["fatal", "show"],
                ["fatal", "replay"],
                ["fatal", "delete"],
                ["redrive"],
            ]) {
                const ran = await cli([...command, "--help"]);
                assert.equal(ran.code, 0, command.join(" "));
                assert.ok(ran.stdout.startsWith(`Usage: hybrid-counter${command.map((c) => ` ${c}`).join("")}`), ran.stdout);
            }
        });
    });

    it("a scripted incident: a batch exhausted to the first DLQ, records expired past retention", async () => {
        // Prepare: one healthy key, then each failure in turn. (A poison record, a stream record the consumer
        // cannot classify, cannot be written through a table: the consumer's tests park them; see runtime-adoption.)
        const s = await system("incident");
        for (const id of ["a", "b", "c"]) {
            await s.client.create("steady", id);
        }
        await s.client.delete("steady", "a");
        await s.emulator.drain();
        // A consumer outage on one key: its batch exhausts its retries and goes to the first DLQ ...
        s.outage.add("exhausted");
        await s.client.create("exhausted", "e1");
        await s.client.create("exhausted", "e2");
        await s.emulator.drain();
        // ... where the redrive function fails it maxReceiveCount (2) times, so SQS moves it to the fatal DLQ.
        const failing = async (event: { Records: Array<{ messageId: string }> }) => ({
            batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })),
        });
        const firstTry = await pollQueueOnce(sqs, s.first, 1, failing, 2);
        const secondTry = await pollQueueOnce(sqs, s.first, 1, failing, 2);
        const thirdTry = await pollQueueOnce(sqs, s.first, 1, failing, 2);
        // Another batch reaches the first DLQ after the stream has trimmed its records.
        s.outage.add("expired");
        await s.client.create("expired", "x1");
        await s.client.create("expired", "x2");
        await s.emulator.drain();
        const expiredPass = await pollQueueOnce(sqs, s.first, 1, trimmedRedrive(s.config), 2);
        assert.deepEqual(
            [firstTry, secondTry, thirdTry, expiredPass],
            [
                { received: 1, deleted: 0 },
                { received: 1, deleted: 0 },
                { received: 0, deleted: 0 },
                { received: 1, deleted: 1 },
            ],
        );

        // Act + Assess: status shows each.
        const before = json(await cli(["status", ...s.flags])) as { worst: unknown[] };
        assert.deepEqual(before, {
            keys: 3,
            exactKeys: 1,
            totals: { bestEffort: 6, eventual: 2, live: 6, pendingCreates: 4, pendingDeletes: 0, malformed: 0, heldSlots: 0, drift: -4 },
            worst: [
                { ...exactKey("exhausted", 0, 2), live: 2, pendingCreates: 2, drift: -2, exact: false },
                { ...exactKey("expired", 0, 2), live: 2, pendingCreates: 2, drift: -2, exact: false },
            ],
        });
        const exhaustedKey = json(await cli(["status", "--key", "exhausted", ...s.flags]));
        assert.deepEqual(exhaustedKey, { ...exactKey("exhausted", 0, 2), live: 2, pendingCreates: 2, drift: -2, exact: false });

        // fatal list explains each.
        const listed = json(await cli(["fatal", "list", ...s.flags])) as Array<{
            id: string;
            receiveCount: number;
            explanation: { kind: string; remedy: string; counterKeys: string[]; problem?: string; range?: unknown };
        }>;
        assert.deepEqual(
            listed.map((e) => [e.explanation.kind, e.explanation.remedy, e.explanation.counterKeys]),
            [
                ["batch-exhausted", "redrive-batch", []],
                ["records-expired", "reconcile-all", []],
            ],
        );
        assert.equal(listed[0]!.explanation.problem, "RetryAttemptsExhausted");
        assert.match(listed[1]!.explanation.problem!, /could not be read from the stream \(TrimmedDataAccessException\)/);
        const human = await cli(["fatal", "list", ...s.flags.filter((f) => f !== "--json")]);
        assert.equal(human.code, 0);
        assert.match(
            human.stdout,
            /do: Within 24 h of the write: `redrive` moves it back to the first DLQ, or `fatal replay` counts it now\./,
        );

        // Replay settles both, and every key is exact with the fatal queue empty.
        const replayed = await cli(["fatal", "replay", ...s.flags]);
        assert.equal(replayed.code, 0, `${replayed.stdout} ${replayed.stderr}`);
        assert.deepEqual(
            (JSON.parse(replayed.stdout) as Array<{ kind: string; outcome: string }>).map((r) => [r.kind, r.outcome]),
            [
                ["batch-exhausted", "settled"],
                ["records-expired", "settled"],
            ],
        );
        const after = json(await cli(["status", ...s.flags]));
        assert.deepEqual(after, {
            keys: 3,
            exactKeys: 3,
            totals: { bestEffort: 6, eventual: 6, live: 6, pendingCreates: 0, pendingDeletes: 0, malformed: 0, heldSlots: 0, drift: 0 },
            worst: [],
        });
        assert.deepEqual(json(await cli(["fatal", "list", ...s.flags])), []);
    });

    it("redrive and replay --to first-dlq move exhausted batches back; reconcile settles keys; delete takes settled messages", async () => {
        // Prepare: two exhausted batches in the fatal DLQ, and a key whose creations the stream never delivered.
        const s = await system("redrive");
        const failing = async (event: { Records: Array<{ messageId: string }> }) => ({
            batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })),
        });
        for (const key of ["r1", "r2"]) {
            s.outage.add(key);
            await s.client.create(key, "i1");
            await s.emulator.drain();
            await pollQueueOnce(sqs, s.first, 1, failing, 2);
            await pollQueueOnce(sqs, s.first, 1, failing, 2);
            await pollQueueOnce(sqs, s.first, 1, failing, 2);
        }
        // Items written around the client, whose records the mapping has not delivered yet when reconcile runs.
        for (const id of ["u1", "u2"]) {
            await s.admin.send(
                new PutItemCommand({
                    TableName: s.tableName,
                    Item: { pk: { S: "lost" }, sk: { S: id }, counter_token: { S: `lost-${id}` } },
                }),
            );
        }
        const listed = json(await cli(["fatal", "list", ...s.flags])) as Array<{ id: string }>;
        assert.equal(listed.length, 2);

        // Act: one batch by `fatal replay --to first-dlq`, the other by `redrive`.
        const toFirst = await cli(["fatal", "replay", "--to", "first-dlq", ...s.flags]);
        const redriven = await cli(["redrive", ...s.flags]);
        const reconciled = await cli(["reconcile", "--key", "lost", ...s.flags]);
        // The redrive function (the real handler) drains the first DLQ.
        const redrive = createRedriveHandler({
            config: s.config,
            dynamodb: engine().dynamodb(),
            streams: engine().streams(),
            sqs,
            sink: () => undefined,
        });
        const drained = [];
        for (let i = 0; i < 3; i++) {
            drained.push(await pollQueueOnce(sqs, s.first, 10, redrive, 1));
        }

        // Assess
        assert.equal(toFirst.code, 0, toFirst.stderr);
        assert.deepEqual(
            (JSON.parse(toFirst.stdout) as Array<{ outcome: string }>).map((r) => r.outcome),
            ["moved-to-first-dlq", "moved-to-first-dlq"],
        );
        assert.deepEqual(JSON.parse(redriven.stdout), { moved: [], left: 0 });
        assert.deepEqual(JSON.parse(reconciled.stdout), {
            results: [{ key: "lost", found: 2, counted: 2, alreadySettled: 0, incomplete: false }],
            notStarted: [],
            incomplete: false,
            unparked: [],
        });
        assert.equal(reconciled.stderr, "reconcile: 0/1\nreconcile: 1/1 lost\n");
        assert.deepEqual(drained, [
            { received: 2, deleted: 2 },
            { received: 0, deleted: 0 },
            { received: 0, deleted: 0 },
        ]);
        for (const key of ["r1", "r2"]) {
            assert.deepEqual(json(await cli(["status", "--key", key, ...s.flags])), exactKey(key, 1));
        }
        assert.deepEqual(json(await cli(["status", "--key", "lost", ...s.flags])), exactKey("lost", 2, 0));
    });

    it("redrive moves only exhausted batches, and delete removes a settled message", async () => {
        // Prepare: one exhausted batch and one malformed-redrive message in the fatal DLQ.
        const s = await system("move");
        s.outage.add("m");
        await s.client.create("m", "i1");
        await s.emulator.drain();
        const failing = async (event: { Records: Array<{ messageId: string }> }) => ({
            batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })),
        });
        for (let i = 0; i < 3; i++) {
            await pollQueueOnce(sqs, s.first, 1, failing, 2);
        }
        await sqs.send(
            new SendMessageCommand({
                QueueUrl: s.fatal.url,
                MessageBody: JSON.stringify({ reason: "malformed-redrive-message", problem: "[body] is not JSON" }),
            }),
        );
        // Act
        const moved = JSON.parse((await cli(["redrive", ...s.flags])).stdout) as { moved: string[]; left: number };
        const redrive = createRedriveHandler({
            config: s.config,
            dynamodb: engine().dynamodb(),
            streams: engine().streams(),
            sqs,
            sink: () => undefined,
        });
        const drained = await pollQueueOnce(sqs, s.first, 10, redrive, 2);
        const left = json(await cli(["fatal", "list", ...s.flags])) as Array<{ id: string; explanation: { kind: string } }>;
        const deleted = await cli(["fatal", "delete", left[0]!.id, ...s.flags]);
        // Assess
        assert.equal(moved.moved.length, 1);
        assert.equal(moved.left, 1);
        assert.deepEqual(drained, { received: 1, deleted: 1 });
        assert.deepEqual(
            left.map((e) => e.explanation.kind),
            ["malformed-redrive-message"],
        );
        assert.deepEqual(JSON.parse(deleted.stdout), { deleted: left[0]!.id, kind: "malformed-redrive-message" });
        assert.deepEqual(json(await cli(["fatal", "list", ...s.flags])), []);
        assert.deepEqual(json(await cli(["status", "--key", "m", ...s.flags])), exactKey("m", 1));
    });

    it("heal --key settles the key first: a late put of a removed life is removed, not counted into best-effort", async () => {
        // Prepare: x created and counted, then deleted and removed; its first put attempt lands again, and the consumer has
        // not read that record yet. The key's last client write is then older than a 1 s quiet window.
        const s = await system("heal-settle");
        const dynamodb = engine().dynamodb();
        const puts = recordPuts(dynamodb);
        const client = new HybridCounterClient({ ...DEFAULT_LAYOUT, tableName: s.tableName, countersTableName: s.tableName, dynamodb });
        await client.create("k", "x");
        await s.emulator.drain();
        await client.delete("k", "x");
        await s.emulator.drain();
        await landAgain(s.admin, puts[0]!);
        await new Promise((resolve) => setTimeout(resolve, 1_100));

        // Act
        const ran = await cli(["heal", "--key", "k", "--mode", "utilization", "--quiet-window-seconds", "1", ...s.flags]);
        await s.emulator.drain();
        const status = await cli(["status", "--key", "k", ...s.flags]);

        // Assess: reconcile removed the late item before the heal read the key, so the heal set best-effort to 0 (without
        // the settle it counted x: best-effort 1 over no live item, in utilization mode).
        assert.equal(ran.code, 0, ran.stderr);
        const healed = json(ran) as { outcome: string; before: number; after: number; settled: Record<string, unknown> };
        assert.deepEqual(
            [healed.outcome, healed.before, healed.after, healed.settled],
            ["healed", 0, 0, { found: 1, counted: 1, alreadySettled: 0, incomplete: false }],
        );
        assert.deepEqual(json(status), exactKey("k", 0));
        dynamodb.destroy();
    });

    it("heal without a fatal queue, or with one that refuses, lists what its settle could not count, and fails (nothing dropped unsaid)", async () => {
        // Prepare: k's item created and counted, then its marker's state broken (what no write of the counting makes),
        // so the settle before the heal parks the marker; the run has no --fatal-queue-url. k's last client write is
        // older than the 1 s quiet window.
        const s = await system("heal-unparked", { healIndex: true });
        await s.client.create("k", "x");
        await s.emulator.drain();
        const scanned = await s.admin.send(new ScanCommand({ TableName: s.tableName, FilterExpression: "attribute_exists(hc_state)" }));
        assert.equal(scanned.Items?.length, 1);
        const marker = scanned.Items![0]!;
        await s.admin.send(
            new UpdateItemCommand({
                TableName: s.tableName,
                Key: { pk: marker.pk!, sk: marker.sk! },
                UpdateExpression: "SET hc_state = :maybe",
                ExpressionAttributeValues: { ":maybe": { S: "maybe" } },
            }),
        );
        await new Promise((resolve) => setTimeout(resolve, 1_100));
        const withoutQueue = s.flags.filter((flag, i) => flag !== "--fatal-queue-url" && s.flags[i - 1] !== "--fatal-queue-url");
        const missingQueue = [...withoutQueue, "--fatal-queue-url", `${sqsServer.endpoint}/000000000000/missing`];
        const heal = ["heal", "--mode", "utilization", "--quiet-window-seconds", "1"];

        // Act: one settler run and the key alone, as JSON and as text, without a fatal queue and with one that refuses.
        const run = await cli([...heal, ...withoutQueue]);
        const key = await cli([...heal, "--key", "k", ...withoutQueue]);
        const text = await cli([...heal, ...withoutQueue.filter((f) => f !== "--json")]);
        const refused = await cli([...heal, ...missingQueue]);
        const refusedText = await cli([...heal, "--key", "k", ...missingQueue.filter((f) => f !== "--json")]);

        // Assess: each exits 1 and lists the marker it could not count, with its key and id (before, the settler run
        // exited 0 and dropped it, and a refused message was dropped by every form).
        const problem = '[hc_state] must be "counted" or "uncounted" on the marker';
        for (const [ran, queueError] of [
            [run, undefined],
            [key, undefined],
            [refused, "QueueDoesNotExist"],
        ] as const) {
            assert.equal(ran.code, 1, ran.stderr);
            const unparked = (JSON.parse(ran.stdout) as { unparked: Array<Record<string, string | undefined>> }).unparked;
            assert.deepEqual(
                unparked.map((m) => [m.reason, m.problem, m.counterKey, m.id, m.queueError?.split(":")[0]]),
                [["poison-item", problem, "k", "x", queueError]],
            );
        }
        const tail = `): poison-item (key "k", id "x"): ${problem}`;
        const lines = [text, refusedText].map((ran) => {
            assert.equal(ran.code, 1, ran.stderr);
            return ran.stdout.split("\n").find((l) => l.startsWith("could not count")) ?? "";
        });
        assert.equal(lines[0], `could not count (no --fatal-queue-url to park it${tail}`);
        assert.ok(
            lines[1]!.startsWith("could not count (the fatal queue refused it: QueueDoesNotExist: ") && lines[1]!.endsWith(tail),
            lines[1],
        );
    });

    it("status --key on a sharded key shows each shard's client items (what a heal sets) apart from other writers' items", async () => {
        // Prepare: a strict key over 3 shards whose selection counts every item under "r#": three client items, and
        // one item another writer put (no client token, no backfill flag), which the eventual counter counts and no
        // heal does.
        const tableName = `cli-sharded-${++tables}`;
        const countersTableName = `${tableName}-counters`;
        const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, selection: { kind: "sortKeyPrefix", prefix: "r#" } };
        const admin = engine().dynamodb();
        await createCounterTable(admin, tableName, layout);
        await createCountersTable(admin, countersTableName, layout);
        const client = new HybridCounterClient({
            ...layout,
            tableName,
            countersTableName,
            counterShards: 3,
            mode: "strict",
            dynamodb: admin,
        });
        for (const id of ["r#a", "r#b", "r#c"]) {
            assert.equal((await client.tryCreate("k", id, 10)).created, true);
        }
        await admin.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: "k" }, sk: { S: "r#other" } } }));
        const flags = [
            ...["--endpoint", engine().endpoint, "--table", tableName, "--counters-table", countersTableName, "--counter-shards", "3"],
            ...["--counted-items", "sortKeyPrefix", "--counted-sort-key-prefix", "r#"],
        ];
        type Shards = { shards: Array<{ shard: number; bestEffort: number; homed: number; others: number }> };

        // Act: status, a heal of the key (its clock past the quiet window), status again, and the human table.
        const before = json(await cli(["status", "--key", "k", "--json", ...flags])) as Shards;
        const config = { ...layout, tableName, countersTableName, counterShards: 3 };
        const healed = await healKey("k", {
            config,
            dynamodb: admin,
            mode: "strict",
            quietWindowMs: 60_000,
            now: () => Date.now() + 120_000,
        });
        const after = json(await cli(["status", "--key", "k", "--json", ...flags])) as Shards;
        const human = await cli(["status", "--key", "k", ...flags]);

        // Assess: "homed" is exactly what the heal set each shard to, the other writer's item is listed apart, in its
        // id's shard, and the heal changed no shard (the strict key was exact over the client's items).
        assert.equal(healed.outcome, "healed");
        const set = healed.shards!.map((s) => s.after ?? -1);
        assert.deepEqual(
            after.shards.map((s) => s.homed),
            set,
        );
        assert.deepEqual(
            after.shards.map((s) => s.bestEffort),
            set,
        );
        assert.deepEqual(
            before.shards.map((s) => [s.bestEffort, s.homed]),
            after.shards.map((s) => [s.bestEffort, s.homed]),
        );
        assert.deepEqual(
            after.shards.map((s) => s.others),
            [0, 1, 2].map((shard) => (shard === markerShard("r#other", 3) ? 1 : 0)),
        );
        assert.equal(
            set.reduce((a, b) => a + b, 0),
            3,
        );
        assert.equal(human.code, 0, human.stderr);
        assert.match(human.stdout, /client items homed here/);
        assert.match(human.stdout, /other writers' items/);
    });
});
