/** Two tables (resource items, counter items) on DynamoDB Local, a model client on a fake clock, and probes. */
import { GetItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { queryPartition } from "../../runtime/heal/partition";
import {
    COUNTER_ATTRIBUTES as A,
    DEFAULT_LAYOUT,
    bestEffortSortKey,
    countersTable,
    type CounterTableConfig,
} from "../../runtime/shared/config";
import { isLive } from "../../runtime/shared/selection";
import type { LocalEngine } from "../../local/engine/engine";
import { createCounterTable, createCountersTable as createTable } from "../../local/engine/table";

let tables = 0;

/** Creates the counters table as the component does: same key names, plus the sparse GSI "heal-index". */
export async function createCountersTable(dynamodb: DynamoDBClient, tableName: string): Promise<void> {
    await createTable(dynamodb, tableName, undefined, { healIndex: true });
}

/**
 * A user table and a counters table. With `sameTable` the counter items live in the user table (one
 * consistent Query then observes both), and the user table carries the GSI.
 */
export async function healTables(engine: LocalEngine, options: { sameTable?: boolean } = {}): Promise<CounterTableConfig> {
    const dynamodb = engine.dynamodb();
    const id = `${++tables}-${process.pid}`;
    if (options.sameTable) {
        const tableName = `heal-same-${id}`;
        await createCountersTable(dynamodb, tableName);
        return { ...DEFAULT_LAYOUT, tableName, countersTableName: tableName };
    }
    const tableName = `heal-items-${id}`;
    const countersTableName = `heal-counters-${id}`;
    await createCounterTable(dynamodb, tableName);
    await createCountersTable(dynamodb, countersTableName);
    return { ...DEFAULT_LAYOUT, tableName, countersTableName };
}

export interface Probe {
    readonly bestEffort: number;
    readonly live: number;
    readonly version?: number;
    readonly healDue: boolean;
}

/** Reads best-effort and the live items of a key (consistent reads, nothing else running in staged tests). */
export async function probe(dynamodb: DynamoDBClient, config: CounterTableConfig, key: string): Promise<Probe> {
    const be = await dynamodb.send(
        new GetItemCommand({
            TableName: countersTable(config),
            Key: { [config.partitionKey]: { S: key }, [config.sortKey]: { S: bestEffortSortKey(config) } },
            ConsistentRead: true,
        }),
    );
    const items = await queryPartition(dynamodb, { tableName: config.tableName, partitionKey: config.partitionKey, key });
    const live = items.filter((item) => isLive(item, config)).length;
    const version = be.Item?.[A.version]?.N;
    return {
        bestEffort: Number(be.Item?.[config.countAttribute]?.N ?? 0),
        live,
        ...(version === undefined ? {} : { version: Number(version) }),
        healDue: be.Item?.[A.healShard] !== undefined,
    };
}

/** A gate a model-client call waits at; `open()` lets it go on. */
export function gate(): { wait: Promise<void>; open: () => void; reached: Promise<void>; arrive: () => void } {
    let open!: () => void;
    let arrive!: () => void;
    const wait = new Promise<void>((resolve) => (open = resolve));
    const reached = new Promise<void>((resolve) => (arrive = resolve));
    return { wait, open, reached, arrive };
}
