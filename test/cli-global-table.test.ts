/**
 * The CLI given a counter without `regions` on a global table (cli/regions.ts, `refuseUnregionedGlobalTable`): every
 * command that reads or writes counts refuses before it reads, writes or sends anything, naming where the table came
 * from: run as one region, it would write counter items `count()` of a multi-region counter never reads.
 * Run as a user runs it: the built bin as a subprocess against DynamoDB Local, behind a proxy that adds `Replicas` to
 * DescribeTable's answer for one table (DynamoDB Local has no global tables; every other request and answer passes
 * through unchanged). A table without replicas runs as before.
 */
import { DescribeTableCommand, DynamoDBServiceException, PutItemCommand, ScanCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { globalTableProblem, refuseUnregionedGlobalTable } from "../cli/regions";
import { UsageError } from "../cli/errors";
import { createCounterTable, createCountersTable } from "../local/engine/table";
import { useServers } from "./support/cli-fixture";

const GLOBAL = "orders-global";
const PLAIN = "orders-plain";
const REPLICAS = ["us-east-1", "eu-west-1"];

/** An HTTP proxy to `target` that adds REPLICAS to DescribeTable's answer for GLOBAL. */
function replicasProxy(target: string): Promise<{ endpoint: string; server: Server }> {
    const upstream = new URL(target);
    const server = createServer((incoming, outgoing) => {
        const chunks: Buffer[] = [];
        incoming.on("data", (c: Buffer) => chunks.push(c));
        incoming.on("end", () => {
            const body = Buffer.concat(chunks);
            const describe = incoming.headers["x-amz-target"] === "DynamoDB_20120810.DescribeTable";
            const forward = request(
                { host: upstream.hostname, port: upstream.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
                (answer) => {
                    const parts: Buffer[] = [];
                    answer.on("data", (c: Buffer) => parts.push(c));
                    answer.on("end", () => {
                        let text = Buffer.concat(parts).toString();
                        if (describe && answer.statusCode === 200) {
                            const parsed = JSON.parse(text) as { Table: { TableName: string; Replicas?: unknown } };
                            if (parsed.Table.TableName === GLOBAL) {
                                parsed.Table.Replicas = REPLICAS.map((r) => ({ RegionName: r, ReplicaStatus: "ACTIVE" }));
                                text = JSON.stringify(parsed);
                            }
                        }
                        // The body may change: its length is set again, and its checksum left out.
                        const { "x-amz-crc32": _crc, ...kept } = answer.headers as Record<string, string | string[] | undefined>;
                        const headers = { ...kept, "content-length": String(Buffer.byteLength(text)) };
                        outgoing.writeHead(answer.statusCode ?? 500, headers);
                        outgoing.end(text);
                    });
                },
            );
            forward.on("error", () => outgoing.destroy());
            forward.end(body);
        });
    });
    return new Promise((resolve) =>
        server.listen(0, "127.0.0.1", () => resolve({ endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server })),
    );
}

async function itemCount(dynamodb: DynamoDBClient, table: string, filter?: string): Promise<number> {
    return (
        (
            await dynamodb.send(
                new ScanCommand({
                    TableName: table,
                    Select: "COUNT",
                    ConsistentRead: true,
                    ...(filter ? { FilterExpression: filter } : {}),
                }),
            )
        ).Count ?? 0
    );
}

describe("cli: a counter without regions on a global table", function () {
    const servers = useServers();
    const engine = () => servers().engine;
    let proxy: { endpoint: string; server: Server };

    before(async () => {
        const dynamodb = engine().dynamodb();
        for (const table of [GLOBAL, PLAIN]) {
            await createCounterTable(dynamodb, table);
            await createCountersTable(dynamodb, `${table}-counters`, undefined, { healIndex: true });
            // A live client item the stream never delivered: what backfill, reconcile and heal would count.
            await dynamodb.send(
                new PutItemCommand({ TableName: table, Item: { pk: { S: "tenant-1" }, sk: { S: "a" }, counter_token: { S: "t-a" } } }),
            );
        }
        proxy = await replicasProxy(engine().endpoint);
    });
    after(() => proxy?.server.close());

    const base = (table: string) => [
        "--endpoint",
        proxy.endpoint,
        "--region",
        "us-east-1",
        "--table",
        table,
        "--counters-table",
        `${table}-counters`,
    ];

    const queue = [
        "--fatal-queue-url",
        "http://127.0.0.1:1/000000000000/fatal",
        "--first-dlq-url",
        "http://127.0.0.1:1/000000000000/first",
    ];
    const commands: ReadonlyArray<readonly string[]> = [
        ["heal", "--mode", "strict", "--key", "tenant-1"],
        ["heal", "--mode", "utilization"],
        ["reconcile", "--key", "tenant-1"],
        ["reconcile", "--all"],
        ["backfill"],
        ["status", "--key", "tenant-1"],
        ["status"],
        ["usage", "--key", "tenant-1", "--days", "1"],
        ["fatal", "replay", ...queue],
        ["fatal", "delete", "some-id", ...queue],
        ["redrive", ...queue],
    ];
    for (const command of commands) {
        it(`${command.filter((flag) => !queue.includes(flag)).join(" ")}: exit 2, one line naming --table and the replicas, nothing written nor sent`, async () => {
            const ran = await servers().cli([...base(GLOBAL), ...command]);
            assert.equal(ran.code, 2, ran.stderr);
            assert.equal(ran.stdout, "");
            const lines = ran.stderr.trim().split("\n");
            assert.equal(lines.length, 1, ran.stderr);
            assert.match(
                lines[0]!,
                /^error: --table: orders-global is a global table \(replicas in us-east-1, eu-west-1\), and the counter was given no regions/,
            );
            assert.doesNotMatch(ran.stderr, /\n\s+at /);
            assert.equal(await itemCount(engine().dynamodb(), `${GLOBAL}-counters`), 0);
            assert.equal(await itemCount(engine().dynamodb(), GLOBAL, "attribute_exists(hc_counted)"), 0);
        });
    }

    it("a table without replicas runs as before: backfill flags the item, which status shows counted once the stream has it", async () => {
        const ran = await servers().cli([...base(PLAIN), "backfill", "--json"]);
        assert.equal(ran.code, 0, ran.stderr);
        assert.deepEqual((JSON.parse(ran.stdout) as { total: unknown }).total, { scanned: 1, counted: 1, alreadyCounted: 0, skipped: 0 });
        assert.equal(await itemCount(engine().dynamodb(), PLAIN, "attribute_exists(hc_counted)"), 1);
        const status = await servers().cli([...base(PLAIN), "--json", "status", "--key", "tenant-1"]);
        assert.equal(status.code, 0, status.stderr);
        const shown = JSON.parse(status.stdout) as { live: number; counted: number; eventual: number; drift: number };
        assert.deepEqual([shown.live, shown.counted, shown.eventual, shown.drift], [1, 1, 0, -1]);
    });

    it("an identity that may not describe the table gets a warning line, and the command goes on", async () => {
        const dynamodb = engine().dynamodb();
        dynamodb.middlewareStack.add(
            (next, context) => async (args) => {
                if (context.commandName === "DescribeTableCommand") {
                    throw new DynamoDBServiceException({
                        name: "AccessDeniedException",
                        $fault: "client",
                        $metadata: {},
                        message: "denied",
                    });
                }
                return next(args);
            },
            { step: "initialize", name: "denyDescribe" },
        );
        const warnings: string[] = [];
        await refuseUnregionedGlobalTable(dynamodb, GLOBAL, "--table", (line) => warnings.push(line));
        assert.deepEqual(warnings, [
            "could not check whether orders-global is a global table (dynamodb:DescribeTable is denied); going on as one region",
        ]);
        dynamodb.destroy();
    });

    it("the problem names the source, the table and every replica; a table without replicas has none", async () => {
        const table = (
            await engine()
                .dynamodb()
                .send(new DescribeTableCommand({ TableName: PLAIN }))
        ).Table;
        assert.equal(globalTableProblem(table, "--table"), undefined);
        assert.equal(globalTableProblem({ ...table, Replicas: [] }, "--table"), undefined);
        assert.equal(
            globalTableProblem({ TableName: "t", Replicas: [{ RegionName: "ap-south-1" }] }, "--config: [tableName]"),
            "--config: [tableName]: t is a global table (replicas in ap-south-1), and the counter was given no regions: pass " +
                "--config with the component's clientConfig output of the region to run as (it sets regions; --region picks another member)",
        );
        await assert.rejects(
            refuseUnregionedGlobalTable(
                {
                    send: async () => ({ Table: { TableName: "t", Replicas: [{ RegionName: "ap-south-1" }] } }),
                } as unknown as DynamoDBClient,
                "t",
                "--table",
                () => undefined,
            ),
            (e: unknown) => e instanceof UsageError && /^--table: t is a global table/.test(e.message),
        );
    });
});
