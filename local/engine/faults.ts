/**
 * Fault injection through SDK middleware, with the real error shapes DynamoDB returns.
 *
 * DynamoDB Local never throws TransactionConflictException, throttling errors or 5xx, so the tests,
 * the local twin and the benchmark inject them. The middleware sits in the deserialize step, inside
 * the SDK's retry loop, like a fault on the wire: the SDK retries what it would retry in production.
 */
import {
    InternalServerError,
    ProvisionedThroughputExceededException,
    TransactionCanceledException,
    TransactionConflictException,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
    type TransactWriteItemsCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware, HandlerExecutionContext } from "@smithy/types";

export type FaultKind =
    /** TransactionConflictException on a plain write; TransactionCanceledException [TransactionConflict] on a transaction. */
    | "conflict"
    /** ProvisionedThroughputExceededException (throttling), before the request is served. */
    | "throttle"
    /** HTTP 500 before the request reaches the table: nothing was written. */
    | "500-before"
    /** HTTP 500 after the request was served: the write committed, the response is lost. */
    | "500-after";

export const FAULT_KINDS: readonly FaultKind[] = ["conflict", "throttle", "500-before", "500-after"];

const WRITES = new Set(["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand", "TransactWriteItemsCommand"]);
const READS = new Set(["GetItemCommand", "QueryCommand", "BatchGetItemCommand"]);

export interface FaultOptions {
    /** Probability in [0, 1] that one attempt of a covered command fails. */
    readonly rate: number;
    readonly kinds?: readonly FaultKind[];
    /** Seeded random source, so a run can be repeated. */
    readonly random: () => number;
    /** Reads get throttle and 500-before faults too. @default true */
    readonly reads?: boolean;
}

export interface FaultStats {
    injected: Record<FaultKind, number>;
    /** The current fault probability; set it to change the rate while the client is in use. */
    rate: number;
}

/** Deterministic PRNG (mulberry32). */
export function seededRandom(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

const metadata = (httpStatusCode: number) => ({ httpStatusCode, requestId: "injected-fault", attempts: 1, totalRetryDelay: 0 });

function conflictError(commandName: string, input: unknown): Error {
    if (commandName === "TransactWriteItemsCommand") {
        const count = (input as TransactWriteItemsCommandInput).TransactItems?.length ?? 1;
        // DynamoDB names the conflicting action and reports "None" for the others.
        const reasons = Array.from({ length: count }, (_, i) =>
            i === 0 ? { Code: "TransactionConflict", Message: "Transaction is ongoing for the item" } : { Code: "None" },
        );
        return new TransactionCanceledException({
            $metadata: metadata(400),
            message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(", ")}]`,
            CancellationReasons: reasons,
        });
    }
    return new TransactionConflictException({
        $metadata: metadata(400),
        message: "Transaction is ongoing for the item",
    });
}

const throttleError = () =>
    new ProvisionedThroughputExceededException({
        $metadata: metadata(400),
        message: "The level of configured provisioned throughput for the table was exceeded.",
    });

const serverError = () => new InternalServerError({ $metadata: metadata(500), message: "Internal server error" });

/** The error DynamoDB would return for an injected fault of `kind` on `commandName`. */
export function faultError(kind: FaultKind, commandName: string, input: unknown): Error {
    switch (kind) {
        case "conflict":
            return conflictError(commandName, input);
        case "throttle":
            return throttleError();
        case "500-before":
        case "500-after":
            return serverError();
    }
}

/** Adds the fault middleware to a client. Returns live counts of what was injected, and the rate to adjust. */
export function injectFaults(client: DynamoDBClient, options: FaultOptions): FaultStats {
    const kinds = options.kinds ?? FAULT_KINDS;
    const stats: FaultStats = { injected: { conflict: 0, throttle: 0, "500-before": 0, "500-after": 0 }, rate: options.rate };
    if (!(options.rate >= 0 && options.rate <= 1)) {
        throw new Error(`[rate] must be between 0 and 1 (got ${options.rate})`);
    }
    const middleware: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> =
        (next, context: HandlerExecutionContext) => async (args) => {
            const name = context.commandName ?? "";
            const isWrite = WRITES.has(name);
            const isRead = (options.reads ?? true) && READS.has(name);
            if ((!isWrite && !isRead) || options.random() >= stats.rate) {
                return next(args);
            }
            const eligible = kinds.filter((k) => isWrite || k === "throttle" || k === "500-before");
            if (eligible.length === 0) {
                return next(args);
            }
            const kind = eligible[Math.floor(options.random() * eligible.length)]!;
            stats.injected[kind]++;
            switch (kind) {
                case "conflict":
                    throw conflictError(name, args.input);
                case "throttle":
                    throw throttleError();
                case "500-before":
                    throw serverError();
                case "500-after": {
                    await next(args);
                    throw serverError();
                }
            }
        };
    client.middlewareStack.add(middleware, { step: "deserialize", name: "hybridCounterFaults", priority: "high" });
    return stats;
}
