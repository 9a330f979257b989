/**
 * Stream marks: which records of a stream shard an eventual item has applied.
 *
 * Invariant: for every key k and stream shard S, the records of k in S that eventual(k) has applied are exactly those
 * at or below its mark `hc_s_<S>`. A stream shard delivers a key's records in order; the consumer applies a key's
 * records above the mark in one conditional write that moves the mark to the last of them (runtime/stream/apply.ts),
 * and never past a record of the key it has not applied: records are applied only together with every record of their
 * stream shard after its frontier, below which all are applied (runtime/stream/progress.ts).
 *
 * A mark holds the padded sequence number and the UTC day (days since the epoch) it was last written. A mark not written
 * for two days is removed: every record it covers was applied over a day ago, and the stream keeps records 24 hours,
 * so none of them can be delivered again; a record above it that is delivered later applies as it should.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { fnv1a } from "../shared/config";
import { paddedSequence } from "./records";

/** The prefix of a mark's attribute name. */
export const MARK_PREFIX = "hc_s_";

const DAY_MS = 86_400_000;

/** The attribute name of stream shard `shardId`'s mark. */
export function markName(shardId: string): string {
    return `${MARK_PREFIX}${fnv1a(shardId).toString(36)}`;
}

/** A mark's value: the padded sequence number of the last record applied, and the day it was written. */
export function markValue(sequenceNumber: string, now: number): string {
    return `${paddedSequence(sequenceNumber)}|${Math.floor(now / DAY_MS)}`;
}

/** The padded sequence number a mark covers (undefined: no mark). */
export function markedSequence(item: Record<string, AttributeValue> | undefined, name: string): string | undefined {
    const value = item?.[name]?.S;
    return value === undefined ? undefined : value.split("|")[0];
}

/** Whether a record is above a mark (not yet applied). */
export function aboveMark(marked: string | undefined, sequenceNumber: string): boolean {
    return marked === undefined || paddedSequence(sequenceNumber) > marked;
}

/** The marks of `item` not written for two days, but `keep`. */
export function staleMarks(item: Record<string, AttributeValue> | undefined, now: number, keep: string): string[] {
    const today = Math.floor(now / DAY_MS);
    return Object.entries(item ?? {})
        .filter(
            ([name, value]) => name.startsWith(MARK_PREFIX) && name !== keep && Number((value.S ?? "").split("|")[1] ?? today) <= today - 2,
        )
        .map(([name]) => name);
}
