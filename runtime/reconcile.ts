/**
 * Reconciliation: counts, from the table itself, what the stream can no longer deliver.
 *
 * Records that expire before they are counted (stream retention is 24 hours) leave their items in a
 * state the consumer would have changed: a creation leaves `processed = false`, a deletion leaves a
 * soft-deleted item in place. Reconciliation reads a key's partition, builds the records those items
 * stand for, and counts them with the consumer's own logic. Every action is conditional on the item's
 * current state, so it is safe to run while the consumer runs, and running it twice changes nothing.
 */
import { QueryCommand, type AttributeValue, type DynamoDBClient, type QueryCommandOutput } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import type { CounterTableConfig } from "./config";
import { countRecords } from "./counting";
import type { FatalQueue } from "./fatal";
import { jsonLogger, Metrics, type LineSink } from "./telemetry";

export interface ReconcileOptions {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    /** Where items that cannot be counted (malformed flags) are reported. */
    readonly fatal: FatalQueue;
    readonly sink?: LineSink;
    /** How long to keep retrying contention or throttling before answering `incomplete`. @default 60000 */
    readonly timeoutMs?: number;
}

export interface ReconcileResult {
    readonly key: string;
    /** Uncounted creations and unremoved deletions found in the table. */
    readonly found: number;
    /** Of those, committed now. */
    readonly counted: number;
    /** Of those, already settled by the consumer meanwhile. */
    readonly alreadySettled: number;
    /** True when something could not be committed; run it again. */
    readonly incomplete: boolean;
}

/** Settles every stranded item of one counter key. */
export async function reconcileKey(key: string, options: ReconcileOptions): Promise<ReconcileResult> {
    const { config, dynamodb } = options;
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    const records: DynamoDBRecord[] = [];
    let start: Record<string, AttributeValue> | undefined;
    let sequence = 0n;
    do {
        const page: QueryCommandOutput = await dynamodb.send(
            new QueryCommand({
                TableName: config.tableName,
                ConsistentRead: true,
                KeyConditionExpression: "#pk = :key",
                ExpressionAttributeNames: { "#pk": config.partitionKey },
                ExpressionAttributeValues: { ":key": { S: key } },
                ExclusiveStartKey: start,
            }),
        );
        for (const item of page.Items ?? []) {
            const sk = item[config.sortKey]?.S;
            const processed = item[config.processedAttribute]?.BOOL;
            if (sk === undefined || sk.startsWith(config.counterPrefix) || processed === undefined) {
                continue;
            }
            const deleted = item[config.deletedAttribute]?.BOOL === true;
            if (!deleted && processed) {
                continue;
            }
            // A record as the stream would have carried it for the item's current state.
            const image = item as unknown as Record<string, import("aws-lambda").AttributeValue>;
            const keys = { [config.partitionKey]: { S: key }, [config.sortKey]: { S: sk } };
            sequence++;
            records.push(
                deleted
                    ? {
                          eventName: "MODIFY",
                          dynamodb: {
                              Keys: keys,
                              NewImage: image,
                              OldImage: { ...image, [config.deletedAttribute]: { BOOL: false } },
                              SequenceNumber: String(sequence),
                          },
                      }
                    : { eventName: "INSERT", dynamodb: { Keys: keys, NewImage: image, SequenceNumber: String(sequence) } },
            );
        }
        start = page.LastEvaluatedKey;
    } while (start);

    const metrics = new Metrics("HybridCounterReconcile", "hybrid-counter-reconcile", options.sink ?? (() => undefined));
    const outcome = await countRecords(records, {
        config,
        dynamodb,
        fatal: options.fatal,
        logger: jsonLogger("hybrid-counter-reconcile", options.sink ?? (() => undefined)),
        metrics,
        remainingMs: () => deadline - Date.now(),
    });
    return {
        key,
        found: records.length,
        counted: outcome.counted,
        alreadySettled: outcome.duplicates,
        incomplete: outcome.failedSequenceNumber !== undefined,
    };
}
