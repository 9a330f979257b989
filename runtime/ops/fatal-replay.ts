/**
 * Replaying the fatal queue: counting what can still be counted, and deleting each message once it is settled
 * (fatal-ops.ts `unsettledReason`).
 *
 * - A batch (Lambda's metadata) is applied from the stream exactly as the redrive applies one (runtime/stream/redrive.ts
 *   `redriveRange`): every record of its shard from the shard's frontier to the batch's end, while the stream holds
 *   them (younger than 24 hours); records it no longer holds go to the fatal queue as records-expired, which stands in
 *   the batch's place. Applying records twice changes nothing (runtime/stream/marks.ts). With `toFirstDlq` the batch
 *   is sent back to the first DLQ instead.
 * - A records-expired or malformed-redrive message, and anything naming no key: every key a reconcile can change is
 *   reconciled (once per run). A poison record naming its key: that key is.
 *
 * A message whose work did not finish stays in the queue, with why; what the fatal queue refused while a range was
 * applied (a poison record, records the stream no longer holds) is reported with the queue's error, and the message
 * that led to it stays.
 */
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { DEFAULT_METRICS_NAMESPACE, DEFAULT_THRESHOLDS, DEFAULT_USAGE_RETENTION_DAYS, type HandlerConfig } from "../shared/config";
import { jsonLogger, Metrics } from "../shared/telemetry";
import { Frontiers, type ShardRun, type StreamHandlerDeps } from "../stream/consumer";
import { parseBatchInfo, redriveRange } from "../stream/redrive";
import { reconcileAll, reconcileKeys, type ReconcileKeysResult } from "./reconcile-all";
import {
    deleteHeld,
    holdAll,
    moveToFirstDlq,
    release,
    reportingFatalQueue,
    unsettledReason,
    type Held,
    type QueueOpsOptions,
    type ReportingFatalQueue,
    type SettleContext,
    type UnparkedMessage,
} from "./fatal-ops";
import type { FatalKind } from "./fatal-explain";

export type ReplayOutcome =
    /** Counted now (or found counted) and deleted from the fatal queue. */
    | "settled"
    /** Sent to the first DLQ for the redrive function, then deleted from the fatal queue. */
    | "moved-to-first-dlq"
    /** The batch's records were gone from the stream: a records-expired message now stands in its place. */
    | "expired"
    /** Left in the fatal queue: `detail` says why. */
    | "kept";

export interface ReplayResult {
    readonly id: string;
    readonly kind: FatalKind;
    readonly outcome: ReplayOutcome;
    readonly detail?: string;
    /** What the fatal queue refused while this message was replayed (absent when nothing). */
    readonly unparked?: readonly UnparkedMessage[];
}

export interface ReplayOptions extends QueueOpsOptions, SettleContext {
    readonly streams: DynamoDBStreamsClient;
    /** Where exhausted batches go with `toFirstDlq`. */
    readonly firstDlqUrl?: string;
    /** Send batches back to the first DLQ instead of applying them here. */
    readonly toFirstDlq?: boolean;
    /** The threshold fractions the deployed handlers use (the bands a replayed range moves). @default [0.8, 1] */
    readonly thresholds?: readonly number[];
    /** The usage history the deployed handlers keep. @default 90 */
    readonly usageRetentionDays?: number;
    readonly onMessage?: (result: ReplayResult, done: number, total: number) => void;
}

/** What one run shares between its messages. */
interface Replay {
    readonly options: ReplayOptions;
    readonly fatal: ReportingFatalQueue;
    /** Set once every key was reconciled in this run: later keyless messages only check. */
    reconciledAll?: ReconcileKeysResult;
}

/**
 * Replays every message in the queue (see the header), oldest first; each is deleted only when settled. Stops between
 * messages when the signal is aborted; the messages not handled are released.
 */
export async function replayFatal(options: ReplayOptions): Promise<ReplayResult[]> {
    if (options.toFirstDlq && !options.firstDlqUrl) {
        throw new Error("[firstDlqUrl] is needed to replay to the first DLQ");
    }
    const replay: Replay = { options, fatal: reportingFatalQueue(options.sqs, options.queueUrl) };
    const held = await holdAll(options);
    const results: ReplayResult[] = [];
    try {
        for (const [i, h] of held.entries()) {
            if (options.signal?.aborted) {
                break;
            }
            const refusedBefore = replay.fatal.unparked.length;
            const result = await replayOne(h, replay);
            const refused = replay.fatal.unparked.slice(refusedBefore);
            results.push(refused.length === 0 ? result : { ...result, unparked: refused });
            options.onMessage?.(results.at(-1)!, i + 1, held.length);
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

async function replayOne(h: Held, replay: Replay): Promise<ReplayResult> {
    const { explanation } = h.entry;
    const { options } = replay;
    if (explanation.remedy === "redrive-batch") {
        if (options.toFirstDlq) {
            const queueError = await moveToFirstDlq(options, h, options.firstDlqUrl!);
            return queueError === undefined
                ? { id: h.entry.id, kind: explanation.kind, outcome: "moved-to-first-dlq" }
                : { id: h.entry.id, kind: explanation.kind, outcome: "kept", detail: `the first DLQ refused it: ${queueError}` };
        }
        return replayBatch(h, replay);
    }
    return replayByReconcile(h, replay);
}

/** The handler configuration a replayed range is applied with: the counter's, and the deployed handlers' settings. */
function handlerConfig(options: ReplayOptions): HandlerConfig {
    return {
        ...options.config,
        fatalQueueUrl: options.queueUrl,
        metricsNamespace: DEFAULT_METRICS_NAMESPACE,
        thresholds: options.thresholds ?? DEFAULT_THRESHOLDS,
        usageRetentionDays: options.usageRetentionDays ?? DEFAULT_USAGE_RETENTION_DAYS,
    };
}

/** Applies a batch's range (and every range open below it) from the stream; deletes the message once applied. */
async function replayBatch(h: Held, replay: Replay): Promise<ReplayResult> {
    const { options, fatal } = replay;
    const base = { id: h.entry.id, kind: h.entry.explanation.kind };
    let info;
    try {
        info = parseBatchInfo(h.entry.body, options.config.tableName);
    } catch (error) {
        return { ...base, outcome: "kept", detail: `not a batch of this table's stream: ${(error as Error).message}` };
    }
    const deps: StreamHandlerDeps = {
        config: handlerConfig(options),
        dynamodb: options.dynamodb,
        streams: options.streams,
        fatal,
        // No topic here: threshold events stay in the key's outbox, and the settler sends them.
        sendEvents: async () => false,
        sink: () => undefined,
    };
    const run: ShardRun = {
        deps,
        shardId: info.shardId,
        streamArn: info.streamArn,
        logger: jsonLogger("hybrid-counter-cli", () => undefined),
        metrics: new Metrics(DEFAULT_METRICS_NAMESPACE, "hybrid-counter-cli", () => undefined),
        // No Lambda budget: the runtime's own attempts bound the work.
        remainingMs: () => 900_000,
        frontiers: new Frontiers(deps),
    };
    const parkedBefore = fatal.parked.length;
    const refusedBefore = fatal.unparked.length;
    let applied: boolean;
    try {
        applied = await redriveRange(info, run);
    } catch (error) {
        return {
            ...base,
            outcome: "kept",
            detail: `could not apply it yet (${(error as Error).name}: ${(error as Error).message}); replay again`,
        };
    }
    if (!applied) {
        const refused = fatal.unparked.length - refusedBefore;
        return {
            ...base,
            outcome: "kept",
            detail:
                refused > 0
                    ? `the fatal queue refused ${refused} message(s) it led to (listed as unparked); replay again once the queue takes them`
                    : "could not apply it yet (throttling or an outage); replay again",
        };
    }
    await deleteHeld(options, h);
    const expired = fatal.parked.slice(parkedBefore).some((m) => m.reason === "records-expired");
    return expired
        ? { ...base, outcome: "expired", detail: "the stream no longer holds its records: a records-expired message stands in its place" }
        : { ...base, outcome: "settled" };
}

/** Reconciles what a message names (or every key, once per run), then deletes it if settled. */
async function replayByReconcile(h: Held, replay: Replay): Promise<ReplayResult> {
    const { options } = replay;
    const { explanation } = h.entry;
    const base = { id: h.entry.id, kind: explanation.kind };
    const deps = { config: options.config, dynamodb: options.dynamodb, ...(options.signal ? { signal: options.signal } : {}) };
    let run: ReconcileKeysResult | undefined;
    if (explanation.remedy === "reconcile-keys") {
        run = await reconcileKeys(explanation.counterKeys, deps);
    } else if (replay.reconciledAll === undefined) {
        run = replay.reconciledAll = await reconcileAll(deps);
    }
    if (run !== undefined && (run.incomplete || run.notStarted.length > 0)) {
        const open = run.results.filter((r) => r.outcome === "pending" || r.outcome === "busy").map((r) => `${r.key} ${r.outcome}`);
        return {
            ...base,
            outcome: "kept",
            detail: `the reconcile did not finish (${[...open, ...run.notStarted.map((k) => `${k} not started`)].join(", ")}); replay again once the stream has counted what it flagged`,
        };
    }
    // A key no counter can hold is not reconciled; its message settles once its items are fixed or gone.
    const reason = await unsettledReason(explanation, options);
    if (reason !== undefined) {
        const refused = run?.refused?.[0];
        return {
            ...base,
            outcome: "kept",
            detail:
                refused === undefined
                    ? reason
                    : `key ${JSON.stringify(refused.key)} cannot be counted ([key] ${refused.problem}): fix or delete its items; ${reason}`,
        };
    }
    await deleteHeld(options, h);
    return { ...base, outcome: "settled" };
}
