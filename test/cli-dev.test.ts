/**
 * `npx hybrid-counter dev`, run as a user runs it: the built bin starts DynamoDB Local and the local SQS
 * server, an API writes through HybridCounterClient to the endpoint it printed, the live view reaches
 * exact counts, and Ctrl-C stops everything with exit 0.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { HybridCounterClient } from "../runtime/client/client";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";
import { buildCli } from "../scripts/bundle-cli";

interface Line {
    event: string;
    [field: string]: unknown;
}

describe("operator CLI: dev", function () {
    let bin = "";
    let child: ChildProcessWithoutNullStreams | undefined;

    before(async () => {
        bin = await buildCli();
    });
    after(() => {
        if (child && child.exitCode === null) {
            child.kill("SIGKILL");
        }
    });

    it("serves a local pipeline, shows the keys exact, and stops on Ctrl-C", async () => {
        // Prepare
        child = spawn(process.execPath, [bin, "dev", "--json", "--table", "dev-orders"], {
            env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_NO_WARNINGS: "1" },
        });
        const lines: Line[] = [];
        let stderr = "";
        let pending = "";
        const waiters: Array<() => void> = [];
        child.stdout.on("data", (chunk: Buffer) => {
            pending += chunk.toString();
            const complete = pending.split("\n");
            pending = complete.pop()!;
            lines.push(...complete.filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Line));
            waiters.splice(0).forEach((w) => w());
        });
        child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        const closed = new Promise<number | null>((resolve) => child!.on("close", (code) => resolve(code)));
        const waitFor = async (match: (l: Line) => boolean, what: string): Promise<Line> => {
            const deadline = Date.now() + 120_000;
            for (;;) {
                const found = lines.find(match);
                if (found) {
                    return found;
                }
                assert.ok(Date.now() < deadline && child!.exitCode === null, `no ${what}; stderr: ${stderr}`);
                await new Promise<void>((resolve) => {
                    waiters.push(resolve);
                    setTimeout(resolve, 500);
                });
            }
        };
        const ready = await waitFor((l) => l.event === "ready", "ready line");
        const dynamodb = new DynamoDBClient({
            endpoint: String(ready.dynamodbEndpoint),
            region: "us-east-1",
            credentials: { accessKeyId: "api", secretAccessKey: "api" },
        });
        const api = new HybridCounterClient({ ...DEFAULT_LAYOUT, tableName: "dev-orders", countersTableName: "dev-orders", dynamodb });

        // Act: the user's API writes through the endpoint dev printed.
        for (const id of ["a", "b", "c"]) {
            await api.create("tenant-1", id);
        }
        await api.delete("tenant-1", "a");
        await api.create("tenant-2", "x");
        const settled = await waitFor(
            (l) => l.event === "status" && l.keys === 2 && l.exactKeys === 2 && (l.totals as { eventual: number }).eventual === 3,
            "exact status",
        );
        child.kill("SIGINT");
        const code = await closed;
        dynamodb.destroy();

        // Assess
        assert.match(String(ready.dynamodbEndpoint), /^http:\/\/127\.0\.0\.1:\d+$/);
        assert.match(String(ready.sqsEndpoint), /^http:\/\/127\.0\.0\.1:\d+$/);
        assert.equal(ready.tableName, "dev-orders");
        assert.deepEqual(settled.totals, {
            bestEffort: 3,
            eventual: 3,
            live: 3,
            pendingCreates: 0,
            pendingDeletes: 0,
            malformed: 0,
            heldSlots: 0,
            drift: 0,
        });
        assert.deepEqual(
            (settled.shown as Array<{ key: string; eventual: number }>).map((s) => [s.key, s.eventual]),
            [
                ["tenant-1", 2],
                ["tenant-2", 1],
            ],
        );
        assert.equal(code, 0, stderr);
        assert.match(stderr, /stopped DynamoDB Local and the local SQS server\n$/);
    });
});
