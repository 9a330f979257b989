/**
 * Read and write units a DynamoDB client consumes, per part of the work it does: every request asks for its consumed
 * capacity (ReturnConsumedCapacity TOTAL, the table's and its indexes'), and `classify` names the part it belongs to.
 * A conditional write DynamoDB refuses still consumes a write unit, and is counted as one (as local/engine/capacity.ts
 * bills it). Used where a figure needs reads as well as writes: what the settler's heals cost per key.
 */
import type { ConsumedCapacity, DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";

const WRITES = new Set(["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand", "TransactWriteItemsCommand", "BatchWriteItemCommand"]);
/** The commands that take ReturnConsumedCapacity. */
const METERED = new Set([...WRITES, "GetItemCommand", "QueryCommand", "ScanCommand", "BatchGetItemCommand", "TransactGetItemsCommand"]);

export interface Units {
    read: number;
    write: number;
    requests: number;
}

/** Units per part, as `classify` names them. */
export type UnitMeter = Map<string, Units>;

export function meterUnits(client: DynamoDBClient, classify: (command: string, input: unknown) => string): UnitMeter {
    const meter: UnitMeter = new Map();
    const add = (part: string, write: boolean, units: number) => {
        const entry = meter.get(part) ?? { read: 0, write: 0, requests: 0 };
        meter.set(part, entry);
        entry.requests++;
        entry[write ? "write" : "read"] += units;
    };
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const command = context.commandName ?? "";
        if (!METERED.has(command)) {
            return next(args);
        }
        const part = classify(command, args.input);
        const write = WRITES.has(command);
        let result;
        try {
            result = await next({ ...args, input: { ...args.input, ReturnConsumedCapacity: "TOTAL" } as ServiceInputTypes });
        } catch (error) {
            add(part, write, write && (error as Error).name === "ConditionalCheckFailedException" ? 1 : 0);
            throw error;
        }
        const consumed = (result.output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }).ConsumedCapacity;
        add(
            part,
            write,
            (Array.isArray(consumed) ? consumed : consumed ? [consumed] : []).reduce((n, c) => n + (c.CapacityUnits ?? 0), 0),
        );
        return result;
    };
    client.middlewareStack.add(middleware, { step: "initialize", name: "benchUnitMeter", priority: "low" });
    return meter;
}

/** The units of the parts named, summed. */
export function unitsOf(meter: UnitMeter, parts?: readonly string[]): Units {
    const sum: Units = { read: 0, write: 0, requests: 0 };
    for (const [part, units] of meter) {
        if (parts === undefined || parts.includes(part)) {
            sum.read += units.read;
            sum.write += units.write;
            sum.requests += units.requests;
        }
    }
    return sum;
}
