/**
 * Operating the fatal queue: reading, explaining and deleting its messages, and moving Lambda's batch metadata back to
 * the first DLQ. Replaying them is fatal-replay.ts's.
 *
 * Invariants:
 * - Reading never consumes: messages are held for a short visibility timeout while read, then released (visibility
 *   0), so the queue is as it was.
 * - A message is deleted only once it is settled (`unsettledReason`): a batch's records are applied (its stream shard's
 *   frontier is past it); the keys a message names have nothing a reconcile can change; a message naming none, nothing
 *   in the whole table. A move sends before it deletes, so an interruption can duplicate a message, never lose one;
 *   applying a batch twice changes nothing (runtime/stream/marks.ts).
 * - A send or a park the queue refuses is reported with the queue's error, never dropped.
 * - Interrupted between messages, every message not handled is released.
 *
 * The pure part, what a message means and what to do, is in fatal-explain.ts.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
    ChangeMessageVisibilityCommand,
    DeleteMessageCommand,
    ReceiveMessageCommand,
    SendMessageCommand,
    type Message,
    type SQSClient,
} from "@aws-sdk/client-sqs";
import type { CounterConfig } from "../shared/config";
import { sqsFatalQueue, type FatalMessage, type FatalQueue } from "../stream/fatal";
import { readFrontier } from "../stream/progress";
import { compareSequences } from "../stream/records";
import { keysToReconcile } from "./status";
import { readKeyStatus, readTableStatus } from "./status-read";
import { explainFatalMessage, type Explanation } from "./fatal-explain";

export interface FatalEntry {
    readonly id: string;
    readonly receiveCount: number;
    readonly sentAt?: string;
    readonly explanation: Explanation;
    readonly body: string;
}

export interface Held {
    readonly message: Message;
    readonly entry: FatalEntry;
}

export interface QueueOpsOptions {
    readonly sqs: SQSClient;
    readonly queueUrl: string;
    readonly partitionKey: string;
    /** How long messages stay hidden while an operation works on them. @default 60 */
    readonly holdSeconds?: number;
    /** At most this many messages. @default 10000 */
    readonly max?: number;
    readonly signal?: AbortSignal;
}

function entryOf(message: Message, partitionKey: string): FatalEntry {
    const sent = Number(message.Attributes?.SentTimestamp);
    return {
        id: message.MessageId!,
        receiveCount: Number(message.Attributes?.ApproximateReceiveCount ?? 0),
        ...(Number.isFinite(sent) && sent > 0 ? { sentAt: new Date(sent).toISOString() } : {}),
        explanation: explainFatalMessage(message.Body ?? "", partitionKey),
        body: message.Body ?? "",
    };
}

/** Receives every visible message, holding each for `holdSeconds`, oldest first. */
export async function holdAll(options: QueueOpsOptions): Promise<Held[]> {
    const held: Held[] = [];
    const seen = new Set<string>();
    const max = options.max ?? 10_000;
    while (held.length < max) {
        options.signal?.throwIfAborted();
        const page = await options.sqs.send(
            new ReceiveMessageCommand({
                QueueUrl: options.queueUrl,
                MaxNumberOfMessages: 10,
                VisibilityTimeout: options.holdSeconds ?? 60,
                WaitTimeSeconds: 0,
                MessageSystemAttributeNames: ["All"],
            }),
        );
        const messages = (page.Messages ?? []).filter((m) => !seen.has(m.MessageId!));
        if (messages.length === 0) {
            break;
        }
        for (const message of messages) {
            seen.add(message.MessageId!);
            held.push({ message, entry: entryOf(message, options.partitionKey) });
        }
    }
    return held.sort((a, b) => (a.entry.sentAt ?? "").localeCompare(b.entry.sentAt ?? ""));
}

/** Makes held messages visible again. */
export async function release(sqs: SQSClient, queueUrl: string, held: readonly Held[]): Promise<void> {
    for (const h of held) {
        try {
            await sqs.send(
                new ChangeMessageVisibilityCommand({ QueueUrl: queueUrl, ReceiptHandle: h.message.ReceiptHandle, VisibilityTimeout: 0 }),
            );
        } catch {
            // The hold ends by itself after holdSeconds.
        }
    }
}

/** Deletes a held message. */
export async function deleteHeld(options: QueueOpsOptions, held: Held): Promise<void> {
    await options.sqs.send(new DeleteMessageCommand({ QueueUrl: options.queueUrl, ReceiptHandle: held.message.ReceiptHandle }));
}

/** Every message in the queue, explained, oldest first; the queue is left as it was. */
export async function listFatal(options: QueueOpsOptions): Promise<FatalEntry[]> {
    const held = await holdAll(options);
    await release(options.sqs, options.queueUrl, held);
    return held.map((h) => h.entry);
}

export class FatalMessageNotFoundError extends Error {
    override name = "FatalMessageNotFoundError";
    constructor(readonly id: string) {
        super(`no message with id ${id} in the fatal queue (it may be in flight elsewhere, or already deleted)`);
    }
}

export class NotSettledError extends Error {
    override name = "NotSettledError";
}

/** One message, explained. Throws FatalMessageNotFoundError. */
export async function showFatal(id: string, options: QueueOpsOptions): Promise<FatalEntry> {
    const found = (await listFatal(options)).find((e) => e.id === id);
    if (found === undefined) {
        throw new FatalMessageNotFoundError(id);
    }
    return found;
}

export interface SettleContext {
    readonly config: CounterConfig;
    readonly dynamodb: DynamoDBClient;
}

/** Why nothing a reconcile can change is left (undefined), named by key. */
function reconcileReason(keys: readonly string[]): string | undefined {
    return keys.length === 0
        ? undefined
        : `${keys.length} key(s) have an eventual count off their items or items not flagged yet (${keys.slice(0, 5).join(", ")}${keys.length > 5 ? ", ..." : ""})`;
}

/**
 * Why a message is not settled, or undefined when it is. A batch: its shard's frontier is at or past its end (every
 * record up to there applied, those the stream no longer held parked as records-expired). A message naming keys: they
 * have nothing a reconcile can change. One naming none: no key of the table has.
 */
export async function unsettledReason(explanation: Explanation, ctx: SettleContext): Promise<string | undefined> {
    const range = explanation.range;
    if (explanation.kind === "batch-exhausted" && range !== undefined) {
        const frontier = await readFrontier(ctx.config, ctx.dynamodb, range.shardId);
        return frontier !== undefined && compareSequences(frontier, range.endSequenceNumber) >= 0
            ? undefined
            : `its records are not applied yet (stream shard ${range.shardId} is applied up to ${frontier ?? "none of its records"}, not ${range.endSequenceNumber})`;
    }
    if (explanation.counterKeys.length > 0) {
        const off: string[] = [];
        for (const key of explanation.counterKeys) {
            off.push(...keysToReconcile([await readKeyStatus(key, ctx)]));
        }
        return reconcileReason(off);
    }
    const table = await readTableStatus(ctx);
    const reason = reconcileReason(keysToReconcile(table.all));
    return reason === undefined ? undefined : `the message names no key, and ${reason}`;
}

/** Deletes one message, only if it is settled. Throws NotSettledError or FatalMessageNotFoundError. */
export async function deleteFatal(id: string, options: QueueOpsOptions & SettleContext): Promise<FatalEntry> {
    const held = await holdAll(options);
    const target = held.find((h) => h.entry.id === id);
    let deleted = false;
    try {
        if (target === undefined) {
            throw new FatalMessageNotFoundError(id);
        }
        const reason = await unsettledReason(target.entry.explanation, options);
        if (reason !== undefined) {
            throw new NotSettledError(`message ${id} is not settled: ${reason}; run \`fatal replay\` or \`reconcile\` first`);
        }
        await deleteHeld(options, target);
        deleted = true;
        return target.entry;
    } finally {
        // Everything held goes back, the target too when it was refused.
        await release(
            options.sqs,
            options.queueUrl,
            held.filter((h) => !(deleted && h === target)),
        );
    }
}

/** The queue's error for a send it refused, as one line. */
export function queueErrorOf(error: unknown): string {
    return error instanceof Error ? `${error.name}: ${error.message.split("\n")[0]}` : String(error);
}

/** Moves one held message to the first DLQ: send, then delete. Resolves the send's error, or undefined once moved. */
export async function moveToFirstDlq(options: QueueOpsOptions, held: Held, firstDlqUrl: string): Promise<string | undefined> {
    try {
        await options.sqs.send(new SendMessageCommand({ QueueUrl: firstDlqUrl, MessageBody: held.entry.body }));
    } catch (error) {
        return queueErrorOf(error);
    }
    await deleteHeld(options, held);
    return undefined;
}

export interface RedriveResult {
    /** Ids of the batches moved to the first DLQ. */
    readonly moved: string[];
    /** Messages left in the fatal queue (other kinds, those not reached, those refused). */
    readonly left: number;
    /** Batches the first DLQ refused, with its error: each stays in the fatal queue. */
    readonly failed: Array<{ readonly id: string; readonly queueError: string }>;
}

/**
 * Moves every batch in the fatal queue back to the first DLQ, where the redrive function applies it from the stream.
 * Other messages stay. Stops between messages when the signal is aborted.
 */
export async function redriveToFirstDlq(
    options: QueueOpsOptions & { firstDlqUrl: string; onMessage?: (id: string, done: number, total: number) => void },
): Promise<RedriveResult> {
    const held = await holdAll(options);
    const batches = held.filter((h) => h.entry.explanation.remedy === "redrive-batch");
    const moved: string[] = [];
    const failed: RedriveResult["failed"] = [];
    try {
        for (const [i, h] of batches.entries()) {
            if (options.signal?.aborted) {
                break;
            }
            const queueError = await moveToFirstDlq(options, h, options.firstDlqUrl);
            if (queueError === undefined) {
                moved.push(h.entry.id);
            } else {
                failed.push({ id: h.entry.id, queueError });
            }
            options.onMessage?.(h.entry.id, i + 1, batches.length);
        }
    } finally {
        const done = new Set(moved);
        await release(
            options.sqs,
            options.queueUrl,
            held.filter((h) => !done.has(h.entry.id)),
        );
    }
    return { moved, left: held.length - moved.length, failed };
}

/** A message a fatal queue refused, with the queue's error. */
export interface UnparkedMessage extends FatalMessage {
    readonly queueError: string;
}

/** A fatal queue that keeps what it parked, and what the queue refused with the queue's error. */
export interface ReportingFatalQueue extends FatalQueue {
    readonly parked: FatalMessage[];
    readonly unparked: UnparkedMessage[];
}

/** The SQS fatal queue at `queueUrl`, reporting what it parks and what it could not. */
export function reportingFatalQueue(sqs: SQSClient, queueUrl: string): ReportingFatalQueue {
    let lastError = "";
    const inner = sqsFatalQueue(sqs, queueUrl, {
        log(_level, _message, fields) {
            lastError = String(fields?.error ?? "");
        },
    });
    const parked: FatalMessage[] = [];
    const unparked: UnparkedMessage[] = [];
    return {
        parked,
        unparked,
        async park(message) {
            lastError = "";
            if (await inner.park(message)) {
                parked.push(message);
                return true;
            }
            unparked.push({ ...message, queueError: lastError || "not sent" });
            return false;
        },
    };
}
