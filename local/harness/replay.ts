/**
 * What the consumer derives from the stream, derived again by a harness that reads the stream itself: each key's
 * threshold crossings and its usage per day, from the user's table's stream records in stream order, with none of
 * the consumer's state. A twin compares them with what the consumer published (the events a subscriber received)
 * and stored (`client.usage`).
 *
 * - A record moves its key's count by counted(new image) - counted(old image) (runtime/shared/selection.ts).
 * - A crossing is a move of the count across ceil(fraction x limit) for a configured fraction, against the key's
 *   stored limit; its id follows runtime/limits/thresholds.ts (`key:sequenceNumber:fraction:direction`).
 * - A day's usage (UTC, by the record's creation time) is its creates, its deletes, and the highest count after any
 *   of its records (from the count the day began at); a record of a day before the key's latest one adds to that
 *   day's creates or deletes only, as the consumer stores a late record (runtime/limits/usage.ts).
 */
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { DynamoDBRecord } from "aws-lambda";
import type { CounterConfig } from "../../runtime/shared/config";
import { isCounted, type ItemImage } from "../../runtime/shared/selection";
import { band, crossings, type ThresholdEvent } from "../../runtime/limits/thresholds";
import { dayOf, type UsageDay } from "../../runtime/limits/usage";
import { toLambdaRecord } from "../../runtime/stream/reader";
import { StreamTail } from "../aws/stream-tail";

/** A crossing, as the stream shows it. */
export interface Crossing {
    readonly id: string;
    readonly key: string;
    readonly threshold: number;
    readonly direction: "up" | "down";
    /** The count after the crossing record. */
    readonly count: number;
    /** When the crossing record was written (epoch ms). */
    readonly time: number;
}

/** One key's replay. */
export interface KeyReplay {
    /** The count after the last record: the eventual counter's truth. */
    readonly count: number;
    readonly crossings: readonly Crossing[];
    /** Its days, oldest first (limits are not replayed). */
    readonly usage: readonly Omit<UsageDay, "limit">[];
}

/** Reads `streamArn` from its first record until two reads in a row return nothing; the records as Lambda delivers them. */
export async function readWholeStream(streams: DynamoDBStreamsClient, streamArn: string): Promise<DynamoDBRecord[]> {
    const tail = new StreamTail(streams, streamArn);
    const records: DynamoDBRecord[] = [];
    for (let empty = 0; empty < 2;) {
        const page = await tail.read();
        records.push(...page.map((raw) => toLambdaRecord(raw, streamArn)));
        empty = page.length === 0 ? empty + 1 : 0;
    }
    return records;
}

interface Day {
    day: string;
    creates: number;
    deletes: number;
    peak: number;
}

class KeyState {
    count = 0;
    readonly crossings: Crossing[] = [];
    readonly days = new Map<string, Day>();
    latest: Day | undefined;

    constructor(
        readonly key: string,
        private readonly limit: number | undefined,
        private readonly thresholds: readonly number[],
    ) {}

    step(delta: number, sequenceNumber: string, time: number): void {
        const before = band(this.count, this.limit, this.thresholds);
        this.addToDay(delta, dayOf(time));
        this.count += delta;
        const after = band(this.count, this.limit, this.thresholds);
        if (this.limit !== undefined && after !== before) {
            const events: ThresholdEvent[] = crossings(
                before,
                after,
                { key: this.key, count: this.count, limit: this.limit, time, cause: sequenceNumber },
                this.thresholds,
            );
            this.crossings.push(
                ...events.map((e) => ({ id: e.id, key: e.key, threshold: e.threshold, direction: e.direction, count: e.count, time })),
            );
        }
    }

    private addToDay(delta: number, day: string): void {
        let target = this.days.get(day);
        const late = this.latest !== undefined && day < this.latest.day;
        if (target === undefined) {
            target = { day, creates: 0, deletes: 0, peak: late ? 0 : this.count };
            this.days.set(day, target);
        }
        if (!late) {
            this.latest = target;
        }
        target.creates += Math.max(0, delta);
        target.deletes += Math.max(0, -delta);
        if (!late) {
            target.peak = Math.max(target.peak, this.count + delta);
        }
    }
}

/**
 * Replays `records` (one stream's, in stream order) for every key they touch, against each key's stored limit
 * (`limitOf`) and the configured fractions.
 */
export function replayStream(
    records: readonly DynamoDBRecord[],
    config: CounterConfig,
    limitOf: (key: string) => number | undefined,
    thresholds: readonly number[],
): Map<string, KeyReplay> {
    const keys = new Map<string, KeyState>();
    for (const record of records) {
        const stream = record.dynamodb;
        const key = stream?.Keys?.[config.partitionKey]?.S;
        if (key === undefined || stream?.SequenceNumber === undefined) {
            continue;
        }
        const delta =
            (isCounted(stream.NewImage as ItemImage | undefined, config) ? 1 : 0) -
            (isCounted(stream.OldImage as ItemImage | undefined, config) ? 1 : 0);
        if (delta === 0) {
            continue;
        }
        let state = keys.get(key);
        if (state === undefined) {
            state = new KeyState(key, limitOf(key), thresholds);
            keys.set(key, state);
        }
        state.step(delta, stream.SequenceNumber, Math.round((stream.ApproximateCreationDateTime ?? 0) * 1000));
    }
    return new Map(
        [...keys].map(([key, s]) => [
            key,
            { count: s.count, crossings: s.crossings, usage: [...s.days.values()].sort((a, b) => (a.day < b.day ? -1 : 1)) },
        ]),
    );
}

/** The threshold figures of a run: every crossing against every event a subscriber received. */
export interface ThresholdFigures {
    /** Events received (each receipt). */
    readonly events: number;
    /** Crossings the stream shows. */
    readonly crossings: number;
    /** Crossings no received event carries the id of. */
    readonly missed: number;
    /** Event ids received more than once. */
    readonly duplicates: number;
    /** Event ids received that are no crossing the stream shows. */
    readonly unmatched: number;
}

export function thresholdFigures(replays: ReadonlyMap<string, KeyReplay>, received: readonly ThresholdEvent[]): ThresholdFigures {
    const times = new Map<string, number>();
    for (const event of received) {
        times.set(event.id, (times.get(event.id) ?? 0) + 1);
    }
    const expected = new Set([...replays.values()].flatMap((r) => r.crossings.map((c) => c.id)));
    return {
        events: received.length,
        crossings: expected.size,
        missed: [...expected].filter((id) => !times.has(id)).length,
        duplicates: [...times.values()].filter((n) => n > 1).length,
        unmatched: [...times.keys()].filter((id) => !expected.has(id)).length,
    };
}

/** Each key's usage as the consumer stored it, against the replay: exact when every key's days are equal. */
export function usageFigures(
    replays: ReadonlyMap<string, KeyReplay>,
    stored: ReadonlyMap<string, readonly UsageDay[]>,
): {
    days: number;
    exact: boolean;
    differing: Array<{ key: string; replayed: readonly Omit<UsageDay, "limit">[]; stored: readonly UsageDay[] }>;
} {
    const differing: Array<{ key: string; replayed: readonly Omit<UsageDay, "limit">[]; stored: readonly UsageDay[] }> = [];
    let days = 0;
    for (const key of new Set([...replays.keys(), ...stored.keys()])) {
        const replayed = replays.get(key)?.usage ?? [];
        const got = stored.get(key) ?? [];
        days += replayed.length;
        const same =
            replayed.length === got.length &&
            replayed.every(
                (d, i) =>
                    d.day === got[i]!.day && d.creates === got[i]!.creates && d.deletes === got[i]!.deletes && d.peak === got[i]!.peak,
            );
        if (!same) {
            differing.push({ key, replayed, stored: got });
        }
    }
    return { days, exact: differing.length === 0, differing };
}
