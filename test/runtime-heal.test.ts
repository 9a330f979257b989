import { strict as assert } from "node:assert";
import { PutItemCommand, UpdateItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import {
    COUNTER_ATTRIBUTES as A,
    DEFAULT_LAYOUT,
    bestEffortSortKey,
    countersTable,
    healShard,
    markerSortKey,
    type CounterTableConfig,
} from "../runtime/shared/config";
import { healKey, planHeal, readForHeal, writeHeal, type HealOptions } from "../runtime/heal/heal";
import { tokenTime, uuidv7 } from "../runtime/shared/tokens";
import { ModelClient, type Step } from "../local/harness/model-client";
import { ledgerPeriodMs } from "../runtime/ledger/ledger";
import { useEngine } from "./support/engine";
import { gate, healTables, probe } from "./support/heal-fixture";

const Q = 60_000;
const DEADLINE = 10_000;
const T0 = 1_800_000_000_000;
const layout = DEFAULT_LAYOUT;

const be = (count: number, version: number, writtenAt: number): Record<string, AttributeValue> => ({
    pk: { S: "k" },
    sk: { S: bestEffortSortKey(layout) },
    count: { N: String(count) },
    [A.version]: { N: String(version) },
    [A.writtenAt]: { N: String(writtenAt) },
    [A.dueAt]: { N: String(writtenAt) },
    [A.healShard]: { S: healShard("k") },
});
const item = (id: string, created: number, extra: Record<string, AttributeValue> = {}): Record<string, AttributeValue> => ({
    pk: { S: "k" },
    sk: { S: id },
    counter_token: { S: uuidv7(created) },
    ...extra,
});

describe("healing: the pure planner", () => {
    it("reads the creation time out of a UUIDv7 token, and nothing out of anything else", () => {
        assert.equal(tokenTime(uuidv7(T0)), T0);
        assert.equal(tokenTime("0b7e8e0c-3d5b-4a52-9f4c-0d0c0a0b0c0d"), undefined);
        assert.equal(tokenTime("not-a-token"), undefined);
        assert.equal(tokenTime(undefined), undefined);
    });

    it("skips a key with no best-effort item, an unversioned one, and one written inside the quiet window", () => {
        assert.deepEqual(planHeal(undefined, [], [], T0, "strict", Q, layout), { action: "skip", reason: "no-best-effort" });
        const unversioned = { pk: { S: "k" }, sk: { S: bestEffortSortKey(layout) }, count: { N: "4" } };
        assert.deepEqual(planHeal(unversioned, [], [], T0, "strict", Q, layout), { action: "skip", reason: "unversioned", current: 4 });
        assert.deepEqual(planHeal(be(3, 7, T0 - Q + 1), [], [], T0, "strict", Q, layout), {
            action: "skip",
            reason: "quiet-window",
            current: 3,
            writtenAt: T0 - Q + 1,
        });
    });

    it("strict: counts every live client-counted item, however young, and items a marker flags hc_be", () => {
        const everyItem = { ...layout, selection: { kind: "sortKeyPrefix", prefix: "" } } as const;
        const items = [
            item("a", T0 - 2 * Q),
            item("b", T0 - 1), // young: counted in strict mode, its reserve came first
            item("c", T0 - 2 * Q, { deleted: { BOOL: true } }), // soft-deleted: not live
            { pk: { S: "k" }, sk: { S: "d" } }, // another writer's item (selected), no token, no flag: not in best-effort
            { pk: { S: "k" }, sk: { S: "e" } }, // another writer's item, flagged by backfill: in best-effort
            { pk: { S: "k" }, sk: { S: bestEffortSortKey(layout) }, counter_token: { S: uuidv7(0) } }, // a counter item
        ];
        const markers = [{ pk: { S: "k" }, sk: { S: markerSortKey(layout, "e") }, [A.beCounted]: { BOOL: true } }];
        assert.deepEqual(planHeal(be(9, 12, T0 - Q), items, markers, T0, "strict", Q, everyItem), {
            action: "heal",
            truth: 3,
            current: 9,
            version: 12,
            cutoff: T0 - Q,
            // An item no writer of this version wrote (no hc_lv): the heal re-bases the ledger.
            ledger: { kind: "quiet", fold: [], folded: T0 - Q, rebase: true },
        });
    });

    it("utilization: leaves out items younger than the window and items whose age cannot be read", () => {
        const items = [
            item("old", T0 - Q),
            item("young", T0 - Q + 1),
            { pk: { S: "k" }, sk: { S: "v4" }, counter_token: { S: "0b7e8e0c-3d5b-4a52-9f4c-0d0c0a0b0c0d" } },
            item("gone", T0 - 5 * Q, { deleted: { BOOL: true } }),
        ];
        assert.deepEqual(planHeal(be(0, 1, T0 - 2 * Q), items, [], T0, "utilization", Q, layout), {
            action: "heal",
            truth: 1,
            // The young item left out keeps the key on the heal index, due at its creation.
            heldBack: T0 - Q + 1,
            current: 0,
            version: 1,
            cutoff: T0 - Q,
            ledger: { kind: "quiet", fold: [], folded: T0 - Q, rebase: true },
        });
    });
});

describe("healing on DynamoDB Local: every race, staged", () => {
    const engine = useEngine();
    let clock = T0;
    const now = () => clock;

    /** A model client whose calls wait at `holds[step]` when one is set. */
    function staged(config: CounterTableConfig, mode: "strict" | "utilization", periodMs = ledgerPeriodMs(Q / 1000)) {
        const holds = new Map<Step, ReturnType<typeof gate>>();
        const client = new ModelClient({
            config,
            dynamodb: engine().dynamodb(),
            mode,
            deadlineMs: DEADLINE,
            now,
            // The period the component's clients write with for this window, unless a test gives its own.
            ledgerPeriodMs: periodMs,
            pause: async (step) => {
                const g = holds.get(step);
                if (g) {
                    g.arrive();
                    await g.wait;
                }
            },
        });
        const hold = (step: Step) => {
            const g = gate();
            holds.set(step, g);
            return g;
        };
        const options = (m = mode): HealOptions => ({ config, dynamodb: engine().dynamodb(), mode: m, quietWindowMs: Q, now });
        return { client, hold, options };
    }

    /** Writes the best-effort item as a client would have, `count` at `version`, at time `at`. */
    async function setBestEffort(config: CounterTableConfig, key: string, count: number, version: number, at: number) {
        await engine()
            .dynamodb()
            .send(
                new PutItemCommand({
                    TableName: countersTable(config),
                    Item: {
                        pk: { S: key },
                        sk: { S: bestEffortSortKey(config) },
                        count: { N: String(count) },
                        [A.version]: { N: String(version) },
                        [A.writtenAt]: { N: String(at) },
                        [A.dueAt]: { N: String(at) },
                        [A.healShard]: { S: healShard(key) },
                    },
                }),
            );
    }

    beforeEach(() => {
        clock = T0;
    });

    it("strict, held slot: a reserve whose put was abandoned is held, then healed, then exact", async () => {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "strict");
        const db = engine().dynamodb();
        assert.deepEqual(await client.create("k", "a", 5), { created: true, abandoned: 0 });
        const held = hold("reserve");
        const call = client.create("k", "b", 5);
        await held.reached;
        clock += DEADLINE + 1; // the call outlives its deadline: the put is never sent
        held.open();
        assert.deepEqual(await call, { created: false, reason: "unavailable", abandoned: 1 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 2, live: 1, version: 2, healDue: true });

        // A heal on the busy key lands, and keeps the slot: the abandoned reservation's life is younger than the horizon,
        // so for all the heal can prove its put may still land. The key stays listed until that life is old.
        const early = await healKey("k", options());
        assert.equal(early.outcome, "healed");
        assert.equal(early.before, 2);
        assert.equal(early.after, 2);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 2, live: 1, version: 2, healDue: true });

        clock += Q;
        const healed = await healKey("k", options());
        assert.equal(healed.outcome, "healed");
        assert.equal(healed.before, 2);
        assert.equal(healed.after, 1);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 2, healDue: false });
    });

    it("strict create held between reserve and put: a heal of the busy key keeps the recent life's reservation, so the put lands within the bound", async () => {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "strict");
        const db = engine().dynamodb();
        const held = hold("reserve");
        const call = client.create("k", "a", 5);
        await held.reached;
        clock += DEADLINE; // the call may still send its put
        const during = await healKey("k", options());
        assert.equal(during.outcome, "healed");
        assert.equal(during.after, 1, "the reservation's unit stays in its ledger entry, though no item shows it yet");
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 0, version: 1, healDue: true });
        held.open();
        assert.deepEqual(await call, { created: true, abandoned: 0 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 1, healDue: true });
        clock += Q;
        assert.equal((await healKey("k", options())).after, 1);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 1, healDue: false });
    });

    it("strict: a reserve that lands between the heal's read and its write makes the heal change nothing", async () => {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "strict");
        const db = engine().dynamodb();
        await setBestEffort(config, "k", 3, 10, T0 - 2 * Q); // three slots held by calls long gone, no items
        const read = await readForHeal("k", options());
        assert.deepEqual(read.plan, {
            action: "heal",
            truth: 0,
            current: 3,
            version: 10,
            cutoff: T0 - Q,
            ledger: { kind: "quiet", fold: [], folded: T0 - Q, rebase: true },
        });
        const held = hold("reserve");
        const call = client.create("k", "a", 5);
        await held.reached; // reserved: 4, its put not yet sent
        const raced = await writeHeal(read, options());
        assert.equal(raced.outcome, "raced");
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 4, live: 0, version: 11, healDue: true });
        held.open();
        assert.deepEqual(await call, { created: true, abandoned: 0 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 4, live: 1, version: 11, healDue: true });
        clock += Q;
        assert.equal((await healKey("k", options())).after, 1);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 11, healDue: false });
    });

    it("strict delete of an old life held after its touch, then after its soft delete: a heal of the busy key lands, and the release it overtook is refused", async () => {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "strict");
        const db = engine().dynamodb();
        for (const id of ["a", "b", "c"]) {
            await client.create("k", id, 5);
        }
        clock += 2 * Q; // the lives are older than the horizon: a heal counts them from the table

        // Held after its touch: the heal counts the item (still live) and opens an epoch; the release, whose touch read
        // the epoch before, is refused and the key listed: a held slot, never a unit taken twice.
        const afterTouch = hold("touch");
        const first = client.delete("k", "a");
        await afterTouch.reached;
        const h1 = await healKey("k", options());
        assert.deepEqual([h1.outcome, h1.before, h1.after], ["healed", 3, 3]);
        afterTouch.open();
        assert.deepEqual(await first, { deleted: true, abandoned: 1 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 3, live: 2, version: 4, healDue: true });

        // Held after its soft delete: the heal no longer sees the item, so it counts it gone. Its release would take a
        // second unit for it (best-effort below the live items); it is refused.
        const afterSoftDelete = hold("soft-delete");
        const second = client.delete("k", "b");
        await afterSoftDelete.reached;
        const h2 = await healKey("k", options());
        assert.deepEqual([h2.outcome, h2.before, h2.after], ["healed", 3, 1]);
        afterSoftDelete.open();
        assert.deepEqual(await second, { deleted: true, abandoned: 1 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 5, healDue: true });

        clock += Q;
        assert.equal((await healKey("k", options())).after, 1);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 5, healDue: false });
    });

    it("strict: a busy heal that lost its race does not plan again when an old life's release wrote a period holding its fold boundary (fuzz seed 180036)", async () => {
        // The heal folds at an edge of the period the component's clients use (a tenth of the window); this client writes
        // with a period ten times as long (its own ledgerPeriodMs), so an entry of its can hold the boundary.
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "strict", Q);
        const db = engine().dynamodb();
        assert.equal(T0 % Q, 0);
        assert.deepEqual(await client.create("k", "old", 5), { created: true, abandoned: 0 });

        // A quiet heal folds at its cutoff, a second into the old life's period: the fold leaves no entry behind.
        clock += Q + 1_000;
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 1, healDue: true });
        const quiet = await healKey("k", options());
        assert.deepEqual([quiet.outcome, quiet.before, quiet.after], ["healed", 1, 1]);

        // The old life's delete, held after its soft delete; then a busy heal reads, folding at the next edge of the
        // heal's period, inside the old life's (no entry holds that instant yet). The old item is gone from its read.
        clock += 6_000;
        const afterSoftDelete = hold("soft-delete");
        const deleting = client.delete("k", "old");
        await afterSoftDelete.reached;
        const read = await readForHeal("k", options());
        assert.equal(read.plan.action, "heal");
        assert.equal(read.plan.truth, 0);
        assert.deepEqual(read.plan.ledger, { kind: "busy", fold: [], boundary: T0 + 6_000, foldedRead: T0 + 1_000 });

        // The release lands (its touch read the epoch the heal has not changed yet): -1 in the old life's period, which
        // holds the boundary. A new life reserves, its put held.
        afterSoftDelete.open();
        assert.deepEqual(await deleting, { deleted: true, abandoned: 0 });
        const beforePut = hold("reserve");
        const creating = client.create("k", "new", 5);
        await beforePut.reached;
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 0, version: 4, healDue: true });

        // The heal loses its race. Planned again, it would take the release for a recent life's and write 0 under a
        // reservation whose put is still coming; it starts over instead.
        assert.equal((await writeHeal(read, options())).outcome, "raced");
        assert.equal(await read.replan!(), undefined);
        beforePut.open();
        assert.deepEqual(await creating, { created: true, abandoned: 0 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 4, healDue: true });
        clock += 2 * Q;
        const again = await healKey("k", options());
        assert.deepEqual([again.outcome, again.before, again.after], ["healed", 1, 1]);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 4, healDue: false });
    });

    it("utilization create held between put and increment: the young item is left out, so the increment cannot overcount", async () => {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "utilization");
        const db = engine().dynamodb();
        await client.create("k", "a");
        clock += Q;
        const held = hold("put");
        const call = client.create("k", "b");
        await held.reached; // b is live, its increment not yet sent
        const healed = await healKey("k", options());
        assert.equal(healed.outcome, "healed");
        assert.equal(healed.after, 1); // a only: b is younger than the window
        // The key stays on the heal index while b's increment may still be lost (its call's mark would then be spent).
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 2, version: 1, healDue: true });
        held.open();
        assert.deepEqual(await call, { created: true, abandoned: 0 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 2, live: 2, version: 2, healDue: true });
    });

    it("utilization create whose increment is abandoned: healed once the item is older than the window", async () => {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "utilization");
        const db = engine().dynamodb();
        await client.create("k", "a");
        const held = hold("put");
        const call = client.create("k", "b");
        await held.reached;
        clock += DEADLINE + 1;
        held.open();
        assert.deepEqual(await call, { created: true, abandoned: 1 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 2, version: 1, healDue: true });
        clock += Q;
        assert.equal((await healKey("k", options())).after, 2);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 2, live: 2, version: 1, healDue: false });
    });

    /** A utilization key whose first and only create abandoned its increment (past its deadline): marks only. */
    async function abandonedOnlyIncrement() {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "utilization");
        const held = hold("put");
        const call = client.create("k", "a");
        await held.reached;
        clock += DEADLINE + 1;
        held.open();
        assert.deepEqual(await call, { created: true, abandoned: 1 });
        return { config, options, db: engine().dynamodb() };
    }

    it("utilization: a key whose only increment was abandoned holds a best-effort item of marks only, healed once the item is old (fuzz seed 80019)", async () => {
        // Prepare: the key's first call abandons its increment; its mark is the only write on the best-effort item.
        const { config, options, db } = await abandonedOnlyIncrement();
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 0, live: 1, healDue: true });

        // Act: a heal once the item is older than the window.
        clock += Q;
        const healed = await healKey("k", options());

        // Assess: healed (not skipped as an earlier version's item), and the key leaves the index.
        assert.equal(healed.after, 1);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, healDue: false });
    });

    it("an item of marks only is healed on the condition that no count landed: a count written since the read makes the heal change nothing", async () => {
        // Prepare: as above, then the heal's read, then an earlier version's client (a count, no version) lands.
        const { config, options, db } = await abandonedOnlyIncrement();
        clock += Q;
        const read = await readForHeal("k", options());
        await db.send(
            new UpdateItemCommand({
                TableName: countersTable(config),
                Key: { pk: { S: "k" }, sk: { S: bestEffortSortKey(config) } },
                UpdateExpression: "ADD #count :one",
                ExpressionAttributeNames: { "#count": "count" },
                ExpressionAttributeValues: { ":one": { N: "1" } },
            }),
        );

        // Act
        const written = await writeHeal(read, options());

        // Assess: the heal's write lost; the count is the other writer's.
        assert.equal(written.outcome, "raced");
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, healDue: true });
    });

    it("utilization: a heal that leaves out a young item whose increment was lost keeps its key listed (fuzz seed 53)", async () => {
        // Prepare: a is old; b's increment is abandoned, so its call marks the key; best-effort is quiet (a's write).
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "utilization");
        const db = engine().dynamodb();
        await client.create("k", "a");
        clock += Q;
        const held = hold("put");
        const call = client.create("k", "b");
        await held.reached;
        clock += DEADLINE + 1;
        held.open();
        assert.deepEqual(await call, { created: true, abandoned: 1 });
        // Act: a settler heal while b is younger than the window.
        const early = await healKey("k", options());
        // Assess: b is left out (its increment might still land), and the key stays on the index for it: the mark its
        // call wrote is not spent on a heal that could not count it.
        assert.equal(early.after, 1);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 2, version: 1, healDue: true });
        clock += Q;
        assert.equal((await healKey("k", options())).after, 2);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 2, live: 2, version: 1, healDue: false });
    });

    for (const lands of [true, false]) {
        it(`utilization delete of an old life held between decrement and soft delete: a heal of the busy key leaves the claimed item out; the soft delete ${lands ? "lands on an exact count" : "abandoned leaves an undercount the next heal restores"}`, async () => {
            const config = await healTables(engine());
            const { client, hold, options } = staged(config, "utilization");
            const db = engine().dynamodb();
            await client.create("k", "a");
            await client.create("k", "b");
            clock += 2 * Q; // old lives: a heal counts them from the table
            const held = hold("decrement");
            const call = client.delete("k", "a");
            await held.reached;
            // The decrement is in best-effort and the item still live: counted, the soft delete would leave best-effort one
            // above the live items. The item carries the delete's claim, younger than the horizon: it is left out.
            const healed = await healKey("k", options());
            assert.deepEqual([healed.outcome, healed.before, healed.after], ["healed", 1, 1]);
            assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 2, version: 3, healDue: true });
            if (lands) {
                held.open();
                assert.deepEqual(await call, { deleted: true, abandoned: 0 });
                assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 3, healDue: true });
                return;
            }
            clock += DEADLINE + 1;
            held.open();
            assert.deepEqual(await call, { deleted: false, reason: "unavailable", abandoned: 1 });
            assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 2, version: 3, healDue: true });
            clock += Q; // the claim is older than the horizon: its delete has ended, and the item is live
            assert.equal((await healKey("k", options())).after, 2);
            assert.deepEqual(await probe(db, config, "k"), { bestEffort: 2, live: 2, version: 3, healDue: false });
        });
    }

    it("utilization: a decrement that lands between the heal's read and its write makes the heal change nothing", async () => {
        const config = await healTables(engine());
        const { client, hold, options } = staged(config, "utilization");
        const db = engine().dynamodb();
        await client.create("k", "a");
        await client.create("k", "b");
        clock += Q;
        const read = await readForHeal("k", options());
        assert.equal(read.plan.action, "heal");
        const held = hold("decrement");
        const call = client.delete("k", "a");
        await held.reached;
        assert.equal((await writeHeal(read, options())).outcome, "raced");
        held.open();
        assert.deepEqual(await call, { deleted: true, abandoned: 0 });
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 3, healDue: false });
    });

    it("a heal racing another heal: both pass only if no client wrote, and the value is the truth", async () => {
        const config = await healTables(engine());
        const { options } = staged(config, "strict");
        const db = engine().dynamodb();
        await setBestEffort(config, "k", 2, 4, T0 - 2 * Q);
        const [one, two] = await Promise.all([healKey("k", options()), healKey("k", options())]);
        assert.deepEqual([one.outcome, two.outcome, one.after, two.after], ["healed", "healed", 0, 0]);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 0, live: 0, version: 4, healDue: false });
    });

    it("same-table placement: counter items in the user table are not counted as items", async () => {
        const config = await healTables(engine(), { sameTable: true });
        const { client, options } = staged(config, "strict");
        const db = engine().dynamodb();
        await client.create("k", "a", 5);
        await db.send(
            new UpdateItemCommand({
                TableName: config.tableName,
                Key: { pk: { S: "k" }, sk: { S: bestEffortSortKey(config) } },
                UpdateExpression: "ADD #count :two",
                ExpressionAttributeNames: { "#count": "count" },
                ExpressionAttributeValues: { ":two": { N: "2" } },
            }),
        );
        clock += Q;
        assert.equal((await healKey("k", options())).after, 1);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 1, live: 1, version: 1, healDue: false });
    });
});
