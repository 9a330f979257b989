/**
 * A deterministic scheduler for concurrent histories on DynamoDB Local.
 *
 * Every DynamoDB request a task sends (the API's callers, the consumer, the redrive, reconciliation)
 * stops at a gate inside the SDK's retry loop. The scheduler waits until every task is either stopped
 * at a gate or finished, then releases ONE request, chosen by a seeded random source, with a fault
 * decided by the same source. So the interleaving of requests, and every injected fault, follows the
 * seed. Not exactly: a task that sends requests in parallel (the settler's shard queries and concurrent
 * heals, the consumer's groups) counts as one here, so a branch can still be on its way to its gate when the
 * schedule moves on, and a seed's request count varies by a few percent between runs. Counting each task's
 * pending timers (async_hooks) would close it.
 *
 * Whatever the branches do, a request is released only when no released request is still in flight, so
 * the engine serves one released request at a time and between two releases the table is still: an
 * observation made then is exact. (Counting tasks alone let a parallel section open a window in which two
 * released requests ran at once, and a read taken "between" them saw one and not the other.)
 *
 * A request can also be *held* (`hold`): its task hears a timeout at once, as when the SDK gives up on an
 * attempt, while the very request (signed, as sent) waits; `land` puts every held request back at the gate
 * under its own task, so that DynamoDB applies it late, when the schedule releases it.
 */
import type { DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware, HandlerExecutionContext, RetryErrorInfo, RetryStrategyV2, RetryToken } from "@smithy/types";
import { AsyncLocalStorage } from "node:async_hooks";
import { faultError, type FaultKind } from "../../local/engine/faults";

/** A unit of concurrent work: one API call, one consumer invocation, one redrive, one reconciliation. */
export interface Task {
    readonly id: number;
    readonly label: string;
}

/** One request a task sent, stopped at the gate. */
export interface GatedRequest {
    readonly task: Task;
    readonly command: string;
    readonly input: Record<string, unknown>;
}

/** What happened to a released request, for the checker. */
export interface Released extends GatedRequest {
    /** The fault injected, if it took effect (a 500 after a request the engine refused is just the refusal). */
    fault: GateFault | undefined;
    /** True when the engine served the request successfully (even if a 500 after it was then injected). */
    served: boolean;
    /** Set once the request has run: its output, or the error the engine (or the fault) gave. */
    outcome?: { output?: unknown; error?: unknown };
}

/** What a released request meets: a fault, or "late" (held: the caller times out, the request waits for `land`). */
export type GateFault = FaultKind | "late";

interface Waiting extends GatedRequest {
    readonly resume: (fault: GateFault | undefined) => void;
}

/** A held request: the attempt its task gave up on, still to reach DynamoDB. */
interface Held extends GatedRequest {
    readonly send: () => Promise<unknown>;
}

/** What the SDK's HTTP handler throws when an attempt's socket times out (`@smithy/node-http-handler`). */
export function timeoutError(): Error {
    return Object.assign(new Error("the request socket timed out (injected: the attempt is held and lands later)"), {
        name: "TimeoutError",
    });
}

export class Scheduler {
    private readonly context = new AsyncLocalStorage<Task>();
    private readonly waiting: Waiting[] = [];
    private readonly held: Held[] = [];
    private running = 0;
    /** Released requests whose answer has not reached their task yet. */
    private inFlight = 0;
    private idle: Array<() => void> = [];
    private nextTaskId = 1;

    /** Runs `work` as a task: its DynamoDB requests wait for the scheduler. */
    spawn<T>(label: string, work: () => Promise<T>, task: Task = { id: this.nextTaskId++, label }): Promise<T> {
        this.running++;
        return this.context.run(task, async () => {
            try {
                return await work();
            } finally {
                this.running--;
                this.wake();
            }
        });
    }

    /** The task the calling code runs in, if any. */
    current(): Task | undefined {
        return this.context.getStore();
    }

    /** The requests waiting at the gate, oldest first. */
    get pending(): readonly GatedRequest[] {
        return this.waiting;
    }

    /** Resolves once every task is stopped at the gate or finished. */
    async quiescent(): Promise<void> {
        while (this.running > 0 || this.inFlight > 0) {
            await new Promise<void>((resolve) => this.idle.push(resolve));
        }
    }

    /** Requests held past their caller, not yet landed. */
    get heldCount(): number {
        return this.held.length;
    }

    /**
     * Puts every held request back at the gate, each under the task that sent it: the schedule then releases
     * it like any other, and DynamoDB applies it (or refuses it on its condition). Resolves when all have run.
     */
    land(): Promise<void> {
        const landing = this.held.splice(0).map((h) =>
            this.spawn(
                h.task.label,
                () =>
                    this.pass(h.command, h.input, h.send).then(
                        () => undefined,
                        () => undefined,
                    ),
                h.task,
            ),
        );
        return Promise.all(landing).then(() => undefined);
    }

    /** Lets the waiting request at `index` run, with `fault` injected ("late": held, see the top). */
    release(index: number, fault: GateFault | undefined): GatedRequest {
        const [request] = this.waiting.splice(index, 1);
        if (!request) {
            throw new Error(`no waiting request at ${index}`);
        }
        this.running++;
        this.inFlight++;
        request.resume(fault);
        return request;
    }

    /**
     * Puts the gate on a client. Requests sent outside any task (the checker's own reads) pass
     * straight through. `onOutcome` hears of every released request once it has run.
     */
    gate(client: DynamoDBClient, onOutcome: (released: Released) => void): void {
        this.onOutcome = onOutcome;
        const middleware: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> =
            (next, context: HandlerExecutionContext) => async (args) => {
                if (this.context.getStore() === undefined) {
                    return next(args);
                }
                const output = await this.pass(context.commandName ?? "unknown", args.input as Record<string, unknown>, () => next(args));
                return output as Awaited<ReturnType<typeof next>>;
            };
        client.middlewareStack.add(middleware, { step: "deserialize", name: "fuzzGate", priority: "high" });
    }

    private onOutcome: (released: Released) => void = () => undefined;

    /** One request of the current task through the gate: it waits to be released, then meets its fault. */
    private async pass(command: string, input: Record<string, unknown>, send: () => Promise<unknown>): Promise<unknown> {
        const task = this.context.getStore()!;
        this.running--;
        this.wake();
        const fault = await new Promise<GateFault | undefined>((resume) => this.waiting.push({ task, command, input, resume }));
        const released: Released = { task, command, input, fault, served: false };
        try {
            if (fault === "late") {
                this.held.push({ task, command, input, send });
                throw timeoutError();
            }
            if (fault === "conflict" || fault === "throttle" || fault === "500-before") {
                throw faultError(fault, command, input);
            }
            let output: unknown;
            try {
                output = await send();
            } catch (error) {
                released.fault = undefined;
                throw error;
            }
            released.served = true;
            if (fault === "500-after") {
                throw faultError(fault, command, input);
            }
            released.outcome = { output: (output as { output?: unknown }).output };
            return output;
        } catch (error) {
            released.outcome = { error };
            throw error;
        } finally {
            this.onOutcome(released);
            this.inFlight--;
            this.wake();
        }
    }

    private wake(): void {
        if (this.running <= 0 && this.inFlight === 0) {
            const idle = this.idle;
            this.idle = [];
            for (const resolve of idle) {
                resolve();
            }
        }
    }
}

/**
 * The SDK's standard retry decisions (retry throttling, transient and server errors, up to
 * `maxAttempts`) without its backoff sleeps or its retry quota: the schedule, not the clock,
 * decides what runs next. Deterministic for the same sequence of errors.
 */
export function immediateRetries(maxAttempts = 3): RetryStrategyV2 {
    const token = (count: number): RetryToken => ({ getRetryCount: () => count, getRetryDelay: () => 0 });
    return {
        acquireInitialRetryToken: async () => token(0),
        refreshRetryTokenForRetry: async (previous: RetryToken, error: RetryErrorInfo) => {
            const retryable = error.errorType === "THROTTLING" || error.errorType === "TRANSIENT" || error.errorType === "SERVER_ERROR";
            if (!retryable || previous.getRetryCount() + 1 >= maxAttempts) {
                throw new Error("no retry");
            }
            return token(previous.getRetryCount() + 1);
        },
        recordSuccess: () => undefined,
    };
}
