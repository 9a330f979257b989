/**
 * Measures how long a write takes to reach the eventual counter: from the moment the API call that
 * wrote a record returned to the moment the consumer invocation that counted it returned.
 */
import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import type { CounterTableLayout } from "../runtime/config";
import { classifyRecord } from "../runtime/records";

export interface LagFigures {
    readonly p50: number;
    readonly p99: number;
    readonly max: number;
}

export class LagMeter {
    private readonly writtenAt = new Map<string, number>();
    private readonly lags: number[] = [];
    /** Records the consumer counted (creations and deletions it acted on). */
    counted = 0;

    constructor(private readonly layout: CounterTableLayout) {}

    /** The API call that created (delta 1) or deleted (delta -1) `id` under `key` returned at `at`. */
    wrote(event: { key: string; id: string; delta: 1 | -1; at: number }): void {
        const k = this.recordKey(event.key, event.id, event.delta === 1 ? "create" : "delete");
        if (!this.writtenAt.has(k)) {
            this.writtenAt.set(k, event.at);
        }
    }

    /** An invocation returned: every record before its checkpoint (if any) was counted now. */
    invoked(event: DynamoDBStreamEvent, response: DynamoDBBatchResponse | undefined, now = Date.now()): void {
        const checkpoint = response?.batchItemFailures?.[0]?.itemIdentifier;
        for (const record of event.Records) {
            if (checkpoint !== undefined && record.dynamodb?.SequenceNumber === checkpoint) {
                return;
            }
            const c = classifyRecord(record, this.layout);
            if (c.type === "change") {
                this.counted++;
                const at = this.writtenAt.get(this.recordKey(c.change.counterKey, c.change.id, c.change.after ? "create" : "delete"));
                if (at !== undefined) {
                    this.lags.push(Math.max(0, now - at));
                }
            }
        }
    }

    figures(): LagFigures {
        const sorted = [...this.lags].sort((a, b) => a - b);
        return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1) ?? 0 };
    }

    private recordKey(key: string, id: string, kind: string): string {
        return `${key}\u0000${id}\u0000${kind}`;
    }
}

export function percentile(sorted: readonly number[], p: number): number {
    return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}
