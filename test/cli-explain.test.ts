/**
 * The pure parts of the operator commands: what each fatal-queue message means and what settles it, a key's status
 * from its rows (the selection and the heal's own plan), the table's order and summary, where a scanned row belongs,
 * the counter a command runs on (flags against `--config`), and the small formats (CSV, days, flags).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { explainFatalMessage } from "../runtime/ops/fatal-explain";
import { keyStatus, keysToReconcile, summarize, worstFirst, type KeyRows, type KeyStatus } from "../runtime/ops/status";
import { rowOf } from "../runtime/ops/status-read";
import { lastDays } from "../runtime/ops/limits";
import { COUNTED_ATTRIBUTE, countingGeneration, DEFAULT_LAYOUT, type CounterConfig } from "../runtime/shared/config";
import { newToken } from "../runtime/shared/tokens";
import { backfillUsage } from "../cli/backfill";
import { usageCsv } from "../cli/usage";
import { advice } from "../cli/status";
import { keyFlag, limitFlag } from "../cli/options";
import { resolveTarget } from "../cli/target";
import { UsageError } from "../cli/errors";

const PERIOD_MS = 600_000;
/** Mid-period, so that lives a second or two old are of the current period. */
const NOW = 1_800_000_300_000;
const config: CounterConfig = { ...DEFAULT_LAYOUT, tableName: "t", countersTableName: "c", mode: "strict", periodMs: PERIOD_MS };
const flag = { [COUNTED_ATTRIBUTE]: { S: countingGeneration(config) } };

type Item = Record<string, AttributeValue>;
const item = (id: string, extra: Item = {}, key = "k"): Item => ({ pk: { S: key }, sk: { S: id }, ...extra });
const life = (id: string, at: number, extra: Item = {}) => item(id, { counter_token: { S: newToken(at) }, ...flag, ...extra });
const counter = (sk: string, count: number, extra: Item = {}): Item => ({
    pk: { S: "k" },
    sk: { S: sk },
    count: { N: String(count) },
    ...extra,
});

describe("fatal messages explained", () => {
    const explained = (body: unknown) => {
        const { kind, remedy, counterKeys, range, recordsExpireAt } = explainFatalMessage(
            typeof body === "string" ? body : JSON.stringify(body),
            "pk",
        );
        return {
            kind,
            remedy,
            counterKeys,
            ...(range === undefined ? {} : { range }),
            ...(recordsExpireAt === undefined ? {} : { recordsExpireAt }),
        };
    };

    it("a poison record names its key and the keys of its records; without one, every key is reconciled", () => {
        assert.deepEqual(
            explained({
                reason: "poison-record",
                problem: "[eventName] ...",
                counterKey: "t-1",
                records: [{ dynamodb: { Keys: { pk: { S: "t-2" } } } }],
            }),
            { kind: "poison-record", remedy: "reconcile-keys", counterKeys: ["t-1", "t-2"] },
        );
        assert.deepEqual(
            explained({ reason: "poison-record", problem: "[dynamodb.Keys.pk] is missing", records: [{ dynamodb: { Keys: {} } }] }),
            {
                kind: "poison-record",
                remedy: "reconcile-all",
                counterKeys: [],
            },
        );
    });

    it("records-expired names its range (from the frontier, when there was one); malformed redrive messages name nothing", () => {
        assert.deepEqual(
            explained({
                reason: "records-expired",
                problem: "...",
                detail: { shardId: "s", startSequenceNumber: "4", endSequenceNumber: "9" },
            }),
            {
                kind: "records-expired",
                remedy: "reconcile-all",
                counterKeys: [],
                range: { shardId: "s", startSequenceNumber: "4", endSequenceNumber: "9" },
            },
        );
        assert.deepEqual(explained({ reason: "records-expired", problem: "...", detail: { shardId: "s", endSequenceNumber: "9" } }), {
            kind: "records-expired",
            remedy: "reconcile-all",
            counterKeys: [],
            range: { shardId: "s", endSequenceNumber: "9" },
        });
        assert.deepEqual(explained({ reason: "malformed-redrive-message", problem: "[body] is not JSON" }), {
            kind: "malformed-redrive-message",
            remedy: "reconcile-all",
            counterKeys: [],
        });
    });

    it("Lambda's metadata of a batch is applied from the stream, whose records expire 24 hours after the first was written", () => {
        const batch = {
            requestContext: { condition: "RetryAttemptsExhausted" },
            timestamp: "2026-01-02T00:00:00.000Z",
            DDBStreamBatchInfo: {
                shardId: "s",
                startSequenceNumber: "1",
                endSequenceNumber: "2",
                approximateArrivalOfFirstRecord: "2026-01-01T10:00:00.000Z",
            },
        };
        assert.deepEqual(explained(batch), {
            kind: "batch-exhausted",
            remedy: "redrive-batch",
            counterKeys: [],
            range: { shardId: "s", startSequenceNumber: "1", endSequenceNumber: "2" },
            recordsExpireAt: "2026-01-02T10:00:00.000Z",
        });
        assert.equal(explainFatalMessage(JSON.stringify(batch), "pk").problem, "RetryAttemptsExhausted");
        assert.equal(explainFatalMessage(JSON.stringify(batch), "pk").parkedAt, "2026-01-02T00:00:00.000Z");
    });

    it("anything else is unknown: its keys reconciled when it names some, every key otherwise", () => {
        assert.deepEqual(explained("{oops"), { kind: "unknown", remedy: "reconcile-all", counterKeys: [] });
        assert.deepEqual(explained({ hello: 1 }), { kind: "unknown", remedy: "reconcile-all", counterKeys: [] });
        assert.deepEqual(explained({ reason: "poison-item", problem: "...", counterKey: "t-3" }), {
            kind: "unknown",
            remedy: "reconcile-keys",
            counterKeys: ["t-3"],
        });
    });
});

describe("status, the pure part", () => {
    const period = Math.floor(NOW / PERIOD_MS);

    it("tells live, counted, pending, malformed items and held slots apart, by the heal's own plan", () => {
        // Best-effort 6: its young entry holds the 2 young lives; the rest is base.
        const old = NOW - 3 * PERIOD_MS;
        const rows: KeyRows = {
            items: [
                life("young-1", NOW - 1_000),
                life("young-2", NOW - 2_000),
                life("old", old),
                life("claimed", old, { counter_token_delete: { S: newToken(NOW - 1_000) } }),
                life("gone", old, { deleted: { BOOL: true } }),
                life("odd", old, { deleted: { S: "yes" } }),
                item("unflagged", { counter_token: { S: newToken(old) } }),
                item("not-selected"),
            ],
            counters: new Map([
                [
                    0,
                    [
                        counter("#counter#best-effort", 6, { [`hc_y_${period}`]: { N: "2" } }),
                        counter("#counter#eventual", 5),
                        counter("#counter#limit", 0, { hc_limit: { N: "9" } }),
                    ],
                ],
            ]),
        };
        // Strict: every old live life holds a slot ("old", "claimed", "odd", "unflagged"), so the 6 are all held for lives.
        assert.deepEqual(keyStatus("k", rows, config, NOW), {
            key: "k",
            bestEffort: 6,
            eventual: 5,
            live: 6,
            counted: 5,
            pendingCreates: 1,
            pendingDeletes: 1,
            malformed: 1,
            heldSlots: 0,
            drift: 0,
            exact: false,
            value: 6,
            limit: 9,
        });
        // Utilization: a heal leaves out the life whose delete is in flight (its -1 may land after the heal).
        const utilization = keyStatus("k", rows, { ...config, mode: "utilization" }, NOW);
        assert.deepEqual([utilization.heldSlots, utilization.live, utilization.exact], [1, 6, false]);
    });

    it("lists a sharded key's shards with what a heal sets each to", () => {
        const sharded = { ...config, counterShards: 2 };
        const rows: KeyRows = {
            items: [life("a", NOW - 3 * PERIOD_MS), life("b", NOW - 3 * PERIOD_MS), life("c", NOW - 3 * PERIOD_MS)],
            counters: new Map([
                [0, [counter("#counter#best-effort", 3), counter("#counter#eventual", 3)]],
                [1, [{ pk: { S: "k\u00001" }, sk: { S: "#counter#best-effort" }, count: { N: "1" } }]],
            ]),
        };
        const s = keyStatus("k", rows, sharded, NOW);
        const targets = s.shards!.map((shard) => shard.target);
        assert.equal(
            targets.reduce((a, b) => a + b, 0),
            3,
        );
        assert.deepEqual(
            s.shards!.map((shard) => [shard.shard, shard.bestEffort]),
            [
                [0, 3],
                [1, 1],
            ],
        );
        assert.equal(s.heldSlots, Math.max(0, 3 - targets[0]!) + Math.max(0, 1 - targets[1]!));
        assert.deepEqual([s.bestEffort, s.live, s.counted, s.exact], [4, 3, 3, true]);
    });

    it("with regions, a row per member region (the lives it owns, its own counter items) and their sums", () => {
        const regional = {
            ...config,
            regions: { current: "eu-west-1", members: [{ region: "us-east-1", role: "home" as const }, { region: "eu-west-1" }] },
        };
        const rows: KeyRows = {
            items: [life("h", NOW - 3 * PERIOD_MS), life("m", NOW - 3 * PERIOD_MS, { hc_region: { S: "eu-west-1" } })],
            counters: new Map([
                [
                    0,
                    [
                        counter("#counter#@us-east-1#eventual", 1),
                        counter("#counter#@eu-west-1#eventual", 0),
                        counter("#counter#@eu-west-1#best-effort", 1),
                    ],
                ],
            ]),
        };
        const s = keyStatus("k", rows, regional, NOW, true);
        assert.deepEqual(
            s.regions!.map((r) => [r.region, r.home, r.bestEffort, r.eventual, r.live, r.counted, r.drift, r.exact]),
            [
                ["eu-west-1", false, 1, 0, 1, 1, -1, false],
                ["us-east-1", true, 0, 1, 1, 1, 0, true],
            ],
        );
        assert.deepEqual([s.bestEffort, s.eventual, s.live, s.drift, s.exact, s.value], [1, 1, 2, -1, false, 2]);
        // The summary's rows are the region the command runs as.
        assert.deepEqual([keyStatus("k", rows, regional, NOW).live, keyStatus("k", rows, regional, NOW).regions], [1, undefined]);
    });

    const status = (key: string, fields: Partial<KeyStatus>): KeyStatus => ({
        key,
        bestEffort: 0,
        eventual: 0,
        live: 0,
        counted: 0,
        pendingCreates: 0,
        pendingDeletes: 0,
        malformed: 0,
        heldSlots: 0,
        drift: 0,
        exact: true,
        value: 0,
        ...fields,
    });

    it("orders keys worst first, sums them, and picks those a reconcile can change", () => {
        const statuses = [
            status("ok", { live: 2 }),
            status("held", { heldSlots: 2 }),
            status("late", { pendingCreates: 3, exact: false }),
            status("tomb", { pendingDeletes: 1, exact: false }),
            status("off", { drift: -1, exact: false }),
        ];
        assert.deepEqual(
            worstFirst(statuses).map((s) => s.key),
            ["late", "held", "off", "tomb", "ok"],
        );
        const summary = summarize(statuses, 3);
        assert.deepEqual([summary.keys, summary.exactKeys, summary.totals.live, summary.totals.drift], [5, 2, 2, -1]);
        assert.deepEqual(
            summary.worst.map((s) => s.key),
            ["late", "held", "off"],
        );
        assert.deepEqual(keysToReconcile(statuses), ["late", "off"]);
        assert.deepEqual(advice(status("off", { drift: -1, pendingDeletes: 2, exact: false })), [
            "not exact: eventual is below its counted items by 1: once the stream has drained, `reconcile --key off` (see `fatal list`)",
            "and: 2 tombstone(s) left for the settler: `heal --key off` removes those no put attempt can reach any more",
        ]);
        assert.deepEqual(advice(status("held", { heldSlots: 2 })), ["exact; 2 held slot(s): `heal --key held` gives them back"]);
    });

    it("files a scanned row under its key: items, a key's counter items by shard, nothing counter-wide", () => {
        const separate = { ...config, counterShards: 2 };
        assert.deepEqual(rowOf(item("a"), false, separate), { key: "k", kind: "item" });
        assert.deepEqual(rowOf(item("a"), true, separate), undefined);
        assert.deepEqual(rowOf({ pk: { S: "k\u00001" }, sk: { S: "#counter#best-effort" } }, true, separate), {
            key: "k",
            kind: "counter",
            shard: 1,
        });
        assert.deepEqual(rowOf({ pk: { S: "k\u0000u" }, sk: { S: "#counter#usage#2026-01-01" } }, true, separate), undefined);
        assert.deepEqual(rowOf({ pk: { S: "#counter#stream" }, sk: { S: "#counter#shard#s" } }, true, separate), undefined);
        assert.deepEqual(rowOf({ pk: { S: "#counter#limits" }, sk: { S: "#counter#default-limit" } }, true, separate), undefined);
        const same = { ...config, countersTableName: "t" };
        assert.deepEqual(rowOf(item("a"), true, same), { key: "k", kind: "item" });
        assert.deepEqual(rowOf(counter("#counter#eventual", 1), true, same), { key: "k", kind: "counter", shard: 0 });
    });
});

describe("the counter a command runs on", () => {
    const resolve = (flags: Record<string, string>, file?: unknown) =>
        resolveTarget({ ...flags, ...(file === undefined ? {} : { config: "f" }) }, () => JSON.stringify(file));
    const refused = (flags: Record<string, string>, file: unknown, message: string) =>
        assert.throws(
            () => resolve(flags, file),
            (e: unknown) => e instanceof UsageError && e.message === message,
        );

    it("takes the clientConfig output (or the whole outputs), the selection flat or as an object, and the queues", () => {
        const outputs = {
            clientConfig: {
                tableName: "t",
                countersTableName: "c",
                countedItems: "sortKeyPrefix",
                countedSortKeyPrefix: "o#",
                counterMode: "strict",
                healQuietWindowSeconds: 900,
                counterShards: 2,
            },
            fatalDlqUrl: "http://127.0.0.1:1/q/fatal",
            firstDlqUrl: "http://127.0.0.1:1/q/first",
        };
        assert.deepEqual(resolve({}, outputs), {
            config: {
                ...DEFAULT_LAYOUT,
                selection: { kind: "sortKeyPrefix", prefix: "o#" },
                tableName: "t",
                countersTableName: "c",
                mode: "strict",
                periodMs: 900_000,
                counterShards: 2,
            },
            modeGiven: true,
            fatalQueueUrl: "http://127.0.0.1:1/q/fatal",
            firstDlqUrl: "http://127.0.0.1:1/q/first",
        });
        const selection = { kind: "attribute", name: "type", value: "order" };
        assert.deepEqual(resolve({}, { tableName: "t", selection }).config.selection, selection);
        assert.deepEqual(resolve({ countedItems: "client" }, { tableName: "t", selection }).config.selection, { kind: "client" });
    });

    it("without a counters table, the counter items are in the user's table; without a mode, it is utilization, not given", () => {
        assert.deepEqual(resolve({ table: "t" }), {
            config: { ...DEFAULT_LAYOUT, tableName: "t", countersTableName: "t", mode: "utilization", periodMs: 600_000 },
            modeGiven: false,
        });
        assert.deepEqual(
            [resolve({ table: "t", mode: "strict" }).config.mode, resolve({ table: "t", mode: "strict" }).modeGiven],
            ["strict", true],
        );
        assert.equal(resolve({ table: "t", quietWindowSeconds: "1200" }).config.periodMs, 1_200_000);
    });

    it("refuses a flag that contradicts the config, and a bad setting, naming it", () => {
        refused(
            { mode: "utilization" },
            { tableName: "t", counterMode: "strict" },
            "--mode: the counter's mode is strict (counterMode in --config), not utilization: it runs in one mode, and a heal in the other would break its bound; drop --mode",
        );
        refused({ quietWindowSeconds: "0" }, { tableName: "t" }, '--quiet-window-seconds must be an integer from 1 to 86400 (got "0")');
        refused(
            {},
            { tableName: "t", healQuietWindowSeconds: "600" },
            '--config: [healQuietWindowSeconds] must be an integer from 1 to 86400 (got "600")',
        );
        refused(
            {},
            { tableName: "t", selection: { kind: "everything" } },
            '--config: [countedItems] must be "client", "sortKeyPrefix", "attribute"',
        );
        refused(
            { countedItems: "attribute" },
            { tableName: "t" },
            '--config: [countedAttributeName] must be an attribute name of 1 to 255 bytes when [countedItems] is "attribute"',
        );
        assert.throws(
            () => resolveTarget({ table: "t", countedItems: "attribute" }, () => ""),
            (e: unknown) =>
                e instanceof UsageError &&
                e.message === '--counted-attribute-name: must be an attribute name of 1 to 255 bytes when [countedItems] is "attribute"',
        );
    });
});

describe("the small formats", () => {
    it("usage as CSV, the last days, the limit and key flags, and backfill's problems as flags", () => {
        assert.equal(
            usageCsv({
                key: "k",
                from: "2026-01-01",
                to: "2026-01-02",
                days: [
                    { day: "2026-01-01", creates: 2, deletes: 1, peak: 2 },
                    { day: "2026-01-02", creates: 0, deletes: 1, peak: 1, limit: 4 },
                ],
            }),
            "day,creates,deletes,peak,limit\n2026-01-01,2,1,2,\n2026-01-02,0,1,1,4",
        );
        assert.deepEqual(lastDays(1, Date.parse("2026-03-01T23:59:59Z")), { from: "2026-03-01", to: "2026-03-01" });
        assert.deepEqual(lastDays(3, Date.parse("2026-03-01T00:00:00Z")), { from: "2026-02-27", to: "2026-03-01" });
        assert.deepEqual([limitFlag("0"), limitFlag("12"), limitFlag("none")], [0, 12, null]);
        assert.throws(() => limitFlag("1e3"), /--limit must be a non-negative integer, or none to remove the limit \(got "1e3"\)/);
        assert.throws(() => keyFlag("--key", "a\u0000b"), /^UsageError: --key must not contain U\+0000/);
        assert.equal(backfillUsage("[pageSize] must be an integer from 1 to 10000"), "--page-size must be an integer from 1 to 10000");
        assert.equal(backfillUsage("[config.tableName] must be set"), "--config: [tableName] must be set");
    });
});
