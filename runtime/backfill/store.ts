/**
 * The adapter between backfill's planner (backfill-plan.ts) and DynamoDB: scans the user table, reads
 * markers, commits the planner's transactions and keeps checkpoints. It decides nothing; every write it
 * makes was built by the planner and carries the planner's conditions.
 */
import {
    BatchGetItemCommand,
    ConditionalCheckFailedException,
    DescribeTableCommand,
    GetItemCommand,
    QueryCommand,
    ScanCommand,
    TransactWriteItemsCommand,
    UpdateItemCommand,
    type AttributeValue,
    type ConsumedCapacity,
    type DynamoDBClient,
    type TransactWriteItem,
} from "@aws-sdk/client-dynamodb";
import { randomUUID } from "node:crypto";
import {
    checkpointFromItem,
    checkpointPartition,
    checkpointSortKey,
    checkpointUpdate,
    markerKey,
    scanProjection,
    type BackfillConfig,
    type SegmentCheckpoint,
} from "./plan";
import { COUNTER_ATTRIBUTES, MARKER_STATE, bestEffortSortKey } from "../shared/config";
import { hasBackfillUnit } from "../shared/strict-ledger";
import { shardCount, shardOfPartitionKey } from "../shards/layout";
import type { Clock } from "../shared/token-bucket";

/** BatchGetItem's limit on keys per request. */
const BATCH_GET_MAX_KEYS = 100;

export interface ScanPage {
    readonly items: Array<Record<string, AttributeValue>>;
    readonly next?: Record<string, AttributeValue>;
    readonly readUnits: number;
}

export interface TableCapacity {
    /** Provisioned read units, undefined for an on-demand table. */
    readonly readUnits?: number;
    readonly writeUnits?: number;
    /** DynamoDB's approximate item count (refreshed about every six hours). */
    readonly itemCount?: number;
}

function units(consumed: ConsumedCapacity | ConsumedCapacity[] | undefined): number {
    const list = Array.isArray(consumed) ? consumed : consumed ? [consumed] : [];
    return list.reduce((sum, c) => sum + (c.CapacityUnits ?? 0), 0);
}

export class BackfillStore {
    constructor(
        private readonly config: BackfillConfig,
        private readonly dynamodb: DynamoDBClient,
        private readonly clock: Clock,
    ) {}

    async capacity(tableName: string): Promise<TableCapacity> {
        const table = (await this.dynamodb.send(new DescribeTableCommand({ TableName: tableName }))).Table;
        const onDemand = table?.BillingModeSummary?.BillingMode === "PAY_PER_REQUEST";
        const read = table?.ProvisionedThroughput?.ReadCapacityUnits;
        const write = table?.ProvisionedThroughput?.WriteCapacityUnits;
        return {
            readUnits: !onDemand && read !== undefined && read > 0 ? read : undefined,
            writeUnits: !onDemand && write !== undefined && write > 0 ? write : undefined,
            itemCount: table?.ItemCount,
        };
    }

    /**
     * Strict mode: the heal epoch of one best-effort item (0 while no heal lowered it), read consistently. Epochs are
     * per shard: `partitionKey` is the shard's (runtime/shards/layout.ts; the key itself when unsharded).
     */
    async epoch(partitionKey: string): Promise<number> {
        const response = await this.dynamodb.send(
            new GetItemCommand({
                TableName: this.config.countersTableName,
                Key: { [this.config.partitionKey]: { S: partitionKey }, [this.config.sortKey]: { S: bestEffortSortKey(this.config) } },
                ConsistentRead: true,
                ProjectionExpression: "#epoch",
                ExpressionAttributeNames: { "#epoch": COUNTER_ATTRIBUTES.epoch },
            }),
        );
        return Number(response.Item?.[COUNTER_ATTRIBUTES.epoch]?.N ?? "0");
    }

    /** One page of one segment, projected to the attributes that decide membership. */
    async scan(
        segment: number,
        totalSegments: number,
        start: Record<string, AttributeValue> | undefined,
        limit: number,
    ): Promise<ScanPage> {
        const projection = scanProjection(this.config);
        const page = await this.dynamodb.send(
            new ScanCommand({
                TableName: this.config.tableName,
                Segment: segment,
                TotalSegments: totalSegments,
                ExclusiveStartKey: start,
                Limit: limit,
                ProjectionExpression: projection.expression,
                ExpressionAttributeNames: projection.names,
                ReturnConsumedCapacity: "TOTAL",
            }),
        );
        return { items: page.Items ?? [], next: page.LastEvaluatedKey, readUnits: units(page.ConsumedCapacity) };
    }

    /**
     * The ids (per counter key) that already have a marker, read eventually consistently: a marker missed
     * here only costs a transaction whose condition then fails. Each marker is read in its shard (`markerKey`)
     * and named by its key, `${counterKey}\0${markerSortKey}`, whatever the shard.
     */
    async markedIds(
        items: ReadonlyArray<{ counterKey: string; id: string }>,
    ): Promise<{ marked: Set<string>; unflagged: Set<string>; readUnits: number }> {
        const marked = new Set<string>();
        const unflagged = new Set<string>();
        let readUnits = 0;
        const { countersTableName, partitionKey, sortKey } = this.config;
        const shards = shardCount(this.config);
        for (let i = 0; i < items.length; i += BATCH_GET_MAX_KEYS) {
            let keys: Array<Record<string, AttributeValue>> = items
                .slice(i, i + BATCH_GET_MAX_KEYS)
                .map((item) => markerKey(this.config, item.counterKey, item.id));
            for (let attempt = 0; keys.length > 0; attempt++) {
                const response = await this.dynamodb.send(
                    new BatchGetItemCommand({
                        RequestItems: {
                            [countersTableName]: {
                                Keys: keys,
                                ProjectionExpression: "#pk, #sk, #state, #be",
                                ExpressionAttributeNames: {
                                    "#pk": partitionKey,
                                    "#sk": sortKey,
                                    "#state": COUNTER_ATTRIBUTES.state,
                                    "#be": COUNTER_ATTRIBUTES.beCounted,
                                },
                            },
                        },
                        ReturnConsumedCapacity: "TOTAL",
                    }),
                );
                readUnits += units(response.ConsumedCapacity);
                for (const marker of response.Responses?.[countersTableName] ?? []) {
                    // A marker no record has reached holds only a client's mark (strict-ledger.ts): no marker yet.
                    if (marker[COUNTER_ATTRIBUTES.state] === undefined) {
                        continue;
                    }
                    const counterKey = shardOfPartitionKey(marker[partitionKey]?.S ?? "", shards).key;
                    const id = `${counterKey}\u0000${marker[sortKey]?.S}`;
                    marked.add(id);
                    if (marker[COUNTER_ATTRIBUTES.state]?.S === MARKER_STATE.counted && !hasBackfillUnit(marker)) {
                        unflagged.add(id);
                    }
                }
                keys = response.UnprocessedKeys?.[countersTableName]?.Keys ?? [];
                if (keys.length > 0) {
                    await this.clock.sleep(Math.min(1_000, 25 * 2 ** attempt));
                }
            }
        }
        return { marked, unflagged, readUnits };
    }

    /**
     * Commits one transaction. `token` makes a resend of the same actions idempotent for ten minutes, so
     * a transaction whose response was lost is not applied twice by DynamoDB (and its conditions would
     * refuse a second application anyway).
     */
    async commit(actions: TransactWriteItem[], token: string = randomUUID()): Promise<{ writeUnits: number }> {
        const response = await this.dynamodb.send(
            new TransactWriteItemsCommand({ TransactItems: actions, ClientRequestToken: token, ReturnConsumedCapacity: "TOTAL" }),
        );
        return { writeUnits: units(response.ConsumedCapacity) };
    }

    /** Every checkpoint of a run, by segment. Strongly consistent: a resume must see the last one written. */
    async checkpoints(runId: string): Promise<Map<number, SegmentCheckpoint>> {
        const { countersTableName, partitionKey, sortKey } = this.config;
        const found = new Map<number, SegmentCheckpoint>();
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await this.dynamodb.send(
                new QueryCommand({
                    TableName: countersTableName,
                    ConsistentRead: true,
                    KeyConditionExpression: "#pk = :pk AND begins_with(#sk, :prefix)",
                    ExpressionAttributeNames: { "#pk": partitionKey, "#sk": sortKey },
                    ExpressionAttributeValues: {
                        ":pk": { S: checkpointPartition(this.config, runId) },
                        ":prefix": { S: checkpointSortKey(this.config, runId, "") },
                    },
                    ExclusiveStartKey: start,
                }),
            );
            for (const item of page.Items ?? []) {
                const checkpoint = checkpointFromItem(item, this.config);
                if (checkpoint) {
                    found.set(checkpoint.segment, checkpoint);
                }
            }
            start = page.LastEvaluatedKey;
        } while (start);
        return found;
    }

    /**
     * Writes a segment's checkpoint unless another runner already wrote a later one for it. Returns false
     * when it was overtaken (that runner carries the segment on).
     */
    async saveCheckpoint(runId: string, checkpoint: SegmentCheckpoint): Promise<{ saved: boolean; writeUnits: number }> {
        try {
            const response = await this.dynamodb.send(
                new UpdateItemCommand({
                    ...checkpointUpdate(this.config, runId, checkpoint, this.clock.now()),
                    ReturnConsumedCapacity: "TOTAL",
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                }),
            );
            return { saved: true, writeUnits: units(response.ConsumedCapacity) };
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                // The same page count means this very write landed and its response was lost (then retried).
                const stored = error.Item ? checkpointFromItem(error.Item, this.config) : undefined;
                return { saved: stored?.pages === checkpoint.pages, writeUnits: 1 };
            }
            throw error;
        }
    }
}
