/**
 * Stream records' times on the checker's virtual clock (clock.ts).
 *
 * DynamoDB Local stamps a record's ApproximateCreationDateTime with the machine's clock, while every party of a history
 * reads time from the virtual clock, which starts at 2026-01-01 and moves only as the schedule moves it. The consumer
 * files a record's creates and deletes under the UTC day of its time (usage) and stamps threshold events with it, so
 * against the machine's clock a history of days would land in one day. Every record the run's stream client reads (the
 * mapping's reads, and the consumer's and the redrive's re-reads) carries instead the virtual time at which the run
 * first read it, and the run reads the stream right after each released request that wrote the user's table, before
 * anything else moves (run.ts): that time is the write's own.
 */
import type {
    DynamoDBStreamsClient,
    GetRecordsCommandOutput,
    ServiceInputTypes,
    ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb-streams";
import type { InitializeMiddleware } from "@smithy/types";

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

    /** The virtual time of a record (the time it was first read). */
    of(sequence: string): number {
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
