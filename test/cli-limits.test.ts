/**
 * `limits get | set | list` and `usage`, run as a user runs them (the built bin against DynamoDB Local): the stored
 * limits the API's calls run under, where a key's comes from, and a key's usage per UTC day as a table, JSON and CSV.
 */
import { strict as assert } from "node:assert";
import { dayOf } from "../runtime/limits/usage";
import { parsedJson } from "./support/cli-bin";
import { counterSystem, human, useServers } from "./support/cli-fixture";

const json = parsedJson;

describe("operator CLI: limits and usage (built bin, DynamoDB Local)", function () {
    const servers = useServers();
    const cli = (args: readonly string[]) => servers().cli(args);
    const usage = (stderr: string) => ({ code: 2, stdout: "", stderr: `error: ${stderr}\n` });

    it("limits: a key's own limit, else the default, else none; set, remove and list them", async () => {
        // Prepare
        const s = await counterSystem(servers(), "limits");
        const get = async (key: string) => json(await cli(["limits", "get", "--key", key, ...s.flags]));
        const set = async (...args: string[]) => cli(["limits", "set", ...args, ...s.flags]);

        // Act + Assess: nothing stored, then a default, then a key's own, then each removed.
        assert.deepEqual(await get("k"), { key: "k", limit: null, source: "none" });
        assert.deepEqual(json(await set("--default", "--limit", "10")), { default: 10 });
        assert.deepEqual(await get("k"), { key: "k", limit: 10, source: "default" });
        assert.deepEqual(json(await set("--key", "k", "--limit", "3")), { key: "k", limit: 3 });
        assert.deepEqual(json(await set("--key", "z", "--limit", "0")), { key: "z", limit: 0 });
        assert.deepEqual(await get("k"), { key: "k", limit: 3, source: "key" });
        assert.deepEqual(await get("other"), { key: "other", limit: 10, source: "default" });
        assert.deepEqual(json(await cli(["limits", "list", ...s.flags])), {
            default: 10,
            keys: [
                { key: "k", limit: 3 },
                { key: "z", limit: 0 },
            ],
        });
        assert.deepEqual(await cli(["limits", "list", ...human(s.flags)]), {
            code: 0,
            stderr: "",
            stdout: "default limit 10\nkey  limit\nk        3\nz        0\n",
        });
        assert.deepEqual(await cli(["limits", "get", "--key", "k", ...human(s.flags)]), {
            code: 0,
            stderr: "",
            stdout: "k: limit 3 (the key's own)\n",
        });
        assert.deepEqual(await cli(["limits", "set", "--key", "k", "--limit", "none", ...human(s.flags)]), {
            code: 0,
            stderr: "",
            stdout: "k: its own limit removed (it runs under the default, if any)\n",
        });
        assert.deepEqual(await get("k"), { key: "k", limit: 10, source: "default" });
        assert.deepEqual(json(await set("--default", "--limit", "none")), { default: null });
        assert.deepEqual(await set("--key", "z", "--limit", "none"), {
            code: 0,
            stderr: "",
            stdout: `${JSON.stringify({ key: "z", limit: null }, null, 2)}\n`,
        });
        assert.deepEqual(await cli(["limits", "list", ...human(s.flags)]), {
            code: 0,
            stderr: "",
            stdout: "no default limit\nno key has a limit of its own\n",
        });
        assert.deepEqual(await cli(["limits", "get", "--key", "k", ...human(s.flags)]), { code: 0, stderr: "", stdout: "k: no limit\n" });
    });

    it("limits: bad flags are refused before anything is written", async () => {
        const s = await counterSystem(servers(), "limits-bad");
        assert.deepEqual(
            await cli(["limits", "set", "--key", "k", ...s.flags]),
            usage("--limit <n> is required: a non-negative integer, or none to remove the limit"),
        );
        for (const value of ["-1", "1.5", "ten", "9007199254740993"]) {
            assert.deepEqual(
                await cli(["limits", "set", "--key", "k", "--limit", value, ...s.flags]),
                usage(`--limit must be a non-negative integer, or none to remove the limit (got "${value}")`),
            );
        }
        assert.deepEqual(await cli(["limits", "set", "--limit", "1", ...s.flags]), usage("--key <key> or --default is required"));
        assert.deepEqual(
            await cli(["limits", "set", "--key", "k", "--default", "--limit", "1", ...s.flags]),
            usage("--key and --default exclude each other"),
        );
        assert.deepEqual(await cli(["limits", "get", ...s.flags]), usage("required option '--key <key>' not specified"));
        assert.deepEqual(await cli(["limits", "get", "--key", "", ...s.flags]), usage("--key must be a non-empty string"));
        assert.deepEqual(json(await cli(["limits", "list", ...s.flags])), { default: null, keys: [] });
    });

    it("usage: a key's creates, deletes, peak and limit per UTC day, as a table, JSON and CSV", async () => {
        // Prepare: a limit, three lives created and one deleted, counted by the consumer.
        const s = await counterSystem(servers(), "usage");
        await s.client.setLimit("u", 5);
        for (const id of ["a", "b", "c"]) {
            assert.equal((await s.client.tryCreate("u", id)).created, true);
        }
        assert.deepEqual(await s.client.delete("u", "a"), { deleted: true });
        await s.drain();
        const before = dayOf(Date.now());

        // Act
        const asJson = await cli(["usage", "--key", "u", "--days", "7", ...s.flags]);
        const asCsv = await cli(["usage", "--key", "u", "--days", "1", "--csv", ...human(s.flags)]);
        const asText = await cli(["usage", "--key", "u", "--days", "1", ...human(s.flags)]);
        const none = await cli(["usage", "--key", "nobody", "--days", "2", ...human(s.flags)]);
        const after = dayOf(Date.now());

        // Assess: the day the records were counted (the run's today; at midnight UTC, either side of it).
        const shown = json(asJson) as { key: string; from: string; to: string; days: Array<{ day: string }> };
        assert.ok([before, after].includes(shown.to), shown.to);
        const today = shown.days[0]!.day;
        assert.deepEqual(shown, {
            key: "u",
            from: dayOf(Date.parse(`${shown.to}T00:00:00Z`) - 6 * 86_400_000),
            to: shown.to,
            days: [{ day: today, creates: 3, deletes: 1, peak: 3, limit: 5 }],
        });
        assert.deepEqual(asCsv, { code: 0, stderr: "", stdout: `day,creates,deletes,peak,limit\n${today},3,1,3,5\n` });
        assert.deepEqual(asText, {
            code: 0,
            stderr: "",
            stdout: [
                `u: usage from ${today} to ${today} (UTC days with any)`,
                "day         creates  deletes  peak  limit",
                `${today}        3        1     3  5`,
                "",
            ].join("\n"),
        });
        assert.match(none.stdout, /^nobody: no usage from \d{4}-\d{2}-\d{2} to \d{4}-\d{2}-\d{2}\n$/);
        assert.deepEqual(
            await cli(["usage", "--key", "u", "--days", "0", ...s.flags]),
            usage('--days must be an integer from 1 to 3650 (got "0")'),
        );
        assert.deepEqual(await cli(["usage", "--key", "u", ...s.flags]), usage("required option '--days <n>' not specified"));
        assert.deepEqual(
            await cli(["usage", "--key", "u", "--days", "1", "--csv", ...s.flags]),
            usage("--csv and --json exclude each other"),
        );
    });
});
