/**
 * Faults of one API call, for the harnesses that need a call to die between its writes or to lose one write: SDK
 * middleware on the API's DynamoDB client that knows which call each request belongs to (the call runs inside
 * `run`, and Node's AsyncLocalStorage carries it through every await, timer and retry of the client).
 *
 * - A call that dies sends nothing from its death on: every later request of it fails before it is sent, as if its
 *   process had stopped there. The harness discards its outcome (a dead process hears nothing).
 * - A failed write is answered with DynamoDB's HTTP 500 (local/engine/faults.ts) before it reaches the table, and the
 *   call goes on.
 * Where a call dies or fails is the caller's rule (`decide`, `after`): bench/busy-heal-plan.ts places them by the
 * client's order of writes, and counts the drift each one leaves when it happens (`onDrift`).
 *
 * The middleware also records, for every call, when each write of a user's item or of a best-effort item answered
 * success, per counter key (`writes`): a key is busy while those follow each other closely.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { AttributeValue, DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import type { CounterConfig } from "../../runtime/shared/config";
import { shardOfPartitionKey } from "../../runtime/shared/keys";
import { parseCounterSortKey } from "../../runtime/client/read";
import { faultError } from "../engine/faults";

/** What a request is, for the rules. */
export interface CallRequest {
    readonly target: "items" | "best-effort" | "other";
    readonly write: boolean;
    /** A write that takes a unit off a count (a value of its update below 0: a release, a decrement). */
    readonly lowers: boolean;
    /** The counter key it belongs to, when it names one. */
    readonly key: string | undefined;
}

/** A call's state the rules read: its own fields, plus what its requests did so far. */
export interface CallState<F> {
    readonly fault: F;
    /** Writes of the user's items that succeeded, and best-effort writes that lowered the count since the last of them. */
    itemWrites: number;
    bestEffortSinceItem: number;
    dead: boolean;
}

export interface CallFaultRules<F> {
    /** Before a request is sent: send it, fail it (HTTP 500, nothing written) or die there; with the drift that makes. */
    decide(call: CallState<F>, request: CallRequest): { action: "send" | "die" | "fail"; drift: number };
    /** After a request succeeded: whether the call dies now (nothing more of it is sent), with the drift that makes. */
    after(call: CallState<F>, request: CallRequest): { dies: boolean; drift: number };
    /** A fault made `drift` units of drift on `key` (called when it happens). */
    onDrift(key: string | undefined, drift: number): void;
}

/** The error a dead call's requests get; it never reaches a caller (the harness discards a dead call's outcome). */
export class CallDiedError extends Error {
    override name = "CallDiedError";
}

const WRITES = new Set(["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand", "TransactWriteItemsCommand"]);

type Keyed = {
    TableName?: string;
    Key?: Record<string, AttributeValue>;
    Item?: Record<string, AttributeValue>;
    ExpressionAttributeValues?: Record<string, AttributeValue>;
};

/** Faults per call on one API client, and the instants each key was written. */
export class CallFaults<F> {
    private readonly calls = new AsyncLocalStorage<CallState<F>>();
    /** Per counter key, the instants its client writes answered success, in order. */
    readonly writes = new Map<string, number[]>();

    constructor(
        private readonly layout: CounterConfig,
        private readonly rules: CallFaultRules<F>,
    ) {}

    /** Adds the middleware to the API's client (outside the SDK's retries: a failed write is not repeated by it). */
    attach(client: DynamoDBClient): void {
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const request = this.describe(context.commandName ?? "", args.input);
            const call = this.calls.getStore();
            if (call !== undefined) {
                const { action, drift } = this.rules.decide(call, request);
                if (action !== "send") {
                    if (drift > 0) {
                        this.rules.onDrift(request.key, drift);
                    }
                    if (action === "die") {
                        call.dead = true;
                        throw new CallDiedError("the call's process died before sending this request");
                    }
                    throw faultError("500-before", context.commandName ?? "", args.input);
                }
            }
            const result = await next(args);
            if (request.write && request.target !== "other" && request.key !== undefined) {
                let at = this.writes.get(request.key);
                if (at === undefined) {
                    at = [];
                    this.writes.set(request.key, at);
                }
                at.push(Date.now());
            }
            if (call !== undefined && request.write) {
                const { dies, drift } = this.rules.after(call, request);
                if (request.target === "items") {
                    call.itemWrites++;
                    call.bestEffortSinceItem = 0;
                } else if (request.target === "best-effort" && request.lowers) {
                    call.bestEffortSinceItem++;
                }
                if (dies) {
                    call.dead = true;
                    if (drift > 0) {
                        this.rules.onDrift(request.key, drift);
                    }
                }
            }
            return result;
        };
        client.middlewareStack.add(middleware, { step: "initialize", name: "hybridCounterCallFaults", priority: "high" });
    }

    /** Runs one call with `fault`; `dead` is true when its process died (its result or error is the harness's to drop). */
    async run<T>(fault: F, call: () => Promise<T>): Promise<{ dead: boolean; result?: T; error?: unknown }> {
        const state: CallState<F> = { fault, itemWrites: 0, bestEffortSinceItem: 0, dead: false };
        try {
            const result = await this.calls.run(state, call);
            return { dead: state.dead, result };
        } catch (error) {
            return { dead: state.dead, error };
        }
    }

    private describe(commandName: string, input: unknown): CallRequest {
        const write = WRITES.has(commandName);
        const transact = (input as { TransactItems?: Array<Record<string, Keyed | undefined>> }).TransactItems;
        const targets: Keyed[] = transact
            ? transact.flatMap((t) => Object.values(t).filter((v): v is Keyed => v !== undefined))
            : [input as Keyed];
        let found: CallRequest = { target: "other", write, lowers: false, key: undefined };
        for (const t of targets) {
            const at = t.Key ?? t.Item;
            const partition = at?.[this.layout.partitionKey]?.S;
            const lowers = write && Object.values(t.ExpressionAttributeValues ?? {}).some((v) => v.N !== undefined && Number(v.N) < 0);
            const sortKey = at?.[this.layout.sortKey]?.S;
            if (
                t.TableName === this.layout.countersTableName &&
                sortKey !== undefined &&
                parseCounterSortKey(this.layout.counterPrefix, sortKey)?.kind === "best-effort"
            ) {
                return {
                    target: "best-effort",
                    write,
                    lowers,
                    key: partition === undefined ? undefined : shardOfPartitionKey(partition).key,
                };
            }
            if (t.TableName === this.layout.tableName) {
                found = { target: "items", write, lowers, key: partition };
            }
        }
        return found;
    }
}
