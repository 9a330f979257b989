import { spawnSync } from "node:child_process";
import { strict as assert } from "node:assert";
import * as path from "node:path";
import { parseTwinArgs, UsageError } from "../local/twin/twin";
import type { RegionsTwinReport } from "../local/twin/regions";

const root = path.resolve(__dirname, "..");
const tsx = path.join(root, "node_modules", ".bin", "tsx");

function twin(args: string[]) {
    return spawnSync(tsx, ["local/twin/twin.ts", ...args], { cwd: root, encoding: "utf8", env: { ...process.env, NODE_NO_WARNINGS: "1" } });
}

/** The contract's errors only: a delete past its deadline on a loaded machine, or DynamoDB's own error after every attempt met a fault. */
function contractError({ operation, error }: { operation: string; error: string }): boolean {
    return (
        (operation === "delete" && error.startsWith("DeadlineExceededError:")) ||
        /^(ThrottlingException|ProvisionedThroughputExceededException|InternalServerError|TransactionConflictException|TransactionCanceledException|RequestLimitExceeded):/.test(
            error,
        )
    );
}

describe("the local twin over several regions (npm start -- --regions N)", () => {
    it("parses --regions and --replication-delay-ms, and names each bad one", () => {
        // Act
        const parsed = parseTwinArgs(["--regions", "3", "--replication-delay-ms", "50", "--ops", "10"]);
        // Assess
        assert.ok(parsed !== "help");
        assert.equal(parsed.regions, 3);
        assert.equal(parsed.replicationDelayMs, 50);
        assert.equal((parseTwinArgs(["--regions", "2"]) as { replicationDelayMs?: number }).replicationDelayMs, 100);
        assert.equal((parseTwinArgs(["--ops", "10"]) as { regions?: number }).regions, undefined);
        assert.throws(() => parseTwinArgs(["--regions", "1"]), {
            name: "UsageError",
            message: '--regions must be an integer from 2 to 6 (got "1")',
        });
        assert.throws(() => parseTwinArgs(["--replication-delay-ms", "10"]), {
            name: "UsageError",
            message: "--replication-delay-ms needs --regions",
        });
        assert.throws(() => parseTwinArgs(["--regions", "3", "--seed-items", "5"]), UsageError);
    });

    it("3 regions, strict with a stored limit, faults in every region: exact in every region once drained, no key over its limit", function () {
        // Act: 90 operations over 3 keys, 30 in each region, a stored limit of 4 a key (shares of 2, 1 and 1 across the regions).
        const result = twin([
            "--json",
            "--regions",
            "3",
            "--mode",
            "strict",
            "--limit",
            "4",
            "--ops",
            "90",
            "--keys",
            "3",
            "--concurrency",
            "6",
            "--faults",
            "0.02",
            "--replication-delay-ms",
            "50",
            "--seed",
            "5",
        ]);
        // Assess
        assert.equal(result.status, 0, result.stderr);
        const lines = result.stdout.trim().split("\n");
        assert.equal(lines.length, 1, "--json prints the report and nothing else");
        const report = JSON.parse(lines[0]!) as RegionsTwinReport;
        assert.equal(report.regions, 3);
        assert.equal(report.home, "us-east-1");
        assert.equal(report.replicationDelayMs, 50);
        assert.deepEqual(
            report.perRegion.map((r) => [r.region, r.role, r.writes]),
            [
                ["us-east-1", "home", 30],
                ["eu-west-1", "member", 30],
                ["ap-southeast-2", "member", 30],
            ],
        );
        assert.equal(report.ops, 90);
        assert.equal(report.converged, true);
        assert.equal(report.exact, true);
        assert.equal(report.limit, 4);
        assert.deepEqual(report.limitExceededKeys, []);
        assert.ok(report.observations > 0, "the limit was observed while the traffic ran");
        assert.deepEqual(
            report.apiErrorList.filter((e) => !contractError(e)),
            [],
        );
        for (const r of report.perRegion) {
            // Each region counted exactly the live items it owns, each of them flagged.
            assert.equal(r.eventual, r.owned, r.region);
            assert.equal(r.counted, r.owned, r.region);
            // Strict: a region's best-effort holds a slot for every life it owns (deletes made in other regions move
            // none of its units: their slots stay held until its heal counts them from the table).
            assert.ok(r.bestEffort >= r.owned, `${r.region}: best-effort ${r.bestEffort} >= owned ${r.owned}`);
            assert.equal(r.exact, true, r.region);
            assert.equal(r.ttlDeleted, 0, `${r.region}: nothing in the counters table expires within the run`);
            assert.ok(r.created > 0, `${r.region} created items`);
            // No filter: each region's consumer reads every record its replica's stream holds, other regions' too,
            // and counts only the lives its region owns (eventual = owned above).
            assert.equal(r.consumer.recordsFiltered, 0, `${r.region}: the mapping the component deploys filters nothing`);
            assert.ok(r.replication.sent > 0 && r.replication.applied > 0, `${r.region} replicated both ways`);
        }
        assert.equal(report.eventual, report.live, "the regions' eventual counters sum to the live items of the converged table");
        for (const [key, live] of Object.entries(report.liveByKey)) {
            assert.ok(live <= 4, `${key}: ${live} live within the limit`);
        }
        assert.ok(
            report.perRegion.some((r) => r.faultsInjected.api + r.faultsInjected.consumer > 0),
            "faults were injected",
        );
    });
});
