/**
 * Healing, reconciliation, the settler and status on a key spread over 3 shards (runtime/shards/layout.ts), on
 * DynamoDB Local: items are written straight to the user's table with client tokens homed in chosen shards, the
 * shards' counter items are set to wrong values, and every shard is checked to its exact value afterwards.
 */
import { strict as assert } from "node:assert";
import { GetItemCommand, PutItemCommand, UpdateItemCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
    COUNTER_ATTRIBUTES as A,
    MARKER_STATE,
    ZERO_SEQ,
    bestEffortSortKey,
    countersTable,
    eventualSortKey,
    healShard,
    markerSortKey,
    type CounterTableConfig,
} from "../runtime/shared/config";
import { bestEffortMarkNames, bestEffortMarkValues, bestEffortUpdate, dueMarkInput } from "../runtime/shared/best-effort-marks";
import { healKey, readForHeal, writeHeal, type HealOptions } from "../runtime/heal/heal";
import { reconcileKey } from "../runtime/heal/reconcile";
import { settle, type SettleOptions } from "../runtime/heal/settle";
import { readKeyStatus, readTableStatus } from "../runtime/ops/status";
import { reconcileAll, reconcileKeys } from "../runtime/ops/reconcile-all";
import { markerShard, shardPartitionKey } from "../runtime/shards/layout";
import { ledgerAttribute, ledgerPeriodMs } from "../runtime/ledger/ledger";
import { InvalidArgumentError } from "../runtime/shared/errors";
import type { FatalMessage } from "../runtime/stream/fatal";
import { useEngine } from "./support/engine";
import { counterFixture } from "./support/counter-fixture";
import { healTables } from "./support/heal-fixture";
import { N, OLD, Q, T0, noFatal, shape, tokenIn } from "./support/shard-heal";

/** The first id `${prefix}0`, `${prefix}1`, ... whose marker lives in `shard`. */
function idIn(shard: number, prefix: string): string {
    for (let i = 0; ; i++) {
        if (markerShard(`${prefix}${i}`, N) === shard) {
            return `${prefix}${i}`;
        }
    }
}

/** The shard of `id`'s marker is none of `shards`: its life's home (its token's) differs from its marker's. */
function idNotIn(shards: readonly number[], prefix: string): string {
    for (let i = 0; ; i++) {
        if (!shards.includes(markerShard(`${prefix}${i}`, N))) {
            return `${prefix}${i}`;
        }
    }
}

interface BestEffortItem {
    readonly count?: number;
    readonly version?: number;
    readonly writtenAt?: number;
    readonly marks?: number;
    /** Puts the item on the heal index, due at this time. */
    readonly dueAt?: number;
    /** Ledger entries (`hc_n_*`: units), written with `hc_lv` = the version (every writer kept the ledger). */
    readonly ledger?: Readonly<Record<string, number>>;
}

function helpers(db: () => DynamoDBClient, config: () => CounterTableConfig) {
    const counterKey = (key: string, shard: number, sk: string) => ({
        [config().partitionKey]: { S: shardPartitionKey(key, shard) },
        [config().sortKey]: { S: sk },
    });
    return {
        async putItem(key: string, id: string, token: string | undefined, extra: Record<string, AttributeValue> = {}) {
            await db().send(
                new PutItemCommand({
                    TableName: config().tableName,
                    Item: {
                        pk: { S: key },
                        sk: { S: id },
                        ...(token === undefined ? {} : { [config().tokenAttribute]: { S: token } }),
                        ...extra,
                    },
                }),
            );
        },
        async setBestEffort(key: string, shard: number, b: BestEffortItem) {
            const n = (value: number | undefined) => (value === undefined ? {} : { N: String(value) });
            await db().send(
                new PutItemCommand({
                    TableName: countersTable(config()),
                    Item: {
                        ...counterKey(key, shard, bestEffortSortKey(config())),
                        ...(b.count === undefined ? {} : { [config().countAttribute]: n(b.count) as AttributeValue }),
                        ...(b.version === undefined ? {} : { [A.version]: n(b.version) as AttributeValue }),
                        ...(b.writtenAt === undefined ? {} : { [A.writtenAt]: n(b.writtenAt) as AttributeValue }),
                        ...(b.marks === undefined ? {} : { [A.marks]: n(b.marks) as AttributeValue }),
                        ...(b.ledger === undefined
                            ? {}
                            : {
                                  [A.ledgerVersion]: n(b.version) as AttributeValue,
                                  ...Object.fromEntries(Object.entries(b.ledger).map(([name, units]) => [name, { N: String(units) }])),
                              }),
                        ...(b.dueAt === undefined
                            ? {}
                            : { [A.dueAt]: n(b.dueAt) as AttributeValue, [A.healShard]: { S: healShard(shardPartitionKey(key, shard)) } }),
                    },
                }),
            );
        },
        async setEventual(key: string, shard: number, count: number) {
            await db().send(
                new PutItemCommand({
                    TableName: countersTable(config()),
                    Item: { ...counterKey(key, shard, eventualSortKey(config())), [config().countAttribute]: { N: String(count) } },
                }),
            );
        },
        async putMarker(key: string, shard: number, id: string, state: string | undefined, extra: Record<string, AttributeValue> = {}) {
            await db().send(
                new PutItemCommand({
                    TableName: countersTable(config()),
                    Item: {
                        ...counterKey(key, shard, markerSortKey(config(), id)),
                        ...(state === undefined ? {} : { [A.state]: { S: state }, [A.seq]: { S: ZERO_SEQ } }),
                        ...extra,
                    },
                }),
            );
        },
        async counterItem(key: string, shard: number, sk: string): Promise<Record<string, AttributeValue> | undefined> {
            const response = await db().send(
                new GetItemCommand({ TableName: countersTable(config()), Key: counterKey(key, shard, sk), ConsistentRead: true }),
            );
            return response.Item;
        },
        /** Each shard's best-effort item as [count, version, epoch, listed on the heal index]. */
        async bestEfforts(key: string): Promise<Array<[number | undefined, number | undefined, number | undefined, boolean]>> {
            const out: Array<[number | undefined, number | undefined, number | undefined, boolean]> = [];
            for (let shard = 0; shard < N; shard++) {
                const item = await this.counterItem(key, shard, bestEffortSortKey(config()));
                const n = (name: string) => (item?.[name]?.N === undefined ? undefined : Number(item[name]!.N));
                out.push([n(config().countAttribute), n(A.version), n(A.epoch), item?.[A.healShard] !== undefined]);
            }
            return out;
        },
        /** Each shard's eventual partial and its counted markers' ids. */
        async partials(key: string, ids: readonly string[]): Promise<Array<{ eventual: number; counted: string[] }>> {
            const out: Array<{ eventual: number; counted: string[] }> = [];
            for (let shard = 0; shard < N; shard++) {
                const eventual = Number((await this.counterItem(key, shard, eventualSortKey(config())))?.[config().countAttribute]?.N ?? 0);
                const counted: string[] = [];
                for (const id of ids) {
                    const marker = await this.counterItem(key, shard, markerSortKey(config(), id));
                    if (marker?.[A.state]?.S === MARKER_STATE.counted) {
                        counted.push(id);
                    }
                }
                out.push({ eventual, counted });
            }
            return out;
        },
        /** A client's best-effort write of shard `shard`: ADD `amount`, a version bump and its clock, as the client sends it. */
        async clientWrite(key: string, shard: number, amount: number, now: number, due = false) {
            await db().send(
                new UpdateItemCommand({
                    TableName: countersTable(config()),
                    Key: counterKey(key, shard, bestEffortSortKey(config())),
                    UpdateExpression: bestEffortUpdate(":amount", due),
                    ExpressionAttributeNames: { "#count": config().countAttribute, ...bestEffortMarkNames(due) },
                    ExpressionAttributeValues: {
                        ":amount": { N: String(amount) },
                        ...bestEffortMarkValues(shardPartitionKey(key, shard), now, due),
                    },
                }),
            );
        },
    };
}

describe("a key spread over 3 shards: healing, reconciliation, the settler and status (DynamoDB Local)", () => {
    const engine = useEngine();
    let config: CounterTableConfig;
    const h = helpers(
        () => engine().dynamodb(),
        () => config,
    );
    const options = (mode: "strict" | "utilization", now = T0): HealOptions => ({
        config,
        dynamodb: engine().dynamodb(),
        mode,
        quietWindowMs: Q,
        now: () => now,
    });

    describe("healing", () => {
        beforeEach(async () => {
            const fixture = await counterFixture(engine(), { placement: "separate", counterShards: N });
            config = fixture.config;
            fixture.close();
        });

        it("utilization: each shard gets the live items homed there (their token's shard), each on its own conditions", async () => {
            // Prepare: ids whose markers live elsewhere than their lives (the home is the token's, not the id's).
            await h.putItem("k", idNotIn([0], "a"), tokenIn(0));
            await h.putItem("k", idNotIn([0], "b"), tokenIn(0));
            await h.putItem("k", idNotIn([1], "c"), tokenIn(1));
            await h.putItem("k", idNotIn([1], "d"), tokenIn(1), { deleted: { BOOL: true } }); // soft-deleted: not live
            await h.putItem("k", idNotIn([1], "e"), tokenIn(1, T0 - Q + 1)); // younger than the window: left out
            for (const id of ["f", "g", "h"]) {
                await h.putItem("k", idNotIn([2], id), tokenIn(2));
            }
            await h.putItem("k", "other", undefined); // no token: not the client's, not selected
            await h.setBestEffort("k", 0, { count: 7, version: 3, writtenAt: OLD, dueAt: OLD, marks: 1 });
            await h.setBestEffort("k", 1, { count: 0, version: 1, writtenAt: OLD });
            await h.setBestEffort("k", 2, { count: 1, version: 5, writtenAt: OLD, dueAt: OLD, marks: 2 });

            // Act
            const healed = await healKey("k", options("utilization"));

            // Assess: shard 0 lowered 7 -> 2 (a new epoch there only), shard 1 raised 0 -> 1, shard 2 raised 1 -> 3.
            assert.equal(healed.outcome, "healed");
            assert.deepEqual([healed.before, healed.after], [8, 6]);
            assert.deepEqual(shape(healed.shards), [
                { shard: 0, outcome: "healed", before: 7, after: 2 },
                { shard: 1, outcome: "healed", before: 0, after: 1 },
                { shard: 2, outcome: "healed", before: 1, after: 3 },
            ]);
            // Shard 1 left its young item out: it stays on the heal index, due at that item's creation.
            assert.deepEqual(await h.bestEfforts("k"), [
                [2, 3, 1, false],
                [1, 1, undefined, true],
                [3, 5, undefined, false],
            ]);
            // Healing again changes nothing.
            assert.deepEqual(shape((await healKey("k", options("utilization"))).shards), [
                { shard: 0, outcome: "healed", before: 2, after: 2 },
                { shard: 1, outcome: "healed", before: 1, after: 1 },
                { shard: 2, outcome: "healed", before: 3, after: 3 },
            ]);
        });

        it("strict: a token-less item's unit is its id's shard's, flagged on its marker there; young items count", async () => {
            // Prepare: every item of the key counts (a sort-key prefix selection), so other writers' items are selected.
            config = { ...config, selection: { kind: "sortKeyPrefix", prefix: "" } };
            const flagged = idIn(2, "x"); // a backfill's unit, in shard 2, flagged on its marker (in shard 2) with epoch 0
            const unflagged = idIn(1, "y"); // another writer's item no unit stands for
            await h.putItem("k", flagged, undefined);
            await h.putItem("k", unflagged, undefined);
            await h.putMarker("k", 2, flagged, MARKER_STATE.counted, { [A.beCounted]: { N: "0" } });
            await h.putItem("k", idNotIn([1], "z"), tokenIn(1, T0 - 1)); // young: a strict reserve came first, it counts
            await h.setBestEffort("k", 0, { count: 4, version: 9, writtenAt: OLD });
            await h.setBestEffort("k", 1, { count: 1, version: 2, writtenAt: OLD });
            await h.setBestEffort("k", 2, { count: 0, version: 4, writtenAt: OLD });

            // Act
            const healed = await healKey("k", options("strict"));

            // Assess
            assert.deepEqual(shape(healed.shards), [
                { shard: 0, outcome: "healed", before: 4, after: 0 },
                { shard: 1, outcome: "healed", before: 1, after: 1 },
                { shard: 2, outcome: "healed", before: 0, after: 1 },
            ]);
            // Every shard written opens its next epoch with the one lowered (a release goes to its token's shard).
            assert.deepEqual(await h.bestEfforts("k"), [
                [0, 9, 1, false],
                [1, 2, 1, false],
                [1, 4, 1, false],
            ]);
        });

        it("a client write to one shard between the heal's read and its write makes the whole heal fail: the shards land together", async () => {
            // Prepare: three drifted shards, read by a heal.
            await h.putItem("k", "a", tokenIn(0));
            await h.putItem("k", "b", tokenIn(1));
            await h.putItem("k", "c", tokenIn(2));
            for (const shard of [0, 1, 2]) {
                await h.setBestEffort("k", shard, { count: 5, version: 10 + shard, writtenAt: OLD, dueAt: OLD, marks: 1 });
            }
            const read = await readForHeal("k", options("strict"));
            assert.deepEqual(
                read.shards.map((s) => s.plan),
                [0, 1, 2].map((shard) => ({
                    action: "heal",
                    truth: 1,
                    current: 5,
                    version: 10 + shard,
                    marks: 1,
                    cutoff: T0 - Q,
                    // Items no writer of this version wrote (no hc_lv): the quiet heal re-bases the ledger.
                    ledger: { kind: "quiet", fold: [], folded: T0 - Q, rebase: true },
                })),
            );
            assert.deepEqual(read.plan, read.shards[0]!.plan);

            // Act: a strict reservation of a life homed in shard 1 lands (ADD 1, version bump, mark), then the heal writes.
            await h.clientWrite("k", 1, 1, T0, true);
            const written = await writeHeal(read, options("strict"));

            // Assess: one transaction for the three shards, refused by shard 1's condition: nothing changed, every entry stays.
            assert.equal(written.outcome, "raced");
            assert.deepEqual(shape(written.shards), [
                { shard: 0, outcome: "raced", before: 5 },
                { shard: 1, outcome: "raced", before: 5 },
                { shard: 2, outcome: "raced", before: 5 },
            ]);
            assert.deepEqual(await h.bestEfforts("k"), [
                [5, 10, undefined, true],
                [6, 12, undefined, true],
                [5, 12, undefined, true],
            ]);
            // Once quiet, the next heal takes shard 1 to its truth too.
            const later = await healKey("k", options("strict", T0 + Q));
            assert.deepEqual(
                shape(later.shards)?.map((s) => [s.outcome, s.after]),
                [
                    ["healed", 1],
                    ["healed", 1],
                    ["healed", 1],
                ],
            );
        });

        it("a busy shard holds the whole key for its window; once quiet, a shard with no item but items homed there is created", async () => {
            // Prepare: shard 0 busy, shard 1 absent with an item homed there, shard 2 quiet and one low.
            await h.putItem("k", "a", tokenIn(0));
            await h.putItem("k", "b", tokenIn(1));
            await h.putItem("k", "c", tokenIn(2));
            await h.setBestEffort("k", 0, { count: 3, version: 1, writtenAt: T0 - 1 });
            await h.setBestEffort("k", 2, { count: 0, version: 1, writtenAt: OLD });

            // Act
            const held = await healKey("k", options("utilization"));
            const later = await healKey("k", options("utilization", T0 + Q));

            // Assess: nothing written while shard 0 is busy, every shard reporting its window (the settler defers the key);
            // then all three land together, shard 1 created with its item.
            assert.equal(held.outcome, "skipped");
            assert.deepEqual(shape(held.shards), [
                { shard: 0, outcome: "skipped", reason: "quiet-window", before: 3, writtenAt: T0 - 1 },
                { shard: 1, outcome: "skipped", reason: "quiet-window", before: 0, writtenAt: T0 - 1 },
                { shard: 2, outcome: "skipped", reason: "quiet-window", before: 0, writtenAt: T0 - 1 },
            ]);
            assert.equal(later.outcome, "healed");
            assert.deepEqual(
                shape(later.shards)?.map((s) => [s.outcome, s.before, s.after]),
                [
                    ["healed", 3, 1],
                    ["healed", 0, 1],
                    ["healed", 0, 1],
                ],
            );
            assert.deepEqual([later.before, later.after], [3, 3]);
        });

        it("an item whose home moved to a shard with no item (another writer changed its token) keeps the sum: strict never drops below live", async () => {
            // Prepare: a strict unit in shard 0 for "x"; another writer rewrites x with a token homed in shard 1 (no item).
            await h.putItem("k", "x", tokenIn(1));
            await h.setBestEffort("k", 0, { count: 1, version: 1, writtenAt: OLD });

            // Act
            const healed = await healKey("k", options("strict"));

            // Assess: shard 0 lowered and shard 1 created in one transaction: the sum stays 1 == live.
            assert.deepEqual(
                shape(healed.shards)?.map((s) => [s.outcome, s.before, s.after]),
                [
                    ["healed", 1, 0],
                    ["healed", 0, 1],
                    ["skipped", undefined, undefined],
                ],
            );
            assert.deepEqual(
                (await h.bestEfforts("k")).map((b) => b[0]),
                [0, 1, undefined],
            );
        });

        it("strict, busy: a recent life whose token another writer moved to another shard is counted once over the key, not once per shard (fuzz seed 25)", async () => {
            // Prepare: "x" reserved in shard 0 a second ago (its unit in shard 0's ledger entry), then another writer gave it
            // a token of the same time homed in shard 1; shard 0 was written within the window, so the heal is a busy one.
            const made = T0 - 1_000;
            const entry = ledgerAttribute(tokenIn(0, made), ledgerPeriodMs(Q / 1000));
            await h.putItem("k", "x", tokenIn(1, made));
            await h.setBestEffort("k", 0, { count: 1, version: 1, writtenAt: made, ledger: { [entry]: 1 } });

            // Act
            const healed = await healKey("k", options("strict"));

            // Assess: the key's recent term is max(1 unit, 1 item) = 1, kept in shard 0 where the unit is; counted per shard
            // (shard 0's unit, shard 1's item) the sum would be 2 with one live item, one above a limit of 1.
            assert.equal(healed.outcome, "healed");
            assert.deepEqual(
                shape(healed.shards)?.map((s) => [s.outcome, s.before, s.after]),
                [
                    ["healed", 1, 1],
                    ["skipped", undefined, undefined],
                    ["skipped", undefined, undefined],
                ],
            );
            assert.deepEqual(
                (await h.bestEfforts("k")).map((b) => b[0]),
                [1, undefined, undefined],
            );
        });

        it("strict: a heal that lowers one shard opens the epoch of every shard it writes, so a release its touch read before is refused wherever it goes (fuzz seed 200164)", async () => {
            // Prepare: shard 0 holds the unit of a life that is no longer live (another writer rewrote its token to one homed
            // in shard 1, then moved the item out of the selection); a delete of it would touch and release in shard 1.
            await h.setBestEffort("k", 0, { count: 1, version: 1, writtenAt: OLD });
            await h.setBestEffort("k", 1, { count: 0, version: 1, writtenAt: OLD });

            // Act
            const healed = await healKey("k", options("strict"));

            // Assess: shard 0 lowered, shard 1 kept; both opened their next epoch, so a release in shard 1 whose touch read
            // its epoch before the heal (the unit the heal took from shard 0) is refused.
            assert.deepEqual(
                shape(healed.shards)?.map((s) => [s.outcome, s.before, s.after]),
                [
                    ["healed", 1, 0],
                    ["healed", 0, 0],
                    ["skipped", undefined, undefined],
                ],
            );
            assert.deepEqual(
                (await h.bestEfforts("k")).map((b) => [b[0], b[2]]),
                [
                    [0, 1],
                    [0, 1],
                    [undefined, undefined],
                ],
            );
        });

        it("a client write to a shard the heal leaves alone (no item, none homed there) between its read and its write makes the heal fail", async () => {
            // Prepare: utilization; "x"'s unit in shard 0, "y"'s in shard 2; another writer rewrote x's token to one homed
            // in shard 1, which has no item. The client deletes x after the heal's read: its soft delete lands, and its
            // decrement goes to its token's shard, 1.
            await h.putItem("k", "x", tokenIn(1));
            await h.putItem("k", "y", tokenIn(2));
            await h.setBestEffort("k", 0, { count: 1, version: 1, writtenAt: OLD });
            await h.setBestEffort("k", 2, { count: 1, version: 1, writtenAt: OLD });
            await h.putItem("k", "x", tokenIn(1), { deleted: { BOOL: true } });
            const read = await readForHeal("k", options("utilization"));
            assert.deepEqual(
                read.shards.map((s) => s.plan.action),
                ["heal", "skip", "heal"],
            );
            await h.clientWrite("k", 1, -1, T0);

            // Act
            const written = await writeHeal(read, options("utilization"));

            // Assess: the transaction held shard 1 to "still no count": it failed, and the sum stays at the one live item.
            // Written, shard 0 would go to 0 beside shard 1's -1: x's end counted twice, the sum one below.
            assert.equal(written.outcome, "raced");
            assert.deepEqual(
                (await h.bestEfforts("k")).map((b) => b[0]),
                [1, -1, 1],
            );
        });

        it("a shard item only a drift mark created (no version) is healed and leaves the heal index, and is healed again later", async () => {
            // Prepare: a utilization call's drift mark on shard 0 (the key itself) of a key whose units live in shard 2,
            // and an item homed in shard 0 whose increment was lost.
            await h.putItem("k", "a", tokenIn(0));
            await h.putItem("k", "c", tokenIn(2));
            await h.setBestEffort("k", 2, { count: 1, version: 1, writtenAt: OLD });
            await engine()
                .dynamodb()
                .send(new UpdateItemCommand(dueMarkInput(config, "k", OLD)));
            assert.deepEqual((await h.bestEfforts("k"))[0], [undefined, undefined, undefined, true]);

            // Act
            const first = await healKey("k", options("utilization"));
            const second = await healKey("k", options("utilization", T0 + Q));

            // Assess
            assert.deepEqual(shape(first.shards)?.[0], { shard: 0, outcome: "healed", before: 0, after: 1 });
            assert.deepEqual(shape(second.shards)?.[0], { shard: 0, outcome: "healed", before: 1, after: 1 });
            assert.deepEqual(await h.bestEfforts("k"), [
                [1, undefined, undefined, false],
                [undefined, undefined, undefined, false],
                [1, 1, undefined, false],
            ]);
        });

        it("a mark-only shard item a client writes between the heal's read and its write: the heal's write fails", async () => {
            await h.putItem("k", "a", tokenIn(0));
            await engine()
                .dynamodb()
                .send(new UpdateItemCommand(dueMarkInput(config, "k", OLD)));
            const read = await readForHeal("k", options("utilization"));
            assert.deepEqual(read.plan, {
                action: "heal",
                truth: 1,
                current: 0,
                marks: 1,
                cutoff: T0 - Q,
                ledger: { kind: "quiet", fold: [], folded: T0 - Q, rebase: false },
            });

            await h.clientWrite("k", 0, 1, T0); // the increment of a's life lands after all

            const written = await writeHeal(read, options("utilization"));
            assert.deepEqual(shape(written.shards)?.[0], { shard: 0, outcome: "raced", before: 0 });
            assert.deepEqual((await h.bestEfforts("k"))[0], [1, 1, undefined, true]);
        });

        it("refuses a key a sharded counter cannot hold", async () => {
            await assert.rejects(healKey("a\u00001", options("strict")), InvalidArgumentError);
            await assert.rejects(reconcileKey("a\u00001", { config, dynamodb: engine().dynamodb(), fatal: noFatal }), InvalidArgumentError);
        });
    });

    describe("reconciliation and status", () => {
        beforeEach(async () => {
            const fixture = await counterFixture(engine(), { placement: "separate", counterShards: N });
            config = fixture.config;
            fixture.close();
        });

        it("repairs a wrong partial in shard 2, markers in the wrong state and a marker outside its shard, shard by shard", async () => {
            // Prepare (each partial == its counted markers, as the consumer keeps it; the markers are off the items):
            // shard 2: three live items never counted, and a counted marker whose item is gone (partial 1, should be 3);
            const live2 = [idIn(2, "p"), idIn(2, "q"), idIn(2, "r")];
            for (const id of live2) {
                await h.putItem("k", id, tokenIn(0));
            }
            const gone2 = idIn(2, "gone");
            await h.putMarker("k", 2, gone2, MARKER_STATE.counted);
            await h.setEventual("k", 2, 1);
            // shard 1: a live item whose marker is "uncounted" (its record lost), and one counted at shard 0 instead;
            const uncounted1 = idIn(1, "u");
            await h.putItem("k", uncounted1, tokenIn(1));
            await h.putMarker("k", 1, uncounted1, MARKER_STATE.uncounted);
            const misplaced = idIn(1, "m");
            await h.putItem("k", misplaced, tokenIn(1));
            await h.putMarker("k", 0, misplaced, MARKER_STATE.counted);
            // shard 0: a soft-deleted item still counted, and a counted live item (settled).
            const softDeleted0 = idIn(0, "s");
            const softToken = tokenIn(0);
            await h.putItem("k", softDeleted0, softToken, { deleted: { BOOL: true } });
            await h.putMarker("k", 0, softDeleted0, MARKER_STATE.counted);
            const settled0 = idIn(0, "ok");
            await h.putItem("k", settled0, tokenIn(2));
            await h.putMarker("k", 0, settled0, MARKER_STATE.counted);
            await h.setEventual("k", 0, 3);
            const ids = [...live2, gone2, uncounted1, misplaced, softDeleted0, settled0];

            // Status before: the sums, each shard, and what is pending (the misplaced marker is a pending delete).
            const before = await readKeyStatus("k", { config, dynamodb: engine().dynamodb() });
            assert.deepEqual(before, {
                key: "k",
                bestEffort: 0,
                eventual: 4,
                live: 6,
                pendingCreates: 5,
                pendingDeletes: 3,
                malformed: 0,
                heldSlots: 0,
                drift: -2,
                exact: false,
                shards: [
                    // Homed by token: the three of shard 2's markers carry shard 0's tokens.
                    { shard: 0, bestEffort: 0, eventual: 3, homed: 3, others: 0 },
                    { shard: 1, bestEffort: 0, eventual: 0, homed: 2, others: 0 },
                    { shard: 2, bestEffort: 0, eventual: 1, homed: 1, others: 0 },
                ],
            });

            // Act
            const parked: FatalMessage[] = [];
            const fatal = { park: async (m: FatalMessage) => (parked.push(m), true) };
            const first = await reconcileKey("k", { config, dynamodb: engine().dynamodb(), fatal });
            const second = await reconcileKey("k", { config, dynamodb: engine().dynamodb(), fatal });

            // Assess: 3 + 1 counted in shard 2 less the gone one; shard 1 counts both its items; shard 0 keeps one.
            assert.deepEqual(first, { key: "k", found: 8, counted: 8, alreadySettled: 0, incomplete: false });
            assert.deepEqual(second, { key: "k", found: 0, counted: 0, alreadySettled: 0, incomplete: false });
            assert.deepEqual(await h.partials("k", ids), [
                { eventual: 1, counted: [settled0] },
                { eventual: 2, counted: [uncounted1, misplaced] },
                { eventual: 3, counted: live2 },
            ]);
            assert.equal(
                await h.counterItem("k", 0, markerSortKey(config, misplaced)).then((m) => m?.[A.state]?.S),
                MARKER_STATE.uncounted,
            );
            const softItem = await engine()
                .dynamodb()
                .send(
                    new GetItemCommand({
                        TableName: config.tableName,
                        Key: { pk: { S: "k" }, sk: { S: softDeleted0 } },
                        ConsistentRead: true,
                    }),
                );
            assert.equal(softItem.Item, undefined, "the soft-deleted item was hard-deleted on its token");
            assert.deepEqual(parked, []);
            const after = await readKeyStatus("k", { config, dynamodb: engine().dynamodb() });
            assert.deepEqual(
                [after.eventual, after.live, after.pendingCreates, after.pendingDeletes, after.exact, after.shards?.map((s) => s.homed)],
                [6, 6, 0, 0, true, [3, 2, 1]],
            );
        });

        it("reconciling many keys reports a key a sharded counter cannot hold as refused, and goes on", async () => {
            await h.putItem("k", idIn(1, "a"), tokenIn(0));
            await h.putItem("a\u00001", "b", tokenIn(0)); // another writer's key, which names shard 1 of key "a"

            const run = await reconcileKeys(["a\u00001", "k"], { config, dynamodb: engine().dynamodb(), fatal: noFatal });
            const all = await reconcileAll({ config, dynamodb: engine().dynamodb(), fatal: noFatal });

            assert.deepEqual(run, {
                results: [{ key: "k", found: 1, counted: 1, alreadySettled: 0, incomplete: false }],
                notStarted: [],
                incomplete: false,
                refused: [
                    {
                        key: "a\u00001",
                        problem: "must not contain U+0000 when counterShards is above 1 (it separates a key from its shard number)",
                    },
                ],
            });
            assert.deepEqual(all, { results: [], notStarted: [], incomplete: false, refused: run.refused });
            assert.deepEqual(await h.partials("k", [idIn(1, "a")]), [
                { eventual: 0, counted: [] },
                { eventual: 1, counted: [idIn(1, "a")] },
                { eventual: 0, counted: [] },
            ]);
        });

        it("status sums a key's shards, and the table status lists each key once, not each shard", async () => {
            await h.putItem("k", idIn(0, "a"), tokenIn(1));
            await h.putItem("k", idIn(2, "b"), tokenIn(2));
            await h.putMarker("k", 0, idIn(0, "a"), MARKER_STATE.counted);
            await h.putMarker("k", 2, idIn(2, "b"), MARKER_STATE.counted);
            await h.setEventual("k", 0, 1);
            await h.setEventual("k", 2, 1);
            await h.setBestEffort("k", 1, { count: 2, version: 1, writtenAt: OLD });
            await h.setBestEffort("k", 2, { count: 1, version: 1, writtenAt: OLD });
            // A key with counters only (its items gone), on shards 1 and 2.
            await h.setBestEffort("gone", 1, { count: 1, version: 1, writtenAt: OLD });
            await h.setEventual("gone", 2, 0);

            const status = await readKeyStatus("k", { config, dynamodb: engine().dynamodb() });
            const table = await readTableStatus({ config, dynamodb: engine().dynamodb() });

            assert.deepEqual(status, {
                key: "k",
                bestEffort: 3,
                eventual: 2,
                live: 2,
                pendingCreates: 0,
                pendingDeletes: 0,
                malformed: 0,
                heldSlots: 1,
                drift: 0,
                exact: true,
                shards: [
                    { shard: 0, bestEffort: 0, eventual: 1, homed: 0, others: 0 },
                    { shard: 1, bestEffort: 2, eventual: 0, homed: 1, others: 0 },
                    { shard: 2, bestEffort: 1, eventual: 1, homed: 1, others: 0 },
                ],
            });
            assert.deepEqual(
                table.all.map((s) => [s.key, s.bestEffort, s.eventual, s.live]),
                [
                    ["gone", 1, 0, 0],
                    ["k", 3, 2, 2],
                ],
            );
            assert.deepEqual(
                table.all.find((s) => s.key === "k"),
                status,
            );
        });
    });

    describe("the settler", () => {
        let clock = T0;
        const settleOptions = (extra: Partial<SettleOptions> = {}): SettleOptions => ({
            config,
            dynamodb: engine().dynamodb(),
            mode: "strict",
            quietWindowMs: Q,
            now: () => clock,
            fatal: noFatal,
            auditSegments: 0,
            ...extra,
        });

        beforeEach(async () => {
            clock = T0;
            config = { ...(await healTables(engine())), counterShards: N };
        });

        it("finds a key due by a mark on shard 0, and another by a strict mark on shard 2's item, and heals every shard of each once", async () => {
            // Prepare: key "u" marked on shard 0 (a drift mark) with shards 0 and 2 listed; key "s" listed only by shard 2.
            await h.putItem("u", "a", tokenIn(1));
            await h.putItem("u", "b", tokenIn(2));
            await h.setBestEffort("u", 0, { count: 2, version: 1, writtenAt: OLD });
            await h.setBestEffort("u", 1, { count: 0, version: 1, writtenAt: OLD });
            await h.setBestEffort("u", 2, { count: 4, version: 2, writtenAt: OLD, dueAt: OLD + 5, marks: 1 });
            await engine()
                .dynamodb()
                .send(new UpdateItemCommand(dueMarkInput(config, "u", OLD + 1)));
            await h.putItem("s", "a", tokenIn(0));
            await h.putItem("s", "b", tokenIn(2));
            await h.setBestEffort("s", 0, { count: 0, version: 1, writtenAt: OLD });
            await h.setBestEffort("s", 1, { count: 3, version: 1, writtenAt: OLD });
            await h.setBestEffort("s", 2, { count: 1, version: 1, writtenAt: OLD - 10 });
            await h.clientWrite("s", 2, 1, OLD, true); // a strict reservation on shard 2 puts it on the index

            // Act
            const run = await settle(settleOptions());

            // Assess: two keys, each once; six shard items healed and corrected, by 2 + 1 + 3 (u) and 1 + 3 + 1 (s).
            assert.equal(run.keysFromIndex, 2);
            assert.deepEqual(run.failedKeys, []);
            assert.deepEqual([run.healed, run.corrected, run.drift, run.raced, run.skipped], [6, 6, 11, 0, {}]);
            // Each key lowered a shard: every shard of it opened its next epoch.
            assert.deepEqual(await h.bestEfforts("u"), [
                [0, 1, 1, false],
                [1, 1, 1, false],
                [1, 2, 1, false],
            ]);
            assert.deepEqual(await h.bestEfforts("s"), [
                [1, 1, 1, false],
                [0, 1, 1, false],
                [1, 2, 1, false],
            ]);
            // Nothing is left due.
            const next = await settle(settleOptions());
            assert.equal(next.keysFromIndex, 0);
        });

        it("holds a key with a busy shard whole: its shards' entries move to the busy shard's last write, nothing is healed", async () => {
            await h.putItem("k", "a", tokenIn(0));
            await h.setBestEffort("k", 0, { count: 3, version: 1, writtenAt: OLD, dueAt: OLD, marks: 1 });
            await h.setBestEffort("k", 1, { count: 1, version: 1, writtenAt: T0 - 5, dueAt: OLD, marks: 1 });

            const run = await settle(settleOptions());

            assert.deepEqual([run.keysFromIndex, run.healed, run.skipped], [1, 0, { "quiet-window": 3 }]);
            const dueAt = async (shard: number) =>
                Number((await h.counterItem("k", shard, bestEffortSortKey(config)))?.[A.dueAt]?.N ?? Number.NaN);
            assert.deepEqual(await h.bestEfforts("k"), [
                [3, 1, undefined, true],
                [1, 1, undefined, true],
                [undefined, undefined, undefined, false],
            ]);
            assert.deepEqual([await dueAt(0), await dueAt(1)], [T0 - 5, T0 - 5]);
        });

        it("audits keys, not shard partitions: a key whose counters outlived its items is healed once", async () => {
            await h.setBestEffort("c", 1, { count: 2, version: 1, writtenAt: OLD });
            await h.setBestEffort("c", 2, { count: 1, version: 1, writtenAt: OLD });
            await h.setEventual("c", 2, 0);

            const run = await settle(settleOptions({ auditSegments: 2, auditPageSize: 100 }));

            assert.deepEqual([run.keysFromIndex, run.keysFromAudit, run.healed, run.drift], [0, 1, 2, 3]);
            assert.deepEqual(await h.bestEfforts("c"), [
                [undefined, undefined, undefined, false],
                [0, 1, 1, false],
                [0, 1, 1, false],
            ]);
        });
    });
});
