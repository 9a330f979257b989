/**
 * Measures the lag a user of the eventual counter sees, and splits it where it arises.
 *
 * Definition: an item's lag is the time from the moment the API call that wrote it (a creation or a deletion)
 * returned, to the moment the write that applied its record to the key's eventual counter returned from the engine.
 * The commit is observed on the consumer's own DynamoDB client (a successful UpdateItem of the key's eventual item that
 * moved its stream mark, runtime/stream/plan.ts), not inferred from the invocation's end.
 *
 * Invariant: every sample pairs one write with the first commit of its key whose mark reached the write's record after
 * the mapping read that record, so a sample is never counted twice and never taken from a commit that could not have
 * applied the write (a mark covers exactly the records of its key up to it: runtime/stream/marks.ts).
 *
 * The lag splits at the moment the mapping read the record from the stream:
 * - stream: write -> read. DynamoDB Local's stream (how soon GetRecords shows a record, and how long it takes to
 *   answer) plus Lambda's polling cadence, which the mapping emulator reproduces.
 * - pipeline: read -> commit. Ours: batching, the invocation, and the consumer's writes.
 */
import type { AttributeValue, DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware } from "@smithy/types";
import type { DynamoDBRecord } from "aws-lambda";
import type { CounterConfig } from "../../runtime/shared/config";
import { isCounted, type ItemImage } from "../../runtime/shared/selection";
import { parseCounterSortKey } from "../../runtime/client/read";
import { paddedSequence } from "../../runtime/stream/records";

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
    /** Read -> commit: batching, invocation and the consumer's writes. */
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

type Kind = "create" | "delete";

interface PendingWrite {
    readonly id: string;
    readonly kind: Kind;
    readonly at: number;
    readAt?: number;
    /** The padded sequence number of the record the mapping read for it. */
    sequence?: string;
}

/** What a record does to its key's count: counted(new) - counted(old), as the consumer applies it. */
export function recordKind(
    record: DynamoDBRecord,
    config: CounterConfig,
): { key: string; id: string; kind: Kind; sequence: string } | undefined {
    const stream = record.dynamodb;
    const key = stream?.Keys?.[config.partitionKey]?.S;
    const id = stream?.Keys?.[config.sortKey]?.S;
    if (key === undefined || id === undefined || stream?.SequenceNumber === undefined) {
        return undefined;
    }
    const delta =
        (isCounted(stream.NewImage as ItemImage | undefined, config) ? 1 : 0) -
        (isCounted(stream.OldImage as ItemImage | undefined, config) ? 1 : 0);
    return delta === 0 ? undefined : { key, id, kind: delta > 0 ? "create" : "delete", sequence: paddedSequence(stream.SequenceNumber) };
}

export class LagMeter {
    /** Writes not yet seen committed, per key. */
    private readonly pending = new Map<string, PendingWrite[]>();
    private readonly seen = new Set<string>();
    /** Records the mapping read before the API call that wrote them had returned (a loaded machine), per key. */
    private readonly readEarly = new Map<string, Array<{ id: string; kind: Kind; at: number; sequence: string }>>();
    private readonly total: number[] = [];
    private readonly stream: number[] = [];
    private readonly pipeline: number[] = [];
    /** True once the mapping reports its reads: then only writes read before a commit was sent can be in it. */
    private readsObserved = false;
    /** Records the consumer counted (creations and deletions it acted on), from the invocations. */
    counted = 0;

    constructor(private readonly config: CounterConfig) {}

    /** The API call that created (delta 1) or deleted (delta -1) `id` under `key` returned at `at`. */
    wrote(event: { key: string; id: string; delta: 1 | -1; at: number }): void {
        const kind: Kind = event.delta === 1 ? "create" : "delete";
        const once = onceOf(event.key, event.id, kind);
        if (this.seen.has(once)) {
            return;
        }
        this.seen.add(once);
        const early = this.readEarly.get(event.key);
        const read = early?.findIndex((r) => r.id === event.id && r.kind === kind) ?? -1;
        const write: PendingWrite = { id: event.id, kind, at: event.at };
        if (read >= 0) {
            const [r] = early!.splice(read, 1);
            write.readAt = r!.at;
            write.sequence = r!.sequence;
        }
        listOf(this.pending, event.key).push(write);
    }

    /** The mapping read `record` from the stream at `at` (the emulator's `onRead`). */
    read(record: DynamoDBRecord, at: number): void {
        this.readsObserved = true;
        const c = recordKind(record, this.config);
        if (c === undefined) {
            return;
        }
        const write = this.pending.get(c.key)?.find((w) => w.id === c.id && w.kind === c.kind && w.readAt === undefined);
        if (write !== undefined) {
            write.readAt = at;
            write.sequence = c.sequence;
        } else if (!this.seen.has(onceOf(c.key, c.id, c.kind))) {
            listOf(this.readEarly, c.key).push({ id: c.id, kind: c.kind, at, sequence: c.sequence });
        }
    }

    /**
     * Watches `client` (the consumer's, the redrive's) for the writes that apply records. Sits innermost in the SDK's
     * stack, so a commit whose response an injected fault then discards still counts.
     */
    watchCommits(client: DynamoDBClient): void {
        const middleware: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            if (context.commandName !== "UpdateItemCommand") {
                return next(args);
            }
            const sentAt = Date.now();
            const result = await next(args);
            const input = args.input as {
                Key?: Record<string, AttributeValue>;
                ExpressionAttributeValues?: Record<string, AttributeValue>;
            };
            const key = input.Key?.[this.config.partitionKey]?.S;
            const sortKey = input.Key?.[this.config.sortKey]?.S ?? "";
            const mark = input.ExpressionAttributeValues?.[":m"]?.S;
            if (key !== undefined && mark !== undefined && parseCounterSortKey(this.config.counterPrefix, sortKey)?.kind === "eventual") {
                this.committed(key, mark.split("|")[0]!, sentAt, Date.now());
            }
            return result;
        };
        client.middlewareStack.add(middleware, { step: "deserialize", name: "hybridCounterLagMeter", priority: "low" });
    }

    /**
     * A write sent at `sentAt` applied `key`'s records up to `marked` (a padded sequence number) and returned at `at`.
     * Only writes the mapping had read before `sentAt` can be in it.
     */
    committed(key: string, marked: string, sentAt: number, at: number): void {
        const early = this.readEarly.get(key) ?? [];
        for (const r of early.filter((e) => e.sequence <= marked && e.at <= sentAt)) {
            // Counted before the API call that wrote it returned: the user saw no lag at all.
            early.splice(early.indexOf(r), 1);
            this.seen.add(onceOf(key, r.id, r.kind));
            this.total.push(0);
            this.stream.push(0);
            this.pipeline.push(Math.max(0, at - r.at));
        }
        const writes = this.pending.get(key);
        if (writes === undefined) {
            return;
        }
        const left = writes.filter((w) => {
            const inCommit = this.readsObserved ? w.readAt !== undefined && w.readAt <= sentAt && w.sequence! <= marked : w.at <= sentAt;
            if (!inCommit) {
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
            this.pending.delete(key);
        } else {
            this.pending.set(key, left);
        }
    }

    /** An invocation returned: counts the records before its checkpoint (if any) that move a count. */
    invoked(
        event: { readonly Records?: DynamoDBRecord[] },
        response: { readonly batchItemFailures?: Array<{ itemIdentifier: string }> } | undefined,
    ): void {
        const checkpoint = response?.batchItemFailures?.[0]?.itemIdentifier;
        for (const record of event.Records ?? []) {
            if (checkpoint !== undefined && record.dynamodb?.SequenceNumber === checkpoint) {
                return;
            }
            if (recordKind(record, this.config) !== undefined) {
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

function onceOf(key: string, id: string, kind: Kind): string {
    return `${key}\u0000${id}\u0000${kind}`;
}

function listOf<T>(map: Map<string, T[]>, key: string): T[] {
    let list = map.get(key);
    if (list === undefined) {
        list = [];
        map.set(key, list);
    }
    return list;
}

function summarize(values: readonly number[]): LagFigures {
    const sorted = [...values].sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? 0 };
}

export function percentile(sorted: readonly number[], p: number): number {
    return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
