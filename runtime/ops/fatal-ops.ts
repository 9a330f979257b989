/**
 * Operating the fatal queue: reading, explaining, replaying and deleting its messages, and moving
 * exhausted batches back to the first DLQ.
 *
 * Invariants:
 * - Reading never consumes: messages are held for a short visibility timeout while read, then
 *   released (visibility 0), so the queue is as it was.
 * - A message is deleted only once it is settled: the keys it concerns have nothing pending in the
 *   table (or, when it names no key, the whole table has nothing pending), or it was copied to the first
 *   DLQ first. A move sends before it deletes, so an interruption can duplicate a message, never lose one;
 *   counting is idempotent, so a duplicate is harmless.
 * - Interrupted between messages, every message not handled is released.
 *
 * The pure part, what a message means and what to do, is in fatal-explain.ts.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import {
    ChangeMessageVisibilityCommand,
    DeleteMessageCommand,
    ReceiveMessageCommand,
    SendMessageCommand,
    type Message,
    type SQSClient,
} from "@aws-sdk/client-sqs";
import type { SQSEvent } from "aws-lambda";
import { DEFAULT_METRICS_NAMESPACE, type CounterTableConfig } from "../shared/config";
import { sqsFatalQueue, type FatalMessage, type FatalQueue } from "../stream/fatal";
import { createRedriveHandler } from "../stream/redrive";
import { reconcileAll, reconcileKeys } from "./reconcile-all";
import { readKeyStatus, readTableStatus } from "./status";
import { jsonLogger } from "../shared/telemetry";
import { explainFatalMessage, type Explanation, type FatalKind } from "./fatal-explain";

export { explainFatalMessage, type Explanation, type FatalKind, type Remedy } from "./fatal-explain";

export interface FatalEntry {
    readonly id: string;
    readonly receiveCount: number;
    readonly sentAt?: string;
    readonly explanation: Explanation;
    readonly body: string;
}

interface Held {
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
        sentAt: Number.isFinite(sent) && sent > 0 ? new Date(sent).toISOString() : undefined,
        explanation: explainFatalMessage(message.Body ?? "", partitionKey),
        body: message.Body ?? "",
    };
}

/** Receives every visible message, holding each for `holdSeconds`. */
async function holdAll(options: QueueOpsOptions): Promise<Held[]> {
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
    return held;
}

async function release(sqs: SQSClient, queueUrl: string, held: readonly Held[]): Promise<void> {
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

/** Every message in the queue, explained, oldest first; the queue is left as it was. */
export async function listFatal(options: QueueOpsOptions): Promise<FatalEntry[]> {
    const held = await holdAll(options);
    await release(options.sqs, options.queueUrl, held);
    return held.map((h) => h.entry).sort((a, b) => (a.sentAt ?? "").localeCompare(b.sentAt ?? ""));
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
    if (!found) {
        throw new FatalMessageNotFoundError(id);
    }
    return found;
}

export interface SettleContext {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
}

/**
 * Why a message is not settled, or undefined when it is: its keys have nothing pending or malformed, or,
 * when it names no key, the table has no pending item.
 */
export async function unsettledReason(explanation: Explanation, ctx: SettleContext): Promise<string | undefined> {
    if (explanation.counterKeys.length > 0) {
        for (const key of explanation.counterKeys) {
            const s = await readKeyStatus(key, { config: ctx.config, dynamodb: ctx.dynamodb });
            const open = s.pendingCreates + s.pendingDeletes + s.malformed;
            if (open > 0) {
                return `key ${key} still has ${s.pendingCreates} pending creates, ${s.pendingDeletes} pending deletes and ${s.malformed} malformed items`;
            }
        }
        return undefined;
    }
    const table = await readTableStatus({ config: ctx.config, dynamodb: ctx.dynamodb });
    // Malformed items have poison messages of their own; what a keyless message can leave behind is pending items.
    const t = table.totals;
    return t.pendingCreates + t.pendingDeletes > 0
        ? `the message names no key and the table still has ${t.pendingCreates} pending creates and ${t.pendingDeletes} pending deletes`
        : undefined;
}

/** Deletes one message, only if it is settled. Throws NotSettledError or FatalMessageNotFoundError. */
export async function deleteFatal(id: string, options: QueueOpsOptions & SettleContext): Promise<FatalEntry> {
    const held = await holdAll(options);
    const target = held.find((h) => h.entry.id === id);
    let deleted = false;
    try {
        if (!target) {
            throw new FatalMessageNotFoundError(id);
        }
        const reason = await unsettledReason(target.entry.explanation, options);
        if (reason !== undefined) {
            throw new NotSettledError(`message ${id} is not settled: ${reason}; run \`fatal replay\` or \`reconcile\` first`);
        }
        await options.sqs.send(new DeleteMessageCommand({ QueueUrl: options.queueUrl, ReceiptHandle: target.message.ReceiptHandle }));
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

export type ReplayOutcome =
    /** Counted now and deleted from the fatal queue. */
    | "settled"
    /** Sent to the first DLQ for the redrive function, then deleted from the fatal queue. */
    | "moved-to-first-dlq"
    /** The batch's records are gone; the redrive parked a records-expired message in its place. */
    | "expired"
    /** Left in the fatal queue: `detail` says why. */
    | "kept";

export interface ReplayResult {
    readonly id: string;
    readonly kind: FatalKind;
    readonly outcome: ReplayOutcome;
    readonly detail?: string;
}

export interface ReplayOptions extends QueueOpsOptions, SettleContext {
    readonly streams: DynamoDBStreamsClient;
    /** Needed by `toFirstDlq` and by `redrive`. */
    readonly firstDlqUrl?: string;
    /** Send exhausted batches back to the first DLQ instead of counting them here. */
    readonly toFirstDlq?: boolean;
    readonly onMessage?: (result: ReplayResult, done: number, total: number) => void;
}

/** A fatal queue that remembers what was parked, and sends it on to the real queue. */
function recordingFatal(inner: FatalQueue): FatalQueue & { parked: FatalMessage[] } {
    const parked: FatalMessage[] = [];
    return {
        parked,
        async park(message) {
            parked.push(message);
            return inner.park(message);
        },
    };
}

/** Moves one held message to the first DLQ: send, then delete. */
async function moveToFirstDlq(options: QueueOpsOptions, held: Held, firstDlqUrl: string): Promise<void> {
    await options.sqs.send(new SendMessageCommand({ QueueUrl: firstDlqUrl, MessageBody: held.entry.body }));
    await options.sqs.send(new DeleteMessageCommand({ QueueUrl: options.queueUrl, ReceiptHandle: held.message.ReceiptHandle }));
}

/**
 * Replays what can still be counted: an exhausted batch is re-read from the stream and counted with the
 * redrive's own logic (or moved to the first DLQ with `toFirstDlq`); a poison message's keys, and for a
 * message that names no key every key with pending items, are reconciled from the table. Each message is
 * deleted only when settled. Stops between messages when the signal is aborted.
 */
export async function replayFatal(options: ReplayOptions): Promise<ReplayResult[]> {
    if (options.toFirstDlq && !options.firstDlqUrl) {
        throw new Error("[firstDlqUrl] is needed to replay to the first DLQ");
    }
    const logger = jsonLogger("hybrid-counter-cli", () => undefined);
    const fatal = recordingFatal(sqsFatalQueue(options.sqs, options.queueUrl, logger));
    const held = await holdAll(options);
    const results: ReplayResult[] = [];
    let reconciledAll = false;
    let index = 0;
    try {
        for (; index < held.length; index++) {
            if (options.signal?.aborted) {
                break;
            }
            const h = held[index]!;
            const result = await replayOne(h, options, fatal, () => {
                const first = !reconciledAll;
                reconciledAll = true;
                return first;
            });
            results.push(result);
            options.onMessage?.(result, index + 1, held.length);
        }
    } finally {
        const handled = new Set(results.filter((r) => r.outcome !== "kept").map((r) => r.id));
        await release(
            options.sqs,
            options.queueUrl,
            held.filter((h) => !handled.has(h.entry.id)),
        );
    }
    return results;
}

async function replayOne(
    h: Held,
    options: ReplayOptions,
    fatal: FatalQueue & { parked: FatalMessage[] },
    firstReconcileAll: () => boolean,
): Promise<ReplayResult> {
    const { explanation } = h.entry;
    const base = { id: h.entry.id, kind: explanation.kind };
    const deleteIt = () =>
        options.sqs.send(new DeleteMessageCommand({ QueueUrl: options.queueUrl, ReceiptHandle: h.message.ReceiptHandle }));

    if (explanation.remedy === "redrive-batch") {
        if (options.toFirstDlq) {
            await moveToFirstDlq(options, h, options.firstDlqUrl!);
            return { ...base, outcome: "moved-to-first-dlq" };
        }
        const before = fatal.parked.length;
        const handler = createRedriveHandler({
            config: { ...options.config, fatalQueueUrl: options.queueUrl, metricsNamespace: DEFAULT_METRICS_NAMESPACE },
            dynamodb: options.dynamodb,
            streams: options.streams,
            sqs: options.sqs,
            fatal,
            sink: () => undefined,
        });
        const event: SQSEvent = {
            Records: [
                {
                    messageId: h.entry.id,
                    receiptHandle: h.message.ReceiptHandle!,
                    body: h.entry.body,
                    attributes: {
                        ApproximateReceiveCount: String(h.entry.receiveCount),
                        SentTimestamp: "0",
                        SenderId: "hybrid-counter-cli",
                        ApproximateFirstReceiveTimestamp: "0",
                    },
                    messageAttributes: {},
                    md5OfBody: "",
                    eventSource: "aws:sqs",
                    eventSourceARN: "",
                    awsRegion: "",
                },
            ],
        };
        const response = await handler(event);
        if (response.batchItemFailures.length > 0) {
            return { ...base, outcome: "kept", detail: "the batch could not be counted yet (contention or throttling); replay again" };
        }
        await deleteIt();
        const expired = fatal.parked.slice(before).some((m) => m.reason === "records-expired");
        return expired
            ? { ...base, outcome: "expired", detail: "the stream no longer holds the records; a records-expired message replaces it" }
            : { ...base, outcome: "settled" };
    }

    if (explanation.remedy === "reconcile-keys") {
        const run = await reconcileKeys(explanation.counterKeys, { config: options.config, dynamodb: options.dynamodb, fatal });
        if (run.refused !== undefined) {
            const { key, problem } = run.refused[0]!;
            return { ...base, outcome: "kept", detail: `key ${JSON.stringify(key)} cannot be counted: [key] ${problem}` };
        }
        if (run.incomplete) {
            return { ...base, outcome: "kept", detail: "reconciliation did not finish (contention or throttling); replay again" };
        }
    } else if (firstReconcileAll()) {
        const run = await reconcileAll({ config: options.config, dynamodb: options.dynamodb, fatal, signal: options.signal });
        if (run.incomplete || run.notStarted.length > 0) {
            return { ...base, outcome: "kept", detail: "reconciliation of every key did not finish; replay again" };
        }
    }
    const reason = await unsettledReason(explanation, options);
    if (reason !== undefined) {
        return { ...base, outcome: "kept", detail: reason };
    }
    await deleteIt();
    return { ...base, outcome: "settled" };
}

/**
 * Moves every exhausted batch in the fatal queue back to the first DLQ, where the redrive function
 * re-reads it from the stream (SQS's own redrive, limited to the messages the redrive can use). Other
 * messages stay. Returns the ids moved.
 */
export async function redriveToFirstDlq(
    options: QueueOpsOptions & { firstDlqUrl: string; onMessage?: (id: string, done: number, total: number) => void },
): Promise<{ moved: string[]; left: number }> {
    const held = await holdAll(options);
    const batches = held.filter((h) => h.entry.explanation.remedy === "redrive-batch");
    const moved: string[] = [];
    try {
        for (const h of batches) {
            if (options.signal?.aborted) {
                break;
            }
            await moveToFirstDlq(options, h, options.firstDlqUrl);
            moved.push(h.entry.id);
            options.onMessage?.(h.entry.id, moved.length, batches.length);
        }
    } finally {
        const done = new Set(moved);
        await release(
            options.sqs,
            options.queueUrl,
            held.filter((h) => !done.has(h.entry.id)),
        );
    }
    return { moved, left: held.length - moved.length };
}
