/**
 * The twin's own reading of the stream (local/harness/replay.ts): each key's crossings and usage recomputed from the
 * records alone, and compared with what a subscriber received and what the consumer stored.
 */
import type { DynamoDBRecord } from "aws-lambda";
import { strict as assert } from "node:assert";
import { replayStream, thresholdFigures, usageFigures } from "../local/harness/replay";
import { COUNTED_ATTRIBUTE, countingGeneration, DEFAULT_LAYOUT, type CounterConfig } from "../runtime/shared/config";
import type { ThresholdEvent } from "../runtime/limits/thresholds";

const config: CounterConfig = {
    ...DEFAULT_LAYOUT,
    tableName: "items",
    countersTableName: "counters",
    mode: "utilization",
    periodMs: 600_000,
};
const DAY1 = Date.parse("2026-03-01T23:59:00Z") / 1000;
const DAY2 = Date.parse("2026-03-02T00:01:00Z") / 1000;

let sequence = 1000;

/** A record of item `id` of key `key` at `seconds`: its images counted (live and flagged) or not. */
function record(
    key: string,
    id: string,
    seconds: number,
    before: "counted" | "none",
    after: "counted" | "deleted" | "unflagged",
): DynamoDBRecord {
    const base = { pk: { S: key }, sk: { S: id }, counter_token: { S: `t-${id}` } };
    const counted = { ...base, [COUNTED_ATTRIBUTE]: { S: countingGeneration(config) } };
    const images = { counted, deleted: { ...counted, deleted: { BOOL: true } }, unflagged: base };
    return {
        eventName: before === "none" ? "INSERT" : "MODIFY",
        dynamodb: {
            SequenceNumber: String(++sequence),
            ApproximateCreationDateTime: seconds,
            Keys: { pk: { S: key }, sk: { S: id } },
            NewImage: images[after],
            ...(before === "none" ? {} : { OldImage: counted }),
        },
    };
}

describe("the twin's replay of the stream: crossings and usage from the records alone", () => {
    // Limit 5 with fractions 0.8 and 1: the levels are 4 and 5.
    const records = [
        ...[1, 2, 3, 4, 5].map((i) => record("k", `r${i}`, DAY1, "none", "counted")),
        record("k", "r5", DAY1, "counted", "deleted"),
        record("k", "x", DAY1, "none", "unflagged"),
        record("k", "r4", DAY2, "counted", "deleted"),
        // A record of the day before, after one of the day after: it adds to its own day's creates only.
        record("k", "r6", DAY1, "none", "counted"),
        record("other", "o1", DAY2, "none", "counted"),
    ];
    const seq = (i: number) => records[i]!.dynamodb!.SequenceNumber!;
    const replays = replayStream(records, config, (key) => (key === "k" ? 5 : undefined), [0.8, 1]);

    it("crosses each level where the running count of counted(new) - counted(old) passes it, with the consumer's event ids", () => {
        assert.deepEqual(
            replays.get("k")!.crossings.map((c) => [c.id, c.count, c.time]),
            [
                [`k:${seq(3)}:0.8:up`, 4, DAY1 * 1000],
                [`k:${seq(4)}:1:up`, 5, DAY1 * 1000],
                [`k:${seq(5)}:1:down`, 4, DAY1 * 1000],
                [`k:${seq(7)}:0.8:down`, 3, DAY2 * 1000],
                [`k:${seq(8)}:0.8:up`, 4, DAY1 * 1000],
            ],
        );
        assert.equal(replays.get("k")!.count, 4);
        assert.deepEqual(replays.get("other")!.crossings, [], "no limit, no crossing");
    });

    it("keeps each day's creates, deletes and peak; a late record adds to its day's creates only", () => {
        assert.deepEqual(replays.get("k")!.usage, [
            { day: "2026-03-01", creates: 6, deletes: 1, peak: 5 },
            { day: "2026-03-02", creates: 0, deletes: 1, peak: 4 },
        ]);
        assert.deepEqual(replays.get("other")!.usage, [{ day: "2026-03-02", creates: 1, deletes: 0, peak: 1 }]);
    });

    it("counts missed crossings, duplicate events and events of no crossing", () => {
        // Prepare: every crossing but the last, the first twice, and one the stream does not show.
        const ids = replays.get("k")!.crossings.map((c) => c.id);
        const event = (id: string) => ({ id }) as ThresholdEvent;
        const received = [...ids.slice(0, -1), ids[0]!, `k:${seq(6)}:1:up`].map(event);

        // Act / Assess
        assert.deepEqual(thresholdFigures(replays, received), { events: 6, crossings: 5, missed: 1, duplicates: 1, unmatched: 1 });
        assert.deepEqual(thresholdFigures(replays, ids.map(event)), { events: 5, crossings: 5, missed: 0, duplicates: 0, unmatched: 0 });
    });

    it("finds the stored usage exact only when every key's every day agrees", () => {
        // Prepare
        const stored = new Map([
            ["k", replays.get("k")!.usage.map((d) => ({ ...d, limit: 5 }))],
            ["other", replays.get("other")!.usage.map((d) => ({ ...d }))],
        ]);
        const off = new Map([...stored, ["other", [{ day: "2026-03-02", creates: 1, deletes: 0, peak: 2 }]]]);

        // Act
        const exact = usageFigures(replays, stored);
        const wrong = usageFigures(replays, off);

        // Assess
        assert.deepEqual([exact.days, exact.exact, exact.differing], [3, true, []]);
        assert.deepEqual([wrong.days, wrong.exact, wrong.differing.map((d) => d.key)], [3, false, ["other"]]);
    });
});
