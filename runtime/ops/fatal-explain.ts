/**
 * What a fatal-queue message means and what to do about it, in the words of docs/operating.md ("Operating it").
 *
 * Invariant: pure. Every message the pipeline sends is recognised by its `reason` (runtime/stream/fatal.ts) or, for a
 * batch the first DLQ gave up on, by Lambda's on-failure metadata, and mapped to the remedy that settles it:
 * - poison-record (the consumer, runtime/stream/consumer.ts): a record whose keys or images cannot be read, sent in
 *   full; it counts as nothing, and its key, when readable, may need a reconcile;
 * - records-expired (the consumer or the redrive): a shard's sequence range the stream no longer holds; the keys it
 *   touched are unknown, so every key a reconcile can change is reconciled;
 * - malformed-redrive-message (the redrive): a first-DLQ message that is not a batch of this table's stream;
 * - Lambda's metadata of a first-DLQ message the redrive failed `redriveMaxReceiveCount` times: its records are applied
 *   from the stream while it holds them (24 hours after they were written); the ones it no longer holds become a
 *   records-expired message.
 */

export type FatalKind = "poison-record" | "records-expired" | "malformed-redrive-message" | "batch-exhausted" | "unknown";

/** What settles a message: reconciling its keys, applying its batch from the stream, or reconciling every key. */
export type Remedy = "reconcile-keys" | "redrive-batch" | "reconcile-all";

/** A stream shard's sequence range (no start: every record of the shard up to its end). */
export interface StreamRange {
    readonly shardId: string;
    readonly startSequenceNumber?: string;
    readonly endSequenceNumber: string;
}

export interface Explanation {
    readonly kind: FatalKind;
    readonly meaning: string;
    readonly action: string;
    readonly remedy: Remedy;
    /** Counter keys the message names (empty when it names none). */
    readonly counterKeys: string[];
    /** The stream range of a batch, or of expired records. */
    readonly range?: StreamRange;
    /** The handler's own sentence (or, for a batch, Lambda's condition). */
    readonly problem?: string;
    /** When the message was parked (or the batch given up on), ISO 8601. */
    readonly parkedAt?: string;
    /** A batch: when the stream begins to drop its records (24 hours after the first was written), ISO 8601. */
    readonly recordsExpireAt?: string;
}

/** How long a DynamoDB stream keeps a record. */
export const STREAM_RETENTION_MS = 24 * 60 * 60 * 1000;

function parse(body: string): Record<string, unknown> | undefined {
    try {
        const value: unknown = JSON.parse(body);
        return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
    } catch {
        return undefined;
    }
}

function rangeOf(info: unknown): StreamRange | undefined {
    const i = info as Record<string, unknown> | null | undefined;
    if (i && typeof i.shardId === "string" && typeof i.endSequenceNumber === "string") {
        return typeof i.startSequenceNumber === "string"
            ? { shardId: i.shardId, startSequenceNumber: i.startSequenceNumber, endSequenceNumber: i.endSequenceNumber }
            : { shardId: i.shardId, endSequenceNumber: i.endSequenceNumber };
    }
    return undefined;
}

/** Keys a message names: its counterKey, and the partition key of each of its records. */
function keysOf(message: Record<string, unknown>, partitionKey: string): string[] {
    const keys = new Set<string>();
    if (typeof message.counterKey === "string" && message.counterKey.length > 0) {
        keys.add(message.counterKey);
    }
    for (const record of Array.isArray(message.records) ? message.records : []) {
        const key = (record as { dynamodb?: { Keys?: Record<string, { S?: unknown }> } } | null)?.dynamodb?.Keys?.[partitionKey]?.S;
        if (typeof key === "string" && key.length > 0) {
            keys.add(key);
        }
    }
    return [...keys].sort();
}

const text = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

/** Lambda's on-failure metadata of a stream batch, explained; undefined when the message is not one. */
function explainBatch(message: Record<string, unknown>): Explanation | undefined {
    const range = rangeOf(message.DDBStreamBatchInfo);
    if (range?.startSequenceNumber === undefined || message.requestContext === null || typeof message.requestContext !== "object") {
        return undefined;
    }
    const info = message.DDBStreamBatchInfo as Record<string, unknown>;
    const firstWritten = Date.parse(text(info.approximateArrivalOfFirstRecord) ?? "");
    const parkedAt = text(message.timestamp);
    const problem = text((message.requestContext as Record<string, unknown>).condition);
    return {
        kind: "batch-exhausted",
        meaning:
            "Lambda's metadata of a stream batch the redrive failed redriveMaxReceiveCount times: its records are not " +
            "counted yet, and the stream holds them for 24 hours after they were written.",
        action:
            "Within 24 h of the write: `fatal replay` applies it from the stream now, or `redrive` moves it back to the " +
            "first DLQ. After that its records are gone: `fatal replay` turns it into a records-expired message, and the next replay " +
            "reconciles every key.",
        remedy: "redrive-batch",
        counterKeys: [],
        range,
        ...(problem === undefined ? {} : { problem }),
        ...(parkedAt === undefined ? {} : { parkedAt }),
        ...(Number.isFinite(firstWritten) ? { recordsExpireAt: new Date(firstWritten + STREAM_RETENTION_MS).toISOString() } : {}),
    };
}

function unknownMessage(meaning: string, keys: string[], common: Partial<Explanation>): Explanation {
    return {
        kind: "unknown",
        meaning,
        action: "Read it; `fatal replay` reconciles what it names (or every key) and removes it once that is settled.",
        remedy: keys.length > 0 ? "reconcile-keys" : "reconcile-all",
        counterKeys: keys,
        ...common,
    };
}

/** What a fatal-queue message means and what to do about it. Pure. */
export function explainFatalMessage(body: string, partitionKey: string): Explanation {
    const message = parse(body);
    if (message === undefined) {
        return unknownMessage("A message that is not a JSON object: nothing in this package sends it.", [], {});
    }
    const problem = text(message.problem);
    const parkedAt = text(message.parkedAt);
    const common = { ...(problem === undefined ? {} : { problem }), ...(parkedAt === undefined ? {} : { parkedAt }) };
    const keys = keysOf(message, partitionKey);
    switch (message.reason) {
        case "poison-record":
            return {
                kind: "poison-record",
                meaning:
                    "A stream record the consumer cannot read (its keys or images), sent in full: it counted as nothing, " +
                    "so the item it concerns may be off its key's eventual count.",
                action:
                    "Fix or delete the item it names; `fatal replay` reconciles its key (every key, when the record names " +
                    "none) and removes the message once that is settled.",
                remedy: keys.length > 0 ? "reconcile-keys" : "reconcile-all",
                counterKeys: keys,
                ...common,
            };
        case "records-expired": {
            const range = rangeOf(message.detail);
            return {
                kind: "records-expired",
                meaning:
                    "A stream shard's sequence range the stream no longer holds (24 h retention): those records were " +
                    "never counted, and the keys they touched are not named.",
                action:
                    "Once the table's writes are counted (the consumer's iterator age near zero), `fatal replay` (or " +
                    "`reconcile --all`) reconciles every key whose eventual count is off, then the message can go.",
                remedy: "reconcile-all",
                counterKeys: [],
                ...(range === undefined ? {} : { range }),
                ...common,
            };
        }
        case "malformed-redrive-message":
            return {
                kind: "malformed-redrive-message",
                meaning: "A first-DLQ message that is not a batch of this table's stream: the redrive could not use it.",
                action: "Read it; `fatal replay` reconciles every key whose eventual count is off and removes it once that is settled.",
                remedy: "reconcile-all",
                counterKeys: [],
                ...common,
            };
        default:
            break;
    }
    return explainBatch(message) ?? unknownMessage("A message of a shape this package does not send.", keys, common);
}
