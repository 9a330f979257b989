/**
 * One key's write for one batch: the records above the key's mark, applied in one conditional UpdateItem of its
 * eventual item that moves the count, the mark, the day's usage and the threshold outbox together. Pure.
 *
 * The write is conditional on the mark, the count and the day's tallies it was planned from, so it applies these
 * records exactly once and keeps what others wrote: a write that meets another (a redelivery, a redrive, another
 * stream shard's batch of the key) fails its condition and is planned again from the item as it is then.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { numberOf } from "../shared/keys";
import { HEAL_DUE, markFor } from "../heal/index-marks";
import type { CounterConfig } from "../shared/config";
import { aboveMark, markName, markValue, markedSequence, staleMarks } from "./marks";
import { addToDay, dayOf, DAY_ATTRIBUTE, usageAttributes, usageDayOf, type UsageDay } from "../limits/usage";
import { advance, readThresholdState, thresholdStateValue, THRESHOLD_ATTRIBUTE, type ThresholdEvent } from "../limits/thresholds";

/**
 * A record that moves the count or wants the key healed. Its mark makes both once: a step below the mark asked for its
 * heal in the write that applied it, and a heal may have taken that listing since, so a record delivered again lists
 * nothing.
 */
export interface Step {
    readonly sequenceNumber: string;
    readonly time: number;
    /** What it moves the count by: -1, 0 or 1. */
    readonly delta: number;
    /** When the record wants the key healed (undefined: it does not). */
    readonly dueAt?: number;
}

export interface PlanInput {
    readonly key: string;
    readonly shardId: string;
    /** The key's records in this batch that move the count or want a heal, in stream order. */
    readonly steps: readonly Step[];
    /** The eventual item as read (undefined: none yet). */
    readonly item: Record<string, AttributeValue> | undefined;
    /** The limit in force: the key's stored one, else the default. */
    readonly limit: number | undefined;
    readonly thresholds: readonly number[];
    /** Whether crossings are announced (a topic is configured): else only the band is kept. */
    readonly announce: boolean;
    readonly now: number;
}

/** Creates and deletes of a day already moved to its own item (a late record), with the marks that make them once. */
export interface LateDay {
    readonly day: string;
    readonly creates: number;
    readonly deletes: number;
    readonly first: string;
    readonly last: string;
}

export interface Update {
    readonly update: string;
    readonly condition: string;
    readonly names: Record<string, string>;
    readonly values: Record<string, AttributeValue>;
}

export interface KeyPlan {
    /** The records this write applies. */
    readonly applied: readonly Step[];
    /** The eventual item's write (undefined: nothing to write). */
    readonly write?: Update;
    /** Finished days to store on items of their own before the write. */
    readonly archive: readonly UsageDay[];
    /** The key's current day after the write (the day of its last record), when a record moved the count. */
    readonly today?: string;
    readonly late: readonly LateDay[];
    /** The outbox after the write: events to send. */
    readonly events: readonly ThresholdEvent[];
    /** Whether the write lists the key on the heal index. */
    readonly marked: boolean;
}

/** Plans one key's write (see the header). */
export function planKey(config: Pick<CounterConfig, "countAttribute" | "regions">, input: PlanInput): KeyPlan {
    const name = markName(input.shardId);
    const marked = markedSequence(input.item, name);
    const applied = input.steps.filter((step) => aboveMark(marked, step.sequenceNumber));
    const state = readThresholdState(input.item);
    const dues = applied.map((step) => step.dueAt).filter((due) => due !== undefined);
    const mark = dues.length === 0 ? undefined : markFor(config, input.key, input.item, Math.min(...dues), input.now);
    if (applied.length === 0 && mark === undefined) {
        return { applied, archive: [], late: [], events: state?.pending ?? [], marked: false };
    }
    const start = numberOf(input.item, config.countAttribute);
    const usage = planUsage(usageDayOf(input.item?.[DAY_ATTRIBUTE]?.M), start, applied, input.limit);
    const names: Record<string, string> = { "#c": config.countAttribute };
    const values: Record<string, AttributeValue> = {};
    const sets: string[] = [];
    const conditions: string[] = [];
    const asRead = (ref: string, read: AttributeValue | undefined): void => {
        conditions.push(read === undefined ? `attribute_not_exists(${ref})` : `${ref} = :${ref.slice(1)}0`);
        if (read !== undefined) {
            values[`:${ref.slice(1)}0`] = read;
        }
    };
    asRead("#c", input.item?.[config.countAttribute]);
    let events = state?.pending ?? [];
    if (applied.length > 0) {
        names["#m"] = name;
        values[":m"] = { S: markValue(applied.at(-1)!.sequenceNumber, input.now) };
        values[":d"] = { N: String(applied.reduce((sum, s) => sum + s.delta, 0)) };
        sets.push("#m = :m");
        asRead("#m", marked === undefined ? undefined : input.item![name]);
        if (usage.current !== undefined) {
            names["#day"] = DAY_ATTRIBUTE;
            values[":day"] = { M: usageAttributes(usage.current) };
            sets.push("#day = :day");
        }
        // Every write that applies records moves the day's tallies: conditional on them as read, a write planned
        // before another stream shard's (one that moved no count, a create and a delete) fails instead of overwriting
        // that shard's tallies and outbox.
        names["#day"] = DAY_ATTRIBUTE;
        asRead("#day", input.item?.[DAY_ATTRIBUTE]);
        const next = advance(state, start, applied, input.key, input.limit, input.thresholds, marked ?? "0", input.announce);
        if (
            state === undefined ||
            next.band !== state.band ||
            next.pending.map((e) => e.id).join() !== state.pending.map((e) => e.id).join()
        ) {
            names["#th"] = THRESHOLD_ATTRIBUTE;
            values[":th"] = thresholdStateValue(next);
            sets.push("#th = :th");
        }
        events = next.pending;
    }
    if (mark !== undefined) {
        Object.assign(names, mark.names);
        Object.assign(values, mark.values);
        sets.push(mark.update);
        // On the mark as read: a mark another writer made since is never put off to a later time.
        asRead("#hd", input.item?.[HEAL_DUE]);
    }
    const stale = staleMarks(input.item, input.now, name);
    stale.forEach((mark, i) => (names[`#x${i}`] = mark));
    const update =
        (applied.length > 0 ? "ADD #c :d " : "") +
        (sets.length > 0 ? `SET ${sets.join(", ")}` : "") +
        (stale.length > 0 ? ` REMOVE ${stale.map((_, i) => `#x${i}`).join(", ")}` : "");
    return {
        applied,
        write: { update: update.trim(), condition: conditions.join(" AND "), names, values },
        archive: usage.archive,
        ...(usage.current === undefined ? {} : { today: usage.current.day }),
        late: usage.late,
        events,
        marked: mark !== undefined,
    };
}

/** The day's tallies after `steps` (those that move the count), a finished day to archive, and the records of days already archived. */
export function planUsage(
    current: UsageDay | undefined,
    start: number,
    steps: readonly Step[],
    limit: number | undefined,
): { current?: UsageDay; archive: UsageDay[]; late: LateDay[] } {
    let day = current;
    const archive: UsageDay[] = [];
    const late = new Map<string, { creates: number; deletes: number; first: string; last: string }>();
    let count = start;
    for (const step of steps.filter((s) => s.delta !== 0)) {
        const stepDay = dayOf(step.time);
        if (day !== undefined && stepDay < day.day) {
            const entry = late.get(stepDay) ?? { creates: 0, deletes: 0, first: step.sequenceNumber, last: step.sequenceNumber };
            late.set(stepDay, {
                ...entry,
                creates: entry.creates + Math.max(0, step.delta),
                deletes: entry.deletes + Math.max(0, -step.delta),
                last: step.sequenceNumber,
            });
        } else if (day === undefined || stepDay > day.day) {
            if (day !== undefined) {
                archive.push(day);
            }
            day = { day: stepDay, creates: 0, deletes: 0, peak: count };
        }
        if (day !== undefined && stepDay >= day.day) {
            day = addToDay(day, count, [step.delta], limit);
        }
        count += step.delta;
    }
    return { ...(day === undefined ? {} : { current: day }), archive, late: [...late].map(([d, v]) => ({ day: d, ...v })) };
}
