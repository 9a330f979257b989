/**
 * The operator CLI on a multi-region counter (cli/regions.ts), run as a user runs it: the built bin as a subprocess,
 * its `--config` the component's clientConfig with `regions`, against two regions counting on one DynamoDB Local
 * engine (test/support/cli-fixture.ts `regionsSystem`: one table seen by both, as if each replica held every write at
 * once). Each command runs as `--region`, else `regions.current`, and writes only that region's counter items;
 * `status --key` shows every region and the sums; a region that is not a member is refused.
 */
import { PutItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { bestEffortKey } from "../runtime/shared/keys";
import { newToken } from "../runtime/shared/tokens";
import { assertUsage, parsedJson, runBin } from "./support/cli-bin";
import { jsonFile, regionsSystem, setCount, setEventual, useServers, type RegionsSystem } from "./support/cli-fixture";

const HOME = "us-east-1";
const MEMBER = "eu-west-1";
const MEMBERS = [HOME, MEMBER];
const json = parsedJson;

/** One region's row of a key, as `status --key --json` prints it. */
const regionRow = (region: string, bestEffort: number, eventual: number, live: number, extra: Record<string, unknown> = {}) => ({
    region,
    home: region === HOME,
    bestEffort,
    eventual,
    live,
    counted: live,
    pendingCreates: 0,
    pendingDeletes: 0,
    malformed: 0,
    heldSlots: 0,
    drift: eventual - live,
    exact: eventual === live,
    ...extra,
});

/** An item another writer put (a token, no region's stamp unless given): the home owns it unless a member stamped it. */
async function putItem(r: RegionsSystem, key: string, id: string, stamp?: string): Promise<void> {
    await r.admin.send(
        new PutItemCommand({
            TableName: r.tableName,
            Item: {
                pk: { S: key },
                sk: { S: id },
                counter_token: { S: newToken() },
                ...(stamp === undefined ? {} : { hc_region: { S: stamp } }),
            },
        }),
    );
}

describe("operator CLI on a multi-region counter (built bin, DynamoDB Local)", function () {
    const servers = useServers();
    const cli = (args: readonly string[]) => servers().cli(args);
    const flagsOf = (r: RegionsSystem, current = HOME) => [
        "--config",
        jsonFile(r.clientConfig(current)),
        "--endpoint",
        servers().engine.endpoint,
    ];

    it("status --key shows each region's counters and the lives it owns, their sums, and count()'s value", async () => {
        // Prepare: each region's client creates lives (stamped with its region), another writer puts one (the home's,
        // which the home's consumer flags and counts), and both consumers run.
        const r = await regionsSystem(servers(), "regions-status", MEMBERS);
        for (const id of ["h0", "h1", "h2"]) {
            assert.deepEqual(await r.side(HOME).client.create("k", id), { created: true });
        }
        for (const id of ["m0", "m1"]) {
            assert.deepEqual(await r.side(MEMBER).client.create("k", id), { created: true });
        }
        await putItem(r, "k", "other");
        await r.drain();

        // Act: from the home's configuration, as the member, and as text.
        const asHome = await cli(["status", "--key", "k", "--json", ...flagsOf(r)]);
        const asMember = await cli(["status", "--key", "k", "--json", "--region", MEMBER, ...flagsOf(r)]);
        const text = await cli(["status", "--key", "k", ...flagsOf(r)]);

        // Assess
        const expected = {
            key: "k",
            bestEffort: 5,
            eventual: 6,
            live: 6,
            counted: 6,
            pendingCreates: 0,
            pendingDeletes: 0,
            malformed: 0,
            heldSlots: 0,
            drift: 0,
            exact: true,
            value: 6,
            regions: [regionRow(MEMBER, 2, 2, 2), regionRow(HOME, 3, 4, 4)],
        };
        assert.deepEqual(json(asHome), expected);
        assert.deepEqual(json(asMember), expected);
        assert.deepEqual(text, {
            code: 0,
            stderr: "",
            stdout: [
                "k: value 6 (the sum over regions of max(best-effort, eventual))",
                "region            best-effort  eventual  live  counted  pending creates  pending deletes  malformed  held slots  drift",
                "eu-west-1                   2         2     2        2                0                0          0           0      0",
                "us-east-1 (home)            3         4     4        4                0                0          0           0      0",
                "sum                         5         6     6        6                0                0          0           0      0",
                "exact",
                "",
            ].join("\n"),
        });
    });

    it("refuses a --region that is not a member, a bad regions setting, and another region's queue, before anything is written", async () => {
        // Prepare
        const r = await regionsSystem(servers(), "regions-refuse", MEMBERS);
        await putItem(r, "n", "x");
        const flags = flagsOf(r);
        const notMember = `--region: "ap-south-1" is not a member region of this counter (members: ${MEMBER}, ${HOME})`;
        const queue = ["--fatal-queue-url", "http://127.0.0.1:1/q/fatal", "--first-dlq-url", "http://127.0.0.1:1/q/first"];

        // Act + Assess: every command that reads or writes counting.
        for (const command of [
            ["status", "--key", "n"],
            ["backfill"],
            ["reconcile", "--key", "n"],
            ["heal", "--key", "n"],
            ["usage", "--key", "n", "--days", "1"],
            ["fatal", "list", ...queue],
            ["redrive", ...queue],
        ]) {
            assertUsage(await cli([...command, "--region", "ap-south-1", ...flags]), notMember);
        }
        assertUsage(
            await cli([
                "status",
                "--key",
                "n",
                "--config",
                jsonFile({
                    ...r.clientConfig(HOME),
                    regions: { current: "ap-south-1", members: [{ region: HOME, role: "home" }, { region: MEMBER }] },
                }),
            ]),
            `--config: [regions.current] "ap-south-1" must be one of [regions.members] (${HOME}, ${MEMBER})`,
        );
        assertUsage(
            await cli(["status", "--key", "n", "--config", jsonFile({ ...r.clientConfig(HOME), regionAttribute: "counter_token" })]),
            '--config: [regionAttribute] must differ from [tokenAttribute] (both are "counter_token")',
        );
        assertUsage(
            await cli([
                "fatal",
                "list",
                "--region",
                MEMBER,
                "--fatal-queue-url",
                "https://sqs.us-east-1.amazonaws.com/000000000000/fatal",
                ...flags,
            ]),
            `--fatal-queue-url: the queue is in ${HOME}, but the command runs as region ${MEMBER}: pass ${MEMBER}'s queue (its stack's outputs)`,
        );
        // The clients' AWS region is the region the command runs as: a counter without regions and no AWS_REGION has none.
        const { regions: _regions, ...single } = r.clientConfig(HOME);
        assertUsage(
            await runBin(servers().bin, ["status", "--key", "n", "--config", jsonFile(single), "--endpoint", servers().engine.endpoint]),
            "no AWS region: pass --region or set AWS_REGION",
        );
        const counters = await r.admin.send(new ScanCommand({ TableName: r.countersTableName, Select: "COUNT" }));
        assert.equal(counters.Count, 0);
    });

    it("backfill --region flags the items that region owns: a member its own, the home every unstamped one", async () => {
        // Prepare: items in the table, which no consumer has seen: 3 unstamped (the home's), 2 the member stamped.
        const r = await regionsSystem(servers(), "regions-backfill", MEMBERS);
        for (const id of ["x0", "x1", "x2"]) {
            await putItem(r, "b", id);
        }
        await putItem(r, "b", "m0", MEMBER);
        await putItem(r, "b", "m1", MEMBER);
        const flags = [...flagsOf(r), "--json"];
        const counted = (ran: { stdout: string }) =>
            JSON.parse(ran.stdout) as { status: string; total: { counted: number; alreadyCounted: number } };

        // Act: the member first, then the home (its configuration's current region), then the home named again.
        const member = await cli(["backfill", "--region", MEMBER, ...flags]);
        const home = await cli(["backfill", ...flags]);
        const again = await cli(["backfill", "--region", HOME, ...flags]);
        await r.drain();

        // Assess
        assert.deepEqual([member.code, counted(member).status, counted(member).total.counted], [0, "complete", 2]);
        assert.deepEqual([home.code, counted(home).total.counted], [0, 3]);
        assert.deepEqual([again.code, counted(again).total.counted, counted(again).total.alreadyCounted], [0, 0, 3]);
        const status = json(await cli(["status", "--key", "b", ...flags])) as { regions: unknown[]; eventual: number };
        assert.deepEqual(status.regions, [regionRow(MEMBER, 0, 2, 2), regionRow(HOME, 0, 3, 3)]);
        // The table-wide summary is the counting of the region the command runs as.
        const totals = async (region: string) => {
            const summary = json(await cli(["status", "--region", region, ...flags])) as { totals: Record<string, number> };
            return [summary.totals.eventual, summary.totals.live, summary.totals.counted];
        };
        assert.deepEqual(await totals(MEMBER), [2, 2, 2]);
        assert.deepEqual(await totals(HOME), [3, 3, 3]);
        // Each region's counter items of key b are its own.
        const page = await r.admin.send(new ScanCommand({ TableName: r.countersTableName, ConsistentRead: true }));
        assert.deepEqual(
            (page.Items ?? [])
                .filter((item) => item.pk!.S === "b")
                .map((item) => item.sk!.S)
                .sort(),
            [`#counter#@${MEMBER}#eventual`, `#counter#@${HOME}#eventual`],
        );
    });

    it("reconcile --key and heal --key run as --region: each sets only its own region's counters", async () => {
        // Prepare: each region's lives, counted; then each region's eventual and best-effort off.
        const r = await regionsSystem(servers(), "regions-heal", MEMBERS);
        for (const id of ["h0", "h1", "h2"]) {
            await r.side(HOME).client.create("r", id);
        }
        for (const id of ["m0", "m1"]) {
            await r.side(MEMBER).client.create("r", id);
        }
        await r.drain();
        for (const region of MEMBERS) {
            const { config } = r.side(region);
            await setEventual({ admin: r.admin, config }, "r", 9, config.regions);
            await setCount({ admin: r.admin, config }, bestEffortKey(config, "r", 0), 7);
        }
        const flags = [...flagsOf(r), "--json"];
        const regions = async () => (json(await cli(["status", "--key", "r", ...flags])) as { regions: unknown[] }).regions;

        // Act + Assess: the member first, then the home.
        const reconciled = json(await cli(["reconcile", "--key", "r", "--region", MEMBER, ...flags])) as {
            results: Array<Record<string, unknown>>;
        };
        assert.deepEqual(reconciled.results, [
            { key: "r", outcome: "corrected", eventualBefore: 9, eventualAfter: 2, items: 2, unflagged: 0 },
        ]);
        const healed = json(await cli(["heal", "--key", "r", "--region", MEMBER, ...flags]));
        assert.deepEqual(healed, { key: "r", shards: [{ shard: 0, before: 7, after: 2 }], drift: 5, removed: 0, healed: true });
        assert.deepEqual(await regions(), [regionRow(MEMBER, 2, 2, 2), regionRow(HOME, 7, 9, 3, { heldSlots: 4 })]);
        assert.equal((await cli(["reconcile", "--key", "r", ...flags])).code, 0);
        assert.equal((await cli(["heal", "--key", "r", ...flags])).code, 0);
        assert.deepEqual(await regions(), [regionRow(MEMBER, 2, 2, 2), regionRow(HOME, 3, 3, 3)]);
    });

    it("fatal list and redrive run as --region against that region's queues, from its stack's outputs", async () => {
        // Prepare: the member's stack outputs (its queues), read as the whole `pulumi stack output --json`.
        const r = await regionsSystem(servers(), "regions-queues", MEMBERS);
        const fatal = await servers().sqs.createQueue(`${r.tableName}-${MEMBER}-fatal`);
        const first = await servers().sqs.createQueue(`${r.tableName}-${MEMBER}-first`);
        const file = jsonFile({ clientConfig: r.clientConfig(MEMBER), fatalDlqUrl: fatal.url, firstDlqUrl: first.url });
        const flags = ["--config", file, "--endpoint", servers().engine.endpoint, "--json"];

        // Act
        const listed = await cli(["fatal", "list", "--region", MEMBER, ...flags]);
        const redriven = await cli(["redrive", ...flags]);

        // Assess: both queues answered, and they were empty.
        assert.deepEqual(json(listed), []);
        assert.deepEqual(json(redriven), { moved: [], left: 0, failed: [] });
    });
});
