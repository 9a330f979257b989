/**
 * Stream records' times on the checker's virtual clock (clock.ts), and how often the consumer found a ledger value of
 * a marker not yet sealed at its record's time.
 *
 * DynamoDB Local stamps a record's ApproximateCreationDateTime with the machine's clock, while every party of a
 * history reads time from the virtual clock, which starts at 2026-01-01 and moves only as the schedule moves it. The
 * consumer compares a record's time with the times its client tokens carry (runtime/shared/strict-ledger.ts: a ledger
 * value, `hc_released` or `hc_pending`, leaves the marker once its life is sealed at the record's time; a mark of an
 * earlier version likewise): against the machine's clock every token of a history looks sealed, and the consumer's
 * "not yet" branch never runs. So every record the run's stream client reads (the mapping's reads and the redrive's)
 * carries instead the virtual time at which the run first read it (`RecordTimes`), and the run reads the stream right
 * after each released request that wrote the user's table, before anything else moves (run.ts). That time is the
 * write's own: requests are released one at a time, the table is still between two releases, the clock moves only
 * by a move of the schedule, and DynamoDB Local shows a record at once. The consumer's Lambda record carries it in
 * whole seconds (stream-reader.ts floors it), as AWS's does: a record looks at most a second older than its write,
 * never younger, so the consumer may keep a value a little longer, never drop one early.
 *
 * `LedgerAges` counts, for the run's stats, the values the consumer read on the markers of a delivered batch, each as
 * sealed or not at the time of the last record of its id in the batch (the time the consumer judges it at:
 * runtime/stream/markers.ts `observedAt`), by the same rule (`lifeSealed`).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type {
    DynamoDBStreamsClient,
    GetRecordsCommandOutput,
    ServiceInputTypes,
    ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb-streams";
import type { InitializeMiddleware } from "@smithy/types";
import type { DynamoDBRecord } from "aws-lambda";
import { COUNTER_ATTRIBUTES, markerId, type CounterTableLayout } from "../../runtime/shared/config";
import { lifeSealed } from "../../runtime/shared/strict-ledger";
import type { Released } from "./scheduler";

/** The virtual time of each stream record the run has read, by its sequence number's value. */
export class RecordTimes {
    private readonly times = new Map<bigint, number>();

    constructor(private readonly now: () => number) {}

    /** Rewrites the time of every record `streams` reads to the virtual time it was first read at (see the top). */
    install(streams: DynamoDBStreamsClient): void {
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const result = await next(args);
            if (context.commandName === "GetRecordsCommand") {
                for (const record of (result.output as GetRecordsCommandOutput).Records ?? []) {
                    if (record.dynamodb?.SequenceNumber !== undefined) {
                        record.dynamodb.ApproximateCreationDateTime = new Date(this.of(record.dynamodb.SequenceNumber));
                    }
                }
            }
            return result;
        };
        streams.middlewareStack.add(middleware, { step: "initialize", name: "fuzzRecordTimes" });
    }

    /** Records stamped so far. */
    get size(): number {
        return this.times.size;
    }

    private of(sequence: string): number {
        const value = BigInt(sequence);
        const known = this.times.get(value);
        if (known !== undefined) {
            return known;
        }
        const now = this.now();
        this.times.set(value, now);
        return now;
    }
}

/** Whether a released request may have written `tableName` (served, a write naming the table). */
export function wroteTable(request: Released, tableName: string): boolean {
    if (!request.served) {
        return false;
    }
    const input = request.input as {
        TableName?: string;
        TransactItems?: ReadonlyArray<Record<string, { TableName?: string } | undefined>>;
        RequestItems?: Record<string, unknown>;
    };
    switch (request.command) {
        case "PutItemCommand":
        case "UpdateItemCommand":
        case "DeleteItemCommand":
            return input.TableName === tableName;
        case "TransactWriteItemsCommand":
            return (input.TransactItems ?? []).some((action) => Object.values(action).some((write) => write?.TableName === tableName));
        case "BatchWriteItemCommand":
            return input.RequestItems?.[tableName] !== undefined;
        default:
            return false;
    }
}

/** Counts the ledger values the consumer read as sealed or not at their record's time (see the top). */
export class LedgerAges {
    /** Values read on a marker while their life was not sealed at the time of the id's last record in the batch. */
    unsealed = 0;
    /** Values read once sealed (the consumer removes them). */
    sealed = 0;
    /** Per consumer task: each delivered id's last record time, epoch ms as the consumer reads it. */
    private readonly batches = new Map<number, Map<string, number>>();

    constructor(
        private readonly layout: Pick<CounterTableLayout, "sortKey" | "counterPrefix">,
        private readonly countersTable: string,
    ) {}

    /** A batch (or one group of a split one) delivered to the consumer by the task `taskId`. */
    delivered(taskId: number, records: readonly DynamoDBRecord[]): void {
        const times = this.batches.get(taskId) ?? new Map<string, number>();
        for (const record of records) {
            const id = (record.dynamodb?.Keys?.[this.layout.sortKey] as { S?: string } | undefined)?.S;
            const seconds = record.dynamodb?.ApproximateCreationDateTime;
            if (id !== undefined && seconds !== undefined) {
                times.set(id, seconds * 1000);
            }
        }
        this.batches.set(taskId, times);
    }

    /** A released request: a consumer's marker read is counted (every other request is left alone). */
    read(request: Released): void {
        const times = this.batches.get(request.task.id);
        if (times === undefined || request.command !== "BatchGetItemCommand" || !request.served) {
            return;
        }
        const output = request.outcome?.output as { Responses?: Record<string, Array<Record<string, AttributeValue>>> } | undefined;
        for (const marker of output?.Responses?.[this.countersTable] ?? []) {
            const id = markerId(this.layout, marker[this.layout.sortKey]?.S ?? "");
            const at = id === undefined ? undefined : times.get(id);
            if (at === undefined) {
                continue;
            }
            for (const value of [marker[COUNTER_ATTRIBUTES.released]?.S, marker[COUNTER_ATTRIBUTES.pending]?.S]) {
                if (value !== undefined) {
                    this[lifeSealed(value, at) ? "sealed" : "unsealed"]++;
                }
            }
        }
    }
}
