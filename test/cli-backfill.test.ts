/**
 * `hybrid-counter backfill --config <file>` as a user runs it (docs/adopting.md, step 4; docs/sharding.md): the
 * component runs under Pulumi mocks and its tables are created on DynamoDB Local as it declares them
 * (local/deployment), a table is seeded the way an existing program leaves it, the `--config` file is the
 * component's outputs (`pulumi stack output --json`, or `clientConfig` alone on stdin), and the built bin
 * (dist/cli/index.js) runs as a subprocess. The counters it leaves are read back with the library's status reader
 * and compared with the seed's own ground truth: every key exact, eventual == live, and in strict mode
 * best-effort == live too. Bad flags and configs exit 2 with one line naming the field, before anything is written.
 */
import { ScanCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import type { HybridCounterComponentArgs } from "../components/args";
import { deployLocally, type LocalDeployment } from "../local/deployment/deployment";
import { seedItems, writeItems, type Seed } from "../local/harness/seed";
import { readKeyStatus } from "../runtime/ops/status";
import { newToken } from "../runtime/shared/tokens";
import { buildCli } from "../scripts/bundle-cli";
import { useEngine } from "./support/engine";
import { assertUsage, runBin, type Ran } from "./support/cli-bin";

let bin = "";

/** Runs the built bin (test/support/cli-bin.ts) in the region every test of this file uses. */
const cli = (args: readonly string[], stdin = ""): Promise<Ran> => runBin(bin, args, { stdin, env: { AWS_REGION: "us-east-1" } });

describe("hybrid-counter backfill --config (built bin, the component's outputs, DynamoDB Local)", function () {
    const engine = useEngine();
    const dir = mkdtempSync(path.join(tmpdir(), "hc-cli-backfill-"));
    let deployments = 0;

    before(async () => {
        bin = await buildCli();
    });

    /** The component's tables on the engine, a seeded user table, and the outputs file `pulumi stack output --json` gives. */
    async function adopted(
        args: HybridCounterComponentArgs,
        seed: number,
    ): Promise<{ deployment: LocalDeployment; seeded: Seed; file: string }> {
        const admin = engine().dynamodb();
        const deployment = await deployLocally(admin, `cli-backfill-${++deployments}`, {
            countedItems: "sortKeyPrefix",
            countedSortKeyPrefix: "order#",
            ...args,
        });
        const seeded = seedItems({ items: 240, keys: 6, seed, largeItems: 2 });
        await writeItems(admin, deployment.clientConfig.tableName, seeded.items);
        const file = path.join(dir, `outputs-${deployments}.json`);
        writeFileSync(
            file,
            JSON.stringify({
                clientConfig: deployment.clientConfig,
                fatalDlqUrl: "https://sqs.us-east-1.amazonaws.com/123456789012/fatal",
                firstDlqUrl: "https://sqs.us-east-1.amazonaws.com/123456789012/first",
            }),
        );
        return { deployment, seeded, file };
    }

    /**
     * Every key as the seed says: each live item counted (no pending create), eventual == live, in strict mode
     * best-effort == live (over the sum of a sharded key's shards); the seed's soft-deleted items
     * (left for a consumer to remove) and its non-boolean flags stay reported as such.
     */
    async function assertCounted(deployment: LocalDeployment, seeded: Seed, strict: boolean): Promise<void> {
        assert.ok(seeded.expectedLive.size === 6 && [...seeded.expectedLive.values()].every((n) => n > 0));
        for (const [key, live] of seeded.expectedLive) {
            const flags = seeded.items
                .filter((item) => item.pk?.S === key && item.sk?.S?.startsWith("order#") === true)
                .map((item) => item.deleted);
            const status = await readKeyStatus(key, { config: deployment.clientLayout, dynamodb: engine().dynamodb() });
            assert.deepEqual(
                {
                    key,
                    live: status.live,
                    eventual: status.eventual,
                    bestEffort: status.bestEffort,
                    pendingCreates: status.pendingCreates,
                    pendingDeletes: status.pendingDeletes,
                    malformed: status.malformed,
                },
                {
                    key,
                    live,
                    eventual: live,
                    bestEffort: strict ? live : 0,
                    pendingCreates: 0,
                    pendingDeletes: flags.filter((f) => f?.BOOL === true).length,
                    malformed: flags.filter((f) => f !== undefined && f.BOOL === undefined).length,
                },
            );
            assert.equal(status.shards?.length, deployment.clientConfig.counterShards);
        }
    }

    it("counts a seeded table from the whole stack outputs file (utilization, one shard), and a second run counts nothing", async () => {
        // Prepare
        const { deployment, seeded, file } = await adopted({}, 11);
        const expected = [...seeded.expectedLive.values()].reduce((a, b) => a + b, 0);

        // Act: the command as docs/adopting.md gives it.
        const first = await cli(["backfill", "--config", file, "--mode", "utilization", "--endpoint", engine().endpoint, "--json"]);
        const second = await cli(["backfill", "--config", file, "--mode", "utilization", "--endpoint", engine().endpoint, "--json"]);

        // Assess
        assert.equal(first.code, 0, first.stderr);
        const report = JSON.parse(first.stdout) as {
            status: string;
            tableName: string;
            countersTableName: string;
            total: { counted: number };
        };
        assert.deepEqual(
            [report.status, report.tableName, report.countersTableName, report.total.counted],
            ["complete", deployment.clientConfig.tableName, deployment.clientConfig.countersTableName, expected],
        );
        assert.notEqual(report.countersTableName, report.tableName);
        assert.equal(second.code, 0, second.stderr);
        assert.equal((JSON.parse(second.stdout) as { alreadyComplete: boolean }).alreadyComplete, true);
        await assertCounted(deployment, seeded, false);
    });

    it("counts a sharded table in strict mode from clientConfig alone on stdin, and prints the human report", async () => {
        // Prepare: three shards; the config read from stdin as `pulumi stack output clientConfig --json | ...`.
        const { deployment, seeded } = await adopted({ counterShards: 3 }, 12);
        assert.equal(deployment.clientConfig.counterShards, 3);

        // Act
        const ran = await cli(
            ["backfill", "--config", "-", "--mode", "strict", "--segments", "2", "--page-size", "25", "--endpoint", engine().endpoint],
            JSON.stringify(deployment.clientConfig),
        );

        // Assess: every shard's partial and unit where the layout puts them (readKeyStatus sums the three).
        assert.equal(ran.code, 0, ran.stderr);
        assert.match(ran.stdout, /^backfill default: complete\n/);
        assert.match(ran.stdout, /segments done: 2 of 2;/);
        await assertCounted(deployment, seeded, true);
    });

    it("--clients-since: client tokens made before it are items from before the counter, given a unit each in strict mode", async () => {
        // Prepare: the client selection; three items carrying client tokens made an hour before the clients began
        const admin = engine().dynamodb();
        const deployment = await deployLocally(admin, `cli-backfill-${++deployments}`, {});
        const since = new Date();
        await writeItems(
            admin,
            deployment.clientConfig.tableName,
            [0, 1, 2].map((i) => ({ pk: { S: "t" }, sk: { S: `old-${i}` }, counter_token: { S: newToken(since.getTime() - 3_600_000) } })),
        );
        const file = path.join(dir, `outputs-${deployments}.json`);
        writeFileSync(file, JSON.stringify({ clientConfig: deployment.clientConfig }));
        const status = async () => (await readKeyStatus("t", { config: deployment.clientLayout, dynamodb: admin })).bestEffort;

        // Act: without the flag the tokens are taken as this table's strict clients'; a second run says when they began
        const trusting = await cli(["backfill", "--config", file, "--mode", "strict", "--endpoint", engine().endpoint]);
        const trusted = await status();
        const adopting = await cli([
            "backfill",
            ...["--config", file, "--mode", "strict", "--run-id", "since", "--clients-since", since.toISOString()],
            ...["--endpoint", engine().endpoint],
        ]);

        // Assess
        assert.equal(trusting.code, 0, trusting.stderr);
        assert.equal(trusted, 0);
        assert.equal(adopting.code, 0, adopting.stderr);
        assert.equal(await status(), 3);
    });

    it("refuses bad flags and configs with one line naming the field, exit 2, and writes nothing", async () => {
        // Prepare
        const { deployment, file } = await adopted({}, 13);
        const sharded = path.join(dir, "sharded-same-table.json");
        writeFileSync(
            sharded,
            JSON.stringify({ ...deployment.clientConfig, countersTableName: deployment.clientConfig.tableName, counterShards: 3 }),
        );
        const notJson = path.join(dir, "not-json.json");
        writeFileSync(notJson, "{ tableName: ");
        const endpoint = ["--endpoint", engine().endpoint];

        // Act / Assess
        assertUsage(
            await cli(["backfill", "--mode", "utilization", ...endpoint]),
            "--table or --config is required: which table holds the counter?",
        );
        assertUsage(
            await cli(["backfill", "--config", path.join(dir, "missing.json"), "--mode", "strict", ...endpoint]),
            `--config: cannot read ${path.join(dir, "missing.json")} (ENOENT)`,
        );
        const garbled = await cli(["backfill", "--config", notJson, "--mode", "strict", ...endpoint]);
        assert.equal(garbled.code, 2);
        assert.match(garbled.stderr, /^error: --config: .*not-json\.json is not JSON \([^\n]*\)\n$/);
        assertUsage(
            await cli(["backfill", "--config", sharded, "--mode", "strict", ...endpoint]),
            "--config: above 1 needs a counters table of its own: a key's shards are partition keys of the counters table",
        );
        assertUsage(
            await cli(["backfill", "--config", file, "--mode", "sometimes", ...endpoint]),
            '--mode must be utilization or strict (got "sometimes")',
        );
        assertUsage(
            await cli(["backfill", "--config", file, "--mode", "strict", "--page-size", "0", ...endpoint]),
            '--page-size must be an integer from 1 to 10000 (got "0")',
        );
        assertUsage(
            await cli(["backfill", "--config", file, "--mode", "strict", "--clients-since", "yesterday", ...endpoint]),
            '--clients-since must be an ISO 8601 time (2026-01-15T09:00:00Z) or milliseconds since the epoch (got "yesterday")',
        );
        assertUsage(
            await cli(["backfill", "--config", file, "--mode", "strict", "--run-id", "a b", ...endpoint]),
            "--run-id must be 1 to 64 letters, digits or _ . : -",
        );
        const counters = await engine()
            .dynamodb()
            .send(new ScanCommand({ TableName: deployment.clientConfig.countersTableName, Select: "COUNT" }));
        assert.equal(counters.Count, 0);
    });
});
