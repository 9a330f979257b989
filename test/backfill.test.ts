/**
 * Backfill on DynamoDB Local without a concurrent consumer: a seeded table is counted exactly, a killed
 * run resumes from its checkpoints, a second run changes nothing, strict mode fills best-effort too,
 * and the rate limit holds. The planner and the token bucket are checked as pure functions first.
 */
import { DynamoDBServiceException, ScanCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";
import * as path from "node:path";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { readCounterItems } from "../local/harness/markers";
import { SEEDED_SELECTION, createCountersTable, seedItems, writeItems, type Seed } from "../local/harness/seed";
import { createCounterTable } from "../local/engine/table";
import { BackfillStore } from "../runtime/backfill/store";
import { backfillActions, cancellationOutcome, planPage, type BackfillConfig } from "../runtime/backfill/plan";
import { backfill, BackfillError, backfillOptionsProblems, type BackfillReport } from "../runtime/backfill/backfill";
import { COUNTER_ATTRIBUTES, ConfigurationError, DEFAULT_LAYOUT, ZERO_SEQ, healShard } from "../runtime/shared/config";
import { TokenBucket, type Clock } from "../runtime/shared/token-bucket";
import { useEngine } from "./support/engine";

let tables = 0;

function configFor(tableName: string, countersTableName: string): BackfillConfig {
    return { ...DEFAULT_LAYOUT, selection: SEEDED_SELECTION, tableName, countersTableName };
}

/** A virtual clock: sleeping advances time at once. */
function virtualClock(): Clock & { slept: number } {
    let now = 1_000_000;
    const clock = {
        slept: 0,
        now: () => now,
        sleep: async (ms: number) => {
            now += ms;
            clock.slept += ms;
        },
    };
    return clock;
}

describe("backfill planner (pure)", () => {
    const config = configFor("orders", "orders-counters");
    const item = (sk: string, extra: Record<string, AttributeValue> = {}) => ({ pk: { S: "acme" }, sk: { S: sk }, ...extra });

    it("counts live selected items without a marker and skips other entities, soft-deleted items and counter items", () => {
        // Prepare
        const items = [
            item("order#1"),
            item("order#2", { deleted: { S: "true" } }),
            item("order#3", { deleted: { BOOL: true } }),
            item("profile#1"),
            item("#counter#eventual"),
            item("order#4", { counter_token: { S: "t-4" } }),
        ];
        const marked = new Set([`acme\u0000#counter#item#order#4`]);

        // Act
        const plan = planPage(items, config, marked, "utilization");

        // Assess
        assert.deepEqual(plan, {
            chunks: [
                {
                    counterKey: "acme",
                    items: [
                        { counterKey: "acme", id: "order#1" },
                        { counterKey: "acme", id: "order#2" },
                    ],
                },
            ],
            alreadyCounted: 1,
            skipped: 3,
        });
    });

    it("splits a key's items into transactions of 99 markers (98 in strict mode, which also moves best-effort)", () => {
        // Prepare
        const items = Array.from({ length: 200 }, (_, i) => item(`order#${i}`));

        // Act
        const utilization = planPage(items, config, new Set(), "utilization").chunks.map((c) => c.items.length);
        const strict = planPage(items, config, new Set(), "strict").chunks.map((c) => c.items.length);

        // Assess
        assert.deepEqual(utilization, [99, 99, 2]);
        assert.deepEqual(strict, [98, 98, 4]);
    });

    it("builds the strict transaction: ADD eventual, best-effort for the items without the client's token (a client write, listed on the heal index, conditional on the heal epoch), conditional markers, hc_be = the epoch only where best-effort took a unit", () => {
        // Act: a client item (its token: best-effort holds it since its reserve) and another writer's item.
        const actions = backfillActions(
            config,
            "acme",
            [
                { counterKey: "acme", id: "order#1", life: "tok" },
                { counterKey: "acme", id: "order#2" },
            ],
            "strict",
            1_700_000_000_000,
            4,
        );

        // Assess
        const marker = (id: string, be: boolean, life?: string) => ({
            Update: {
                TableName: "orders-counters",
                Key: { pk: { S: "acme" }, sk: { S: `#counter#item#${id}` } },
                UpdateExpression: `SET #state = :counted, #seq = :zero${be ? ", #be = :epoch" : ""}${life ? ", #life = :life" : ""}`,
                ConditionExpression: "attribute_not_exists(#state)",
                ExpressionAttributeNames: {
                    "#state": "hc_state",
                    "#seq": "hc_seq",
                    ...(be ? { "#be": "hc_be" } : {}),
                    ...(life ? { "#life": "hc_life" } : {}),
                },
                ExpressionAttributeValues: {
                    ":counted": { S: "counted" },
                    ":zero": { S: ZERO_SEQ },
                    ...(be ? { ":epoch": { N: "4" } } : {}),
                    ...(life ? { ":life": { S: life } } : {}),
                },
            },
        });
        assert.deepEqual(actions, [
            {
                Update: {
                    TableName: "orders-counters",
                    Key: { pk: { S: "acme" }, sk: { S: "#counter#eventual" } },
                    UpdateExpression: "ADD #count :n",
                    ExpressionAttributeNames: { "#count": "count" },
                    ExpressionAttributeValues: { ":n": { N: "2" } },
                },
            },
            {
                Update: {
                    TableName: "orders-counters",
                    Key: { pk: { S: "acme" }, sk: { S: "#counter#best-effort" } },
                    // The units move the ledger entry of backfilled units (only ever raised), which every heal folds (runtime/ledger/).
                    UpdateExpression:
                        "ADD #count :n, #version :one, #lv :one, #ledger :n, #marks :one SET #writtenAt = :now, #heal = :shard, #due = if_not_exists(#due, :now)",
                    ConditionExpression: "#epoch = :epoch",
                    ExpressionAttributeNames: {
                        "#count": "count",
                        "#version": "hc_version",
                        "#lv": "hc_lv",
                        "#ledger": "hc_n_0_2",
                        "#writtenAt": "hc_written_at",
                        "#heal": "hc_heal",
                        "#due": "hc_due_at",
                        "#marks": "hc_marks",
                        "#epoch": "hc_epoch",
                    },
                    ExpressionAttributeValues: {
                        ":n": { N: "1" },
                        ":one": { N: "1" },
                        ":now": { N: "1700000000000" },
                        ":shard": { S: healShard("acme") },
                        ":epoch": { N: "4" },
                    },
                },
            },
            marker("order#1", false, "tok"),
            marker("order#2", true),
        ]);
    });

    it("reads a cancellation: failed marker conditions are already counted, conflicts are retried with backoff", () => {
        // Prepare
        const items = [
            { counterKey: "acme", id: "a" },
            { counterKey: "acme", id: "b" },
        ];

        // Act
        const conditions = cancellationOutcome(
            items,
            [{ Code: "None" }, { Code: "ConditionalCheckFailed" }, { Code: "None" }],
            "utilization",
        );
        const conflict = cancellationOutcome(items, [{ Code: "TransactionConflict" }, { Code: "None" }, { Code: "None" }], "utilization");

        // Assess
        assert.deepEqual(conditions, { alreadyCounted: [items[0]], remaining: [items[1]], contention: false });
        assert.deepEqual(conflict, { alreadyCounted: [], remaining: items, contention: true });
    });

    it("token bucket: a debt is waited off at the configured rate", async () => {
        // Prepare
        const clock = virtualClock();
        const bucket = new TokenBucket(100, clock, 100);

        // Act: 100 units of burst, then 250 more units in three requests.
        await bucket.take();
        bucket.spend(100);
        await bucket.take();
        bucket.spend(250);
        await bucket.take();

        // Assess: the 250 units of debt took 2.5 s to pay back.
        assert.equal(clock.slept, 2_500);
    });

    it("names every bad option", () => {
        // Act
        const problems = backfillOptionsProblems({
            config: configFor("orders", "orders-counters"),
            segments: 0,
            pageSize: 1.5,
            capacityShare: 2,
            readUnitsPerSecond: -1,
            runId: "has space",
            mode: "exact" as "strict",
        });

        // Assess
        assert.deepEqual(problems, [
            '[mode] must be "utilization" or "strict"',
            "[runId] must be 1 to 64 letters, digits or _ . : -",
            "[segments] must be an integer from 1 to 1000",
            "[pageSize] must be an integer from 1 to 10000",
            "[capacityShare] must be a number in (0, 1]",
            "[readUnitsPerSecond] must be a positive number (Infinity for no limit)",
        ]);
    });
});

describe("backfill on DynamoDB Local (no consumer)", function () {
    const engine = useEngine();

    async function seededTables(seedOptions: {
        items: number;
        keys: number;
        seed: number;
        largeItems?: number;
    }): Promise<{ config: BackfillConfig; seed: Seed }> {
        const client = engine().dynamodb();
        const n = ++tables;
        const config = configFor(`bf-user-${n}`, `bf-counters-${n}`);
        await createCounterTable(client, config.tableName);
        await createCountersTable(client, config.countersTableName);
        const seed = seedItems(seedOptions);
        await writeItems(client, config.tableName, seed.items);
        client.destroy();
        return { config, seed };
    }

    async function assertExact(config: BackfillConfig, seed: Seed, strict = false): Promise<void> {
        const reader = engine().dynamodb();
        for (const [key, live] of seed.expectedLive) {
            const c = await readCounterItems(reader, config.countersTableName, config, key);
            assert.equal(c.eventual, live, `key ${key}: eventual ${c.eventual} != live ${live}`);
            assert.equal(c.countedMarkers, live, `key ${key}: ${c.countedMarkers} counted markers != live ${live}`);
            assert.equal(c.markers.size, live, `key ${key}: ${c.markers.size} markers != live ${live}`);
            assert.equal(c.bestEffort, strict ? live : 0, `key ${key}: best-effort ${c.bestEffort}`);
            assert.equal(c.bestEffortMarkers, strict ? live : 0, `key ${key}: hc_be markers ${c.bestEffortMarkers}`);
            for (const marker of c.markers.values()) {
                assert.equal(marker[COUNTER_ATTRIBUTES.seq]?.S, ZERO_SEQ);
            }
        }
        reader.destroy();
    }

    const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

    it("a request refused before any segment runs (its checkpoints' read) stops the run with a BackfillError, not DynamoDB's error (checker seed 90202)", async () => {
        // Prepare: the first Query (the run's checkpoints) reaches DynamoDB after its signature expired.
        const { config } = await seededTables({ items: 20, keys: 2, seed: 3 });
        const dynamodb = engine().dynamodb();
        let refused = 0;
        dynamodb.middlewareStack.add(
            (next, context) => async (args) => {
                if (context.commandName === "QueryCommand" && refused === 0) {
                    refused++;
                    throw new DynamoDBServiceException({
                        name: "InvalidSignatureException",
                        $fault: "client",
                        $metadata: { httpStatusCode: 400 },
                        message: "Signature expired",
                    });
                }
                return next(args);
            },
            { step: "initialize" },
        );

        // Act
        const failed = await backfill({ config, dynamodb, segments: 2 }).catch((error: unknown) => error);
        const resumed = await backfill({ config, dynamodb, segments: 2 });

        // Assess: the contract's error, with the cause; the next invocation completes the run.
        assert.ok(failed instanceof BackfillError, String(failed));
        assert.equal((failed.cause as Error).name, "InvalidSignatureException");
        assert.equal(resumed.status, "complete");
    });

    it("counts every live selected item of a seeded table exactly, under 5% injected faults, and a second run changes nothing", async () => {
        // Prepare
        const { config, seed } = await seededTables({ items: 2_000, keys: 10, seed: 11 });
        const dynamodb = engine().dynamodb();
        const faults = injectFaults(dynamodb, { rate: 0.05, random: seededRandom(5) });
        const progress: number[] = [];

        // Act
        const first = await backfill({
            config,
            dynamodb,
            segments: 3,
            pageSize: 200,
            onProgress: (p) => progress.push(p.scanned),
            progressIntervalMs: 0,
        });
        const again = await backfill({ config, dynamodb, segments: 3 });
        const fresh = await backfill({ config, dynamodb, runId: "second" });

        // Assess
        const live = sum(seed.expectedLive);
        assert.ok(Object.values(faults.injected).reduce((a, b) => a + b, 0) > 0, "faults were injected");
        assert.equal(first.status, "complete");
        assert.deepEqual(first.total, { scanned: 2_000, counted: live, alreadyCounted: 0, skipped: 2_000 - live });
        assert.equal(progress.at(-1), 2_000);
        assert.deepEqual(
            {
                status: again.status,
                alreadyComplete: again.alreadyComplete,
                scanned: again.thisCall.scanned,
                writeUnits: again.thisCall.writeUnits,
            },
            {
                status: "complete",
                alreadyComplete: true,
                scanned: 0,
                writeUnits: 0,
            },
        );
        assert.deepEqual(fresh.total, { scanned: 2_000, counted: 0, alreadyCounted: live, skipped: 2_000 - live });
        assert.equal(fresh.thisCall.transactions, 0);
        await assertExact(config, seed);
        dynamodb.destroy();
    });

    it("strict mode counts the items into best-effort too, marking them hc_be", async () => {
        // Prepare
        const { config, seed } = await seededTables({ items: 600, keys: 4, seed: 12 });
        const dynamodb = engine().dynamodb();

        // Act
        const report = await backfill({ config, dynamodb, mode: "strict", runId: "strict" });

        // Assess
        assert.equal(report.total.counted, sum(seed.expectedLive));
        await assertExact(config, seed, true);
        dynamodb.destroy();
    });

    it("resumes after a SIGKILL midway and after an abort (Ctrl-C), and ends exact", async () => {
        // Prepare
        const { config, seed } = await seededTables({ items: 3_000, keys: 10, seed: 13 });
        const reader = engine().dynamodb();
        const store = new BackfillStore(config, reader, { now: Date.now, sleep: async () => undefined });
        const options = { config, runId: "killed", segments: 2, pageSize: 100, writeUnitsPerSecond: 600 };

        // Act 1: a process that is killed once a few pages are checkpointed.
        const child = spawn(
            process.execPath,
            [
                "--import",
                "tsx",
                path.join(__dirname, "support", "backfill-child.ts"),
                JSON.stringify({ endpoint: engine().endpoint, options }),
            ],
            {
                stdio: ["ignore", "pipe", "pipe"],
            },
        );
        const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
        let pagesAtKill = 0;
        for (;;) {
            const checkpoints = [...(await store.checkpoints("killed")).values()];
            pagesAtKill = checkpoints.reduce((n, c) => n + c.pages, 0);
            if (pagesAtKill >= 4) {
                break;
            }
            await new Promise((r) => setTimeout(r, 50));
        }
        child.kill("SIGKILL");
        await exited;
        const afterKill = [...(await store.checkpoints("killed")).values()];

        // Act 2: resumed, and aborted after its first progress report.
        const controller = new AbortController();
        const aborted = await backfill({
            ...options,
            dynamodb: reader,
            signal: controller.signal,
            progressIntervalMs: 0,
            onProgress: () => controller.abort(),
        });

        // Act 3: resumed to the end.
        const resumed: BackfillReport = await backfill({ ...options, dynamodb: reader });

        // Assess
        assert.equal(afterKill.length, 2);
        assert.ok(
            afterKill.some((c) => !c.done),
            "the kill left the run unfinished",
        );
        assert.equal(aborted.status, "aborted");
        assert.equal(aborted.resumed, true);
        assert.equal(resumed.status, "complete");
        assert.equal(resumed.total.scanned, 3_000);
        // A page cut off by the kill is repeated: its items are found already counted, never counted twice.
        assert.equal(resumed.total.counted + resumed.total.alreadyCounted, sum(seed.expectedLive));
        await assertExact(config, seed);
        reader.destroy();
    });

    it("keeps the Scan within its read budget (virtual clock)", async () => {
        // Prepare
        const { config } = await seededTables({ items: 400, keys: 4, seed: 14, largeItems: 0 });
        const dynamodb = engine().dynamodb();
        const clock = virtualClock();

        // Act
        const report = await backfill({
            config,
            dynamodb,
            clock,
            readUnitsPerSecond: 1,
            writeUnitsPerSecond: 1_000_000,
            pageSize: 50,
            segments: 1,
        });

        // Assess: units spent <= rate x elapsed + one second of burst + the largest page (at most the
        // whole scan of these 400 small items). The marker reads go to the counters table, not this budget.
        const wholeScan = await scanUnitsOf(config.tableName);
        const scanUnits = report.thisCall.readUnits - report.thisCall.markerReadUnits;
        assert.equal(report.status, "complete");
        assert.ok(wholeScan >= 2 && wholeScan < 10, `a whole scan costs ${wholeScan} units`);
        assert.ok(scanUnits >= wholeScan - 1, `read ${scanUnits} units`);
        assert.ok(scanUnits <= 1 * (report.thisCall.elapsedMs / 1000) + 1 + wholeScan / 4, JSON.stringify(report.thisCall));
        assert.ok(report.thisCall.elapsedMs >= (wholeScan - 1 - wholeScan / 4) * 1000, JSON.stringify(report.thisCall));
        assert.ok(clock.slept > 0);
        dynamodb.destroy();
    });

    async function scanUnitsOf(tableName: string): Promise<number> {
        const reader = engine().dynamodb();
        const page = await reader.send(new ScanCommand({ TableName: tableName, ReturnConsumedCapacity: "TOTAL", Select: "COUNT" }));
        reader.destroy();
        return page.ConsumedCapacity?.CapacityUnits ?? 0;
    }

    it("refuses to resume a run with a different number of segments, naming [segments]", async () => {
        // Prepare
        const { config } = await seededTables({ items: 50, keys: 2, seed: 15 });
        const dynamodb = engine().dynamodb();
        await backfill({ config, dynamodb, runId: "fixed", segments: 2 });

        // Act
        const attempt = backfill({ config, dynamodb, runId: "fixed", segments: 3 });

        // Assess
        await assert.rejects(attempt, (error: unknown) => {
            assert.ok(error instanceof ConfigurationError);
            assert.deepEqual(error.problems, [
                '[segments] run "fixed" was started with 2 segments; resume it with the same number or start a new run',
            ]);
            return true;
        });
        dynamodb.destroy();
    });
});
