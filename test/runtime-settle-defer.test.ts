/**
 * The settler moves a busy key's heal-index entry to its last write (`deferBusy`, runtime/heal/settle.ts). That move is
 * bookkeeping: when it meets a transaction over the key's best-effort item (a strict backfill's, a sharded heal's),
 * DynamoDB refuses it with TransactionConflictException, and the key must simply stay due where it was, not be
 * reported as a failed key (the run's `failedKeys`, which its SettleFailures metric counts) nor lose its reconciliation in that run.
 * The parity layer raises the conflict on DynamoDB Local and holds the transaction open, so the meeting is staged.
 */
import { TransactWriteItemsCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { ModelClient } from "../local/harness/model-client";
import { settle } from "../runtime/heal/settle";
import { bestEffortSortKey, countersTable } from "../runtime/shared/config";
import type { FatalQueue } from "../runtime/stream/fatal";
import { useEngine } from "./support/engine";
import { healTables } from "./support/heal-fixture";

const Q = 600_000;
const T0 = 1_800_000_000_000;
const noFatal: FatalQueue = { park: async () => true };

describe("the settler's deferral of a busy key meets a transaction (DynamoDB Local, parity layer)", function () {
    const engine = useEngine({ parity: true });

    it("the key stays due and is not reported failed", async () => {
        // Prepare: a strict key written twice, the second write inside the window of the run below, by a client of an
        // earlier version (no ledger of recent lives: the heal waits for the key to be quiet, and the settler defers it)
        const config = await healTables(engine());
        const db = engine().dynamodb();
        let clock = T0;
        const client = new ModelClient({ config, dynamodb: db, mode: "strict", now: () => clock, keepsLedger: false });
        await client.create("busy", "a", 5);
        clock = T0 + Q;
        await client.create("busy", "b", 5);
        clock = T0 + Q + 20;
        const key = { [config.partitionKey]: { S: "busy" }, [config.sortKey]: { S: bestEffortSortKey(config) } };
        const hold = engine().parity!.holdTransactions((t) => t.items.some((i) => i.table === countersTable(config)));
        const transaction = db.send(
            new TransactWriteItemsCommand({
                TransactItems: [
                    {
                        ConditionCheck: {
                            TableName: countersTable(config),
                            Key: key,
                            ConditionExpression: "attribute_exists(#pk)",
                            ExpressionAttributeNames: { "#pk": config.partitionKey },
                        },
                    },
                ],
            }),
        );
        await hold.held;

        // Act: a run while the transaction holds the key's best-effort item
        const run = await settle({
            config,
            dynamodb: db,
            mode: "strict",
            quietWindowMs: Q,
            now: () => clock,
            fatal: noFatal,
            auditSegments: 0,
        });
        hold.release();
        await transaction;

        // Assess: skipped for its window, not failed; the deferral's refusal was met
        assert.deepEqual(run.skipped, { "quiet-window": 1 });
        assert.deepEqual(run.failedKeys, []);
    });
});
