/**
 * The pure part of the replicator (local/regions/replicator.ts): item versions, last-writer-wins, and the
 * canonical form of an image that recognises the replicator's own writes when they come back in a stream.
 *
 * A version is the (write time, origin region) global tables version 2019.11.21 resolve conflicts with: of two
 * versions of one item, the later time wins, and on a tie the region whose name sorts last. The order is total
 * over distinct versions, so every engine that has applied the same set of versions holds the same one: the
 * engines converge whatever order the versions reach them in.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";

export interface Version {
    /** Milliseconds on the replicator's clock. */
    readonly time: number;
    readonly origin: string;
}

/** True when `a` wins over `b` under last-writer-wins (`b` undefined: nothing applied yet). */
export function later(a: Version, b: Version | undefined): boolean {
    if (b === undefined) {
        return true;
    }
    return a.time > b.time || (a.time === b.time && a.origin > b.origin);
}

/**
 * The time of a write made in a region: the replicator's clock, but always after the version the region held
 * before the write. A write is made on top of what the region's replica shows, so it must win over it everywhere,
 * or the region that made it would keep it while the others kept the version it replaced.
 */
export function localWriteTime(now: number, held: Version | undefined): number {
    return held === undefined ? now : Math.max(now, held.time + 1);
}

type Value = AttributeValue | Record<string, unknown>;

/** One string per distinct value: map keys sorted, binary as base64, sets sorted. Undefined (no image) is "". */
export function canonical(image: Record<string, AttributeValue> | undefined): string {
    return image === undefined ? "" : JSON.stringify(canonicalMap(image));
}

function canonicalMap(map: Record<string, Value>): unknown {
    return Object.fromEntries(
        Object.keys(map)
            .sort()
            .map((k) => [k, canonicalValue(map[k] as AttributeValue)]),
    );
}

function canonicalValue(value: AttributeValue): unknown {
    if (value.B !== undefined) {
        return { B: Buffer.from(value.B).toString("base64") };
    }
    if (value.BS !== undefined) {
        return { BS: value.BS.map((b) => Buffer.from(b).toString("base64")).sort() };
    }
    if (value.SS !== undefined) {
        return { SS: [...value.SS].sort() };
    }
    if (value.NS !== undefined) {
        // Numbers are compared as DynamoDB returns them (normalized): every image compared here was read from it.
        return { NS: [...value.NS].sort() };
    }
    if (value.L !== undefined) {
        return { L: value.L.map(canonicalValue) };
    }
    if (value.M !== undefined) {
        return { M: canonicalMap(value.M) };
    }
    return value;
}

/** The item's identity within its table: its key attributes, canonical. */
export function itemKey(keys: Record<string, AttributeValue> | undefined): string {
    return canonical(keys ?? {});
}
