/**
 * `hybrid-counter backfill` as a user runs it (docs/adopting.md): a table holds items another program wrote before the
 * counter, the `--config` file is the component's outputs (`pulumi stack output --json`, or `clientConfig` alone on
 * stdin), and the built bin runs as a subprocess against DynamoDB Local. The backfill flags what does not count yet,
 * the consumer counts each flag once, and every key ends exact; in strict mode the keys it listed are healed to their
 * items. Bad flags and configs exit 2 with one line naming the field, before anything is written.
 */
import { PutItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { DEFAULT_LAYOUT, type CounterTableLayout } from "../runtime/shared/config";
import { parsedJson } from "./support/cli-bin";
import { clientConfigOf, counterSystem, jsonFile, useServers, type CounterSystem } from "./support/cli-fixture";

const json = parsedJson;
const layout: CounterTableLayout = { ...DEFAULT_LAYOUT, selection: { kind: "sortKeyPrefix", prefix: "order#" } };

/** Per key: live orders, a soft-deleted one, one with a deleted flag that is not a boolean, and another entity. */
async function seed(s: CounterSystem, keys: number, orders: number): Promise<Map<string, number>> {
    const live = new Map<string, number>();
    for (let k = 0; k < keys; k++) {
        const key = `tenant-${k}`;
        const put = (id: string, extra = {}) =>
            s.admin.send(new PutItemCommand({ TableName: s.tableName, Item: { pk: { S: key }, sk: { S: id }, ...extra } }));
        for (let i = 0; i < orders + k; i++) {
            await put(`order#${i}`);
        }
        await put("order#gone", { deleted: { BOOL: true } });
        await put("order#odd", { deleted: { S: "maybe" } });
        await put("profile#1");
        live.set(key, orders + k + 1);
    }
    return live;
}

interface Report {
    runId: string;
    status: string;
    tableName: string;
    countersTableName: string;
    segments: number;
    resumed: boolean;
    segmentsDone: number;
    total: { scanned: number; counted: number; alreadyCounted: number; skipped: number };
    thisCall: { scanned: number; counted: number; alreadyCounted: number; skipped: number; keysListed: number };
}

describe("hybrid-counter backfill (built bin, the component's outputs, DynamoDB Local)", function () {
    const servers = useServers();
    const cli = (args: readonly string[], stdin?: string) => servers().cli(args, stdin === undefined ? {} : { stdin });

    /**
     * Every key's eventual count equal to its items; in strict mode, after a heal, best-effort too; and no tombstone left
     * (the consumer removed each: another writer's, with no client token, so no put attempt of its life can land).
     */
    async function assertCounted(s: CounterSystem, live: Map<string, number>, strict: boolean, flags: readonly string[]): Promise<void> {
        for (const [key, n] of live) {
            const status = json(await cli(["status", "--key", key, ...flags, "--endpoint", servers().engine.endpoint, "--json"])) as Record<
                string,
                unknown
            >;
            const { shards, ...figures } = status;
            assert.deepEqual(figures, {
                key,
                bestEffort: strict ? n : 0,
                eventual: n,
                live: n,
                counted: n,
                pendingCreates: 0,
                pendingDeletes: 0,
                malformed: 1,
                heldSlots: 0,
                drift: 0,
                exact: true,
                value: n,
            });
            assert.equal((shards as unknown[] | undefined)?.length, s.config.counterShards);
        }
    }

    it("counts a table from the whole stack outputs file (utilization), and a second run flags nothing new", async () => {
        // Prepare
        const s = await counterSystem(servers(), "backfill", { layout });
        const live = await seed(s, 3, 4);
        const file = jsonFile({ clientConfig: clientConfigOf(s), fatalDlqUrl: s.fatal.url, firstDlqUrl: s.first.url });
        const run = ["backfill", "--config", file, "--endpoint", servers().engine.endpoint];

        // Act: the command as docs/adopting.md gives it; the stream counts the flags; then again.
        const first = await cli([...run, "--json"]);
        await s.drain();
        const second = await cli([...run, "--run-id", "again", "--capacity-share", "0.5", "--json"]);
        const text = await cli([...run, "--read-units-per-second", "1000", "--write-units-per-second", "1000"]);

        // Assess: 3 keys of 4, 5 and 6 orders (plus the odd one, live), a tombstone and a profile each.
        assert.equal(first.code, 0, first.stderr);
        const report = JSON.parse(first.stdout) as Report;
        const items = 3 * 3 + 4 + 5 + 6;
        assert.deepEqual(
            [report.runId, report.status, report.tableName, report.countersTableName, report.resumed, report.segments, report.segmentsDone],
            ["default", "complete", s.tableName, s.countersTableName, false, 4, 4],
        );
        assert.deepEqual(report.total, { scanned: items, counted: 18, alreadyCounted: 0, skipped: 6 });
        assert.equal(report.thisCall.keysListed, 3);
        assert.equal(first.stderr.split("\n")[0], "backfill (segments): 0/4");
        // The stream brought each key's tombstone to the consumer, which removed it (it has no client token: no put
        // attempt of its life can land), so the later runs scan one item fewer per key.
        const again = JSON.parse(second.stdout) as Report;
        assert.deepEqual(
            [again.runId, again.status, again.resumed, again.total],
            ["again", "complete", false, { scanned: items - 3, counted: 0, alreadyCounted: 18, skipped: 3 }],
        );
        assert.equal(text.code, 0, text.stderr);
        assert.match(
            text.stdout,
            /^backfill default: complete\n {11}scanned {2}flagged {2}already counted {2}skipped\nthis call {7}21 {8}0 {15}18 {8}3\nwhole run {7}21 {8}0 {15}18 {8}3\nsegments done: 4 of 4; 0 keys listed for a heal; /,
        );
        // The counter as the flags describe it, without a config.
        const flags = [
            "--table",
            s.tableName,
            "--counters-table",
            s.countersTableName,
            "--counted-items",
            "sortKeyPrefix",
            "--counted-sort-key-prefix",
            "order#",
        ];
        await assertCounted(s, live, false, flags);
    });

    it("strict and sharded, from clientConfig on stdin: the keys it flagged are listed, and a settler run heals them to their items", async () => {
        // Prepare
        const s = await counterSystem(servers(), "strict", { layout, mode: "strict", counterShards: 3 });
        const live = await seed(s, 2, 3);
        const endpoint = ["--endpoint", servers().engine.endpoint, "--json"];

        // Act
        const ran = await cli(
            ["backfill", "--config", "-", "--segments", "2", "--page-size", "3", ...endpoint],
            JSON.stringify(clientConfigOf(s)),
        );
        await s.drain();
        const healed = await cli(["heal", "--config", "-", ...endpoint], JSON.stringify(clientConfigOf(s)));

        // Assess
        assert.equal(ran.code, 0, ran.stderr);
        const report = JSON.parse(ran.stdout) as Report;
        assert.deepEqual(
            [report.status, report.segments, report.segmentsDone, report.total],
            ["complete", 2, 2, { scanned: 13, counted: 9, alreadyCounted: 0, skipped: 4 }],
        );
        assert.equal(healed.code, 0, healed.stderr);
        assert.deepEqual(
            [
                (JSON.parse(healed.stdout) as { due: number; healed: number; corrected: number }).due,
                (JSON.parse(healed.stdout) as { healed: number }).healed,
            ],
            [2, 2],
        );
        await assertCounted(s, live, true, ["--config", jsonFile(clientConfigOf(s))]);
    });

    it("refuses bad flags and configs with one line naming the field, exit 2, and writes nothing", async () => {
        // Prepare
        const s = await counterSystem(servers(), "refuse", { layout });
        await seed(s, 1, 2);
        const file = jsonFile(clientConfigOf(s));
        const sharedSharded = jsonFile({ ...clientConfigOf(s), countersTableName: s.tableName, counterShards: 3 });
        const endpoint = ["--endpoint", servers().engine.endpoint];
        const usage = (line: string) => ({ code: 2, stdout: "", stderr: `error: ${line}\n` });

        // Act + Assess
        assert.deepEqual(await cli(["backfill", ...endpoint]), usage("--table or --config is required: which table holds the counter?"));
        assert.deepEqual(
            await cli(["backfill", "--config", sharedSharded, ...endpoint]),
            usage("--config: above 1 needs a counters table of its own: a key's shards are partition keys of the counters table"),
        );
        assert.deepEqual(
            await cli(["backfill", "--config", file, "--mode", "strict", ...endpoint]),
            usage(
                "--mode: the counter's mode is utilization (counterMode in --config), not strict: it runs in one mode, and a heal in the other would break its bound; drop --mode",
            ),
        );
        assert.deepEqual(
            await cli(["backfill", "--config", file, "--page-size", "0", ...endpoint]),
            usage('--page-size must be an integer from 1 to 10000 (got "0")'),
        );
        assert.deepEqual(
            await cli(["backfill", "--config", file, "--segments", "1001", ...endpoint]),
            usage('--segments must be an integer from 1 to 1000 (got "1001")'),
        );
        assert.deepEqual(
            await cli(["backfill", "--config", file, "--capacity-share", "2", ...endpoint]),
            usage('--capacity-share must be a number above 0 and at most 1 (got "2")'),
        );
        assert.deepEqual(
            await cli(["backfill", "--config", file, "--read-units-per-second", "0", ...endpoint]),
            usage('--read-units-per-second must be a number above 0 and at most 1000000000 (got "0")'),
        );
        assert.deepEqual(
            await cli(["backfill", "--config", file, "--write-units-per-second", "x", ...endpoint]),
            usage('--write-units-per-second must be a number above 0 and at most 1000000000 (got "x")'),
        );
        assert.deepEqual(
            await cli(["backfill", "--config", file, "--run-id", "a b", ...endpoint]),
            usage("--run-id must be 1 to 64 letters, digits or _ . : -"),
        );
        const counters = await s.admin.send(new ScanCommand({ TableName: s.countersTableName, Select: "COUNT" }));
        const flagged = await s.admin.send(
            new ScanCommand({ TableName: s.tableName, Select: "COUNT", FilterExpression: "attribute_exists(hc_counted)" }),
        );
        assert.deepEqual([counters.Count, flagged.Count], [0, 0]);
    });
});
