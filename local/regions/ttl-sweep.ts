/**
 * DynamoDB's TTL on one replica, which DynamoDB Local does not run: a sweep deletes the replica's copy of every item
 * whose TTL attribute (epoch seconds) has passed by the replica's own clock. Each delete is conditional on the value
 * the sweep read (an item rewritten meanwhile stays), and shows in the replica's stream like any write, so the
 * replicator sends it to every other region (local/regions/replicator.ts), as a global table's TTL delete is
 * replicated: any region whose copy expired deletes the item everywhere, last writer wins.
 */
import {
    ConditionalCheckFailedException,
    DeleteItemCommand,
    DescribeTableCommand,
    ScanCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";

export interface TtlSweepOptions {
    /** The replica's engine (the sweep is the service's own work: no parity layer, no faults). */
    readonly dynamodb: DynamoDBClient;
    readonly table: string;
    /** The TTL attribute: a number of epoch seconds. */
    readonly attribute: string;
    /** The replica's clock (ms). @default Date.now */
    readonly now?: () => number;
}

export class TtlSweep {
    /** Items this sweep deleted. */
    deleted = 0;
    private readonly now: () => number;

    constructor(private readonly options: TtlSweepOptions) {
        this.now = options.now ?? Date.now;
    }

    /** One pass over the table; resolves how many items it deleted. */
    async sweep(): Promise<number> {
        const { dynamodb, table, attribute } = this.options;
        const seconds = Math.floor(this.now() / 1000);
        let deleted = 0;
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await dynamodb.send(
                new ScanCommand({
                    TableName: table,
                    FilterExpression: "#ttl < :now",
                    ExpressionAttributeNames: { "#ttl": attribute },
                    ExpressionAttributeValues: { ":now": { N: String(seconds) } },
                    ...(start === undefined ? {} : { ExclusiveStartKey: start }),
                }),
            );
            for (const item of page.Items ?? []) {
                deleted += (await this.expire(item)) ? 1 : 0;
            }
            start = page.LastEvaluatedKey;
        } while (start !== undefined);
        this.deleted += deleted;
        return deleted;
    }

    /** Deletes an expired item unless it changed since the scan read it. */
    private async expire(item: Record<string, AttributeValue>): Promise<boolean> {
        const { dynamodb, table, attribute } = this.options;
        const keys = await this.keysOf(item);
        try {
            await dynamodb.send(
                new DeleteItemCommand({
                    TableName: table,
                    Key: keys,
                    ConditionExpression: "#ttl = :seen",
                    ExpressionAttributeNames: { "#ttl": attribute },
                    ExpressionAttributeValues: { ":seen": item[attribute]! },
                }),
            );
            return true;
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                return false;
            }
            throw error;
        }
    }

    private keyNames: string[] | undefined;

    /** The item's key attributes (the table's key schema, described once). */
    private async keysOf(item: Record<string, AttributeValue>): Promise<Record<string, AttributeValue>> {
        if (this.keyNames === undefined) {
            const description = await this.options.dynamodb.send(new DescribeTableCommand({ TableName: this.options.table }));
            this.keyNames = (description.Table?.KeySchema ?? []).map((k) => k.AttributeName!);
        }
        return Object.fromEntries(this.keyNames.map((name) => [name, item[name]!]));
    }
}
