/**
 * What a fatal-queue message means and what to do about it, in the words of docs/operating.md ("Operating it").
 *
 * Invariant: pure. Every message kind the pipeline sends is recognised by its `reason` (or, for a batch
 * the first DLQ gave up on, by Lambda's on-failure metadata), and mapped to the remedy that settles it.
 */

export type FatalKind = "poison-record" | "poison-item" | "records-expired" | "malformed-redrive-message" | "batch-exhausted" | "unknown";

/** What settles a message: reconciling its keys, re-reading its batch from the stream, or reconciling every key. */
export type Remedy = "reconcile-keys" | "redrive-batch" | "reconcile-all";

export interface Explanation {
    readonly kind: FatalKind;
    readonly meaning: string;
    readonly action: string;
    readonly remedy: Remedy;
    /** Counter keys the message names (empty when it names none). */
    readonly counterKeys: string[];
    /** The stream range, for a batch. */
    readonly range?: { shardId: string; startSequenceNumber: string; endSequenceNumber: string };
    /** The handler's own sentence, when the message has one. */
    readonly problem?: string;
    readonly parkedAt?: string;
}

function parse(body: string): Record<string, unknown> | undefined {
    try {
        const value: unknown = JSON.parse(body);
        return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
    } catch {
        return undefined;
    }
}

function rangeOf(info: unknown): Explanation["range"] {
    const i = info as Record<string, unknown> | null | undefined;
    if (i && typeof i.shardId === "string" && typeof i.startSequenceNumber === "string" && typeof i.endSequenceNumber === "string") {
        return { shardId: i.shardId, startSequenceNumber: i.startSequenceNumber, endSequenceNumber: i.endSequenceNumber };
    }
    return undefined;
}

/** Keys named by a poison message: its counterKey, or the partition key of each record. */
function keysOf(message: Record<string, unknown>, partitionKey: string): string[] {
    const keys = new Set<string>();
    if (typeof message.counterKey === "string" && message.counterKey.length > 0) {
        keys.add(message.counterKey);
    }
    for (const record of Array.isArray(message.records) ? message.records : []) {
        const key = (record as { dynamodb?: { Keys?: Record<string, { S?: unknown }> } })?.dynamodb?.Keys?.[partitionKey]?.S;
        if (typeof key === "string" && key.length > 0) {
            keys.add(key);
        }
    }
    return [...keys].sort();
}

/** What a fatal-queue message means and what to do about it. Pure. */
export function explainFatalMessage(body: string, partitionKey: string): Explanation {
    const message = parse(body);
    if (!message) {
        return {
            kind: "unknown",
            meaning: "A message that is not JSON: nothing in this package sends it.",
            action: "Read it; `fatal delete` removes it once `status` shows nothing pending.",
            remedy: "reconcile-all",
            counterKeys: [],
        };
    }
    const problem = typeof message.problem === "string" ? message.problem : undefined;
    const parkedAt = typeof message.parkedAt === "string" ? message.parkedAt : undefined;
    const common = { problem, parkedAt };
    switch (message.reason) {
        case "poison-record":
            return {
                kind: "poison-record",
                meaning: "The full stream record of a change the consumer cannot count: a malformed flag or key.",
                action:
                    "Fix the item (its flags must be booleans) or delete it, then `fatal replay` settles its key and " +
                    "removes the message.",
                remedy: keysOf(message, partitionKey).length > 0 ? "reconcile-keys" : "reconcile-all",
                counterKeys: keysOf(message, partitionKey),
                ...common,
            };
        case "poison-item":
            return {
                kind: "poison-item",
                meaning: "The stored item has a flag that is not a boolean, so it can never be counted automatically.",
                action: "Fix the item's flags (booleans) or delete it, then `fatal replay` settles its key and removes the message.",
                remedy: "reconcile-keys",
                counterKeys: keysOf(message, partitionKey),
                ...common,
            };
        case "records-expired": {
            const detail = message.detail as Record<string, unknown> | undefined;
            return {
                kind: "records-expired",
                meaning:
                    "The shard and sequence range the stream no longer holds (24 h retention): those records were " +
                    "never counted, so the keys they touched are off until reconciled from the table.",
                action: "`reconcile --all` (or `fatal replay`) counts the stranded items from the table, then the message can go.",
                remedy: "reconcile-all",
                counterKeys: [],
                range: rangeOf(detail),
                ...common,
            };
        }
        case "malformed-redrive-message":
            return {
                kind: "malformed-redrive-message",
                meaning: "A first-DLQ message that is not a batch of this table's stream: the redrive could not use it.",
                action: "Read it; nothing can be counted from it. `fatal replay` removes it once nothing is pending in the table.",
                remedy: "reconcile-all",
                counterKeys: [],
                ...common,
            };
        default:
            break;
    }
    const range = rangeOf(message.DDBStreamBatchInfo);
    if (range && message.requestContext !== undefined) {
        return {
            kind: "batch-exhausted",
            meaning:
                "Lambda's own metadata for a first-DLQ batch the redrive failed redriveMaxReceiveCount times; the " +
                "records may still be in the stream (24 h).",
            action:
                "Within 24 h of the write: `redrive` moves it back to the first DLQ, or `fatal replay` counts it now. " +
                "After that: `reconcile --all`.",
            remedy: "redrive-batch",
            counterKeys: [],
            range,
            problem:
                typeof (message.requestContext as Record<string, unknown>)?.condition === "string"
                    ? String((message.requestContext as Record<string, unknown>).condition)
                    : undefined,
            parkedAt: typeof message.timestamp === "string" ? message.timestamp : undefined,
        };
    }
    return {
        kind: "unknown",
        meaning: "A message of a shape this package does not send.",
        action: "Read it; `fatal delete` removes it once `status` shows nothing pending.",
        remedy: "reconcile-all",
        counterKeys: [],
        ...common,
    };
}
