/**
 * The operator CLI on a multi-region counter (cli/regions.ts, cli/status-regions.ts), run as a user runs it: the built
 * bin (dist/cli/index.js) as a subprocess, its `--config` the component's clientConfig with `regions`, against two
 * regions counting on one DynamoDB Local engine (test/support/regions-fixture.ts: one table seen by both, as if each
 * replica held every write at once). Each command runs as `--region`, else `regions.current`, and writes only that
 * region's counter items; `status --key` shows every region and the sums; a region that is not a member is refused.
 */
import { PutItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { COUNTER_ATTRIBUTES, DEFAULT_LAYOUT, bestEffortSortKey } from "../runtime/shared/config";
import { buildCli } from "../scripts/bundle-cli";
import { useEngine } from "./support/engine";
import { assertUsage, parsedJson, runBin, type Ran } from "./support/cli-bin";
import { putItem, putOwnedItems, regionsFixture, regionsOf, type RegionsFixture } from "./support/regions-fixture";

const HOME = "us-east-1";
const MEMBER = "eu-west-1";
const MEMBERS = [HOME, MEMBER];

let bin = "";

/** Runs the built bin (test/support/cli-bin.ts): the region comes from --region or the outputs' `regions`. */
const cli = (args: readonly string[]): Promise<Ran> => runBin(bin, args);
const json = parsedJson;

/** One region's status row of a key, as `status --key --json` prints it. */
const regionRow = (region: string, bestEffort: number, eventual: number, live: number, extra: Record<string, unknown> = {}) => ({
    region,
    home: region === HOME,
    bestEffort,
    eventual,
    live,
    pendingCreates: 0,
    pendingDeletes: 0,
    malformed: 0,
    heldSlots: Math.max(0, bestEffort - live),
    drift: eventual - live,
    exact: eventual === live,
    ...extra,
});

/** 3 items no region stamped (the home's), 2 stamped by the home, 2 by the member. */
const seed = (fixture: RegionsFixture, key: string) => putOwnedItems(fixture, key, HOME, MEMBER);

/** Region `region`'s best-effort item of `key` as a client left it an hour ago (versioned, last written then). */
async function staleBestEffort(fixture: RegionsFixture, key: string, region: string, count: number): Promise<void> {
    await fixture.reader.send(
        new PutItemCommand({
            TableName: fixture.countersTableName,
            Item: {
                pk: { S: key },
                sk: { S: bestEffortSortKey(fixture.side(region).config) },
                [DEFAULT_LAYOUT.countAttribute]: { N: String(count) },
                [COUNTER_ATTRIBUTES.version]: { N: String(count) },
                [COUNTER_ATTRIBUTES.writtenAt]: { N: String(Date.now() - 3_600_000) },
            },
        }),
    );
}

/** The counters table's sort keys, sorted. */
async function counterSortKeys(fixture: RegionsFixture): Promise<string[]> {
    const page = await fixture.reader.send(new ScanCommand({ TableName: fixture.countersTableName, ConsistentRead: true }));
    assert.equal(page.LastEvaluatedKey, undefined);
    return (page.Items ?? []).map((item) => `${item.pk!.S!} ${item.sk!.S!}`).sort();
}

describe("operator CLI on a multi-region counter (built bin, DynamoDB Local)", function () {
    const engine = useEngine();
    const dir = mkdtempSync(path.join(tmpdir(), "hc-cli-regions-"));
    let configs = 0;

    before(async () => {
        bin = await buildCli();
    });

    /** The component's clientConfig of the home region's stack (regions.current = the home), as a file. */
    function configFile(
        fixture: RegionsFixture,
        extra: Record<string, unknown> = {},
        whole: Record<string, unknown> = {
            tableName: fixture.tableName,
            countersTableName: fixture.countersTableName,
            regions: regionsOf(HOME, MEMBERS),
            regionAttribute: "hc_region",
        },
    ): string {
        const file = path.join(dir, `config-${++configs}.json`);
        writeFileSync(file, JSON.stringify({ ...whole, ...extra }));
        return file;
    }

    it("status --key shows each region's counters and the lives it owns, and their sums, exactly", async () => {
        // Prepare: each region's client creates lives (stamped with its region), another writer puts one (the home's),
        // and both consumers count.
        const fixture = await regionsFixture(engine(), MEMBERS);
        for (let i = 0; i < 3; i++) {
            assert.deepEqual(await fixture.side(HOME).client.create("k", `h${i}`), { created: true });
        }
        for (let i = 0; i < 2; i++) {
            assert.deepEqual(await fixture.side(MEMBER).client.create("k", `m${i}`), { created: true });
        }
        await putItem(fixture, "k", "other");
        await fixture.drain();
        const flags = ["--config", configFile(fixture), "--endpoint", engine().endpoint];

        // Act: from the home's configuration, and as the member.
        const asHome = await cli(["status", "--key", "k", "--json", ...flags]);
        const asMember = await cli(["status", "--key", "k", "--json", "--region", MEMBER, ...flags]);
        const human = await cli(["status", "--key", "k", ...flags]);

        // Assess: the member owns its 2; the home its 3 and the unstamped one, which its best-effort never counted.
        const expected = {
            key: "k",
            bestEffort: 5,
            eventual: 6,
            live: 6,
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
        assert.equal(human.code, 0, human.stderr);
        const lines = human.stdout.split("\n");
        assert.equal(lines[0], `k: value 6 (the sum over regions of max(best-effort, eventual)), read in ${HOME}'s replica`);
        const cells = (line: string | undefined) => line?.trim().split(/\s{2,}/);
        assert.deepEqual(cells(lines.find((l) => l.startsWith(MEMBER))), [MEMBER, "2", "2", "2", "0", "0", "0", "0", "0"]);
        assert.deepEqual(cells(lines.find((l) => l.startsWith(HOME))), [`${HOME} (home)`, "3", "4", "4", "0", "0", "0", "0", "0"]);
        assert.deepEqual(cells(lines.find((l) => l.startsWith("sum"))), ["sum", "5", "6", "6", "0", "0", "0", "0", "0"]);
        assert.equal(lines.at(-2), "exact");
    });

    it("status --key on a sharded multi-region key lists each region's shards, and sums every shard of every region", async () => {
        // Prepare: two shards per key in each region.
        const fixture = await regionsFixture(engine(), MEMBERS, { counterShards: 2 });
        for (let i = 0; i < 4; i++) {
            assert.deepEqual(await fixture.side(HOME).client.create("s", `h${i}`), { created: true });
        }
        for (let i = 0; i < 3; i++) {
            assert.deepEqual(await fixture.side(MEMBER).client.create("s", `m${i}`), { created: true });
        }
        await fixture.drain();
        const flags = ["--config", configFile(fixture, { counterShards: 2 }), "--endpoint", engine().endpoint];

        // Act
        const status = json(await cli(["status", "--key", "s", "--json", ...flags])) as {
            regions: Array<{ region: string; bestEffort: number; eventual: number; shards: Array<Record<string, number>> }>;
        } & Record<string, unknown>;
        const human = await cli(["status", "--key", "s", ...flags]);

        // Assess: each region's shards add up to its row, and the rows to the sums.
        assert.deepEqual([status.bestEffort, status.eventual, status.live, status.value, status.exact], [7, 7, 7, 7, true]);
        assert.deepEqual(
            status.regions.map((r) => [r.region, r.bestEffort, r.eventual, r.shards.length]),
            [
                [MEMBER, 3, 3, 2],
                [HOME, 4, 4, 2],
            ],
        );
        for (const r of status.regions) {
            const sum = (field: string) => r.shards.reduce((total, shard) => total + shard[field]!, 0);
            assert.deepEqual(
                [sum("bestEffort"), sum("eventual"), sum("homed"), sum("others")],
                [r.bestEffort, r.eventual, r.bestEffort, 0],
            );
        }
        assert.equal(human.code, 0, human.stderr);
        const shardLines = human.stdout.split("\n").filter((l) => /^(us-east-1|eu-west-1) \d\s/.test(l));
        assert.deepEqual(
            shardLines.map((l) => l.trim().split(/\s{2,}/)[0]),
            [`${MEMBER} 0`, `${MEMBER} 1`, `${HOME} 0`, `${HOME} 1`],
        );
    });

    it("refuses a --region that is not a member, and a bad regions setting, before anything is written", async () => {
        // Prepare
        const fixture = await regionsFixture(engine(), MEMBERS);
        await seed(fixture, "n");
        const flags = ["--config", configFile(fixture), "--endpoint", engine().endpoint];
        const notMember = `--region: "ap-south-1" is not a member region of this counter (members: ${MEMBER}, ${HOME})`;

        // Act + Assess: every command that reads or writes counting.
        assertUsage(await cli(["status", "--key", "n", "--region", "ap-south-1", ...flags]), notMember);
        assertUsage(await cli(["backfill", "--mode", "utilization", "--region", "ap-south-1", ...flags]), notMember);
        assertUsage(await cli(["reconcile", "--key", "n", "--region", "ap-south-1", ...flags]), notMember);
        assertUsage(await cli(["heal", "--key", "n", "--mode", "strict", "--region", "ap-south-1", ...flags]), notMember);
        assertUsage(await cli(["fatal", "list", "--region", "ap-south-1", ...flags]), notMember);
        assertUsage(await cli(["redrive", "--region", "ap-south-1", ...flags]), notMember);
        assertUsage(
            await cli(["status", "--key", "n", "--config", configFile(fixture, { regions: regionsOf("ap-south-1", MEMBERS) })]),
            `--config: [regions.current] "ap-south-1" must be one of [regions.members] (${HOME}, ${MEMBER})`,
        );
        assertUsage(
            await cli(["status", "--key", "n", "--config", configFile(fixture, { regionAttribute: "counter_token" })]),
            '--config: [regionAttribute] must differ from [tokenAttribute] (both are "counter_token")',
        );
        // Another region's queue would park this region's batches where its redrive never reads them.
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
        // The clients' AWS region is the region the command runs as: with no AWS_REGION set, a counter without regions
        // has none.
        const {
            regions: _regions,
            regionAttribute: _attribute,
            ...single
        } = JSON.parse(readFileSync(flags[1]!, "utf8")) as Record<string, unknown>;
        assertUsage(
            await cli(["status", "--key", "n", "--config", configFile(fixture, {}, single), "--endpoint", engine().endpoint]),
            "no AWS region: pass --region or set AWS_REGION",
        );
        assert.deepEqual(await counterSortKeys(fixture), []);
    });

    it("backfill --region counts into that region's counters only: a member its own items, the home every unstamped one", async () => {
        // Prepare: the items are in the table; no consumer ran.
        const fixture = await regionsFixture(engine(), MEMBERS);
        await seed(fixture, "b");
        const flags = ["--config", configFile(fixture), "--endpoint", engine().endpoint, "--json"];
        const status = async () => json(await cli(["status", "--key", "b", ...flags])) as { regions: unknown[]; eventual: number };

        // Act: the member first, then the home (its configuration's current region, then named).
        const member = json(await cli(["backfill", "--mode", "utilization", "--region", MEMBER, ...flags])) as Record<string, unknown>;
        const afterMember = await status();
        const home = json(await cli(["backfill", "--mode", "utilization", ...flags])) as Record<string, unknown>;
        const again = json(await cli(["backfill", "--mode", "utilization", "--region", HOME, ...flags])) as Record<string, unknown>;

        // Assess
        assert.deepEqual([member.status, (member.total as { counted: number }).counted], ["complete", 2]);
        assert.deepEqual(afterMember.regions, [regionRow(MEMBER, 0, 2, 2), regionRow(HOME, 0, 0, 5, { pendingCreates: 5, exact: false })]);
        assert.deepEqual([home.status, (home.total as { counted: number }).counted], ["complete", 5]);
        assert.deepEqual([again.alreadyComplete, (again.thisCall as { counted: number }).counted], [true, 0]);
        const after = await status();
        assert.deepEqual(after.regions, [regionRow(MEMBER, 0, 2, 2), regionRow(HOME, 0, 5, 5)]);
        assert.equal(after.eventual, 7);
        // The table-wide summary is the counting of the region the command runs as.
        const totals = async (region: string) => {
            const summary = json(await cli(["status", "--region", region, ...flags])) as { totals: Record<string, number> };
            return [summary.totals.bestEffort, summary.totals.eventual, summary.totals.live, summary.totals.pendingCreates];
        };
        assert.deepEqual(await totals(MEMBER), [0, 2, 2, 0]);
        assert.deepEqual(await totals(HOME), [0, 5, 5, 0]);
        // Every marker and counter item of key b is under the region that owns the item.
        const ofKey = (await counterSortKeys(fixture)).filter((k) => k.startsWith("b "));
        assert.deepEqual(ofKey, [
            `b #counter#@${MEMBER}#eventual`,
            `b #counter#@${MEMBER}#item#m0`,
            `b #counter#@${MEMBER}#item#m1`,
            `b #counter#@${HOME}#eventual`,
            `b #counter#@${HOME}#item#h0`,
            `b #counter#@${HOME}#item#h1`,
            `b #counter#@${HOME}#item#x0`,
            `b #counter#@${HOME}#item#x1`,
            `b #counter#@${HOME}#item#x2`,
        ]);
    });

    it("reconcile --key and heal --key run as --region: each settles and heals only what its region owns", async () => {
        // Prepare
        const fixture = await regionsFixture(engine(), MEMBERS);
        await seed(fixture, "r");
        const flags = ["--config", configFile(fixture), "--endpoint", engine().endpoint, "--json"];
        const regions = async () => (json(await cli(["status", "--key", "r", ...flags])) as { regions: unknown[] }).regions;
        // Each region's best-effort as its clients left it an hour ago, 9 units, before other writers changed the items.
        for (const region of MEMBERS) {
            await staleBestEffort(fixture, "r", region, 9);
        }

        // Act + Assess: reconcile as the member, then as the home.
        const member = json(await cli(["reconcile", "--key", "r", "--region", MEMBER, ...flags])) as { results: unknown[] };
        assert.deepEqual(
            member.results.map((r) => [(r as { key: string }).key, (r as { counted: number }).counted]),
            [["r", 2]],
        );
        assert.deepEqual(await regions(), [regionRow(MEMBER, 9, 2, 2), regionRow(HOME, 9, 0, 5, { pendingCreates: 5, exact: false })]);
        const home = json(await cli(["reconcile", "--key", "r", ...flags])) as { results: unknown[] };
        assert.deepEqual(
            home.results.map((r) => [(r as { key: string }).key, (r as { counted: number }).counted]),
            [["r", 5]],
        );

        // Heal as the member: its best-effort becomes the 2 lives it owns; the home's stays as it was.
        const healed = json(await cli(["heal", "--key", "r", "--mode", "strict", "--region", MEMBER, ...flags])) as Record<string, unknown>;
        assert.deepEqual([healed.key, healed.outcome, healed.before, healed.after], ["r", "healed", 9, 2], JSON.stringify(healed));
        assert.deepEqual(await regions(), [regionRow(MEMBER, 2, 2, 2), regionRow(HOME, 9, 5, 5)]);
        const healedHome = json(await cli(["heal", "--key", "r", "--mode", "strict", ...flags])) as Record<string, unknown>;
        assert.deepEqual([healedHome.outcome, healedHome.before, healedHome.after], ["healed", 9, 5]);
        assert.deepEqual(await regions(), [regionRow(MEMBER, 2, 2, 2), regionRow(HOME, 5, 5, 5)]);
    });

    describe("the queues", () => {
        let sqs: LocalSqs;
        before(async () => {
            sqs = await startLocalSqs();
        });
        after(async () => {
            await sqs.stop();
        });

        it("fatal list and redrive run as --region against that region's queues", async () => {
            // Prepare: the member's stack outputs (its queues), read as the whole `pulumi stack output --json`.
            const fixture = await regionsFixture(engine(), MEMBERS);
            const fatal = await sqs.createQueue(`${fixture.tableName}-${MEMBER}-fatal`);
            const first = await sqs.createQueue(`${fixture.tableName}-${MEMBER}-first`);
            const file = path.join(dir, `outputs-${++configs}.json`);
            writeFileSync(
                file,
                JSON.stringify({
                    clientConfig: {
                        tableName: fixture.tableName,
                        countersTableName: fixture.countersTableName,
                        regions: regionsOf(MEMBER, MEMBERS),
                    },
                    fatalDlqUrl: fatal.url,
                    firstDlqUrl: first.url,
                }),
            );
            const flags = ["--config", file, "--endpoint", engine().endpoint, "--json"];

            // Act
            const listed = json(await cli(["fatal", "list", "--region", MEMBER, ...flags]));
            const redriven = json(await cli(["redrive", "--region", MEMBER, ...flags]));

            // Assess: both queues answered, and they were empty.
            assert.deepEqual(listed, []);
            assert.deepEqual(redriven, { moved: [], left: 0 });
        });
    });
});
