/**
 * Measures the lag a user of the eventual counter sees, and splits it where it arises.
 *
 * Definition: an item's lag is the time from the moment the API call that wrote it (a creation or
 * a deletion) returned, to the moment the transaction that committed its count returned from the
 * engine. The commit is observed on the consumer's own DynamoDB client (a successful
 * TransactWriteItems that touched the item), not inferred from the invocation's end.
 *
 * Invariant: every sample pairs one write with the first commit that touched the same item after
 * the mapping read that write's stream record, so a sample is never counted twice and never taken
 * from a commit that could not have contained the write.
 *
 * The lag splits at the moment the mapping read the record from the stream:
 * - stream: write -> read. DynamoDB Local's stream (how soon GetRecords shows a record, and how long
 *   it takes to answer) plus Lambda's polling cadence, which the mapping emulator reproduces.
 * - pipeline: read -> commit. Ours: batching, the invocation, and the consumer's transactions.
 */
import type { DynamoDBClient, ServiceInputTypes, ServiceOutputTypes, TransactWriteItem } from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware } from "@smithy/types";
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from "aws-lambda";
import { markerId, type CounterTableLayout } from "../../runtime/shared/config";
import { classifyRecord } from "../../runtime/stream/records";

export interface LagFigures {
    readonly p50: number;
    readonly p99: number;
    readonly max: number;
}

export interface LagBreakdown {
    /** Write -> commit of the count: what a user sees. */
    readonly total: LagFigures;
    /** Write -> the mapping read the record: DynamoDB Local's stream and Lambda's polling cadence. */
    readonly stream: LagFigures;
    /** Read -> commit: batching, invocation and the consumer's transactions. */
    readonly pipeline: LagFigures;
    /** Writes measured. */
    readonly samples: number;
    /** Writes whose commit was not observed (counted by a path this meter does not watch, or not yet counted). */
    readonly unmatched: number;
}

/** The lag's split and the engine's stream figures, as the twin reports them. */
export interface LagSplit {
    readonly stream: LagFigures;
    readonly pipeline: LagFigures;
    readonly samples: number;
    readonly unmatched: number;
    /** DynamoDB Local's own part: how long GetRecords took, and how many shards the stream had. */
    readonly engine: { readonly getRecordsMeanMs: number; readonly getRecordsMaxMs: number; readonly shards: number };
}

interface PendingWrite {
    readonly kind: "create" | "delete";
    readonly at: number;
    readAt?: number;
}

export class LagMeter {
    /** Writes not yet seen committed, per item. */
    private readonly pending = new Map<string, PendingWrite[]>();
    private readonly seen = new Set<string>();
    /** Records the mapping read before the API call that wrote them had returned (a loaded machine). */
    private readonly readEarly = new Map<string, number>();
    private readonly total: number[] = [];
    private readonly stream: number[] = [];
    private readonly pipeline: number[] = [];
    /** True once the mapping reports its reads: then only writes read before a commit was sent can be in it. */
    private readsObserved = false;
    /** Records the consumer counted (creations and deletions it acted on), from the invocations. */
    counted = 0;

    constructor(private readonly layout: CounterTableLayout) {}

    /** The API call that created (delta 1) or deleted (delta -1) `id` under `key` returned at `at`. */
    wrote(event: { key: string; id: string; delta: 1 | -1; at: number }): void {
        const kind = event.delta === 1 ? "create" : "delete";
        const once = `${itemKey(event.key, event.id)}\u0000${kind}`;
        if (this.seen.has(once)) {
            return;
        }
        this.seen.add(once);
        const item = itemKey(event.key, event.id);
        const list = this.pending.get(item) ?? [];
        const readAt = this.readEarly.get(once);
        this.readEarly.delete(once);
        list.push(readAt === undefined ? { kind, at: event.at } : { kind, at: event.at, readAt });
        this.pending.set(item, list);
    }

    /** The mapping read `record` from the stream at `at` (the emulator's `onRead`). */
    read(record: DynamoDBRecord, at: number): void {
        this.readsObserved = true;
        const c = classifyRecord(record, this.layout);
        if (c.type !== "change") {
            return;
        }
        const kind: PendingWrite["kind"] = c.change.after ? "create" : "delete";
        const item = itemKey(c.change.counterKey, c.change.id);
        const write = this.pending.get(item)?.find((w) => w.kind === kind && w.readAt === undefined);
        if (write) {
            write.readAt = at;
        } else if (!this.seen.has(`${item}\u0000${kind}`)) {
            this.readEarly.set(`${item}\u0000${kind}`, at);
        }
    }

    /**
     * Watches `client` (the consumer's, the redrive's) for committed transactions. Sits innermost in
     * the SDK's stack, so a commit whose response an injected fault then discards still counts.
     */
    watchCommits(client: DynamoDBClient): void {
        const middleware: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            if (context.commandName !== "TransactWriteItemsCommand") {
                return next(args);
            }
            const sentAt = Date.now();
            const result = await next(args);
            this.committed((args.input as { TransactItems?: TransactWriteItem[] }).TransactItems ?? [], sentAt, Date.now());
            return result;
        };
        client.middlewareStack.add(middleware, { step: "deserialize", name: "hybridCounterLagMeter", priority: "low" });
    }

    /**
     * A transaction sent at `sentAt` committed at `at`. A marker set "counted" counts the item's
     * creation; a marker set "uncounted" counts its deletion and, when both were in one batch, its
     * creation too. Only writes the mapping had read before `sentAt` can be in the transaction.
     */
    committed(actions: readonly TransactWriteItem[], sentAt: number, at: number): void {
        for (const action of actions) {
            const update = action.Update;
            const pk = update?.Key?.[this.layout.partitionKey]?.S;
            const sk = update?.Key?.[this.layout.sortKey]?.S;
            const id = sk === undefined ? undefined : markerId(this.layout, sk);
            const target = update?.ExpressionAttributeValues?.[":target"]?.S;
            if (pk === undefined || id === undefined || (target !== "counted" && target !== "uncounted")) {
                continue;
            }
            const kinds: ReadonlyArray<PendingWrite["kind"]> = target === "counted" ? ["create"] : ["create", "delete"];
            const item = itemKey(pk, id);
            for (const kind of kinds) {
                // Counted before the API call that wrote it returned: the user saw no lag at all.
                const once = `${item}\u0000${kind}`;
                const readAt = this.readEarly.get(once);
                if (readAt !== undefined && readAt <= sentAt) {
                    this.readEarly.delete(once);
                    this.seen.add(once);
                    this.total.push(0);
                    this.stream.push(0);
                    this.pipeline.push(Math.max(0, at - readAt));
                }
            }
            const writes = this.pending.get(item);
            if (!writes) {
                continue;
            }
            const left = writes.filter((w) => {
                const readBy = this.readsObserved ? w.readAt : w.at;
                if (!kinds.includes(w.kind) || readBy === undefined || readBy > sentAt) {
                    return true;
                }
                this.total.push(Math.max(0, at - w.at));
                if (w.readAt !== undefined) {
                    this.stream.push(Math.max(0, w.readAt - w.at));
                    this.pipeline.push(Math.max(0, at - Math.max(w.readAt, w.at)));
                }
                return false;
            });
            if (left.length === 0) {
                this.pending.delete(item);
            } else {
                this.pending.set(item, left);
            }
        }
    }

    /** An invocation returned: counts the records before its checkpoint (if any) as processed. */
    invoked(event: DynamoDBStreamEvent, response: DynamoDBBatchResponse | undefined): void {
        const checkpoint = response?.batchItemFailures?.[0]?.itemIdentifier;
        for (const record of event.Records) {
            if (checkpoint !== undefined && record.dynamodb?.SequenceNumber === checkpoint) {
                return;
            }
            if (classifyRecord(record, this.layout).type === "change") {
                this.counted++;
            }
        }
    }

    /** The user-visible lag (write -> commit). */
    figures(): LagFigures {
        return summarize(this.total);
    }

    breakdown(): LagBreakdown {
        let unmatched = 0;
        for (const writes of this.pending.values()) {
            unmatched += writes.length;
        }
        return {
            total: summarize(this.total),
            stream: summarize(this.stream),
            pipeline: summarize(this.pipeline),
            samples: this.total.length,
            unmatched,
        };
    }

    /** The breakdown with the mapping's stream statistics. */
    split(stats: { getRecordsCalls: number; getRecordsMs: number; getRecordsMaxMs: number; shardsSeen: number }): LagSplit {
        const b = this.breakdown();
        return {
            stream: b.stream,
            pipeline: b.pipeline,
            samples: b.samples,
            unmatched: b.unmatched,
            engine: {
                getRecordsMeanMs: stats.getRecordsCalls === 0 ? 0 : Math.round(stats.getRecordsMs / stats.getRecordsCalls),
                getRecordsMaxMs: stats.getRecordsMaxMs,
                shards: stats.shardsSeen,
            },
        };
    }
}

function itemKey(key: string, id: string): string {
    return `${key}\u0000${id}`;
}

function summarize(values: readonly number[]): LagFigures {
    const sorted = [...values].sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? 0 };
}

export function percentile(sorted: readonly number[], p: number): number {
    return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
