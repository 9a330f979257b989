/**
 * A key that is never quiet heals (runtime/heal/heal.ts, "A busy key"), on DynamoDB Local with the real client and the
 * settler: the client writes one key every few seconds of a virtual clock for four quiet windows, a fault in every
 * few of its sent-once writes makes drift all along (strict: a release lost, a held slot; utilization: an increment
 * lost, an undercount), and a settler run every quarter window heals the key while it is busy.
 *
 * What must hold, and why each bound is exact rather than a tolerance:
 *   - the mode's bound after every call and every run (strict: live <= best-effort; utilization: best-effort <= live);
 *   - after each run, the drift left is at most the faults made since the run's clock less the window less one ledger
 *     period: a fault at time f can only touch a life made at or before f, and a heal at t counts from the table every
 *     life made before its boundary, which is at least t - Q - P (ledger.ts `foldBoundary`);
 *   - the runs heal the key while it is busy (its last client write is always younger than the window);
 *   - once the traffic stops and the window passes, best-effort is exact; no call throws.
 * The clock is virtual (Date.now is replaced for the test), so nothing here depends on the machine's speed.
 */
import {
    InternalServerError,
    GetItemCommand,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
    type UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { HybridCounterClient, type CounterMode } from "../runtime/client/client";
import { settle } from "../runtime/heal/settle";
import { queryPartition } from "../runtime/heal/partition";
import { ledgerPeriodMs } from "../runtime/ledger/ledger";
import { bestEffortSortKey, countersTable, type CounterTableConfig } from "../runtime/shared/config";
import { isLive } from "../runtime/shared/selection";
import { shardPartitionKey } from "../runtime/shards/layout";
import type { FatalQueue } from "../runtime/stream/fatal";
import { seededRandom } from "../local/engine/faults";
import { useEngine } from "./support/engine";
import { healTables } from "./support/heal-fixture";

const Q = 600_000;
const P = ledgerPeriodMs(Q / 1000);
const T0 = Date.UTC(2026, 0, 1);
/** A call every 5 s: no gap longer than a hundredth of the window. */
const STEP = 5_000;
const WINDOWS = 4;
const RUN_EVERY = Q / 4;
/** One sent-once write in this many fails. */
const FAULT_EVERY = 4;
const noFatal: FatalQueue = { park: async () => true };

describe("a busy key heals (DynamoDB Local, virtual clock)", function () {
    const engine = useEngine();
    const realNow = Date.now;
    afterEach(() => {
        Date.now = realNow;
    });

    for (const mode of ["strict", "utilization"] as const) {
        for (const shards of [1, 3]) {
            it(`${mode}, ${shards} shard(s): drift made all along is healed while the key is never quiet, within the bound at every step`, async () => {
                const config: CounterTableConfig = { ...(await healTables(engine())), ...(shards > 1 ? { counterShards: shards } : {}) };
                let clock = T0;
                Date.now = () => clock;
                const dynamodb = engine().dynamodb();
                const clientDynamo = engine().dynamodb();
                const faults: number[] = [];
                failSentOnce(clientDynamo, mode, () => faults.push(clock));
                const client = new HybridCounterClient({
                    ...config,
                    dynamodb: clientDynamo,
                    mode,
                    healQuietWindowSeconds: Q / 1000,
                });
                const random = seededRandom(7 + shards);
                const live: string[] = [];
                let made = 0;
                const problems: string[] = [];
                const check = async (when: string) => {
                    const { bestEffort, items } = await observe(dynamodb, config, shards);
                    if (mode === "strict" ? items > bestEffort : bestEffort > items) {
                        problems.push(`${when} at +${clock - T0} ms: best-effort ${bestEffort}, live ${items}`);
                    }
                    return { bestEffort, items };
                };
                const runs: Array<{ at: number; healed: number; drift: number; lastWrite: number }> = [];
                let lastWrite = clock;

                // Act: a call every STEP, a settler run every RUN_EVERY, for WINDOWS windows.
                for (let step = 1; step * STEP <= WINDOWS * Q; step++) {
                    clock += STEP;
                    if (live.length < 12 || (live.length < 30 && random() < 0.55)) {
                        const id = `i${made++}`;
                        const result = await client.tryCreate("k", id, 1_000);
                        if (result.created) {
                            live.push(id);
                        }
                    } else {
                        const [id] = live.splice(Math.floor(random() * live.length), 1);
                        await client.delete("k", id!);
                    }
                    lastWrite = clock;
                    await check("after a call");
                    if ((step * STEP) % RUN_EVERY === 0) {
                        const run = await settle({
                            config,
                            dynamodb,
                            mode,
                            quietWindowMs: Q,
                            now: () => clock,
                            fatal: noFatal,
                            auditSegments: 0,
                        });
                        const { bestEffort, items } = await check("after a settler run");
                        runs.push({ at: clock, healed: run.healed, drift: Math.abs(bestEffort - items), lastWrite });
                    }
                }

                // Assess: the bound held throughout; the runs healed the busy key; the drift they left is what recent
                // lives may still hold, never what older faults made.
                assert.deepEqual(problems, []);
                assert.ok(faults.length >= 20, `the faults made drift all along (${faults.length})`);
                const busyHeals = runs.filter((run) => run.healed > 0 && run.at - run.lastWrite < Q);
                // A key written without pause is listed again half a window after each heal (heal.ts `planLedgerHeal`).
                assert.ok(busyHeals.length >= WINDOWS, `heals on the busy key: ${busyHeals.length} of ${runs.length} runs`);
                // After each run, the drift is at most the faults made since the boundary of the last heal so far.
                let lastHeal: number | undefined;
                for (const run of runs) {
                    lastHeal = run.healed > 0 ? run.at : lastHeal;
                    const since = lastHeal === undefined ? T0 : lastHeal - Q - P;
                    const recent = faults.filter((at) => at >= since).length;
                    assert.ok(
                        run.drift <= recent,
                        `the run at +${run.at - T0} ms left ${run.drift}, more than the ${recent} faults since +${since - T0} ms`,
                    );
                }
                const last = runs.filter((run) => run.healed > 0).at(-1)!;
                assert.ok(
                    faults.filter((at) => at < last.at - Q - P).length > 0,
                    "the last heal came after faults older than its boundary, which it healed",
                );

                // The traffic stops: once the window has passed, the next run makes best-effort exact.
                clock += Q + P + 1;
                await settle({ config, dynamodb, mode, quietWindowMs: Q, now: () => clock, fatal: noFatal, auditSegments: 0 });
                const end = await observe(dynamodb, config, shards);
                assert.equal(end.bestEffort, end.items, "exact once quiet");
                assert.equal(end.items, live.length);
            });
        }
    }
});

/** Fails every FAULT_EVERY-th sent-once best-effort write before it is sent (strict: a release; utilization: an increment). */
function failSentOnce(dynamodb: DynamoDBClient, mode: CounterMode, onFault: () => void): void {
    let seen = 0;
    const sentOnce = (input: UpdateItemCommandInput): boolean => {
        const delta = input.ExpressionAttributeValues?.[":delta"]?.N;
        return (input.UpdateExpression ?? "").startsWith("ADD #count") && delta === (mode === "strict" ? "-1" : "1");
    };
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === "UpdateItemCommand" && sentOnce(args.input as UpdateItemCommandInput) && ++seen % FAULT_EVERY === 0) {
            onFault();
            throw new InternalServerError({ $metadata: { httpStatusCode: 500 }, message: "injected before sending" });
        }
        return next(args);
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: "failSentOnce" });
}

/** Best-effort summed over the key's shards, and the live client items. */
async function observe(
    dynamodb: DynamoDBClient,
    config: CounterTableConfig,
    shards: number,
): Promise<{ bestEffort: number; items: number }> {
    let bestEffort = 0;
    for (let shard = 0; shard < shards; shard++) {
        const read = await dynamodb.send(
            new GetItemCommand({
                TableName: countersTable(config),
                Key: { [config.partitionKey]: { S: shardPartitionKey("k", shard) }, [config.sortKey]: { S: bestEffortSortKey(config) } },
                ConsistentRead: true,
            }),
        );
        bestEffort += Number(read.Item?.[config.countAttribute]?.N ?? "0");
    }
    const items = await queryPartition(dynamodb, { tableName: config.tableName, partitionKey: config.partitionKey, key: "k" });
    return { bestEffort, items: items.filter((item) => isLive(item, config)).length };
}
