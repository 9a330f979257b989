/**
 * The parity layer: a small HTTP proxy in front of DynamoDB Local that enforces what DynamoDB
 * enforces and DynamoDB Local does not, with the service's own error shapes on the wire.
 *
 * Invariant: a request the proxy lets through reaches DynamoDB Local unchanged but for
 * ReturnConsumedCapacity (asked for, then removed from the answer when the caller had not asked);
 * a request it refuses never reaches the engine. What it adds:
 *
 * - TransactWriteItems of more than 100 actions: the service's validation message (DynamoDB Local
 *   refuses them too, with another message).
 * - TransactWriteItems whose items add up to more than 4 MB, counting the stored item of every
 *   Update, Delete and ConditionCheck (read from the engine) and the item each Update leaves.
 *   DynamoDB Local counts only the request's payload, so 12 flag flips on 390 KB items pass there.
 * - Per-partition-key throughput: 1,000 WCU/s and 3,000 RCU/s per partition key value, as token
 *   buckets (local/engine/parity-model.ts); a harness may scale a table's rates down, or meter a table
 *   per item (`metering`). Raises ThrottlingException on an on-demand table,
 *   ProvisionedThroughputExceededException on a provisioned one, and a TransactionCanceledException
 *   with a ThrottlingError reason for a transaction. The SDK retries them as it would against AWS.
 * - Transactional capacity: 2 write units per item per KB of the item's larger image, plus the writes
 *   each action makes to the table's global secondary indexes (standard writes: an entry added, removed,
 *   or moved as a delete and a put), reported in the transaction's ConsumedCapacity (DynamoDB Local
 *   reports one flat figure). Single-item writes keep DynamoDB Local's own figure, which bills index
 *   writes the same way (test/parity.test.ts proves both).
 * - Transaction conflicts (local/engine/transaction-window.ts): a plain write of an item an ongoing
 *   TransactWriteItems includes gets TransactionConflictException, a transaction meeting another one on an item, or
 *   a TransactGetItems meeting any write of one of its items, a TransactionCanceledException with
 *   TransactionConflict reasons. `holdTransactions` keeps a transaction open for a test
 *   (test/parity-conflicts.test.ts).
 *
 * What DynamoDB Local already enforces with the service's messages is left to it, and the tests
 * prove it: the 400 KB item size for PutItem, UpdateItem (including attributes an update adds) and
 * transaction actions, and the 4 MB request payload.
 *
 * A partition key value stands for its partition: real partitions hold many keys, so this is the
 * most a single key can get, never less. Scans and index queries are not metered per key, nor are
 * Queries on a table metered per item.
 */
import {
    createServer,
    request as httpRequest,
    Agent,
    type IncomingHttpHeaders,
    type IncomingMessage,
    type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { crc32 } from "node:zlib";
import {
    itemSize,
    MESSAGES,
    PARTITION_BUCKET_SECONDS,
    PARTITION_READ_UNITS_PER_SECOND,
    PARTITION_WRITE_UNITS_PER_SECOND,
    readUnits,
    TokenBucket,
    TRANSACTION_MAX_ACTIONS,
    TRANSACTION_MAX_BYTES,
    applyUpdateExpression,
    meteredUnit,
    indexWriteUnits,
    updatedItemSize,
    writeUnits,
    type IndexSchema,
    type Item,
    type TableMetering,
} from "./parity-model";
import {
    conflictReasons,
    CONFLICT_MESSAGE,
    IN_PROGRESS_MESSAGE,
    TransactionWindow,
    type PendingTransaction,
    type TransactionHold,
} from "./transaction-window";

export interface ParityOptions {
    /** @default 1000 */
    readonly partitionWriteUnitsPerSecond?: number;
    /** @default 3000 */
    readonly partitionReadUnitsPerSecond?: number;
    /** Depth of each partition's bucket, in seconds of its rate. @default 1 */
    readonly bucketSeconds?: number;
    /** The clock (milliseconds), for tests. @default Date.now */
    readonly now?: () => number;
    /**
     * The metering of a table, where it is not the default (the rates above, per partition key value):
     * scaled-down rates, or a bucket per item (parity-model.ts, `TableMetering`). Asked when a table's
     * bucket is first needed, so a harness may name its tables after the layer has started.
     * @default every table: the rates above, per partition key value
     */
    readonly metering?: (table: string) => Partial<TableMetering> | undefined;
}

export interface ParityStats {
    /** Data-plane requests the layer inspected (every SDK attempt counts). */
    requests: number;
    /** Requests throttled by a partition's bucket, by kind. */
    throttled: { reads: number; writes: number; transactions: number };
    /** Throttled requests per partition key value (`table/key`). */
    throttledByKey: Map<string, number>;
    /** Write units consumed per partition key value (`table/key`), as DynamoDB would meter them. */
    writeUnitsByKey: Map<string, number>;
    /** Requests refused for a limit DynamoDB Local does not enforce. */
    refused: { transactionTooLarge: number; tooManyActions: number };
    /** Transactions whose ConsumedCapacity was rewritten to what DynamoDB bills. */
    transactionsBilled: number;
    /** Write units transactions spent on global secondary indexes (included in their ConsumedCapacity). */
    transactionIndexWriteUnits: number;
    /** Requests passed through unchecked because the engine refused the layer's own read (a missing table). */
    unchecked: number;
    /** Requests refused for meeting an ongoing write (transaction-window.ts): plain writes, transactions, TransactGetItems. */
    conflicts: { writes: number; transactions: number; reads: number };
}

export interface ParityProxy {
    /** Where clients connect: every DynamoDB and DynamoDB Streams call goes through here. */
    readonly endpoint: string;
    readonly stats: ParityStats;
    readonly limits: { partitionWriteUnitsPerSecond: number; partitionReadUnitsPerSecond: number; bucketSeconds: number };
    /** The tables metered otherwise than `limits` per partition key value (`ParityOptions.metering`), as first metered. */
    readonly metered: ReadonlyMap<string, TableMetering>;
    /**
     * Keeps the next TransactWriteItems `match` accepts open (its items held, the engine not yet asked) until the
     * hold's `release()`: what a request meets while the engine applies a transaction, staged without timing.
     */
    holdTransactions(match: (transaction: PendingTransaction) => boolean): TransactionHold;
    stop(): Promise<void>;
}

interface TableInfo {
    hashKey: string;
    rangeKey?: string;
    onDemand: boolean;
    arn: string;
    indexes: IndexSchema[];
}

type Json = Record<string, unknown>;

const DATA_PLANE = "DynamoDB_20120810.";
const JSON_TYPE = "application/x-amz-json-1.0";

class ServiceError {
    constructor(
        readonly type: string,
        readonly body: Json,
        readonly status = 400,
    ) {}
}

/** A transaction (write or get) cancelled for meeting ongoing writes: one reason per action, in order. */
function cancelledFor(conflicts: readonly boolean[]): ServiceError {
    const reasons = conflictReasons(conflicts);
    return new ServiceError("TransactionCanceledException", {
        Message: MESSAGES.transactionCancelled(reasons.map((r) => r.Code)),
        CancellationReasons: reasons,
    });
}

/** The engine refused one of the layer's own calls (a table that does not exist): the request goes through as sent. */
class EngineRefusal extends Error {}

/** One line for reports: whether the layer is on, and what it enforced. */
export function describeParity(proxy: ParityProxy | undefined): string {
    if (!proxy) {
        return "parity layer: off (DynamoDB Local's own limits only)";
    }
    const { stats, limits } = proxy;
    const throttled = stats.throttled.reads + stats.throttled.writes + stats.throttled.transactions;
    return (
        `parity layer: on (${limits.partitionWriteUnitsPerSecond} WCU/s, ${limits.partitionReadUnitsPerSecond} RCU/s per partition key; ` +
        [...proxy.metered]
            .map(([table, m]) => `${table}: ${m.writeUnitsPerSecond} WCU/s, ${m.readUnitsPerSecond} RCU/s per ${m.per}; `)
            .join("") +
        `4 MB / 100 actions per transaction; transactions billed 2 WCU per KB per item): ` +
        `${throttled} of ${stats.requests} requests throttled (${stats.throttled.writes} writes, ${stats.throttled.transactions} transactions, ` +
        `${stats.throttled.reads} reads), ${stats.refused.transactionTooLarge + stats.refused.tooManyActions} transactions refused, ` +
        `${stats.conflicts.writes + stats.conflicts.transactions + stats.conflicts.reads} transaction conflicts raised ` +
        `(${stats.conflicts.writes} plain writes, ${stats.conflicts.transactions} transactions, ${stats.conflicts.reads} TransactGetItems)`
    );
}

/** Starts the proxy on a free 127.0.0.1 port, in front of `upstream` (DynamoDB Local's endpoint). */
export async function startParityProxy(upstream: string, options: ParityOptions = {}): Promise<ParityProxy> {
    const limits = {
        partitionWriteUnitsPerSecond: options.partitionWriteUnitsPerSecond ?? PARTITION_WRITE_UNITS_PER_SECOND,
        partitionReadUnitsPerSecond: options.partitionReadUnitsPerSecond ?? PARTITION_READ_UNITS_PER_SECOND,
        bucketSeconds: options.bucketSeconds ?? PARTITION_BUCKET_SECONDS,
    };
    const now = options.now ?? Date.now;
    const target = new URL(upstream);
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    const stats: ParityStats = {
        requests: 0,
        throttled: { reads: 0, writes: 0, transactions: 0 },
        throttledByKey: new Map(),
        writeUnitsByKey: new Map(),
        refused: { transactionTooLarge: 0, tooManyActions: 0 },
        transactionsBilled: 0,
        transactionIndexWriteUnits: 0,
        unchecked: 0,
        conflicts: { writes: 0, transactions: 0, reads: 0 },
    };
    const window = new TransactionWindow();
    const tables = new Map<string, Promise<TableInfo>>();
    const writeBuckets = new Map<string, TokenBucket>();
    const readBuckets = new Map<string, TokenBucket>();

    const send = (headers: IncomingHttpHeaders, body: Buffer): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> =>
        new Promise((resolve, reject) => {
            const forwarded: Record<string, string | string[]> = {};
            for (const [name, value] of Object.entries(headers)) {
                if (value !== undefined && !["host", "content-length", "connection", "transfer-encoding"].includes(name)) {
                    forwarded[name] = value;
                }
            }
            forwarded["content-length"] = String(body.length);
            const req = httpRequest(
                { host: target.hostname, port: target.port, path: "/", method: "POST", headers: forwarded, agent },
                (res: IncomingMessage) => {
                    const chunks: Buffer[] = [];
                    res.on("data", (c: Buffer) => chunks.push(c));
                    res.on("end", () => resolve({ status: res.statusCode ?? 500, headers: res.headers, body: Buffer.concat(chunks) }));
                    res.on("error", reject);
                },
            );
            req.on("error", reject);
            req.end(body);
        });

    /** A call of the proxy's own to the engine (reading items, describing tables): never metered. */
    const call = async (operation: string, input: Json): Promise<Json> => {
        const response = await send(
            {
                "x-amz-target": `${DATA_PLANE}${operation}`,
                "content-type": JSON_TYPE,
                // DynamoDB Local reads the credential scope, not the signature.
                authorization:
                    "AWS4-HMAC-SHA256 Credential=hybridcounterlocal/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
            },
            Buffer.from(JSON.stringify(input)),
        );
        const parsed = JSON.parse(response.body.toString("utf8") || "{}") as Json;
        if (response.status !== 200) {
            throw new EngineRefusal(`${operation} failed: ${String(parsed.message ?? parsed.Message ?? response.status)}`);
        }
        return parsed;
    };

    const tableInfo = (name: string): Promise<TableInfo> => {
        let info = tables.get(name);
        if (!info) {
            info = call("DescribeTable", { TableName: name }).then((d) => {
                type KeySchema = Array<{ AttributeName: string; KeyType: string }>;
                const table = d.Table as {
                    KeySchema: KeySchema;
                    BillingModeSummary?: { BillingMode?: string };
                    ProvisionedThroughput?: { WriteCapacityUnits?: number };
                    TableArn: string;
                    GlobalSecondaryIndexes?: Array<{
                        IndexName: string;
                        KeySchema: KeySchema;
                        Projection?: { ProjectionType?: string; NonKeyAttributes?: string[] };
                    }>;
                };
                const hash = (schema: KeySchema) => schema.find((k) => k.KeyType === "HASH")!.AttributeName;
                const range = (schema: KeySchema) => schema.find((k) => k.KeyType === "RANGE")?.AttributeName;
                const tableKeys = [hash(table.KeySchema), ...(range(table.KeySchema) ? [range(table.KeySchema)!] : [])];
                return {
                    indexes: (table.GlobalSecondaryIndexes ?? []).map((index) => ({
                        name: index.IndexName,
                        hashKey: hash(index.KeySchema),
                        rangeKey: range(index.KeySchema),
                        projection: (index.Projection?.ProjectionType ?? "ALL") as IndexSchema["projection"],
                        projected: index.Projection?.NonKeyAttributes ?? [],
                        tableKeys,
                    })),
                    hashKey: table.KeySchema.find((k) => k.KeyType === "HASH")!.AttributeName,
                    rangeKey: table.KeySchema.find((k) => k.KeyType === "RANGE")?.AttributeName,
                    onDemand:
                        table.BillingModeSummary?.BillingMode === "PAY_PER_REQUEST" ||
                        (table.ProvisionedThroughput?.WriteCapacityUnits ?? 0) === 0,
                    arn: table.TableArn,
                };
            });
            info.catch(() => tables.delete(name));
            tables.set(name, info);
        }
        return info;
    };

    /** A table's metering: the layer's rates per partition key value, unless `options.metering` says otherwise. */
    const metered = new Map<string, TableMetering>();
    const meteringOf = (table: string): TableMetering => {
        const own = options.metering?.(table);
        const metering: TableMetering = {
            writeUnitsPerSecond: limits.partitionWriteUnitsPerSecond,
            readUnitsPerSecond: limits.partitionReadUnitsPerSecond,
            per: "partition",
            ...own,
        };
        if (own !== undefined && !metered.has(table)) {
            metered.set(table, metering);
        }
        return metering;
    };
    const bucket = (buckets: Map<string, TokenBucket>, key: string, rate: () => number): TokenBucket => {
        let b = buckets.get(key);
        if (!b) {
            b = new TokenBucket(rate(), limits.bucketSeconds, now());
            buckets.set(key, b);
        }
        return b;
    };
    /** The bucket of a metered unit (`partitionKey`'s answer) of `table`. */
    const writeBucket = (table: string, key: string) => bucket(writeBuckets, key, () => meteringOf(table).writeUnitsPerSecond);
    const consumeWrite = (table: string, key: string, units: number) => {
        writeBucket(table, key).consume(units, now());
        stats.writeUnitsByKey.set(key, (stats.writeUnitsByKey.get(key) ?? 0) + units);
    };
    const readBucket = (table: string, key: string) => bucket(readBuckets, key, () => meteringOf(table).readUnitsPerSecond);
    /** The unit an item is metered on: its partition key value, or the item itself on a table metered per item. */
    const partitionKey = (table: string, info: TableInfo, item: Item | undefined): string | undefined => {
        return meteredUnit(
            table,
            meteringOf(table).per,
            item?.[info.hashKey],
            info.rangeKey === undefined ? undefined : item?.[info.rangeKey],
        );
    };
    const noteThrottle = (key: string) => stats.throttledByKey.set(key, (stats.throttledByKey.get(key) ?? 0) + 1);

    const throttleError = (info: TableInfo, kind: "Read" | "Write"): ServiceError => {
        const reasons = [{ reason: `Table${kind}KeyRangeThroughputExceeded`, resource: info.arn }];
        return info.onDemand
            ? new ServiceError("ThrottlingException", { message: MESSAGES.onDemandThrottled, throttlingReasons: reasons })
            : new ServiceError("ProvisionedThroughputExceededException", {
                  message: MESSAGES.provisionedThrottled,
                  ThrottlingReasons: reasons,
              });
    };

    /** Forwards, asking for the consumed capacity; returns the parsed answer and whether to strip it. */
    const forwardMetered = async (headers: IncomingHttpHeaders, input: Json) => {
        const asked = input.ReturnConsumedCapacity !== undefined && input.ReturnConsumedCapacity !== "NONE";
        const body = Buffer.from(JSON.stringify(asked ? input : { ...input, ReturnConsumedCapacity: "TOTAL" }));
        const response = await send(headers, body);
        return { response, asked };
    };

    const consumedUnits = (output: Json): number => {
        const consumed = output.ConsumedCapacity as { CapacityUnits?: number } | Array<{ CapacityUnits?: number }> | undefined;
        return (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []).reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
    };

    /** Sends an engine answer back, without ConsumedCapacity when the caller had not asked for it. */
    const reply = (res: ServerResponse, response: { status: number; headers: IncomingHttpHeaders; body: Buffer }, output?: Json): void => {
        const body = output === undefined ? response.body : Buffer.from(JSON.stringify(output));
        const headers: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(response.headers)) {
            if (value !== undefined && !["content-length", "connection", "transfer-encoding", "x-amz-crc32"].includes(name)) {
                headers[name] = value;
            }
        }
        headers["content-length"] = String(body.length);
        // The SDK verifies DynamoDB's CRC32 of the body.
        headers["x-amz-crc32"] = String(crc32(body) >>> 0);
        res.writeHead(response.status, headers);
        res.end(body);
    };

    const replyError = (res: ServerResponse, error: ServiceError): void => {
        const body = Buffer.from(JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${error.type}`, ...error.body }));
        res.writeHead(error.status, {
            "content-type": JSON_TYPE,
            "content-length": String(body.length),
            "x-amzn-requestid": `parity-${Math.random().toString(36).slice(2)}`,
            "x-amz-crc32": String(crc32(body) >>> 0),
        });
        res.end(body);
    };

    /** A plain single-key request (PutItem, UpdateItem, DeleteItem, GetItem, Query). */
    const singleKey = async (res: ServerResponse, headers: IncomingHttpHeaders, operation: string, input: Json): Promise<void> => {
        const table = input.TableName as string;
        const info = await tableInfo(table);
        const write = operation !== "GetItem" && operation !== "Query";
        let key: string | undefined;
        if (operation === "Query") {
            key = input.IndexName === undefined ? queryPartition(table, info, input) : undefined;
        } else {
            key = partitionKey(table, info, (operation === "PutItem" ? input.Item : input.Key) as Item | undefined);
        }
        if (key !== undefined) {
            const b = write ? writeBucket(table, key) : readBucket(table, key);
            if (!b.admits(now())) {
                stats.throttled[write ? "writes" : "reads"]++;
                noteThrottle(key);
                return replyError(res, throttleError(info, write ? "Write" : "Read"));
            }
        }
        let released: (() => void) | undefined;
        if (write) {
            const item = (operation === "PutItem" ? input.Item : input.Key) as Item | undefined;
            released = item === undefined ? () => undefined : window.openWrite([identity(table, info, item)]);
            if (released === undefined) {
                stats.conflicts.writes++;
                return replyError(res, new ServiceError("TransactionConflictException", { message: CONFLICT_MESSAGE }));
            }
        }
        const { response, asked } = await forwardMetered(headers, input).finally(released);
        if (response.status !== 200) {
            if (key !== undefined && write) {
                // A refused conditional write still consumes a write unit.
                consumeWrite(table, key, 1);
            }
            return reply(res, response);
        }
        const output = JSON.parse(response.body.toString("utf8")) as Json;
        if (key !== undefined) {
            if (write) {
                consumeWrite(table, key, consumedUnits(output));
            } else {
                readBucket(table, key).consume(consumedUnits(output), now());
            }
        }
        if (!asked) {
            delete output.ConsumedCapacity;
        }
        reply(res, response, output);
    };

    /** A Query's partition, metered as one read; none on a table metered per item (a Query reads many of its units). */
    const queryPartition = (table: string, info: TableInfo, input: Json): string | undefined => {
        if (meteringOf(table).per === "item") {
            return undefined;
        }
        const expression = input.KeyConditionExpression as string | undefined;
        const names = (input.ExpressionAttributeNames ?? {}) as Record<string, string>;
        const values = (input.ExpressionAttributeValues ?? {}) as Record<string, unknown>;
        for (const clause of (expression ?? "").split(/\bAND\b/i)) {
            const m = /^\s*\(?\s*([#\w]+)\s*=\s*(:\w+)\s*\)?\s*$/.exec(clause);
            if (m && (m[1]!.startsWith("#") ? names[m[1]!] : m[1]) === info.hashKey && values[m[2]!] !== undefined) {
                return `${table}/${JSON.stringify(values[m[2]!])}`;
            }
        }
        return undefined;
    };

    /** Reads the stored items a transaction's actions name (consistently, unmetered). */
    const readItems = async (keys: Array<{ table: string; key: Item }>): Promise<Map<string, Item>> => {
        const found = new Map<string, Item>();
        let pending: Record<string, { Keys: Item[]; ConsistentRead: boolean }> = {};
        for (const { table, key } of keys) {
            (pending[table] ??= { Keys: [], ConsistentRead: true }).Keys.push(key);
        }
        while (Object.keys(pending).length > 0) {
            const output = await call("BatchGetItem", { RequestItems: pending });
            for (const [table, items] of Object.entries((output.Responses ?? {}) as Record<string, Item[]>)) {
                const info = await tableInfo(table);
                for (const item of items) {
                    found.set(identity(table, info, item), item);
                }
            }
            pending = (output.UnprocessedKeys ?? {}) as typeof pending;
        }
        return found;
    };
    const identity = (table: string, info: TableInfo, item: Item): string =>
        `${table}/${JSON.stringify(item[info.hashKey])}/${info.rangeKey ? JSON.stringify(item[info.rangeKey]) : ""}`;

    const transactWrite = async (res: ServerResponse, headers: IncomingHttpHeaders, input: Json): Promise<void> => {
        const actions = (input.TransactItems ?? []) as Array<Record<string, Json>>;
        if (actions.length > TRANSACTION_MAX_ACTIONS) {
            stats.refused.tooManyActions++;
            return replyError(res, new ServiceError("ValidationException", { message: MESSAGES.tooManyActions(actions.length) }));
        }
        const parsed = await Promise.all(
            actions.map(async (action) => {
                const [kind, body] = Object.entries(action)[0] ?? ["", {}];
                const table = body.TableName as string;
                const info = await tableInfo(table);
                const item = (kind === "Put" ? body.Item : body.Key) as Item | undefined;
                // A Put names its item by the key attributes of its Item.
                const key: Item | undefined = item && {
                    [info.hashKey]: item[info.hashKey]!,
                    ...(info.rangeKey ? { [info.rangeKey]: item[info.rangeKey]! } : {}),
                };
                return { kind, body, table, info, key };
            }),
        );
        const stored = await readItems(parsed.flatMap((p) => (p.key ? [{ table: p.table, key: p.key }] : [])));
        // What each action leaves, for its index writes: undefined for a removal (or an update the layer cannot
        // evaluate, whose index entries are then taken as unchanged).
        const indexUnits = parsed.map((p): Array<[string, number]> => {
            if (p.info.indexes.length === 0 || p.kind === "ConditionCheck") {
                return [];
            }
            const current = p.key ? stored.get(identity(p.table, p.info, p.key)) : undefined;
            const after =
                p.kind === "Put"
                    ? (p.body.Item as Item)
                    : p.kind === "Delete"
                      ? undefined
                      : applyUpdateExpression(
                            current,
                            p.key ?? {},
                            (p.body.UpdateExpression as string | undefined) ?? "",
                            p.body.ExpressionAttributeNames as Record<string, string> | undefined,
                            p.body.ExpressionAttributeValues as Item | undefined,
                        );
            if (p.kind === "Update" && after === undefined) {
                return [];
            }
            return p.info.indexes.map((index) => [index.name, indexWriteUnits(index, current, after)]);
        });
        const sizes = parsed.map((p) => {
            const current = p.key ? stored.get(identity(p.table, p.info, p.key)) : undefined;
            const before = itemSize(current);
            const after =
                p.kind === "Put"
                    ? itemSize(p.body.Item as Item)
                    : p.kind === "Update"
                      ? updatedItemSize(
                            current,
                            p.key ?? {},
                            p.body.UpdateExpression as string | undefined,
                            p.body.ExpressionAttributeNames as Record<string, string> | undefined,
                            p.body.ExpressionAttributeValues as Item | undefined,
                        )
                      : before;
            return Math.max(before, after);
        });
        const aggregate = sizes.reduce((a, b) => a + b, 0);
        if (aggregate > TRANSACTION_MAX_BYTES) {
            stats.refused.transactionTooLarge++;
            return replyError(res, new ServiceError("ValidationException", { message: MESSAGES.transactionTooLarge }));
        }
        const at = now();
        const keys = parsed.map((p) => (p.key ? partitionKey(p.table, p.info, p.key) : undefined));
        const throttled = keys.map((k, i) => k !== undefined && !writeBucket(parsed[i]!.table, k).admits(at));
        if (throttled.some(Boolean)) {
            stats.throttled.transactions++;
            const reasons = parsed.map((p, i) =>
                throttled[i]
                    ? p.info.onDemand
                        ? { Code: "ThrottlingError", Message: MESSAGES.onDemandThrottled }
                        : { Code: "ProvisionedThroughputExceeded", Message: MESSAGES.provisionedThrottled }
                    : { Code: "None" },
            );
            keys.forEach((k, i) => throttled[i] && k !== undefined && noteThrottle(k));
            return replyError(
                res,
                new ServiceError("TransactionCanceledException", {
                    Message: MESSAGES.transactionCancelled(reasons.map((r) => r.Code)),
                    CancellationReasons: reasons,
                }),
            );
        }
        // A token the engine already answered is answered from its record: it meets no conflict (transaction-window.ts).
        const token = input.ClientRequestToken as string | undefined;
        const replayed = token === undefined ? "new" : window.tokenState(token, now());
        if (replayed === "pending") {
            return replyError(res, new ServiceError("TransactionInProgressException", { message: IN_PROGRESS_MESSAGE }));
        }
        let response: Awaited<ReturnType<typeof send>>;
        if (replayed === "answered") {
            response = await send(headers, Buffer.from(JSON.stringify(input)));
        } else {
            const named = parsed.map((p, i) => (p.key ? identity(p.table, p.info, p.key) : `unnamed action ${i}`));
            const opened = window.openTransaction(named);
            if ("conflicts" in opened) {
                stats.conflicts.transactions++;
                return replyError(res, cancelledFor(opened.conflicts));
            }
            const answered = token === undefined ? () => undefined : window.tokenSent(token, now);
            response = await window
                .pause({ items: parsed.map((p) => ({ table: p.table, key: p.key ?? {} })) }, named)
                .then(() => send(headers, Buffer.from(JSON.stringify(input))))
                .finally(() => {
                    opened.release();
                    answered();
                });
        }
        if (response.status !== 200) {
            return reply(res, response);
        }
        // Billed as DynamoDB bills it: 2 write units per KB of each item's larger image, and its index writes.
        const perTable = new Map<string, { table: number; indexes: Map<string, number> }>();
        parsed.forEach((p, i) => {
            const units = 2 * writeUnits(sizes[i]!);
            const billed = perTable.get(p.table) ?? { table: 0, indexes: new Map<string, number>() };
            billed.table += units;
            for (const [name, n] of indexUnits[i]!) {
                billed.indexes.set(name, (billed.indexes.get(name) ?? 0) + n);
                stats.transactionIndexWriteUnits += n;
            }
            perTable.set(p.table, billed);
            const k = keys[i];
            if (k !== undefined) {
                consumeWrite(p.table, k, units);
            }
        });
        stats.transactionsBilled++;
        const output = JSON.parse(response.body.toString("utf8") || "{}") as Json;
        const mode = input.ReturnConsumedCapacity;
        if (mode === "TOTAL" || mode === "INDEXES") {
            output.ConsumedCapacity = [...perTable].map(([TableName, units]) => {
                const billed = [...units.indexes].filter(([, n]) => n > 0);
                const total = units.table + billed.reduce((n, [, u]) => n + u, 0);
                return {
                    TableName,
                    CapacityUnits: total,
                    WriteCapacityUnits: total,
                    ...(mode === "INDEXES"
                        ? {
                              Table: { CapacityUnits: units.table, WriteCapacityUnits: units.table },
                              ...(billed.length > 0
                                  ? {
                                        GlobalSecondaryIndexes: Object.fromEntries(
                                            billed.map(([name, n]) => [name, { CapacityUnits: n, WriteCapacityUnits: n }]),
                                        ),
                                    }
                                  : {}),
                          }
                        : {}),
                };
            });
        }
        reply(res, response, output);
    };

    /** Multi-key reads and writes: admitted only if every key they touch has capacity. */
    const batch = async (res: ServerResponse, headers: IncomingHttpHeaders, operation: string, input: Json): Promise<void> => {
        const write = operation === "BatchWriteItem";
        const touched: Array<{ table: string; key: string; info: TableInfo; units: number }> = [];
        if (operation === "TransactGetItems") {
            for (const { Get } of (input.TransactItems ?? []) as Array<{ Get: Json }>) {
                const info = await tableInfo(Get.TableName as string);
                const key = partitionKey(Get.TableName as string, info, Get.Key as Item);
                if (key) touched.push({ table: Get.TableName as string, key, info, units: 2 });
            }
        } else {
            for (const [table, request] of Object.entries((input.RequestItems ?? {}) as Record<string, unknown>)) {
                const info = await tableInfo(table);
                const entries = write
                    ? (request as Array<{ PutRequest?: { Item: Item }; DeleteRequest?: { Key: Item } }>).map((r) => ({
                          item: r.PutRequest?.Item ?? r.DeleteRequest?.Key,
                          units: r.PutRequest ? writeUnits(itemSize(r.PutRequest.Item)) : 1,
                      }))
                    : ((request as { Keys?: Item[] }).Keys ?? []).map((k) => ({ item: k, units: 0.5 }));
                for (const e of entries) {
                    const key = partitionKey(table, info, e.item);
                    if (key) touched.push({ table, key, info, units: e.units });
                }
            }
        }
        const at = now();
        const blocked = touched.find((t) => !(write ? writeBucket(t.table, t.key) : readBucket(t.table, t.key)).admits(at));
        if (blocked) {
            stats.throttled[write ? "writes" : "reads"]++;
            noteThrottle(blocked.key);
            return replyError(res, throttleError(blocked.info, write ? "Write" : "Read"));
        }
        const items = await batchItems(operation, input);
        if (operation === "TransactGetItems") {
            const conflicts = window.readConflicts(items);
            if (conflicts.some(Boolean)) {
                stats.conflicts.reads++;
                return replyError(res, cancelledFor(conflicts));
            }
        }
        const written = write ? window.holdWrite(items) : undefined;
        const response = await send(headers, Buffer.from(JSON.stringify(input))).finally(written);
        if (response.status === 200 && !write) {
            // Reads are billed by what they returned.
            const output = JSON.parse(response.body.toString("utf8") || "{}") as Json;
            const items: Array<{ table: string; item: Item }> =
                operation === "TransactGetItems"
                    ? ((output.Responses ?? []) as Array<{ Item?: Item }>).map((r, i) => ({
                          table: ((input.TransactItems as Array<{ Get: Json }>)[i]!.Get.TableName as string) ?? "",
                          item: r.Item ?? {},
                      }))
                    : Object.entries((output.Responses ?? {}) as Record<string, Item[]>).flatMap(([table, list]) =>
                          list.map((item) => ({ table, item })),
                      );
            for (const { table, item } of items) {
                const info = await tableInfo(table);
                const key = partitionKey(table, info, item);
                if (key)
                    readBucket(table, key).consume(
                        readUnits(itemSize(item), operation === "TransactGetItems") * (operation === "TransactGetItems" ? 2 : 1),
                        now(),
                    );
            }
        } else if (response.status === 200) {
            for (const t of touched) consumeWrite(t.table, t.key, t.units);
        }
        reply(res, response);
    };

    /** The items a TransactGetItems reads or a BatchWriteItem writes, as the transaction window names them. */
    const batchItems = async (operation: string, input: Json): Promise<string[]> => {
        const named: string[] = [];
        if (operation === "TransactGetItems") {
            for (const { Get } of (input.TransactItems ?? []) as Array<{ Get: Json }>) {
                named.push(identity(Get.TableName as string, await tableInfo(Get.TableName as string), Get.Key as Item));
            }
        } else if (operation === "BatchWriteItem") {
            for (const [table, request] of Object.entries((input.RequestItems ?? {}) as Record<string, unknown>)) {
                const info = await tableInfo(table);
                for (const r of request as Array<{ PutRequest?: { Item: Item }; DeleteRequest?: { Key: Item } }>) {
                    named.push(identity(table, info, (r.PutRequest?.Item ?? r.DeleteRequest?.Key)!));
                }
            }
        }
        return named;
    };

    const server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
            const body = Buffer.concat(chunks);
            const targetHeader = String(req.headers["x-amz-target"] ?? "");
            const operation = targetHeader.startsWith(DATA_PLANE) ? targetHeader.slice(DATA_PLANE.length) : "";
            const handle = async (): Promise<void> => {
                if (operation === "CreateTable" || operation === "DeleteTable" || operation === "UpdateTable") {
                    const name = (JSON.parse(body.toString("utf8") || "{}") as Json).TableName as string;
                    tables.delete(name);
                    for (const map of [writeBuckets, readBuckets]) {
                        for (const k of [...map.keys()].filter((k) => k.startsWith(`${name}/`))) map.delete(k);
                    }
                }
                if (
                    ![
                        "PutItem",
                        "UpdateItem",
                        "DeleteItem",
                        "GetItem",
                        "Query",
                        "TransactWriteItems",
                        "TransactGetItems",
                        "BatchGetItem",
                        "BatchWriteItem",
                    ].includes(operation)
                ) {
                    return reply(res, await send(req.headers, body));
                }
                stats.requests++;
                const input = JSON.parse(body.toString("utf8")) as Json;
                if (operation === "TransactWriteItems") {
                    return transactWrite(res, req.headers, input);
                }
                if (operation === "TransactGetItems" || operation.startsWith("Batch")) {
                    return batch(res, req.headers, operation, input);
                }
                return singleKey(res, req.headers, operation, input);
            };
            handle()
                .catch(async (error: unknown) => {
                    if (error instanceof EngineRefusal && !res.headersSent) {
                        // The engine answers the request itself, with its own error (ResourceNotFoundException...).
                        stats.unchecked++;
                        return reply(res, await send(req.headers, body));
                    }
                    throw error;
                })
                .catch((error: unknown) => {
                    // An error of the layer itself: answer as the service does for an internal failure.
                    if (!res.headersSent) {
                        replyError(
                            res,
                            new ServiceError("InternalServerError", { message: `parity layer: ${(error as Error).message}` }, 500),
                        );
                    }
                });
        });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    return {
        endpoint: `http://127.0.0.1:${port}`,
        stats,
        limits,
        metered,
        holdTransactions: (match) => window.hold(match),
        async stop() {
            agent.destroy();
            server.closeAllConnections();
            await new Promise<void>((resolve) => server.close(() => resolve()));
        },
    };
}
