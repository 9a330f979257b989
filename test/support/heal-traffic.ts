/**
 * Staged races on DynamoDB Local: every request a watched DynamoDB client sends waits at a gate until the test lets it
 * through, so the test decides the order in which the parties' requests reach the engine and looks at the tables
 * between two of them, while nothing is in flight.
 *
 * - `run(work)` starts one party's work (a client call, a heal, a loop of them) as a task; its requests wait.
 * - `next(label)` waits for a request; `pin(label)` also keeps it waiting; `until(label)` lets the others (but the
 *   pinned) through in their order until that one arrives.
 * - `release(request, fault?)` lets it reach the engine, or fails it as DynamoDB would (refused before it is served,
 *   or served and its answer lost, which the SDK retries), or keeps it on the wire to land later (`late`).
 * - `quiet()` waits until every unfinished task waits at the gate: the tables then hold still.
 *
 * The gate sits in the SDK's deserialize step, inside its retry loop (as local/engine/faults.ts does): a request the
 * SDK retries comes to the gate again. Requests are labelled by what the counter means by them (`labelOf`).
 */
import {
    DynamoDBServiceException,
    InternalServerError,
    ProvisionedThroughputExceededException,
    type DynamoDBClient,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware, HandlerExecutionContext } from "@smithy/types";
import type { CounterConfig } from "../../runtime/shared/config";

/** What the counter means by a request (see `labelOf`). */
export type Label =
    | "put"
    | "read item"
    | "claim"
    | "unclaim"
    | "soft delete"
    | "remove item"
    | "flag"
    | "+1"
    | "-1"
    | "read generation"
    | "mark due"
    | "relist"
    | "read items"
    | "read shard"
    | "read counters"
    | "read due"
    | "heal write"
    | "read caps"
    | "write caps"
    | "read limits"
    | "due keys"
    | "other";

export interface Request {
    readonly party: string;
    readonly command: string;
    readonly input: Record<string, any>;
    readonly label: Label;
    /** The virtual time (Date.now) it reached the gate. */
    readonly arrivedAt: number;
}

/**
 * How a released request meets the engine: "refuse" (a 400 before it is served: nothing written), "throttle" (the
 * same, as throttling, which a client repeats), "lose" (served, its answer replaced by a 500: the SDK retries what it
 * may), "late" (not sent now: the caller sees a 500, and `landLate` sends it later, as a request still on the wire).
 */
export type Fault = "refuse" | "throttle" | "lose" | "late";

export interface Released {
    /** The engine's answer, or its error (a fault's error for "refuse", "throttle", "lose"). */
    readonly error?: unknown;
    readonly output?: unknown;
    /** For "late": sends the request now; resolves with the engine's error, if any. */
    readonly landLate?: () => Promise<unknown>;
}

interface Waiting extends Request {
    go(fault: Fault | undefined): Promise<Released>;
}

/** The error DynamoDB gives a request it refuses as written (an access denied: not repeated by anyone). */
export function refusal(): Error {
    return new DynamoDBServiceException({
        name: "AccessDeniedException",
        $fault: "client",
        $metadata: { httpStatusCode: 400 },
        message: "refused by the test",
    });
}

const throttling = () =>
    new ProvisionedThroughputExceededException({ $metadata: { httpStatusCode: 400 }, message: "throttled by the test" });
const lostAnswer = () =>
    new InternalServerError({ $metadata: { httpStatusCode: 500 }, message: "Internal server error (answer lost by the test)" });

export class Traffic {
    private readonly waiting: Waiting[] = [];
    /** Requests the test keeps waiting: `until` lets others through, never these. */
    private readonly pinned = new Set<Request>();
    private readonly arrivals: Array<() => void> = [];
    private inFlight = 0;
    private tasks = 0;
    private finished = 0;
    /** Every request released, in order, with its fault and the error it met. */
    readonly log: Array<{ readonly party: string; readonly label: Label; readonly fault?: Fault; error?: string }> = [];

    constructor(private readonly config: CounterConfig) {}

    /** Holds every request `client` sends, as party `party`. */
    watch(client: DynamoDBClient, party: string): void {
        const gate: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context: HandlerExecutionContext) => (args) =>
            new Promise((resolve, reject) => {
                const command = context.commandName ?? "";
                const input = args.input as Record<string, any>;
                const label = labelOf(this.config, command, input);
                const send = () => next(args);
                this.waiting.push({
                    party,
                    command,
                    input,
                    label,
                    arrivedAt: Date.now(),
                    go: (fault) => this.go({ party, label }, send, fault, resolve, reject),
                });
                this.wake();
            });
        client.middlewareStack.add(gate, { step: "deserialize", name: "heal-traffic-gate", priority: "high" });
    }

    /** Sends a released request (or fails it: see Fault) and settles its caller's promise. */
    private async go<T extends { output?: unknown }>(
        request: { readonly party: string; readonly label: Label },
        send: () => Promise<T>,
        fault: Fault | undefined,
        resolve: (value: T) => void,
        reject: (error: unknown) => void,
    ): Promise<Released> {
        this.inFlight++;
        const entry: (typeof this.log)[number] = { ...request, ...(fault === undefined ? {} : { fault }) };
        this.log.push(entry);
        try {
            if (fault === "refuse" || fault === "throttle" || fault === "late") {
                const error = fault === "refuse" ? refusal() : fault === "throttle" ? throttling() : lostAnswer();
                reject(error);
                return fault === "late"
                    ? {
                          error,
                          landLate: () =>
                              send().then(
                                  () => undefined,
                                  (e: unknown) => e,
                              ),
                      }
                    : { error };
            }
            try {
                const output = await send();
                const error = fault === "lose" ? lostAnswer() : undefined;
                if (error === undefined) {
                    resolve(output);
                } else {
                    reject(error);
                }
                return { output: output.output, ...(error === undefined ? {} : { error }) };
            } catch (error) {
                entry.error = (error as Error).name;
                reject(error);
                return { error };
            }
        } finally {
            // Let the caller's continuation run before the step counts as over.
            await new Promise((r) => setImmediate(r));
            this.inFlight--;
            this.wake();
        }
    }

    /** Starts `work` as a task whose requests the gate holds. */
    run<T>(work: () => Promise<T>): Promise<T> {
        this.tasks++;
        const done = work();
        done.then(
            () => this.taskDone(),
            () => this.taskDone(),
        );
        return done;
    }

    /** Requests waiting at the gate, oldest first. */
    get pending(): readonly Request[] {
        return this.waiting;
    }

    /** Tasks not finished yet. */
    get running(): number {
        return this.tasks - this.finished;
    }

    /** Waits for a waiting request matching `match` (a label, or a test), without releasing anything. */
    async next(match: Label | ((r: Request) => boolean), from?: string): Promise<Request> {
        const test = matcher(match, from);
        return this.waitFor(() => this.waiting.find(test), `a request ${describe(match, from)}`);
    }

    /** Waits for a request matching `match` and keeps it waiting until `release` (see `until`). */
    async pin(match: Label | ((r: Request) => boolean), from?: string): Promise<Request> {
        const request = await this.next(match, from);
        this.pinned.add(request);
        return request;
    }

    /**
     * Releases, in their order of arrival, the requests (of `from`, when given) that do not match, until one that does
     * arrives; returns it, still waiting.
     */
    async until(match: Label | ((r: Request) => boolean), from?: string): Promise<Request> {
        const test = matcher(match, from);
        for (;;) {
            const found = this.waiting.find(test);
            if (found !== undefined) {
                return found;
            }
            const free = (r: Request) => !this.pinned.has(r) && (from === undefined || r.party === from);
            const other = this.waiting.find(free);
            if (other !== undefined) {
                await this.release(other);
                continue;
            }
            await this.waitFor(() => this.waiting.find((r) => free(r) || test(r)), `a request ${describe(match, from)}`);
        }
    }

    /** Lets `request` through (see Fault); resolves once its answer came back and its caller went on. */
    async release(request: Request, fault?: Fault): Promise<Released> {
        const at = this.waiting.indexOf(request as Waiting);
        if (at < 0) {
            throw new Error(`${request.party} ${request.label} is not waiting at the gate`);
        }
        this.waiting.splice(at, 1);
        this.pinned.delete(request);
        return (request as Waiting).go(fault);
    }

    /** Releases `label`'s next request (of `from`), letting the others through until it comes. */
    async step(match: Label | ((r: Request) => boolean), from?: string, fault?: Fault): Promise<Released> {
        return this.release(await this.until(match, from), fault);
    }

    /** Lets every request through, in their order, until every task is done. */
    async drain(): Promise<void> {
        for (;;) {
            const next = await this.waitFor<Request | "done">(
                () => this.waiting[0] ?? (this.running === 0 ? "done" : undefined),
                "a request or the end of every task",
            );
            if (next === "done") {
                return;
            }
            await this.release(next);
        }
    }

    /** Waits until nothing is in flight and every unfinished task waits at the gate (or is done). */
    async quiet(timeoutMs = 60_000): Promise<void> {
        const until = performance.now() + timeoutMs;
        for (let stable = 0; stable < 3;) {
            await this.waitFor(
                () => (this.inFlight === 0 && this.waiting.length >= this.running ? true : undefined),
                "every task at the gate",
                Math.max(0, until - performance.now()),
            );
            const seen = this.waiting.length;
            await new Promise((r) => setTimeout(r, 2));
            stable = this.inFlight === 0 && this.waiting.length === seen && seen >= this.running ? stable + 1 : 0;
        }
    }

    /** The last `n` requests released, as `party label (fault) -> error`. */
    recent(n: number): string {
        return this.log
            .slice(-n)
            .map(
                (e) =>
                    `${e.party} ${e.label}${e.fault === undefined ? "" : ` (${e.fault})`}${e.error === undefined ? "" : ` -> ${e.error}`}`,
            )
            .join(", ");
    }

    private taskDone(): void {
        this.finished++;
        this.wake();
    }

    private wake(): void {
        for (const wake of this.arrivals.splice(0)) {
            wake();
        }
    }

    private async waitFor<T>(find: () => T | undefined, what: string, timeoutMs = 60_000): Promise<T> {
        const until = performance.now() + timeoutMs;
        for (;;) {
            const found = find();
            if (found !== undefined) {
                return found;
            }
            if (performance.now() > until) {
                throw new Error(
                    `waited ${timeoutMs} ms for ${what}; waiting: ${this.waiting.map((r) => `${r.party} ${r.label}`).join(", ") || "none"}; ${this.inFlight} in flight; ${this.running} tasks running; released: ${this.recent(12)}`,
                );
            }
            await new Promise<void>((resolve) => {
                const timer = setTimeout(resolve, 250);
                this.arrivals.push(() => {
                    clearTimeout(timer);
                    resolve();
                });
            });
        }
    }
}

function matcher(match: Label | ((r: Request) => boolean), from: string | undefined): (r: Request) => boolean {
    const test = typeof match === "string" ? (r: Request) => r.label === match : match;
    return (r) => (from === undefined || r.party === from) && test(r);
}

function describe(match: Label | ((r: Request) => boolean), from: string | undefined): string {
    return `${typeof match === "string" ? `"${match}"` : "matching"}${from === undefined ? "" : ` of ${from}`}`;
}

/** What the counter means by a request, from its shape (runtime/client/, runtime/heal/, runtime/limits/). */
export function labelOf(config: CounterConfig, command: string, input: Record<string, any>): Label {
    const onItems =
        input.TableName === config.tableName &&
        !String(input.Key?.[config.sortKey]?.S ?? input.ExpressionAttributeValues?.[":sk"]?.S ?? "").startsWith(config.counterPrefix);
    const sortKey = String(input.Key?.[config.sortKey]?.S ?? input.ExpressionAttributeValues?.[":sk"]?.S ?? "");
    const update = String(input.UpdateExpression ?? "");
    switch (command) {
        case "PutItemCommand":
            return onItems ? "put" : "other";
        case "DeleteItemCommand":
            return onItems ? "remove item" : "other";
        case "GetItemCommand":
            return onItems ? "read item" : input.ProjectionExpression === "#g" ? "read generation" : "other";
        case "BatchGetItemCommand":
            return "read limits";
        case "TransactGetItemsCommand":
            return "read caps";
        case "TransactWriteItemsCommand":
            return "write caps";
        case "QueryCommand":
            if (input.IndexName !== undefined) {
                return "due keys";
            }
            if (input.TableName === config.tableName && input.KeyConditionExpression === "#pk = :pk") {
                return "read items";
            }
            if (String(input.KeyConditionExpression).includes("begins_with")) {
                return "read counters";
            }
            return sortKey.endsWith("best-effort") ? "read shard" : sortKey.endsWith("eventual") ? "read due" : "other";
        case "UpdateItemCommand":
            if (onItems) {
                return update.startsWith("SET #deleteToken")
                    ? "claim"
                    : update.startsWith("REMOVE #deleteToken")
                      ? "unclaim"
                      : update.startsWith("SET #deleted")
                        ? "soft delete"
                        : update.startsWith("SET #selFlag")
                          ? "flag"
                          : "other";
            }
            if (sortKey.endsWith("eventual")) {
                return update.includes(":hh") ? "mark due" : update.includes("#hh") ? "relist" : "other";
            }
            if (update.startsWith("ADD #c :corr")) {
                return "heal write";
            }
            if (input.ExpressionAttributeValues?.[":d"]?.N === "1") {
                return "+1";
            }
            return input.ExpressionAttributeValues?.[":d"]?.N === "-1" ? "-1" : "other";
        default:
            return "other";
    }
}

/** Refuses (with `refusal()`, nothing written) every request of `client` that `match` picks, until `stop()`. */
export function refuseRequests(
    client: DynamoDBClient,
    config: CounterConfig,
    match: (label: Label, input: Record<string, any>) => boolean,
): { readonly refused: Label[]; stop(): void } {
    const refused: Label[] = [];
    let on = true;
    const refuse: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> =
        (next, context: HandlerExecutionContext) => async (args) => {
            const label = labelOf(config, context.commandName ?? "", args.input as Record<string, any>);
            if (on && match(label, args.input as Record<string, any>)) {
                refused.push(label);
                throw refusal();
            }
            return next(args);
        };
    client.middlewareStack.add(refuse, { step: "deserialize", name: `heal-refusals-${Math.random()}`, priority: "high" });
    return {
        refused,
        stop: () => {
            on = false;
        },
    };
}
