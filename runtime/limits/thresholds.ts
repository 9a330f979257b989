/**
 * Threshold events: when a key's eventual count crosses a configured fraction of its limit, upward or back below.
 *
 * Which count: the eventual counter, record by record as the consumer applies the stream (its value after each
 * record, in stream order), against the limit in force when the record is applied (the key's stored limit, else the
 * counter's default). Best-effort does not drive events: it may undercount, or hold slots.
 *
 * What a subscriber sees: every crossing, at least once. The state (the band the key was last announced in, and the
 * events not yet sent) rides on the eventual item and is written by the same UpdateItem that applies the records, so a
 * crossing is recorded exactly once whatever the retries and redeliveries (an outbox). Events are sent after that
 * write and cleared after they are sent; a crash in between sends them again, with the same ids. So a subscriber sees
 * no crossing missed, and a duplicate only after a crash or a failed send, carrying the id of the event it repeats.
 * A limit changed under a key announces the band it moves the key into, at the key's next record.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";

/** One crossing, as sent. */
export interface ThresholdEvent {
    /** Deterministic: the key, the record (or the limit change) that crossed, the threshold and the direction. */
    readonly id: string;
    readonly key: string;
    readonly count: number;
    readonly limit: number;
    /** The fraction of the limit crossed. */
    readonly threshold: number;
    readonly direction: "up" | "down";
    /** When the crossing record was written (ISO 8601). */
    readonly time: string;
}

/** The eventual item's attribute: the band last announced (`b`) and the events not yet sent (`p`). */
export const THRESHOLD_ATTRIBUTE = "hc_th";

/** The count at which a fraction of a limit is reached: ceil(fraction x limit), at least 1. */
export function level(fraction: number, limit: number): number {
    return Math.max(1, Math.ceil(fraction * limit - 1e-9));
}

/** How many of the thresholds a count has reached under a limit. */
export function band(count: number, limit: number | undefined, thresholds: readonly number[]): number {
    return limit === undefined ? 0 : thresholds.filter((t) => count >= level(t, limit)).length;
}

/** The events of a move from band `from` to band `to` (thresholds sorted ascending). */
export function crossings(
    from: number,
    to: number,
    base: { readonly key: string; readonly count: number; readonly limit: number; readonly time: number; readonly cause: string },
    thresholds: readonly number[],
): ThresholdEvent[] {
    const events: ThresholdEvent[] = [];
    const time = new Date(base.time).toISOString();
    for (let b = from; b < to; b++) {
        events.push({
            id: `${base.key}:${base.cause}:${thresholds[b]}:up`,
            key: base.key,
            count: base.count,
            limit: base.limit,
            threshold: thresholds[b]!,
            direction: "up",
            time,
        });
    }
    for (let b = from; b > to; b--) {
        events.push({
            id: `${base.key}:${base.cause}:${thresholds[b - 1]}:down`,
            key: base.key,
            count: base.count,
            limit: base.limit,
            threshold: thresholds[b - 1]!,
            direction: "down",
            time,
        });
    }
    return events;
}

/** The state as stored. */
export interface ThresholdState {
    readonly band: number;
    readonly pending: readonly ThresholdEvent[];
}

export function readThresholdState(item: Record<string, AttributeValue> | undefined): ThresholdState | undefined {
    const map = item?.[THRESHOLD_ATTRIBUTE]?.M;
    if (map === undefined) {
        return undefined;
    }
    const pending = (map["p"]?.L ?? []).map((v) => JSON.parse(v.S ?? "null") as ThresholdEvent).filter((e) => e !== null);
    return { band: Number(map["b"]?.N ?? "0"), pending };
}

export function thresholdStateValue(state: ThresholdState): AttributeValue {
    return { M: { b: { N: String(state.band) }, p: { L: state.pending.map((e) => ({ S: JSON.stringify(e) })) } } };
}

/**
 * The most events a key's outbox holds: while the topic refuses them (an outage), the oldest beyond this are dropped,
 * and the key's band stays exact, so the next crossing is announced as it should be (docs/limits.md).
 */
export const OUTBOX_MAX = 50;

/**
 * Applies a key's records (their deltas in order) to its state; returns the new state, with the crossings appended
 * to the outbox when `announce` (a topic is configured), else only the band. Under no limit the band stays as it was:
 * a limit set again later announces the band the key is in then.
 */
export function advance(
    state: ThresholdState | undefined,
    start: number,
    steps: ReadonlyArray<{ readonly delta: number; readonly sequenceNumber: string; readonly time: number }>,
    key: string,
    limit: number | undefined,
    thresholds: readonly number[],
    markRead: string,
    announce: boolean,
): ThresholdState {
    let current = state?.band ?? band(start, limit, thresholds);
    const pending = [...(state?.pending ?? [])];
    if (limit === undefined) {
        return { band: current, pending };
    }
    const startBand = band(start, limit, thresholds);
    if (startBand !== current) {
        // The limit moved under the key since its last record: announce the band it is in now.
        pending.push(
            ...crossings(
                current,
                startBand,
                { key, count: start, limit, time: steps[0]?.time ?? Date.now(), cause: `limit@${markRead}` },
                thresholds,
            ),
        );
        current = startBand;
    }
    let count = start;
    for (const step of steps) {
        count += step.delta;
        const next = band(count, limit, thresholds);
        if (next !== current) {
            pending.push(...crossings(current, next, { key, count, limit, time: step.time, cause: step.sequenceNumber }, thresholds));
        }
        current = next;
    }
    return { band: current, pending: announce ? pending.slice(-OUTBOX_MAX) : [] };
}
