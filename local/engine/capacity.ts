/**
 * Measures the write capacity a DynamoDB client consumes.
 *
 * Standard writes: ReturnConsumedCapacity, as the engine reports it (1 WCU per KB written).
 * Transactions: DynamoDB bills each item of a TransactWriteItems at 2 WCU per KB (prepare + commit),
 * but DynamoDB Local reports a flat figure for a whole transaction, whatever its size. Behind the
 * parity layer (local/engine/parity.ts) the reported figure is DynamoDB's bill; without it, `billed` counts
 * at least 2 WCU per transactional action, so figures measured locally read as they would on the
 * bill for items under 1 KB; `reported` is what the engine (or the parity layer) said.
 *
 * A conditional write DynamoDB refuses still consumes a write unit (per KB of the item), and is billed
 * here as one. Index writes are in the reported figure: DynamoDB Local bills them on single writes and
 * the parity layer on transactions. Writes sent inside `attributeTo(kind, ...)` are also summed per kind
 * (an async context follows the call through its retries), so concurrent calls are told apart.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { ConsumedCapacity, DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";

const callKind = new AsyncLocalStorage<string>();

/** Runs `work` with its writes attributed to `kind` by every meter (see `CapacityMeter.byKind`). */
export function attributeTo<T>(kind: string, work: () => Promise<T>): Promise<T> {
    return callKind.run(kind, work);
}

const WRITES = new Set(["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand", "TransactWriteItemsCommand"]);

export interface CapacityMeter {
    /** Write units as DynamoDB would bill them. */
    billed: number;
    /** Write units as the engine reported them. */
    reported: number;
    writes: number;
    /** Billed write units of the writes sent inside `attributeTo(kind, ...)`, per kind. */
    byKind: Map<string, number>;
}

export function meterWrites(client: DynamoDBClient): CapacityMeter {
    const meter: CapacityMeter = { billed: 0, reported: 0, writes: 0, byKind: new Map() };
    const bill = (units: number) => {
        meter.billed += units;
        const kind = callKind.getStore();
        if (kind !== undefined) {
            meter.byKind.set(kind, (meter.byKind.get(kind) ?? 0) + units);
        }
    };
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const name = context.commandName ?? "";
        if (!WRITES.has(name)) {
            return next(args);
        }
        const input = args.input as { ReturnConsumedCapacity?: string };
        if (input.ReturnConsumedCapacity === undefined || input.ReturnConsumedCapacity === "NONE") {
            args = { ...args, input: { ...args.input, ReturnConsumedCapacity: "TOTAL" } as ServiceInputTypes };
        }
        let result;
        try {
            result = await next(args);
        } catch (error) {
            if ((error as Error).name === "ConditionalCheckFailedException") {
                meter.writes++;
                bill(1);
            }
            throw error;
        }
        const consumed = (result.output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }).ConsumedCapacity;
        const units = (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []).reduce((n, c) => n + (c.CapacityUnits ?? 0), 0);
        meter.writes++;
        meter.reported += units;
        const actions = (args.input as { TransactItems?: unknown[] }).TransactItems?.length ?? 0;
        bill(name === "TransactWriteItemsCommand" ? Math.max(2 * actions, units) : units);
        return result;
    };
    client.middlewareStack.add(middleware, { step: "initialize", name: "hybridCounterCapacityMeter", priority: "low" });
    return meter;
}
