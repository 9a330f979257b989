import { strict as assert } from "node:assert";
import { DeleteItemCommand, GetItemCommand, PutItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { ConfigurationError, ENV, settlerCursorSortKey, countersTable, type CounterTableConfig } from "../runtime/shared/config";
import type { FatalQueue } from "../runtime/stream/fatal";
import type { ReconcileResult } from "../runtime/heal/reconcile";
import { advanceCursor, settle, type SettleOptions } from "../runtime/heal/settle";
import { SETTLER_ENV, settlerConfigFromEnv, settlerEnvironment } from "../runtime/heal/settler-config";
import { uuidv7 } from "../runtime/shared/tokens";
import { ModelClient } from "../local/harness/model-client";
import { useEngine } from "./support/engine";
import { healTables, probe } from "./support/heal-fixture";

const Q = 60_000;
const T0 = 1_800_000_000_000;
const noFatal: FatalQueue = { park: async () => true };

describe("the settler's pure parts", () => {
    it("advances each unfinished segment by its page, and starts a new round when every segment is done", () => {
        const k = { pk: { S: "a" }, sk: { S: "b" } };
        assert.deepEqual(advanceCursor({ round: 0, positions: [null, null] }, [k, undefined]), { round: 0, positions: [k, "done"] });
        assert.deepEqual(advanceCursor({ round: 0, positions: [k, "done"] }, [k, "skipped"]), { round: 0, positions: [k, "done"] });
        assert.deepEqual(advanceCursor({ round: 3, positions: [k, "done"] }, [undefined, "skipped"]), {
            round: 4,
            positions: [null, null],
        });
    });

    it("reads its environment back as the component writes it, and names each bad variable", () => {
        const env = {
            [ENV.tableName]: "items",
            [ENV.fatalQueueUrl]: "https://sqs/fatal",
            ...settlerEnvironment({ countersTableName: "counters", mode: "strict", quietWindowMs: 600_000, keyBudget: 200 }),
        };
        const config = settlerConfigFromEnv(env);
        assert.deepEqual(
            [config.tableName, config.countersTableName, config.mode, config.quietWindowMs, config.keyBudget],
            ["items", "counters", "strict", 600_000, 200],
        );
        assert.throws(
            () => settlerConfigFromEnv({ ...env, [SETTLER_ENV.mode]: "exact", [SETTLER_ENV.quietWindowMs]: "-1", [ENV.tableName]: "" }),
            (error: unknown) =>
                error instanceof ConfigurationError &&
                error.problems.join("; ") ===
                    `[${ENV.tableName}] must be set; [${SETTLER_ENV.mode}] must be "strict" or "utilization"; [${SETTLER_ENV.quietWindowMs}] must be a positive integer`,
        );
    });
});

describe("the settler on DynamoDB Local", () => {
    const engine = useEngine();
    let clock = T0;
    const now = () => clock;

    const options = (config: CounterTableConfig, extra: Partial<SettleOptions> = {}): SettleOptions => ({
        config,
        dynamodb: engine().dynamodb(),
        mode: "strict",
        quietWindowMs: Q,
        now,
        fatal: noFatal,
        auditSegments: 0,
        ...extra,
    });

    /** A strict client each of whose creates stalls past its deadline after its reserve (its own clock jumps): the put is abandoned. */
    const stallingClient = (config: CounterTableConfig, dynamodb: DynamoDBClient) => {
        let stall = 0;
        const client = new ModelClient({ config, dynamodb, mode: "strict", now: () => clock + stall, pause: () => void (stall = 20_000) });
        return {
            create: (key: string, id: string, limit: number) => {
                stall = 0;
                return client.create(key, id, limit);
            },
        };
    };

    beforeEach(() => {
        clock = T0;
    });

    it("heals the keys the heal index lists as due, within its key budget, and reports what it cost", async () => {
        const config = await healTables(engine());
        const db = engine().dynamodb();
        // Three keys, each with one slot held by a call abandoned after its reserve (its put was never sent).
        const client = new ModelClient({ config, dynamodb: db, mode: "strict", now });
        const stalled = stallingClient(config, db);
        for (const key of ["a", "b", "c"]) {
            assert.deepEqual(await client.create(key, "kept", 5), { created: true, abandoned: 0 });
            assert.deepEqual(await stalled.create(key, "lost", 5), { created: false, reason: "unavailable", abandoned: 1 });
        }
        clock += 1000;
        // Not yet quiet: the index query returns nothing due.
        const early = await settle(options(config, { keyBudget: 2 }));
        assert.deepEqual([early.keysFromIndex, early.healed, early.budgetExhausted], [0, 0, false]);

        clock += Q;
        const first = await settle(options(config, { keyBudget: 2 }));
        assert.deepEqual(
            [first.keysFromIndex, first.healed, first.corrected, first.drift, first.raced, first.budgetExhausted, first.failedKeys],
            [2, 2, 2, 2, 0, true, []],
        );
        assert.ok(first.readUnits > 0, `read units reported (${first.readUnits})`);
        assert.ok(first.writeUnits >= 2, `write units reported (${first.writeUnits})`);
        const second = await settle(options(config, { keyBudget: 2 }));
        assert.deepEqual([second.keysFromIndex, second.healed, second.corrected, second.budgetExhausted], [1, 1, 1, false]);
        for (const key of ["a", "b", "c"]) {
            assert.deepEqual(await probe(db, config, key), { bestEffort: 1, live: 1, version: 2, healDue: false }, key);
        }
        const third = await settle(options(config, { keyBudget: 2 }));
        assert.deepEqual([third.keysFromIndex, third.healed], [0, 0]);
    });

    it("does not heal a key whose settle failed in that run: it stays due, and the next run heals it", async () => {
        // Prepare: one key with a slot held by a call that stalled past its deadline after its reserve; quiet since.
        const config = await healTables(engine());
        const db = engine().dynamodb();
        const client = stallingClient(config, db);
        assert.deepEqual(await client.create("k", "lost", 5), { created: false, reason: "unavailable", abandoned: 1 });
        clock += Q + 1;
        const failing = async (): Promise<ReconcileResult> => {
            throw new Error("reconcile failed");
        };
        const incomplete = async (key: string): Promise<ReconcileResult> => ({
            key,
            found: 1,
            counted: 0,
            alreadySettled: 0,
            incomplete: true,
        });

        // Act: a run whose settle throws, one whose settle ends incomplete, then one whose settle succeeds.
        const thrown = await settle(options(config, { settleKey: failing }));
        const cut = await settle(options(config, { settleKey: incomplete }));
        const held = await probe(db, config, "k");
        const healed = await settle(options(config));

        // Assess
        assert.deepEqual([thrown.keysFromIndex, thrown.healed, thrown.failedKeys], [1, 0, ["k"]]);
        assert.deepEqual([cut.keysFromIndex, cut.healed, cut.failedKeys], [1, 0, ["k"]]);
        assert.deepEqual(held, { bestEffort: 1, live: 0, version: 1, healDue: true });
        assert.deepEqual([healed.healed, healed.failedKeys], [1, []]);
        assert.deepEqual(await probe(db, config, "k"), { bestEffort: 0, live: 0, version: 1, healDue: false });
    });

    for (const sameTable of [false, true]) {
        it(`heals from the audit a key whose counters outlived its items (${sameTable ? "same-table" : "separate"} placement)`, async () => {
            // Prepare: two client items, healed (the heal takes the key off the index); then another writer (or TTL)
            // hard-deletes both, and no client writes the key again: nothing lists it, and it has no items to scan.
            const config = await healTables(engine(), { sameTable });
            const db = engine().dynamodb();
            const client = new ModelClient({ config, dynamodb: db, mode: "strict", now });
            for (const id of ["x", "y"]) {
                assert.deepEqual(await client.create("gone", id, 5), { created: true, abandoned: 0 });
            }
            clock += Q + 1;
            const healed = await settle(options(config));
            assert.deepEqual([healed.healed, (await probe(db, config, "gone")).healDue], [1, false]);
            for (const id of ["x", "y"]) {
                await db.send(new DeleteItemCommand({ TableName: config.tableName, Key: { pk: { S: "gone" }, sk: { S: id } } }));
            }
            assert.deepEqual(await probe(db, config, "gone"), { bestEffort: 2, live: 0, version: 2, healDue: false });

            // Act: settler runs with the audit on, until its round is over.
            clock += Q + 1;
            let round = 0;
            for (let i = 0; i < 4 && round === 0; i++) {
                round = (await settle(options(config, { auditSegments: 2, auditPageSize: 10 }))).audit.round;
            }

            // Assess: the audit met the key's counters and the heal released the two units.
            assert.equal(round, 1);
            assert.deepEqual(await probe(db, config, "gone"), { bestEffort: 0, live: 0, version: 2, healDue: false });
        });
    }

    it("audits the user table a page per segment per run, keeps its cursor in the counters table, and settles the keys it meets", async () => {
        const config = await healTables(engine());
        const db = engine().dynamodb();
        for (const key of ["p", "q", "r", "s", "t", "u"]) {
            await db.send(
                new PutItemCommand({
                    TableName: config.tableName,
                    Item: { pk: { S: key }, sk: { S: "x" }, counter_token: { S: uuidv7(T0) } },
                }),
            );
        }
        const settled: string[] = [];
        const settleKey = async (key: string): Promise<ReconcileResult> => {
            settled.push(key);
            return { key, found: 1, counted: 1, alreadySettled: 0, incomplete: false };
        };
        const run = () => settle(options(config, { auditSegments: 2, auditPageSize: 2, settleKey }));
        const reports = [];
        for (let i = 0; i < 4 && new Set(settled).size < 6; i++) {
            reports.push(await run());
        }
        assert.deepEqual([...new Set(settled)].sort(), ["p", "q", "r", "s", "t", "u"]);
        assert.ok(
            reports.every((r) => r.keysFromAudit <= 4),
            "at most segments x page size keys per run",
        );
        assert.equal(
            reports.reduce((n, r) => n + r.settleCounted, 0),
            settled.length,
        );
        assert.deepEqual(reports[0]!.skipped, { "no-best-effort": reports[0]!.keysFromAudit });
        const cursor = await db.send(
            new GetItemCommand({
                TableName: countersTable(config),
                Key: { pk: { S: `${config.counterPrefix}settler` }, sk: { S: settlerCursorSortKey(config) } },
                ConsistentRead: true,
            }),
        );
        assert.equal(cursor.Item?.hc_version?.N, String(reports.length));
        // Keep running: the round completes and the audit starts over.
        let round = reports.at(-1)!.audit.round;
        for (let i = 0; i < 4 && round === 0; i++) {
            round = (await run()).audit.round;
        }
        assert.equal(round, 1);
    });
});
