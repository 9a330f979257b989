/**
 * Strict mode across regions (runtime/regions/index.ts): each region admits under its base quota of the key's limit, on
 * its own counter items, so the live lives over every region never pass the limit, with no cross-region call. Three
 * regions' clients on one DynamoDB Local engine, with faults, creating and deleting concurrently (deletes of other
 * regions' lives included), their consumers and heals run between rounds.
 */
import { strict as assert } from "node:assert";
import { healKey } from "../runtime/heal/heal";
import { baseQuota } from "../runtime/regions/quotas";
import { seededRandom } from "../local/engine/faults";
import { useEngine } from "./support/engine";
import { regionsFixture } from "./support/regions-fixture";

const MEMBERS = ["us-east-1", "eu-west-1", "ap-southeast-2"] as const;

describe("strict mode across regions on DynamoDB Local", () => {
    const engine = useEngine();

    it("base quotas split the limit over the sorted members and sum to it", () => {
        const regions = {
            current: "us-east-1",
            members: MEMBERS.map((region, i) => (i === 0 ? { region, role: "home" as const } : { region })),
        };
        // Sorted: ap-southeast-2, eu-west-1, us-east-1; the first L mod 3 take one more.
        assert.deepEqual(
            MEMBERS.map((region) => baseQuota(7, regions, region)),
            [2, 2, 3],
        );
        for (let limit = 0; limit <= 40; limit++) {
            assert.equal(
                MEMBERS.reduce((sum, region) => sum + baseQuota(limit, regions, region), 0),
                limit,
            );
        }
    });

    for (const seed of [11, 29]) {
        it(`never lets the live lives of a key pass its limit over the regions (seed ${seed}, faults)`, async () => {
            // Prepare
            const limit = 7;
            const random = seededRandom(seed);
            const fixture = await regionsFixture(engine(), MEMBERS, { mode: "strict", clientFaults: { rate: 0.1, seed } });
            const ids: string[] = [];
            let next = 0;
            let refusedAtLimit = 0;
            let created = 0;
            let maxLive = 0;

            for (let round = 0; round < 24; round++) {
                // Act: every region's calls of the round run at once, creates and deletes of any region's lives.
                const calls = MEMBERS.flatMap((region) =>
                    Array.from({ length: 3 }, async () => {
                        const client = fixture.side(region).client;
                        if (random() < 0.65 || ids.length === 0) {
                            const id = `${region}-${next++}`;
                            ids.push(id);
                            const result = await client.tryCreate("s", id, limit);
                            refusedAtLimit += result.reason === "limit" ? 1 : 0;
                            created += result.created ? 1 : 0;
                        } else {
                            await client.delete("s", ids[Math.floor(random() * ids.length)]!);
                        }
                    }),
                );
                // A fault that outlived every attempt throws the resource write's own error: allowed, and on the safe side.
                await Promise.allSettled(calls);

                // Assess: the bound over every region, and each region within its own quota.
                const live = (await fixture.items("s")).filter((item) => item.deleted?.BOOL !== true).length;
                maxLive = Math.max(maxLive, live);
                assert.ok(live <= limit, `round ${round}: ${live} live lives over the regions, above the limit ${limit}`);
                // B per region: every live life holds a unit in its owner's best-effort (no call is in flight now).
                const owned = await fixture.liveByOwner("s");
                for (const region of MEMBERS) {
                    const { bestEffort } = await fixture.counters("s", region);
                    const quota = baseQuota(limit, fixture.side(region).config.regions);
                    assert.ok(bestEffort <= quota, `round ${round}: ${region}'s best-effort ${bestEffort} above its quota ${quota}`);
                    assert.ok(
                        owned.get(region)! <= bestEffort,
                        `round ${round}: ${region} owns ${owned.get(region)} live lives, best-effort ${bestEffort}`,
                    );
                }

                if (round % 4 === 3) {
                    // Between rounds (no call in flight): the consumers, then each region's heal of its own units.
                    await fixture.drain();
                    for (const region of MEMBERS) {
                        const side = fixture.side(region);
                        const later = () => Date.now() + 10 * 60_000;
                        await healKey("s", {
                            config: side.config,
                            dynamodb: fixture.reader,
                            mode: "strict",
                            quietWindowMs: 120_000,
                            now: later,
                        });
                    }
                }
            }

            // The bound was under pressure: calls were refused at a region's quota, and lives were created past one quota.
            assert.ok(refusedAtLimit > 0, "no call met a region's quota");
            assert.ok(created > limit, `only ${created} lives created`);
            assert.ok(maxLive > 3, `the key never held more lives than one region's quota (${maxLive})`);
            const injected = MEMBERS.reduce((sum, region) => {
                const stats = fixture.side(region).faults!.injected;
                return sum + stats.conflict + stats.throttle + stats["500-before"] + stats["500-after"];
            }, 0);
            assert.ok(injected > 0, "no fault was injected");
        });
    }
});
