/**
 * `npx hybrid-counter dev`, run as a user runs it: the built bin starts DynamoDB Local and the local SQS server with
 * the shipped bundles (npm run build:bundles), an API writes through HybridCounterClient to the endpoint it printed,
 * the live view reaches the counts the items say, and Ctrl-C stops everything with exit 0.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { HybridCounterClient } from "../runtime/client/client";
import type { CounterMode } from "../runtime/shared/config";
import { buildBundles } from "../scripts/bundle";
import { buildCli } from "../scripts/bundle-cli";

interface Line {
    event: string;
    [field: string]: unknown;
}

/** The JSON lines a child prints, and a wait for one (however long the machine takes; a child that exits ends it). */
function jsonLines(child: ChildProcessWithoutNullStreams): {
    waitFor(match: (l: Line) => boolean, what: string): Promise<Line>;
    stderr(): string;
} {
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
    return {
        async waitFor(match, what) {
            for (;;) {
                const found = lines.find(match);
                if (found) {
                    return found;
                }
                assert.equal(child.exitCode, null, `no ${what}; stderr: ${stderr}`);
                await new Promise<void>((resolve) => {
                    waiters.push(resolve);
                    setTimeout(resolve, 500);
                });
            }
        },
        stderr: () => stderr,
    };
}

describe("operator CLI: dev", function () {
    let bin = "";
    let child: ChildProcessWithoutNullStreams | undefined;

    before(async () => {
        await buildBundles();
        bin = await buildCli();
    });
    after(() => {
        if (child && child.exitCode === null) {
            child.kill("SIGKILL");
        }
    });

    it("serves a local pipeline, shows the keys' counts, and stops on Ctrl-C", async () => {
        // Prepare
        child = spawn(process.execPath, [bin, "dev", "--json", "--table", "dev-orders", "--keys", "5"], {
            env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_NO_WARNINGS: "1" },
        });
        const { waitFor, stderr } = jsonLines(child);
        const closed = new Promise<number | null>((resolve) => child!.on("close", (code) => resolve(code)));
        const ready = await waitFor((l) => l.event === "ready", "ready line");
        const dynamodb = new DynamoDBClient({
            endpoint: String(ready.dynamodbEndpoint),
            region: "us-east-1",
            credentials: { accessKeyId: "api", secretAccessKey: "api" },
        });
        const api = new HybridCounterClient({
            tableName: String(ready.tableName),
            countersTableName: String(ready.countersTableName),
            counterMode: ready.counterMode as CounterMode,
            dynamodb,
        });

        // Act: the user's API writes through the endpoint dev printed.
        for (const id of ["a", "b", "c"]) {
            await api.create("tenant-1", id);
        }
        await api.delete("tenant-1", "a");
        await api.create("tenant-2", "x");
        // The end state: every write counted (an earlier view may show eventual at 3 before the delete was counted).
        const totals = {
            bestEffort: 3,
            eventual: 3,
            live: 3,
            counted: 3,
            pendingCreates: 0,
            pendingDeletes: 1,
            malformed: 0,
            heldSlots: 0,
            drift: 0,
        };
        const counted = await waitFor((l) => l.event === "status" && JSON.stringify(l.totals) === JSON.stringify(totals), "counted status");
        child.kill("SIGINT");
        const code = await closed;
        dynamodb.destroy();

        // Assess: the deleted life's tombstone stays while a put attempt of it could land (the settler removes it later).
        assert.match(String(ready.dynamodbEndpoint), /^http:\/\/127\.0\.0\.1:\d+$/);
        assert.match(String(ready.sqsEndpoint), /^http:\/\/127\.0\.0\.1:\d+$/);
        assert.deepEqual(
            [ready.tableName, ready.countersTableName, ready.counterMode, ready.region],
            ["dev-orders", "dev-orders-counters", "utilization", "us-east-1"],
        );
        assert.deepEqual([counted.keys, counted.exactKeys], [2, 1]);
        assert.deepEqual(
            (counted.shown as Array<{ key: string; eventual: number; pendingDeletes: number }>).map((s) => [
                s.key,
                s.eventual,
                s.pendingDeletes,
            ]),
            [
                ["tenant-1", 2, 1],
                ["tenant-2", 1, 0],
            ],
        );
        assert.equal(code, 0, stderr());
        assert.match(stderr(), /stopped DynamoDB Local and the local SQS server\n$/);
    });
});
