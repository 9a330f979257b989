import type { AttributeValue } from "@aws-sdk/client-dynamodb";
/** The fatal queue's messages, explained: each kind the pipeline sends maps to its remedy and the keys it names. */
import { strict as assert } from "node:assert";
import { explainFatalMessage } from "../runtime/ops/fatal-explain";
import { itemState, keyStatus, worstFirst } from "../runtime/ops/status";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";

describe("fatal messages explained", () => {
    const cases: Array<[string, string, { kind: string; remedy: string; counterKeys: string[] }]> = [
        [
            "a poison item names its key",
            JSON.stringify({
                reason: "poison-item",
                problem: "[item] was refused by DynamoDB (ValidationError): Item size has exceeded the maximum allowed size",
                counterKey: "t-1",
                id: "x",
            }),
            { kind: "poison-item", remedy: "reconcile-keys", counterKeys: ["t-1"] },
        ],
        [
            "a poison record names the keys of its records",
            JSON.stringify({
                reason: "poison-record",
                problem: "[eventName] ...",
                records: [{ dynamodb: { Keys: { pk: { S: "t-2" }, sk: { S: "a" } } } }],
            }),
            { kind: "poison-record", remedy: "reconcile-keys", counterKeys: ["t-2"] },
        ],
        [
            "a poison record without a readable key reconciles every key",
            JSON.stringify({ reason: "poison-record", problem: "[dynamodb.Keys.pk] is missing", records: [{ dynamodb: { Keys: {} } }] }),
            { kind: "poison-record", remedy: "reconcile-all", counterKeys: [] },
        ],
        [
            "Lambda's metadata of an exhausted batch is redriven",
            JSON.stringify({
                requestContext: { condition: "RetryAttemptsExhausted" },
                DDBStreamBatchInfo: { shardId: "s", startSequenceNumber: "1", endSequenceNumber: "2" },
            }),
            { kind: "batch-exhausted", remedy: "redrive-batch", counterKeys: [] },
        ],
        ["a body that is not JSON", "{oops", { kind: "unknown", remedy: "reconcile-all", counterKeys: [] }],
        ["JSON of another shape", JSON.stringify({ hello: 1 }), { kind: "unknown", remedy: "reconcile-all", counterKeys: [] }],
    ];
    for (const [title, body, expected] of cases) {
        it(title, () => {
            const { kind, remedy, counterKeys } = explainFatalMessage(body, "pk");
            assert.deepEqual({ kind, remedy, counterKeys }, expected);
        });
    }
});

describe("status, the pure part", () => {
    it("tells counted, pending and malformed items apart from an item and its marker (the counting model, in one place)", () => {
        const item = (extra: Record<string, AttributeValue> = {}) => ({
            pk: { S: "k" },
            sk: { S: "a" },
            counter_token: { S: "t" },
            ...extra,
        });
        const counted = { hc_state: { S: "counted" } };
        const uncounted = { hc_state: { S: "uncounted" } };
        assert.equal(itemState(item(), counted, DEFAULT_LAYOUT), "counted");
        assert.equal(itemState(item(), undefined, DEFAULT_LAYOUT), "pending-create");
        assert.equal(itemState(item(), uncounted, DEFAULT_LAYOUT), "pending-create");
        assert.equal(itemState(item({ deleted: { BOOL: true } }), counted, DEFAULT_LAYOUT), "pending-delete");
        assert.equal(itemState(item({ deleted: { BOOL: true } }), undefined, DEFAULT_LAYOUT), "pending-delete");
        assert.equal(itemState(undefined, counted, DEFAULT_LAYOUT), "pending-delete");
        assert.equal(itemState(undefined, uncounted, DEFAULT_LAYOUT), "ignored");
        assert.equal(itemState(item({ deleted: { S: "yes" } }), counted, DEFAULT_LAYOUT), "malformed");
        assert.equal(itemState({ pk: { S: "k" }, sk: { S: "other" } }, undefined, DEFAULT_LAYOUT), "ignored");
    });

    it("orders keys worst first and counts held slots", () => {
        const tally = (bestEffort: number, eventual: number, live: number, pendingCreates = 0) => ({
            bestEffort,
            eventual,
            live,
            pendingCreates,
            pendingDeletes: 0,
            malformed: 0,
        });
        const statuses = [keyStatus("ok", tally(2, 2, 2)), keyStatus("held", tally(5, 3, 3)), keyStatus("late", tally(4, 1, 4, 3))];
        assert.deepEqual(
            worstFirst(statuses).map((s) => [s.key, s.heldSlots, s.drift, s.exact]),
            [
                ["late", 0, -3, false],
                ["held", 2, 0, true],
                ["ok", 0, 0, true],
            ],
        );
    });
});
