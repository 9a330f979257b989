/**
 * A backfill run's checkpoints: one item per Scan segment, holding where the segment's Scan stands and what it did,
 * in one attribute (`hc_bf`). Written after every page, conditional on the page count it follows, so two runners of
 * one run never both carry a segment on. Removed, every segment's, when the run completes: a finished run leaves
 * nothing behind, and running it again scans again and flags nothing new. A run abandoned unfinished goes with
 * `hc_expires`, 30 days after its last page (the counters table's TTL, and the settler's audit without one): resumed
 * after that, it starts over, which flags nothing twice.
 */
import {
    ConditionalCheckFailedException,
    DeleteItemCommand,
    QueryCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { backfillCheckpointKey, backfillRunPrefix } from "../shared/keys";
import { EXPIRES_ATTRIBUTE } from "../limits/usage";

/** How long an unfinished run's checkpoints outlive its last page. */
const CHECKPOINT_TTL_SECONDS = 30 * 86_400;

/** The checkpoint item's one attribute. */
export const CHECKPOINT_ATTRIBUTE = "hc_bf";

/** What a segment has done, across every call of its run. */
export interface SegmentCheckpoint {
    readonly segment: number;
    readonly totalSegments: number;
    /** Where the next page starts (absent: the segment's first page, or done). */
    readonly next?: Record<string, AttributeValue>;
    readonly done: boolean;
    readonly pages: number;
    readonly scanned: number;
    /** Items this run flagged (each is counted by the consumer when its flag's record arrives). */
    readonly counted: number;
    /** Live selected items that already counted. */
    readonly alreadyCounted: number;
    /** Items that are not live selected items of this region. */
    readonly skipped: number;
}

export function freshCheckpoint(segment: number, totalSegments: number): SegmentCheckpoint {
    return { segment, totalSegments, done: false, pages: 0, scanned: 0, counted: 0, alreadyCounted: 0, skipped: 0 };
}

function toItem(checkpoint: SegmentCheckpoint): AttributeValue {
    const n = (v: number): AttributeValue => ({ N: String(v) });
    return {
        M: {
            segment: n(checkpoint.segment),
            totalSegments: n(checkpoint.totalSegments),
            done: { BOOL: checkpoint.done },
            pages: n(checkpoint.pages),
            scanned: n(checkpoint.scanned),
            counted: n(checkpoint.counted),
            alreadyCounted: n(checkpoint.alreadyCounted),
            skipped: n(checkpoint.skipped),
            ...(checkpoint.next === undefined ? {} : { next: { S: JSON.stringify(checkpoint.next) } }),
        },
    };
}

function fromItem(item: Record<string, AttributeValue>): SegmentCheckpoint | undefined {
    const map = item[CHECKPOINT_ATTRIBUTE]?.M;
    if (map === undefined) {
        return undefined;
    }
    const n = (name: string) => Number(map[name]?.N ?? "0");
    return {
        segment: n("segment"),
        totalSegments: n("totalSegments"),
        done: map["done"]?.BOOL === true,
        pages: n("pages"),
        scanned: n("scanned"),
        counted: n("counted"),
        alreadyCounted: n("alreadyCounted"),
        skipped: n("skipped"),
        ...(map["next"]?.S === undefined ? {} : { next: JSON.parse(map["next"].S) as Record<string, AttributeValue> }),
    };
}

export class CheckpointStore {
    constructor(
        private readonly config: CounterConfig,
        private readonly dynamodb: DynamoDBClient,
    ) {}

    /** Every checkpoint of `run`, by segment (strongly consistent: a resume must see the last one written). */
    async read(run: string): Promise<Map<number, SegmentCheckpoint>> {
        const found = new Map<number, SegmentCheckpoint>();
        for (const item of await this.items(run)) {
            const checkpoint = fromItem(item);
            if (checkpoint !== undefined) {
                found.set(checkpoint.segment, checkpoint);
            }
        }
        return found;
    }

    /** Saves a segment's checkpoint unless another runner moved it on first (then false: that runner carries it). */
    async save(run: string, checkpoint: SegmentCheckpoint): Promise<boolean> {
        const key = backfillCheckpointKey(this.config, run, checkpoint.segment);
        try {
            await this.dynamodb.send(
                new UpdateItemCommand({
                    TableName: this.config.countersTableName,
                    Key: key,
                    UpdateExpression: "SET #bf = :bf, #exp = :exp",
                    ConditionExpression:
                        checkpoint.pages === 1 ? "attribute_not_exists(#bf) OR #bf.#pages < :pages" : "#bf.#pages < :pages",
                    ExpressionAttributeNames: { "#bf": CHECKPOINT_ATTRIBUTE, "#pages": "pages", "#exp": EXPIRES_ATTRIBUTE },
                    ExpressionAttributeValues: {
                        ":bf": toItem(checkpoint),
                        ":pages": { N: String(checkpoint.pages) },
                        ":exp": { N: String(Math.floor(Date.now() / 1000) + CHECKPOINT_TTL_SECONDS) },
                    },
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                }),
            );
            return true;
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                // The same page count stored: this very write landed and its answer was lost.
                return (error.Item === undefined ? undefined : fromItem(error.Item))?.pages === checkpoint.pages;
            }
            throw error;
        }
    }

    /** Removes every checkpoint of `run` (the run is complete). */
    async remove(run: string): Promise<void> {
        for (const item of await this.items(run)) {
            await this.dynamodb.send(
                new DeleteItemCommand({
                    TableName: this.config.countersTableName,
                    Key: { [this.config.partitionKey]: item[this.config.partitionKey]!, [this.config.sortKey]: item[this.config.sortKey]! },
                }),
            );
        }
    }

    private async items(run: string): Promise<Array<Record<string, AttributeValue>>> {
        const key = backfillCheckpointKey(this.config, run, 0);
        const items: Array<Record<string, AttributeValue>> = [];
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await this.dynamodb.send(
                new QueryCommand({
                    TableName: this.config.countersTableName,
                    ConsistentRead: true,
                    KeyConditionExpression: "#pk = :pk AND begins_with(#sk, :prefix)",
                    ExpressionAttributeNames: { "#pk": this.config.partitionKey, "#sk": this.config.sortKey },
                    ExpressionAttributeValues: {
                        ":pk": key[this.config.partitionKey]!,
                        ":prefix": { S: backfillRunPrefix(this.config, run) },
                    },
                    ...(start === undefined ? {} : { ExclusiveStartKey: start }),
                }),
            );
            items.push(...(page.Items ?? []));
            start = page.LastEvaluatedKey;
        } while (start !== undefined);
        return items;
    }
}
