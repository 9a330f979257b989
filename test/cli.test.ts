/**
 * The operator CLI, run as a user runs it: the built bin (dist/cli/index.js) as a subprocess, against DynamoDB Local
 * and the local SQS server, with exact output and exit codes: bad input, `--help`, `status`, `heal` and `reconcile`.
 * The fatal queue's commands are in cli-fatal.test.ts, limits and usage in cli-limits.test.ts.
 */
import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { bestEffortKey } from "../runtime/shared/keys";
import { newToken } from "../runtime/shared/tokens";
import { parsedJson } from "./support/cli-bin";
import { counterSystem, human, jsonFile, setCount, setEventual, useServers, without, type CounterSystem } from "./support/cli-fixture";

const json = parsedJson;

/** A key's status as `status --key --json` prints it, exact unless the fields say otherwise. */
const keyStatus = (key: string, n: number, extra: Record<string, unknown> = {}) => ({
    key,
    bestEffort: n,
    eventual: n,
    live: n,
    counted: n,
    pendingCreates: 0,
    pendingDeletes: 0,
    malformed: 0,
    heldSlots: 0,
    drift: 0,
    exact: true,
    value: n,
    ...extra,
});

/**
 * k1's client lives (one deleted: its tombstone stays while a put attempt could still land) and a stored limit; k2 one
 * life; k3 another writer's item and one whose deleted flag is not a boolean (both flagged by the consumer); k4 another
 * writer's item the consumer has not seen yet.
 */
async function seedStatus(s: CounterSystem): Promise<void> {
    for (const id of ["a", "b", "c"]) {
        assert.deepEqual(await s.client.create("k1", id), { created: true });
    }
    assert.deepEqual(await s.client.delete("k1", "a"), { deleted: true });
    await s.client.create("k2", "x");
    const put = (key: string, id: string, extra = {}) =>
        s.admin.send(
            new PutItemCommand({
                TableName: s.tableName,
                Item: { pk: { S: key }, sk: { S: id }, counter_token: { S: newToken() }, ...extra },
            }),
        );
    await put("k3", "other");
    await put("k3", "odd", { deleted: { S: "yes" } });
    await s.drain();
    await s.client.setLimit("k1", 5);
    await put("k4", "late");
}

describe("operator CLI: bad input, help, status, heal, reconcile (built bin, DynamoDB Local)", function () {
    const servers = useServers();
    const cli = (args: readonly string[], options?: { stdin?: string; env?: Record<string, string> }) => servers().cli(args, options);

    describe("bad input: one line, exit 2 (usage) or 1 (failure), nothing on stdout, no stack unless --verbose", () => {
        const usage = (stderr: string) => ({ code: 2, stdout: "", stderr: `error: ${stderr}\n` });

        it("an unknown command, a missing or unknown option, and a flag a command has no use for", async () => {
            assert.deepEqual(await cli(["nope"]), usage("unknown command 'nope'"));
            assert.deepEqual(await cli(["status", "--table", "t", "--key"]), usage("option '--key <key>' argument missing"));
            assert.deepEqual(await cli(["heal", "--table", "t", "--audit-segments", "2"]), usage("unknown option '--audit-segments'"));
            assert.deepEqual(await cli(["backfill", "--table", "t", "--clients-since", "0"]), usage("unknown option '--clients-since'"));
            assert.deepEqual(await cli(["fatal", "show", "--table", "t"]), usage("missing required argument 'id'"));
            assert.deepEqual(await cli(["fatal", "delete", "--table", "t"]), usage("missing required argument 'id'"));
        });

        it("each command's own flags, named before any config is read", async () => {
            assert.deepEqual(await cli(["reconcile", "--table", "t"]), usage("--key <key> or --all is required"));
            assert.deepEqual(await cli(["reconcile", "--table", "t", "--all", "--key", "k"]), usage("--key and --all exclude each other"));
            assert.deepEqual(await cli(["reconcile", "--key", ""]), usage("--key must be a non-empty string"));
            assert.deepEqual(await cli(["status", "--top", "0"]), usage('--top must be an integer from 1 to 10000 (got "0")'));
            assert.deepEqual(await cli(["heal", "--budget", "0"]), usage('--budget must be an integer from 1 to 10000 (got "0")'));
            assert.deepEqual(
                await cli(["heal", "--audit-page-size", "x"]),
                usage('--audit-page-size must be an integer from 1 to 10000 (got "x")'),
            );
            assert.deepEqual(
                await cli(["backfill", "--page-size", "0"]),
                usage('--page-size must be an integer from 1 to 10000 (got "0")'),
            );
            assert.deepEqual(await cli(["dev", "--keys", "0"]), usage('--keys must be an integer from 1 to 1000 (got "0")'));
        });

        it("no table, a malformed config from a file or stdin, and a bad layout", async () => {
            const file = path.join(tmpdir(), "hc-cli-no-such-dir", "config.json");
            const broken = jsonFile("x");
            assert.deepEqual(await cli(["status"]), usage("--table or --config is required: which table holds the counter?"));
            assert.deepEqual(await cli(["status", "--config", file]), usage(`--config: cannot read ${file} (ENOENT)`));
            const garbled = await cli(["status", "--config", "-"], { stdin: '{"tableName": "t",' });
            assert.equal(garbled.code, 2);
            assert.match(garbled.stderr, /^error: --config: stdin is not JSON \([^\n]+\)\n$/);
            assert.deepEqual(await cli(["status", "--config", broken]), usage("--config: must be a JSON object (the clientConfig output)"));
            assert.deepEqual(
                await cli(["status", "--config", "-"], { stdin: '{"tableName": 42}' }),
                usage("--config: [tableName] must be a string"),
            );
            assert.deepEqual(
                await cli(["status", "--config", "-"], { stdin: '{"tableName": "t", "sortKey": "pk"}' }),
                usage('--config: [sortKey] must differ from [partitionKey] (both are "pk")'),
            );
            assert.deepEqual(
                await cli(["status", "--config", "-"], { stdin: '{"clientConfig": {"tableName": "t"}, "thresholds": [0.8, 0.8]}' }),
                usage("--config: [thresholds] must not name a fraction twice"),
            );
            assert.deepEqual(
                await cli(["status", "--config", "-"], { stdin: '{"clientConfig": {"tableName": "t"}, "usageRetentionDays": 1.5}' }),
                usage("--config: [usageRetentionDays] must be a positive integer (got 1.5)"),
            );
            assert.deepEqual(
                await cli(["status", "--table", "t", "--sort-key", "pk"]),
                usage('--sort-key: must differ from [partitionKey] (both are "pk")'),
            );
            assert.deepEqual(
                await cli(["status", "--table", "t", "--counter-shards", "3"]),
                usage(
                    "--counter-shards: above 1 needs a counters table of its own: a key's shards are partition keys of the counters table",
                ),
            );
        });

        it("the mode and the period come from the config: a flag that contradicts them is refused, naming it", async () => {
            const config = jsonFile({ tableName: "t", countersTableName: "c", counterMode: "strict", healQuietWindowSeconds: 900 });
            assert.deepEqual(
                await cli(["heal", "--config", config, "--mode", "utilization"]),
                usage(
                    "--mode: the counter's mode is strict (counterMode in --config), not utilization: it runs in one mode, and a heal in the other would break its bound; drop --mode",
                ),
            );
            assert.deepEqual(
                await cli(["heal", "--config", config, "--quiet-window-seconds", "600"]),
                usage("--quiet-window-seconds: the counter's period is 900 s (healQuietWindowSeconds in --config), not 600: drop the flag"),
            );
            assert.deepEqual(
                await cli(["heal", "--table", "t", "--mode", "sometimes"]),
                usage('--mode must be utilization or strict (got "sometimes")'),
            );
            assert.deepEqual(
                await cli(["heal", "--table", "t"]),
                usage("--mode is required (or counterMode in --config): heal works by the counter's mode, utilization or strict"),
            );
            assert.deepEqual(
                await cli(["status", "--config", "-"], { stdin: '{"tableName": "t", "counterMode": "fast"}' }),
                usage('--config: [counterMode] must be "utilization" or "strict" (got "fast")'),
            );
        });

        it("an unreachable endpoint: one line, and the stack with --verbose; no SDK warning", async () => {
            const args = ["status", "--table", "t", "--key", "k", "--endpoint", "http://127.0.0.1:1"];
            const ran = await cli(args, { env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "false" } });
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

        it("a table that does not exist, a queue that does not exist, no queue, and a bad --to", async () => {
            const table = await cli(["status", "--table", "no-such-table", "--key", "k", "--endpoint", servers().engine.endpoint]);
            assert.equal(table.code, 1);
            assert.match(table.stderr, /^error: table not found: check --table \/ --config and --region \(.+\)\n$/);
            assert.deepEqual(
                await cli(["fatal", "list", "--table", "t", "--fatal-queue-url", `${servers().sqs.endpoint}/000000000000/missing`]),
                {
                    code: 1,
                    stdout: "",
                    stderr: "error: the queue does not exist: check --fatal-queue-url / --first-dlq-url (The specified queue does not exist.)\n",
                },
            );
            assert.deepEqual(
                await cli(["fatal", "list", "--table", "t"]),
                usage("--fatal-queue-url is required (or fatalDlqUrl in --config)"),
            );
            assert.deepEqual(
                await cli(["redrive", "--table", "t", "--fatal-queue-url", "http://127.0.0.1:1/q"]),
                usage("--first-dlq-url is required (or firstDlqUrl in --config)"),
            );
            assert.deepEqual(
                await cli(["fatal", "replay", "--table", "t", "--fatal-queue-url", "http://127.0.0.1:1/q", "--to", "elsewhere"]),
                usage('--to must be first-dlq (got "elsewhere")'),
            );
            const replay = ["fatal", "replay", "--table", "t", "--fatal-queue-url", "http://127.0.0.1:1/q"];
            assert.deepEqual(
                await cli([...replay, "--thresholds", "0.8,1.5"]),
                usage('--thresholds must be fractions of the limit, each above 0 and at most 1, none twice (got "0.8,1.5")'),
            );
            assert.deepEqual(
                await cli([...replay, "--thresholds", "0.5,,1"]),
                usage('--thresholds must be fractions of the limit, each above 0 and at most 1, none twice (got "0.5,,1")'),
            );
            assert.deepEqual(
                await cli([...replay, "--usage-retention-days", "0"]),
                usage('--usage-retention-days must be an integer from 1 to 3650 (got "0")'),
            );
        });

        it("--help on every command", async () => {
            const commands = [
                [],
                ["status"],
                ["reconcile"],
                ["heal"],
                ["backfill"],
                ["fatal"],
                ["fatal", "list"],
                ["fatal", "show"],
                ["fatal", "replay"],
                ["fatal", "delete"],
                ["redrive"],
                ["limits"],
                ["limits", "get"],
                ["limits", "set"],
                ["limits", "list"],
                ["usage"],
                ["dev"],
            ];
            for (const command of commands) {
                const ran = await cli([...command, "--help"]);
                assert.equal(ran.code, 0, command.join(" "));
                assert.equal(ran.stderr, "");
                assert.ok(ran.stdout.startsWith(`Usage: hybrid-counter${command.map((c) => ` ${c}`).join("")} [options]`), ran.stdout);
            }
        });
    });

    it("status: a key's counters and items, and the table's worst keys, as JSON and as text", async () => {
        // Prepare
        const s = await counterSystem(servers(), "status");
        await seedStatus(s);

        // Act
        const summary = await cli(["status", ...s.flags]);
        const k1 = await cli(["status", "--key", "k1", ...s.flags]);
        const k3 = await cli(["status", "--key", "k3", ...s.flags]);
        const text = await cli(["status", ...human(s.flags)]);
        const k1Text = await cli(["status", "--key", "k1", ...human(s.flags)]);
        const k4Text = await cli(["status", "--key", "k4", ...human(s.flags)]);
        const top = await cli(["status", "--top", "1", ...s.flags]);

        // Assess
        const k1Status = keyStatus("k1", 2, { pendingDeletes: 1, exact: false, limit: 5 });
        const k4Status = keyStatus("k4", 0, { live: 1, pendingCreates: 1, exact: false });
        assert.deepEqual(json(summary), {
            keys: 4,
            exactKeys: 2,
            totals: {
                bestEffort: 3,
                eventual: 5,
                live: 6,
                counted: 5,
                pendingCreates: 1,
                pendingDeletes: 1,
                malformed: 1,
                heldSlots: 0,
                drift: 0,
            },
            worst: [k1Status, k4Status],
        });
        assert.deepEqual((json(top) as { worst: unknown[] }).worst, [k1Status]);
        assert.deepEqual(json(k1), k1Status);
        // Another writer's items count in eventual; best-effort is the client's (utilization: its old lives, from the table).
        assert.deepEqual(json(k3), keyStatus("k3", 2, { bestEffort: 0, malformed: 1, value: 2 }));
        assert.deepEqual(text, {
            code: 0,
            stderr: "",
            stdout: [
                "4 keys, 2 exact; totals: best-effort 3, eventual 5, live 6, counted 5, pending creates 1, pending deletes 1, malformed 1, held slots 0, drift 0",
                "",
                "key  best-effort  eventual  live  counted  pending creates  pending deletes  malformed  held slots  drift",
                "k1             2         2     2        2                0                1          0           0      0",
                "k4             0         0     1        0                1                0          0           0      0",
                "",
            ].join("\n"),
        });
        assert.equal(
            k1Text.stdout,
            [
                "key  best-effort  eventual  live  counted  pending creates  pending deletes  malformed  held slots  drift",
                "k1             2         2     2        2                0                1          0           0      0",
                "limit 5 (the key's own)",
                "not exact: 1 tombstone(s) left for the settler: `heal --key k1` removes those no put attempt can reach any more",
                "",
            ].join("\n"),
        );
        assert.equal(
            k4Text.stdout.split("\n").at(-2),
            "not exact: 1 live item(s) not flagged yet: the consumer flags them when their records arrive, or `backfill` does",
        );
    });

    it("heal --key gives a strict key's held slots back; heal runs the settler once, whose audit heals a key nobody listed", async () => {
        // Prepare: three strict lives, counted; then best-effort holds two slots no life stands for (a reservation
        // whose put never came, as a crashed call leaves it).
        const s = await counterSystem(servers(), "heal", { mode: "strict" });
        for (const id of ["a", "b", "c"]) {
            assert.equal((await s.client.tryCreate("h", id, 10)).created, true);
        }
        await s.drain();
        const held = async () => json(await cli(["status", "--key", "h", ...s.flags])) as { heldSlots: number; bestEffort: number };
        await setCount(s, bestEffortKey(s.config, "h", 0), 5);
        const before = await held();

        // Act
        const healed = await cli(["heal", "--key", "h", ...s.flags]);
        const after = await held();
        await setCount(s, bestEffortKey(s.config, "h", 0), 6);
        const run = await cli(["heal", "--budget", "10", "--audit-page-size", "50", "--quiet-window-seconds", "600", ...human(s.flags)]);
        const again = await cli(["heal", ...s.flags]);
        const keyText = await cli(["heal", "--key", "h", ...human(s.flags)]);

        // Assess
        assert.deepEqual([before.bestEffort, before.heldSlots, after.bestEffort, after.heldSlots], [5, 2, 3, 0]);
        assert.deepEqual(json(healed), { key: "h", shards: [{ shard: 0, before: 5, after: 3 }], drift: 2, removed: 0, healed: true });
        assert.deepEqual(run, {
            code: 0,
            stderr: "",
            stdout: [
                "due  healed  corrected  drift closed  raced  tombstones removed  audited  healed by the audit",
                "0         1          1             3      0                   0        1                    1",
                "",
            ].join("\n"),
        });
        assert.deepEqual(json(again), {
            due: 0,
            healed: 0,
            corrected: 0,
            drift: 0,
            raced: 0,
            removed: 0,
            audited: 1,
            auditHealed: 0,
            failedKeys: [],
        });
        assert.deepEqual(keyText, { code: 0, stderr: "", stdout: "h: healed\n  best-effort 3 -> 3\n" });
        assert.deepEqual(await held(), { ...keyStatus("h", 3) });
    });

    it("every layout flag, --profile and --sqs-endpoint: the counter as the flags describe it, the credentials and queues they name", async () => {
        // Prepare: a table of another layout, items selected by an attribute; a profile in a home of its own.
        const layout = {
            partitionKey: "tenant",
            sortKey: "id",
            deletedAttribute: "gone",
            tokenAttribute: "tok",
            counterPrefix: "#c#",
            countAttribute: "n",
            selection: { kind: "attribute" as const, name: "type", value: "order" },
        };
        const s = await counterSystem(servers(), "layout", { layout });
        await s.client.create("t1", "o1");
        await s.client.create("t1", "o2");
        await s.drain();
        const layoutFlags = [
            ...["--partition-key", "tenant", "--sort-key", "id", "--deleted-attribute", "gone", "--token-attribute", "tok"],
            ...["--counter-prefix", "#c#", "--count-attribute", "n", "--counted-items", "attribute"],
            ...["--counted-attribute-name", "type", "--counted-attribute-value", "order"],
        ];
        const home = mkdtempSync(path.join(tmpdir(), "hc-cli-home-"));
        mkdirSync(path.join(home, ".aws"));
        writeFileSync(
            path.join(home, ".aws", "credentials"),
            "[operator]\naws_access_key_id = operator\naws_secret_access_key = operator\n",
        );
        const noEnvironmentKeys = { HOME: home, AWS_ACCESS_KEY_ID: "", AWS_SECRET_ACCESS_KEY: "" };

        // Act
        const flagged = await cli(["status", "--key", "t1", ...layoutFlags, ...s.flags]);
        const byDefault = await cli(["status", "--key", "t1", ...s.flags]);
        const profile = await cli(["status", "--key", "t1", "--profile", "operator", ...layoutFlags, ...s.flags], {
            env: noEnvironmentKeys,
        });
        const noProfile = await cli(["status", "--key", "t1", "--profile", "nobody", ...layoutFlags, ...s.flags], {
            env: noEnvironmentKeys,
        });
        // --sqs-endpoint says where SQS is, whatever host the queue URL names.
        const sqsEndpoint = await cli([
            "fatal",
            "list",
            "--table",
            s.tableName,
            "--fatal-queue-url",
            s.fatal.url,
            "--sqs-endpoint",
            "http://127.0.0.1:1",
        ]);

        // Assess
        assert.deepEqual(json(flagged), keyStatus("t1", 2));
        assert.equal(byDefault.code, 1);
        assert.match(byDefault.stderr, /^error: ValidationException: /);
        assert.deepEqual(json(profile), keyStatus("t1", 2));
        assert.equal(noProfile.code, 1);
        assert.match(noProfile.stderr, /^error: no AWS credentials: pass --profile or set the standard AWS variables \(.+\)\n$/);
        assert.deepEqual(sqsEndpoint, {
            code: 1,
            stdout: "",
            stderr: "error: could not reach http://127.0.0.1:1 (ECONNREFUSED): check --endpoint, --sqs-endpoint and --region\n",
        });
    });

    it("reconcile --key and --all set eventual from the items, with progress on stderr; items not flagged yet end it pending (exit 1) until the backfill flags them", async () => {
        // Prepare: r1 and r2 counted, then their eventual counts lose records; r3 holds another writer's item the
        // consumer has not seen.
        const s = await counterSystem(servers(), "reconcile");
        await s.client.create("r1", "a");
        await s.client.create("r1", "b");
        await s.client.create("r2", "c");
        await s.drain();
        await setEventual(s, "r1", 0);
        await setEventual(s, "r2", 7);
        await s.admin.send(
            new PutItemCommand({ TableName: s.tableName, Item: { pk: { S: "r3" }, sk: { S: "d" }, counter_token: { S: newToken() } } }),
        );
        const result = (key: string, outcome: string, before: number, after: number, items: number, unflagged = 0) => ({
            key,
            outcome,
            eventualBefore: before,
            eventualAfter: after,
            items,
            unflagged,
        });

        // Act: one key; then every key; the backfill flags r3's item and the stream counts it; every key again.
        const one = await cli(["reconcile", "--key", "r1", ...s.flags]);
        const all = await cli(["reconcile", "--all", ...s.flags]);
        const backfill = await cli(["backfill", ...s.flags]);
        await s.drain();
        const again = await cli(["reconcile", "--all", ...human(s.flags)]);
        const exact = await cli(["reconcile", "--key", "r1", "r2", ...human(s.flags)]);

        // Assess
        assert.deepEqual(one, {
            code: 0,
            stderr: "reconcile: 0/1\nreconcile: 1/1 r1\n",
            stdout: `${JSON.stringify({ results: [result("r1", "corrected", 0, 2, 2)], notStarted: [], incomplete: false }, null, 2)}\n`,
        });
        assert.equal(all.code, 1, all.stderr);
        assert.equal(all.stderr, "reconcile: 0/2\nreconcile: 1/2 r2\nreconcile: 2/2 r3\n");
        assert.deepEqual(JSON.parse(all.stdout), {
            results: [result("r2", "corrected", 7, 1, 1), result("r3", "pending", 0, 0, 0, 1)],
            notStarted: [],
            incomplete: true,
        });
        assert.equal(backfill.code, 0, backfill.stderr);
        assert.deepEqual(again, { code: 0, stderr: "reconcile: 0/0\n", stdout: "nothing to reconcile\n" });
        assert.deepEqual(exact, {
            code: 0,
            stderr: "reconcile: 0/2\nreconcile: 1/2 r1\nreconcile: 2/2 r2\n",
            stdout: [
                "key  outcome  eventual before  eventual after  counted items  not flagged",
                "r1   exact                  2               2              2            0",
                "r2   exact                  1               1              1            0",
                "",
            ].join("\n"),
        });
        for (const [key, n] of [
            ["r1", 2],
            ["r2", 1],
            ["r3", 1],
        ] as const) {
            const bestEffort = key === "r3" ? 0 : n;
            assert.deepEqual(
                json(await cli(["status", "--key", key, ...without(s.flags, "--mode")])),
                keyStatus(key, n, { bestEffort, value: n }),
            );
        }
    });
});
