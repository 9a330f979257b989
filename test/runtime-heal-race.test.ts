/**
 * The heal races the API's calls on DynamoDB Local, staged request by request (test/support/heal-traffic.ts): each
 * party's requests wait at a gate, the test lets them reach the engine in the order a race needs, and after every
 * request it observes the key while nothing is in flight. The mode's bound (docs/design/core.md) must hold at every
 * one of those instants: utilization never counts more than the live client lives, strict never fewer.
 */
import { strict as assert } from "node:assert";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture, type FixtureOptions } from "./support/counter-fixture";
import { Traffic, refuseRequests, type Fault, type Label, type Request } from "./support/heal-traffic";
import { boundBroken, boundProblem, itemOf, ledgerOf, periodNow } from "./support/heal-probes";
import { tokenTime } from "../runtime/shared/tokens";
import { TOMBSTONE_SETTLED_MS } from "../runtime/stream/effects";
import { healKey, type HealResult } from "../runtime/heal/heal";
import { seededRandom } from "../local/engine/faults";

const KEY = "k";

describe("the heal races the API's calls, request by request (DynamoDB Local)", function () {
    const engine = useEngine();
    let f: CounterFixture;
    let settler: DynamoDBClient;
    let traffic: Traffic;

    async function setUp(options: FixtureOptions): Promise<void> {
        f = await counterFixture(engine(), options);
        settler = engine().dynamodb();
        traffic = new Traffic(f.config);
    }

    afterEach(() => {
        f?.close();
        settler?.destroy();
    });

    /** Starts the gate on the API's and the settler's requests (whatever was written before went straight through). */
    function watch(): void {
        traffic.watch(f.clientDynamo, "api");
        traffic.watch(settler, "settler");
    }

    const heal = () => traffic.run(() => healKey(KEY, { config: f.config, dynamodb: settler }));

    /** Releases `label` (of `party`), waits until the tables hold still, and checks the bound. */
    async function step(label: Label | ((r: Request) => boolean), party: string, fault?: Fault): Promise<void> {
        await traffic.step(label, party, fault);
        await traffic.quiet();
        assert.equal(await boundBroken(f, KEY), undefined, `after ${traffic.recent(1)}`);
    }

    /** Lets `party`'s requests through, checking the bound after each, until `work` is done. */
    async function through<T>(party: string, work: Promise<T>): Promise<T> {
        let done = false;
        void work.then(
            () => (done = true),
            () => (done = true),
        );
        for (;;) {
            await traffic.quiet();
            if (done) {
                return work;
            }
            const next = traffic.pending.find((r) => r.party === party);
            assert.ok(
                next !== undefined,
                `${party} is not done and sends nothing: ${traffic.pending.map((r) => `${r.party} ${r.label}`).join(", ")}`,
            );
            await traffic.release(next);
            await traffic.quiet();
            assert.equal(await boundBroken(f, KEY), undefined, `after ${traffic.recent(1)}`);
        }
    }

    it("utilization: a delete whose -1 lands before its create's repeated +1 meets it in the life's entry, and a heal between them changes nothing", async () => {
        // Prepare
        await setUp({ mode: "utilization" });
        watch();
        const period = periodNow(f);
        const create = traffic.run(() => f.client.create(KEY, "x"));
        await step("put", "api");
        await step("+1", "api", "throttle"); // refused before it was served: the client sends it again

        // Act: the repeat waits while a delete runs to the end and a heal runs to the end
        const repeat = await traffic.pin("+1", "api");
        const del = traffic.run(() => f.client.delete(KEY, "x"));
        for (const label of ["read item", "claim", "-1", "soft delete"] as const) {
            await step(label, "api");
        }
        const afterDelete = await ledgerOf(f, KEY);
        const healed = await through("settler", heal());
        const afterHeal = await ledgerOf(f, KEY);
        await traffic.release(repeat);
        await traffic.quiet();
        assert.equal(await boundBroken(f, KEY), undefined);

        // Assess
        assert.deepEqual(await create, { created: true });
        assert.deepEqual(await del, { deleted: true });
        assert.deepEqual(afterDelete, { count: -1, entries: { [period]: -1 }, gen: 0 });
        assert.equal(healed.drift, 0, "the heal took the -1 from the young entry, as the +1 will be");
        assert.deepEqual({ count: afterHeal.count, entries: afterHeal.entries }, { count: -1, entries: { [period]: -1 } });
        const final = await ledgerOf(f, KEY);
        assert.deepEqual({ count: final.count, entries: final.entries }, { count: 0, entries: { [period]: 0 } });
        const tombstone = tokenTime((await itemOf(f, KEY, "x"))?.[f.config.tokenAttribute]?.S)! + TOMBSTONE_SETTLED_MS;
        assert.equal(
            healed.dueAgainAt,
            Math.min(tombstone, (period + 2) * f.config.periodMs),
            "listed again for the tombstone, and for the entry that disagrees with the table",
        );
    });

    it("strict: a release of an old life that lands between a heal's reads and its write refuses the write (the fenced releases moved); the heal reads again and the unit goes once", async () => {
        // Prepare: two old lives, healed once (their entry gone: base holds them)
        await setUp({ mode: "strict" });
        await f.client.create(KEY, "x");
        await f.client.create(KEY, "y");
        f.clock.advance(2 * f.config.periodMs);
        await f.heal(KEY);
        assert.deepEqual(await ledgerOf(f, KEY), { count: 2, entries: {}, gen: 1 });
        watch();

        // Act: the delete reads the generation and soft-deletes; the heal reads the tombstone (T) and the shard (R);
        // the release lands; then the heal's write, and its second attempt
        const del = traffic.run(() => f.client.delete(KEY, "x"));
        for (const label of ["read item", "read generation", "soft delete"] as const) {
            await step(label, "api");
        }
        const healing = heal();
        for (const label of ["read due", "read items", "read shard"] as const) {
            await step(label, "settler");
        }
        await step("-1", "api");
        const result = await through("api", del);
        const healed = await through("settler", healing);

        // Assess: (the SDK may send a refused write again: the fixture's clock is ahead of the engine's)
        assert.deepEqual(result, { deleted: true });
        const settler = traffic.log
            .filter((e) => e.party === "settler")
            .map((e) => `${e.label}${e.error === undefined ? "" : ` ${e.error}`}`);
        assert.deepEqual(
            settler.filter((label, i) => label !== settler[i - 1]),
            [
                "read due",
                "read items",
                "read shard",
                "remove item",
                "heal write ConditionalCheckFailedException",
                "read items",
                "read shard",
            ],
            "the write planned without the release was refused; the second attempt read again and found nothing to correct",
        );
        assert.deepEqual([healed.healed, healed.drift], [true, 0]);
        assert.deepEqual(await ledgerOf(f, KEY), { count: 1, entries: {}, gen: 1 });
        assert.equal((await f.snapshot(KEY)).clientLive, 1);
    });

    it("strict: a heal leaves no fence behind: a later delete of an old life, overlapping no heal, gives its slot back at once", async () => {
        // Prepare: three old lives, healed twice (the second heal corrected nothing), then the clock moves on
        await setUp({ mode: "strict" });
        for (const id of ["x", "y", "z"]) {
            await f.client.create(KEY, id);
        }
        f.clock.advance(2 * f.config.periodMs);
        await f.heal(KEY);
        await f.heal(KEY);
        f.clock.advance(5 * f.config.periodMs);
        const before = await ledgerOf(f, KEY);

        // Act
        const results = [await f.client.delete(KEY, "x"), await f.client.delete(KEY, "y")];

        // Assess
        assert.deepEqual(results, [{ deleted: true }, { deleted: true }]);
        assert.deepEqual(await ledgerOf(f, KEY), { count: 1, entries: {}, gen: before.gen }, "both releases landed, in the count");
        assert.equal((await f.snapshot(KEY)).clientLive, 1);
    });

    it("strict: a release whose delete read the generation before a heal's write is refused after it and holds its slot; the next heal gives it back", async () => {
        // Prepare: three old lives, healed; z deleted with its release lost (best-effort 3 for 2 live: a heal writes)
        await setUp({ mode: "strict" });
        for (const id of ["x", "y", "z"]) {
            await f.client.create(KEY, id);
        }
        f.clock.advance(2 * f.config.periodMs);
        await f.heal(KEY);
        const losing = refuseRequests(f.clientDynamo, f.config, (label) => label === "-1");
        await f.client.delete(KEY, "z");
        losing.stop();
        watch();

        // Act: the delete reads the generation; the heal reads (R, T: x live) and writes; the delete goes on
        const del = traffic.run(() => f.client.delete(KEY, "x"));
        await step("read item", "api");
        await step("read generation", "api");
        const healed = await through("settler", heal());
        await step("soft delete", "api");
        await step("-1", "api");
        const result = await through("api", del);
        const held = await ledgerOf(f, KEY);
        const again = await through("settler", heal());

        // Assess
        assert.deepEqual(result, { deleted: true });
        assert.equal(healed.drift, 1, "the heal counted x live, as its T saw it, and gave z's slot back");
        assert.deepEqual(
            traffic.log.filter((e) => e.label === "-1").map((e) => e.error),
            ["ConditionalCheckFailedException"],
            "the release was refused on the generation",
        );
        assert.equal(held.count, 2, "x's slot is held");
        assert.equal(again.drift, 1);
        assert.deepEqual(await ledgerOf(f, KEY), { count: 1, entries: {}, gen: held.gen + 1 });
        assert.equal((await f.snapshot(KEY)).clientLive, 1);
    });

    for (const mode of ["utilization", "strict"] as const) {
        it(`${mode}: a heal write whose answer is lost after it committed is retried by the SDK and refused by the generation: the correction lands once`, async () => {
            // Prepare: utilization, three lives whose +1 was refused (best-effort 0); strict, five lives of which two
            // were deleted with their release refused (best-effort 5 for 3 live)
            await setUp({ mode });
            watch();
            for (const id of ["a", "b", "c", "d", "e"].slice(0, mode === "strict" ? 5 : 3)) {
                const create = traffic.run(() => f.client.create(KEY, id));
                await traffic.step(mode === "strict" ? "+1" : "put", "api");
                if (mode === "utilization") {
                    await traffic.step("+1", "api", "refuse");
                    await traffic.step("mark due", "api");
                } else {
                    await traffic.step("put", "api");
                }
                await create;
            }
            for (const id of mode === "strict" ? ["d", "e"] : []) {
                const del = traffic.run(() => f.client.delete(KEY, id));
                await traffic.step("-1", "api", "refuse");
                await traffic.step("mark due", "api");
                await del;
            }
            f.clock.advance(2 * f.config.periodMs);
            const before = await ledgerOf(f, KEY);

            // Act
            const healing = heal();
            await step("heal write", "settler", "lose");
            const result = await through("settler", healing);

            // Assess
            const writes = traffic.log.filter((e) => e.label === "heal write");
            assert.deepEqual(writes[0], { party: "settler", label: "heal write", fault: "lose" });
            assert.ok(writes.length >= 2, "the SDK sent the write again after the lost answer");
            assert.deepEqual(
                writes.slice(1).map((e) => e.error),
                writes.slice(1).map(() => "ConditionalCheckFailedException"),
                "every repeat was refused by the generation the lost write moved",
            );
            assert.equal(before.count, mode === "strict" ? 5 : 0);
            const after = await ledgerOf(f, KEY);
            assert.equal(after.count, 3, "the correction applied once");
            assert.equal(after.gen, 1, "one write committed");
            assert.equal(result.healed, true);
        });
    }

    it("utilization: a heal that stalls between R and T while the clock moves two periods judges lives by its clock before R: a life created meanwhile is not counted twice", async () => {
        // Prepare
        await setUp({ mode: "utilization" });
        watch();
        const healing = heal();
        await step("read due", "settler");
        await step("read shard", "settler"); // R: nothing yet

        // Act: while T waits, y is created (its +1 lands after R), and the clock moves two periods
        await traffic.pin("read items", "settler");
        await through(
            "api",
            traffic.run(() => f.client.create(KEY, "y")),
        );
        f.clock.advance(2 * f.config.periodMs);
        const result = await through("settler", healing);

        // Assess: judged at the later clock, y would be old, counted from T on top of its +1 (best-effort 2)
        assert.equal(result.drift, 0);
        assert.equal((await ledgerOf(f, KEY)).count, 1);
        assert.equal((await f.snapshot(KEY)).clientLive, 1);
    });

    it("strict: a heal that stalls between T and R while the clock moves two periods judges lives by its clock before T: a life created meanwhile keeps its slot", async () => {
        // Prepare
        await setUp({ mode: "strict" });
        watch();
        const healing = heal();
        await step("read due", "settler");
        await step("read items", "settler"); // T: nothing yet

        // Act: while R waits, y is created (reserved in its entry, then put), and the clock moves two periods
        await traffic.pin("read shard", "settler");
        await through(
            "api",
            traffic.run(() => f.client.create(KEY, "y")),
        );
        f.clock.advance(2 * f.config.periodMs);
        const result = await through("settler", healing);

        // Assess: judged at the later clock, y's entry would be stale and its slot dropped (best-effort 0 for 1 live)
        assert.equal(result.drift, 0);
        assert.equal((await ledgerOf(f, KEY)).count, 1);
        assert.equal((await f.snapshot(KEY)).clientLive, 1);
    });

    for (const [mode, seed] of [
        ["utilization", 12],
        ["strict", 22],
    ] as const) {
        it(`${mode}, seed ${seed}: a busy key is healed while creates and deletes run, within the bound after every request, and exact once they stop`, async () => {
            // Prepare: three workers create and delete ids of a small pool; the settler heals the key over and over;
            // one request in ten meets a fault; the clock moves 10 s per request (a request still waiting after 200 s
            // goes first: no request outlives its signature)
            await setUp({ mode });
            watch();
            const random = seededRandom(seed);
            const limit = mode === "strict" ? 4 : undefined;
            const worker = async (w: number) => {
                for (let op = 0; op < 16; op++) {
                    const id = `i${Math.floor(random() * 5)}`;
                    try {
                        if (random() < 0.55) {
                            await f.client.tryCreate(KEY, `${id}`, limit ?? 1_000);
                        } else {
                            await f.client.delete(KEY, id);
                        }
                    } catch {
                        // A refused put or read surfaces to the caller: the worker goes on, as an API would.
                    }
                }
                return w;
            };
            let working = 3;
            const heals: HealResult[] = [];
            const workers = [0, 1, 2].map((w) => traffic.run(() => worker(w).finally(() => working--)));
            const settling = traffic.run(async () => {
                while (working > 0) {
                    // A heal whose read failed every SDK attempt throws; the settler reports the key and goes on.
                    await healKey(KEY, { config: f.config, dynamodb: settler }).then(
                        (r) => void heals.push(r),
                        () => undefined,
                    );
                }
            });

            // Act
            let steps = 0;
            let drifted = 0;
            for (;;) {
                await traffic.quiet();
                if (traffic.running === 0) {
                    break;
                }
                const old = traffic.pending.find((r) => Date.now() - r.arrivedAt > 200_000);
                const request = old ?? traffic.pending[Math.floor(random() * traffic.pending.length)]!;
                const roll = random();
                const fault: Fault | undefined =
                    roll < 0.04 ? "throttle" : roll < 0.07 ? "lose" : roll < 0.1 && request.party === "api" ? "refuse" : undefined;
                await traffic.release(request, fault);
                await traffic.quiet();
                steps++;
                const s = await f.snapshot(KEY);
                assert.equal(boundProblem(mode, s, limit), undefined, `step ${steps}: after ${traffic.recent(6)}`);
                drifted += s.bestEffort === s.clientLive ? 0 : 1;
                f.clock.advance(10_000);
            }
            await Promise.all([...workers, settling]);
            f.clock.advance(2 * f.config.periodMs);
            const last = await f.heal(KEY);

            // Assess
            assert.ok(steps > 100, `${steps} requests`);
            assert.ok(drifted > 10, `best-effort was off its items after ${drifted} of the requests`);
            assert.ok(heals.length >= 3, `${heals.length} heals ran during the traffic`);
            const s = await f.snapshot(KEY);
            assert.equal(last.healed, true);
            assert.equal(s.bestEffort, s.clientLive, "exact once every life is old");
            assert.equal(last.dueAgainAt, undefined);
        });
    }
});
