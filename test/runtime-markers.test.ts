import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { streamRecordBuilder } from "./support/stream-records";
import { streamFilterPatterns } from "../components/defaults";
import { matchesAny, parsePattern } from "../local/aws/filter";
import {
    COUNTER_ATTRIBUTES,
    DEFAULT_LAYOUT,
    ZERO_SEQ,
    markerSortKey,
    paddedSequence,
    type CounterTableConfig,
    type CounterTableLayout,
    type ItemSelection,
} from "../runtime/shared/config";
import { chunkIntents, planBatch, refineIntent, transactionActions, unresurrect, type ItemIntent } from "../runtime/stream/markers";
import { planReconcile } from "../runtime/heal/reconcile";
import { classifyRecord } from "../runtime/stream/records";
import { isLive, isSelected } from "../runtime/shared/selection";

const config: CounterTableConfig = { ...DEFAULT_LAYOUT, tableName: "orders", countersTableName: "orders-counters" };

type Image = Record<string, AttributeValue>;
const { record, token, del } = streamRecordBuilder(1000);

function summary(r: DynamoDBRecord, layout: CounterTableLayout = config): string {
    const c = classifyRecord(r, layout);
    if (c.type === "change") {
        return `change ${c.change.before ? "live" : "out"}->${c.change.after ? "live" : "out"}${c.change.softDelete ? " soft-delete" : ""}`;
    }
    return c.type === "ignored" ? `ignored ${c.reason}` : `poison ${c.field} ${c.problem}`;
}

describe("classifyRecord: membership before and after", () => {
    const cases: Array<[string, DynamoDBRecord, string]> = [
        ["a client creation counts", record("INSERT", "k", "a", token("t1")), "change out->live"],
        ["another writer's put without a token is not selected by default", record("INSERT", "k", "a", {}), "ignored stays uncounted"],
        ["a client soft delete", record("MODIFY", "k", "a", del("t1"), token("t1")), "change live->out soft-delete"],
        [
            "a soft delete from deleted = false",
            record("MODIFY", "k", "a", del("t1"), { ...token("t1"), deleted: { BOOL: false } }),
            "change live->out soft-delete",
        ],
        [
            "a non-boolean deleted flag leaves the item live",
            record("INSERT", "k", "a", { ...token("t1"), deleted: { S: "yes" } }),
            "change out->live",
        ],
        ["a hard delete of a live item by any writer", record("REMOVE", "k", "a", undefined, token("t1")), "change live->out"],
        [
            "the consumer's own hard delete of a soft-deleted item",
            record("REMOVE", "k", "a", undefined, del("t1")),
            "ignored stays uncounted",
        ],
        ["an update of a live item", record("MODIFY", "k", "a", { ...token("t1"), x: { N: "2" } }, token("t1")), "ignored stays counted"],
        ["a full overwrite by another writer that drops the token", record("MODIFY", "k", "a", {}, token("t1")), "change live->out"],
        [
            "a counter item (same-table placement)",
            record("MODIFY", "k", "#counter#eventual", { count: { N: "2" } }, { count: { N: "1" } }),
            "ignored counter item",
        ],
        [
            "a stream without old images",
            record("MODIFY", "k", "a", token("t1")),
            "poison dynamodb.OldImage is missing: the stream must carry new and old images",
        ],
        [
            "a REMOVE without its old image",
            record("REMOVE", "k", "a"),
            "poison dynamodb.OldImage is missing: the stream must carry new and old images",
        ],
        [
            "a number partition key",
            {
                ...record("INSERT", "k", "a", token("t")),
                dynamodb: { Keys: { pk: { N: "1" }, sk: { S: "a" } }, NewImage: {}, SequenceNumber: "5" },
            },
            "poison dynamodb.Keys.pk must be a string (S) attribute",
        ],
        [
            "a sequence number over 40 digits",
            { eventName: "INSERT", dynamodb: { Keys: { pk: { S: "k" }, sk: { S: "a" } }, NewImage: {}, SequenceNumber: "1".repeat(41) } },
            "poison dynamodb.SequenceNumber must be a decimal string of at most 40 digits",
        ],
    ];
    for (const [name, input, expected] of cases) {
        it(name, () => assert.equal(summary(input), expected));
    }

    it("selects by sort-key prefix whoever wrote the item", () => {
        const layout = { ...config, selection: { kind: "sortKeyPrefix", prefix: "ORDER#" } as const };
        assert.equal(summary(record("INSERT", "k", "ORDER#1", {}), layout), "change out->live");
        assert.equal(summary(record("INSERT", "k", "PROFILE", {}), layout), "ignored stays uncounted");
    });

    it("selects by attribute value, and a change of the value moves membership", () => {
        const layout = { ...config, selection: { kind: "attribute", name: "type", value: "order" } as const };
        assert.equal(summary(record("INSERT", "k", "a", { type: { S: "order" } }), layout), "change out->live");
        assert.equal(summary(record("MODIFY", "k", "a", { type: { S: "draft" } }, { type: { S: "order" } }), layout), "change live->out");
        assert.equal(summary(record("INSERT", "k", "b", { type: { S: "user" } }), layout), "ignored stays uncounted");
    });

    it("carries the life token of the image it leaves, and the soft delete's token", () => {
        const r = record("MODIFY", "k", "a", del("t2"), token("t2"));
        const c = classifyRecord(r, config);
        assert.deepEqual(c, {
            type: "change",
            change: {
                counterKey: "k",
                id: "a",
                sequenceNumber: r.dynamodb!.SequenceNumber,
                before: true,
                after: false,
                softDelete: { token: { S: "t2" } },
                life: "t2",
                approximateCreationTime: undefined,
            },
        });
    });
});

describe("the mapping's filter drops only records the consumer ignores", () => {
    const selections: ItemSelection[] = [
        { kind: "client" },
        { kind: "sortKeyPrefix", prefix: "ORDER#" },
        { kind: "attribute", name: "type", value: "order" },
    ];
    const images: Array<Image | undefined> = [
        undefined,
        {},
        token("t1"),
        del("t1"),
        { counter_token: { N: "1" } },
        { ...token("t1"), deleted: { S: "true" } },
        { type: { S: "order" } },
        { type: { S: "order" }, deleted: { BOOL: true } },
        { type: { S: "user" } },
        { type: { N: "1" } },
    ];
    const sortKeys = ["ORDER#1", "PROFILE", "#counter#item#x", "#counter#eventual"];
    const records: DynamoDBRecord[] = [];
    for (const sk of sortKeys) {
        for (const next of images) {
            for (const previous of images) {
                const eventName = next === undefined ? "REMOVE" : previous === undefined ? "INSERT" : "MODIFY";
                if (next === undefined && previous === undefined) {
                    continue;
                }
                records.push(record(eventName, "k", sk, next, previous));
            }
        }
    }
    const expected: Record<ItemSelection["kind"], { delivered: number; changes: number }> = {
        client: { delivered: 204, changes: 64 },
        sortKeyPrefix: { delivered: 99, changes: 42 },
        attribute: { delivered: 144, changes: 36 },
    };
    for (const selection of selections) {
        it(`selection "${selection.kind}": ${records.length} records, every dropped one ignored`, () => {
            const layout = { ...config, selection };
            const patterns = streamFilterPatterns(layout).map(parsePattern);
            let delivered = 0;
            let changes = 0;
            for (const r of records) {
                const c = classifyRecord(r, layout);
                if (matchesAny(r, patterns)) {
                    delivered++;
                } else {
                    assert.equal(c.type, "ignored", `dropped but not ignored: ${JSON.stringify(r.dynamodb)}`);
                }
                if (c.type === "change") {
                    changes++;
                }
            }
            assert.deepEqual({ delivered, changes }, expected[selection.kind]);
        });
    }

    it("each pattern is within Lambda's 4,096 characters and names the layout's attributes", () => {
        assert.deepEqual(streamFilterPatterns(config), [
            '{"dynamodb":{"NewImage":{"counter_token":{"S":[{"exists":true}]}}}}',
            '{"dynamodb":{"OldImage":{"counter_token":{"S":[{"exists":true}]}}}}',
        ]);
        assert.deepEqual(streamFilterPatterns({ ...config, selection: { kind: "sortKeyPrefix", prefix: "ORDER#" } }), [
            '{"dynamodb":{"Keys":{"sk":{"S":[{"prefix":"ORDER#"}]}}}}',
        ]);
    });
});

describe("selection", () => {
    it("never selects a counter item, and a soft-deleted item is selected but not live", () => {
        const layout = { ...config, selection: { kind: "sortKeyPrefix", prefix: "#" } as const };
        assert.equal(isSelected({ sk: { S: "#counter#item#a" } }, layout), false);
        assert.equal(isSelected({ sk: { S: "#a" }, deleted: { BOOL: true } }, layout), true);
        assert.equal(isLive({ sk: { S: "#a" }, deleted: { BOOL: true } }, layout), false);
        assert.equal(isLive({ sk: { S: "#a" }, deleted: { BOOL: false } }, layout), true);
    });
});

describe("planBatch", () => {
    it("groups by key, takes the target from an item's last change and the guess from its first", () => {
        const a1 = record("INSERT", "k1", "a", token("t1"));
        const a2 = record("MODIFY", "k1", "a", del("t1"), token("t1"));
        const b = record("INSERT", "k1", "b", token("t2"));
        const noise = record("MODIFY", "k1", "b", { ...token("t2"), x: { N: "1" } }, token("t2"));
        const c = record("REMOVE", "k2", "c", undefined, token("t3"));
        const plan = planBatch([a1, b, noise, c, a2], config);
        assert.deepEqual(plan.groups, [
            {
                counterKey: "k1",
                items: [
                    {
                        id: "a",
                        target: "uncounted",
                        expected: "notCounted",
                        seq: paddedSequence(a2.dynamodb!.SequenceNumber!),
                        sequenceNumbers: [a1.dynamodb!.SequenceNumber, a2.dynamodb!.SequenceNumber],
                        softDelete: { token: { S: "t1" } },
                        life: "t1",
                        // The INSERT the soft delete ended, kept to ask the marker whether it was a late put.
                        insertedBefore: { life: "t1", seq: paddedSequence(a1.dynamodb!.SequenceNumber!) },
                        putInBatch: true,
                    },
                    {
                        id: "b",
                        target: "counted",
                        expected: "notCounted",
                        seq: paddedSequence(b.dynamodb!.SequenceNumber!),
                        sequenceNumbers: [b.dynamodb!.SequenceNumber],
                        life: "t2",
                        inserted: { life: "t2", seq: paddedSequence(b.dynamodb!.SequenceNumber!) },
                        putInBatch: true,
                    },
                ],
            },
            {
                counterKey: "k2",
                items: [
                    {
                        id: "c",
                        target: "uncounted",
                        expected: "counted",
                        seq: paddedSequence(c.dynamodb!.SequenceNumber!),
                        sequenceNumbers: [c.dynamodb!.SequenceNumber],
                        life: "t3",
                    },
                ],
            },
        ]);
        assert.equal(plan.ignored, 1);
    });
});

describe("transactionActions", () => {
    const intent = (
        id: string,
        target: ItemIntent["target"],
        expected: ItemIntent["expected"],
        extra: Partial<ItemIntent> = {},
    ): ItemIntent => ({
        id,
        target,
        expected,
        seq: paddedSequence("77"),
        sequenceNumbers: ["77"],
        ...extra,
    });
    const now = 1_800_000_000_000;

    it("moves the counter and the markers in the counters table, and hard-deletes in the user's table", () => {
        const { actions, index } = transactionActions(
            config,
            "k",
            [
                intent("a", "counted", "notCounted", { life: "t1" }),
                intent("b", "uncounted", "counted", { softDelete: { token: { S: "t2" } } }),
            ],
            now,
        );
        assert.deepEqual(index, [{ marker: 0 }, { marker: 1, softDelete: 2 }]);
        assert.equal(actions.length, 3, "a delta of 0 writes no counter");
        assert.deepEqual(actions[0], {
            Update: {
                TableName: "orders-counters",
                Key: { pk: { S: "k" }, sk: { S: "#counter#item#a" } },
                // A life the marker did not count before: a strict backfill's flag of an earlier life goes.
                UpdateExpression: "SET #state = :target, #seq = :seq, #life = :life, #lifeSeq = :seq REMOVE #exp, #be, #beLife",
                ConditionExpression:
                    "(attribute_not_exists(#seq) OR #seq < :seq) AND (attribute_not_exists(#state) OR #state = :uncounted)",
                ExpressionAttributeNames: {
                    "#state": "hc_state",
                    "#seq": "hc_seq",
                    "#exp": "hc_expires_at",
                    "#be": "hc_be",
                    "#beLife": "hc_be_life",
                    "#life": "hc_life",
                    "#lifeSeq": "hc_life_seq",
                },
                ExpressionAttributeValues: {
                    ":target": { S: "counted" },
                    ":seq": { S: paddedSequence("77") },
                    ":life": { S: "t1" },
                    ":uncounted": { S: "uncounted" },
                },
                ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            },
        });
        assert.deepEqual(actions[1], {
            Update: {
                TableName: "orders-counters",
                Key: { pk: { S: "k" }, sk: { S: "#counter#item#b" } },
                UpdateExpression: "SET #state = :target, #seq = :seq, #exp = :exp",
                ConditionExpression: "(attribute_not_exists(#seq) OR #seq < :seq) AND #state = :counted",
                ExpressionAttributeNames: { "#state": "hc_state", "#seq": "hc_seq", "#exp": "hc_expires_at" },
                ExpressionAttributeValues: {
                    ":target": { S: "uncounted" },
                    ":seq": { S: paddedSequence("77") },
                    ":exp": { N: String(1_800_000_000 + 48 * 3600) },
                    ":counted": { S: "counted" },
                },
                ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            },
        });
        assert.deepEqual(actions[2], {
            Delete: {
                TableName: "orders",
                Key: { pk: { S: "k" }, sk: { S: "b" } },
                ConditionExpression: "#deleted = :true AND #token = :token",
                ExpressionAttributeNames: { "#deleted": "deleted", "#token": "counter_token" },
                ExpressionAttributeValues: { ":true": { BOOL: true }, ":token": { S: "t2" } },
                ReturnValuesOnConditionCheckFailure: "ALL_OLD",
            },
        });
    });

    it("drops a strict backfill's flag when it counts a life the marker did not hold: not when the marker counted this item", () => {
        // Prepare: a removal and a new put of the id in one batch (the marker stays counted), the same from uncounted, and
        // a change of an item the marker counted before the batch.
        const planned = (target: ItemIntent) => transactionActions(config, "k", [target], now).actions.at(-1)!.Update!;

        // Act
        const reput = planned(intent("a", "counted", "counted", { putInBatch: true }));
        const again = planned(intent("b", "counted", "uncounted"));
        const kept = planned(intent("c", "counted", "counted"));

        // Assess
        assert.match(reput.UpdateExpression!, / REMOVE #exp, #be, #beLife$/);
        assert.match(again.UpdateExpression!, / REMOVE #exp, #be, #beLife$/);
        assert.deepEqual([reput.ExpressionAttributeNames!["#be"], reput.ExpressionAttributeNames!["#beLife"]], ["hc_be", "hc_be_life"]);
        assert.match(kept.UpdateExpression!, / REMOVE #exp$/);
    });

    it("puts the net delta first; a tombstone for a missing marker moves nothing", () => {
        const { actions } = transactionActions(
            config,
            "k",
            [intent("a", "counted", "absent"), intent("b", "counted", "uncounted"), intent("c", "uncounted", "absent")],
            now,
        );
        assert.deepEqual(actions[0]!.Update!.ExpressionAttributeValues, { ":delta": { N: "2" } });
        assert.equal(actions[0]!.Update!.TableName, "orders-counters");
        assert.equal(
            actions[3]!.Update!.ConditionExpression,
            "(attribute_not_exists(#seq) OR #seq < :seq) AND attribute_not_exists(#state)",
        );
    });

    it("chunks at 100 actions, one slot kept for the counter, a hard delete costing two", () => {
        const plain = Array.from({ length: 250 }, (_, i) => intent(`i${i}`, "counted", "absent"));
        assert.deepEqual(
            chunkIntents(plain).map((c) => c.length),
            [99, 99, 52],
        );
        const deletes = Array.from({ length: 60 }, (_, i) => intent(`d${i}`, "uncounted", "counted", { softDelete: { token: undefined } }));
        assert.deepEqual(
            chunkIntents(deletes).map((c) => c.length),
            [49, 11],
        );
    });
});

describe("refineIntent: the cheap skip and the resolution of a failed condition", () => {
    const intent: ItemIntent = { id: "a", target: "counted", expected: "notCounted", seq: paddedSequence("50"), sequenceNumbers: ["50"] };
    const cases: Array<[string, { state?: string; seq?: string } | undefined, unknown]> = [
        ["no marker: apply from absent", undefined, { action: "apply", intent: { ...intent, expected: "absent" } }],
        [
            "a newer record applied",
            { state: "uncounted", seq: paddedSequence("60") },
            { action: "done", why: "a record as new or newer was applied" },
        ],
        [
            "the same record applied",
            { state: "counted", seq: paddedSequence("50") },
            { action: "done", why: "a record as new or newer was applied" },
        ],
        [
            "counted by backfill (ZERO_SEQ)",
            { state: "counted", seq: ZERO_SEQ },
            { action: "apply", intent: { ...intent, expected: "counted" } },
        ],
        [
            "an older tombstone",
            { state: "uncounted", seq: paddedSequence("40") },
            { action: "apply", intent: { ...intent, expected: "uncounted" } },
        ],
        [
            "an unreadable state",
            { state: "maybe", seq: paddedSequence("40") },
            { action: "poison", field: "hc_state", problem: 'must be "counted" or "uncounted" on the marker (found "maybe")' },
        ],
    ];
    for (const [name, marker, expected] of cases) {
        it(name, () => assert.deepEqual(refineIntent(intent, marker), expected));
    }

    describe("a late put of a removed life (an INSERT whose life the marker names from before it)", () => {
        const inserted: ItemIntent = { ...intent, life: "t1", inserted: { life: "t1", seq: paddedSequence("50") } };
        const late = (expected: ItemIntent["expected"]): ItemIntent => ({
            id: "a",
            target: "uncounted",
            expected,
            seq: paddedSequence("50"),
            sequenceNumbers: ["50"],
            life: "t1",
            resurrected: "t1",
        });
        const lateCases: Array<[string, { state?: string; seq?: string; life?: string; lifeSeq?: string }, unknown]> = [
            [
                "removed before: remove the item, count nothing",
                { state: "uncounted", seq: paddedSequence("40"), life: "t1", lifeSeq: paddedSequence("40") },
                { action: "apply", intent: late("uncounted") },
            ],
            [
                "counted by reconcile after its removal (hc_seq kept): remove and uncount",
                { state: "counted", seq: paddedSequence("40"), life: "t1", lifeSeq: paddedSequence("40") },
                { action: "apply", intent: late("counted") },
            ],
            [
                "another life named: counted as before",
                { state: "uncounted", seq: paddedSequence("40"), life: "t0", lifeSeq: paddedSequence("40") },
                { action: "apply", intent: { ...inserted, expected: "uncounted" } },
            ],
            [
                "the life written by a backfill (no hc_life_seq), tokenless records since: proves nothing, counted",
                { state: "uncounted", seq: paddedSequence("40"), life: "t1" },
                { action: "apply", intent: { ...inserted, expected: "uncounted" } },
            ],
        ];
        for (const [name, marker, expected] of lateCases) {
            it(name, () => assert.deepEqual(refineIntent(inserted, marker), expected));
        }

        it("a redelivery that starts at the INSERT already applied is no late put", () => {
            // The marker names the life from the INSERT itself (hc_seq 50); the batch goes on to seq 60.
            const longer: ItemIntent = { ...inserted, seq: paddedSequence("60"), sequenceNumbers: ["50", "60"] };
            assert.deepEqual(
                refineIntent(longer, { state: "counted", seq: paddedSequence("50"), life: "t1", lifeSeq: paddedSequence("50") }),
                {
                    action: "apply",
                    intent: { ...longer, expected: "counted" },
                },
            );
        });

        it("a late INSERT a soft delete of the batch ended: nothing to remove, and the key is due for a heal", () => {
            // Prepare: the marker names t9 from an earlier record; the batch holds t9's INSERT again, then its soft delete.
            const insert = record("INSERT", "k1", "x", token("t9"));
            const softDelete = record("MODIFY", "k1", "x", del("t9"), token("t9"));
            const [item] = planBatch([insert, softDelete], config).groups[0]!.items;
            const marker = { state: "uncounted", seq: paddedSequence("5"), life: "t9", lifeSeq: paddedSequence("5") };

            // Act
            const refined = refineIntent(item!, marker);

            // Assess: the soft delete is applied as any (the item is removed), and the late put is seen.
            assert.equal(refined.action, "apply");
            assert.equal(refined.action === "apply" && refined.intent.lateSeen, true);
            assert.equal(refined.action === "apply" && refined.intent.target, "uncounted");
            // The same batch against a marker of an older life: no late put.
            const older = refineIntent(item!, { ...marker, life: "t1" });
            assert.equal(older.action === "apply" && older.intent.lateSeen, undefined);
        });

        it("a late INSERT another writer moved out of the selection in the batch: removed, so a move back in cannot count it (fuzz seed 120254)", () => {
            // Prepare: an attribute selection; the marker names t9 from an earlier record; the batch holds t9's INSERT
            // again, then another writer's move of the item out of the selection (status archived), the item left in place.
            const selected: CounterTableConfig = { ...config, selection: { kind: "attribute", name: "status", value: "active" } };
            const active = { ...token("t9"), status: { S: "active" } };
            const archived = { ...token("t9"), status: { S: "archived" } };
            const insert = record("INSERT", "k1", "x", active);
            const moveOut = record("MODIFY", "k1", "x", archived, active);
            const [item] = planBatch([insert, moveOut], selected).groups[0]!.items;
            const marker = { state: "uncounted", seq: paddedSequence("5"), life: "t9", lifeSeq: paddedSequence("5") };

            // Act
            const refined = refineIntent(item!, marker);

            // Assess: the item is removed on its token, nothing is counted, and the key is due for a heal.
            assert.equal(refined.action, "apply");
            assert.equal(refined.action === "apply" && refined.intent.resurrected, "t9");
            assert.equal(refined.action === "apply" && refined.intent.target, "uncounted");
            assert.equal(refined.action === "apply" && refined.intent.lateSeen, true);
            // A removal that finds the item replaced keeps the batch's target (its later records move the replacement).
            assert.equal(refined.action === "apply" && unresurrect(refined.intent, true).target, "uncounted");
            // The same batch against a marker of an older life: no late put, nothing removed.
            const older = refineIntent(item!, { ...marker, life: "t1" });
            assert.equal(older.action === "apply" && older.intent.resurrected, undefined);
        });

        it("a delivery that holds one INSERT twice counts it once and removes nothing (fuzz seed 319)", () => {
            // Prepare: the same record twice, as a reader that lists a page twice would deliver it.
            const insert = record("INSERT", "k1", "x", token("t9"));

            // Act
            const plan = planBatch([insert, structuredClone(insert)], config);

            // Assess: one counted intent, no late put, the copy ignored.
            assert.equal(plan.ignored, 1);
            assert.deepEqual(plan.groups[0]!.items, [
                {
                    id: "x",
                    target: "counted",
                    expected: "notCounted",
                    seq: paddedSequence(insert.dynamodb!.SequenceNumber!),
                    sequenceNumbers: [insert.dynamodb!.SequenceNumber],
                    life: "t9",
                    inserted: { life: "t9", seq: paddedSequence(insert.dynamodb!.SequenceNumber!) },
                    putInBatch: true,
                },
            ]);
        });

        it("a REMOVE and the late INSERT of one life in one batch: removed by the batch alone", () => {
            const remove = record("REMOVE", "k1", "x", undefined, token("t9"));
            const insert = record("INSERT", "k1", "x", token("t9"));
            const [item] = planBatch([remove, insert], config).groups[0]!.items;
            assert.deepEqual(item, {
                id: "x",
                target: "uncounted",
                expected: "counted",
                seq: paddedSequence(insert.dynamodb!.SequenceNumber!),
                sequenceNumbers: [remove.dynamodb!.SequenceNumber, insert.dynamodb!.SequenceNumber],
                life: "t9",
                resurrected: "t9",
                lateSeen: true,
                putInBatch: true,
            });
        });

        it("a client item moved back into an attribute selection is a MODIFY: counted, never taken for a late put", () => {
            const layout: CounterTableConfig = { ...config, selection: { kind: "attribute", name: "status", value: "active" } };
            const back = record(
                "MODIFY",
                "k1",
                "x",
                { ...token("t9"), status: { S: "active" } },
                { ...token("t9"), status: { S: "archived" } },
            );
            const [item] = planBatch([back], layout).groups[0]!.items;
            assert.equal(item!.inserted, undefined);
            assert.deepEqual(
                refineIntent(item!, { state: "uncounted", seq: paddedSequence("1"), life: "t9", lifeSeq: paddedSequence("1") }),
                {
                    action: "apply",
                    intent: { ...item!, expected: "uncounted" },
                },
            );
        });

        it("counting an INSERT is conditional on the marker not naming its life from before it", () => {
            const { actions } = transactionActions(config, "k1", [inserted], 0);
            assert.match(
                actions[1]!.Update!.ConditionExpression!,
                /\(attribute_not_exists\(#lifeSeq\) OR #life <> :insertedLife OR #lifeSeq >= :insertedSeq\)$/,
            );
            const removal = transactionActions(config, "k1", [late("uncounted")], 0).actions[1]!.Delete!;
            assert.deepEqual(
                { table: removal.TableName, condition: removal.ConditionExpression, token: removal.ExpressionAttributeValues },
                { table: "orders", condition: "#token = :token", token: { ":token": { S: "t1" } } },
            );
        });
    });

    it("pads sequence numbers so that string order is numeric order", () => {
        assert.equal(paddedSequence("9") < paddedSequence("10"), true);
        assert.equal(paddedSequence("9").length, 40);
        assert.throws(() => paddedSequence("1".repeat(41)), RangeError);
    });
});

describe("planReconcile", () => {
    const item = (sk: string, extra: Image = {}): Image => ({ pk: { S: "k" }, sk: { S: sk }, ...extra });
    const marker = (id: string, state: string, seq = ZERO_SEQ): Image => ({
        pk: { S: "k" },
        sk: { S: markerSortKey(config, id) },
        [COUNTER_ATTRIBUTES.state]: { S: state },
        [COUNTER_ATTRIBUTES.seq]: { S: seq },
    });

    it("counts live items without a counted marker, uncounts counted markers of items gone or soft-deleted, purges the rest", () => {
        const plan = planReconcile(
            [
                item("live-unmarked", token("t1")),
                item("live-counted", token("t2")),
                item("live-tombstone", token("t3")),
                item("soft-counted", del("t4")),
                item("soft-unmarked", del("t5")),
                item("foreign", { type: { S: "profile" } }),
                item("#counter#eventual", { count: { N: "3" } }),
            ],
            [
                marker("live-counted", "counted"),
                marker("live-tombstone", "uncounted", paddedSequence("9")),
                marker("soft-counted", "counted", paddedSequence("8")),
                marker("gone", "counted"),
                marker("gone-tombstone", "uncounted"),
                marker("bad", "maybe"),
            ],
            config,
        );
        assert.deepEqual(plan.actions, [
            { kind: "count", id: "live-unmarked", markerState: undefined, markerSeq: undefined },
            { kind: "count", id: "live-tombstone", markerState: "uncounted", markerSeq: paddedSequence("9") },
            { kind: "purge", id: "soft-unmarked", hardDelete: { token: { S: "t5" } } },
            {
                kind: "uncount",
                id: "soft-counted",
                markerState: "counted",
                markerSeq: paddedSequence("8"),
                hardDelete: { token: { S: "t4" } },
            },
            { kind: "uncount", id: "gone", markerState: "counted", markerSeq: ZERO_SEQ },
        ]);
        assert.deepEqual(plan.badMarkers, [marker("bad", "maybe")]);
    });
});
