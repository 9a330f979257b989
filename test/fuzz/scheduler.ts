/**
 * A deterministic scheduler for concurrent histories on DynamoDB Local: the seed alone decides the history.
 *
 * Every DynamoDB request a task sends (the API's callers, the consumer, the redrive, reconciliation, backfill, the
 * settler) stops at a gate inside the SDK's retry loop. The scheduler waits until the system is *quiescent*, then
 * makes ONE move, chosen by a seeded random source: release one waiting request (with a fault decided by the same
 * source), start the next event, or fire a timer of the virtual clock (clock.ts). So the interleaving of requests,
 * every injected fault and every wake-up follow the seed, and a history replays request for request.
 *
 * Quiescent means every branch of every task is stopped: at the gate, asleep on the virtual clock, or finished.
 * A task may run branches in parallel (the settler's shard queries and concurrent heals, the consumer's groups, a
 * sharded read): the scheduler does not count tasks or branches. It waits until (1) no released request and no
 * tracked read (`track`: the stream reads, the checker's own reads a task makes) is in flight, and (2) a turn of
 * the event loop passes in which nothing arrives at the gate, sets a timer or ends. A branch between two gates runs
 * on microtasks alone (every wait is a request, which is in flight, or a timer, which is virtual), and the microtask
 * queue drains before the turn ends: so every branch has reached its next stop before a move is made, however slow
 * the machine. A branch that waited on a real timer or on I/O nobody tracks would break this: none does (the
 * runtime sleeps through runtime/shared/pauses.ts, the SDK's retries through adapter.ts `fuzzRetries`).
 *
 * A request is released only when no released request is still in flight, so the engine serves one released
 * request at a time and between two releases the table is still: an observation made then is exact.
 *
 * A request can also be *held* (`hold`): its task hears a timeout at once, as when the SDK gives up on an
 * attempt, while the very request (signed, as sent) waits; `land` puts every held request back at the gate
 * under its own task, so that DynamoDB applies it late, when the schedule releases it.
 */
import { DynamoDBServiceException, type DynamoDBClient, type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware, HandlerExecutionContext, RetryErrorInfo, RetryStrategyV2, RetryToken } from "@smithy/types";
import { AsyncLocalStorage } from "node:async_hooks";
import { setImmediate as nextTurn } from "node:timers/promises";
import type { VirtualTime } from "./clock";
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
export type GateFault = FaultKind | "late" | "expired";

interface Waiting extends GatedRequest {
    readonly resume: (fault: GateFault | undefined) => void;
    /** The virtual time the request reached the gate: when its attempt was signed and sent. */
    readonly sentAt: number;
}

/** A held request: the attempt its task gave up on, still to reach DynamoDB. */
interface Held extends GatedRequest {
    readonly send: () => Promise<unknown>;
    /** When it was first sent: it lands within the request lifetime of that, or never. */
    readonly sentAt: number;
}

/** What the SDK's HTTP handler throws when an attempt's socket times out (`@smithy/node-http-handler`). */
export function timeoutError(): Error {
    return Object.assign(new Error("the request socket timed out (injected: the attempt is held and lands later)"), {
        name: "TimeoutError",
    });
}

/**
 * What DynamoDB answers a request that reaches it more than the request lifetime after it was signed (heal.ts, A2:
 * a SigV4 signature is refused five minutes after its time stamp): nothing is written, and the SDK does not retry it.
 */
export function signatureExpiredError(): Error {
    return new DynamoDBServiceException({
        name: "InvalidSignatureException",
        $fault: "client",
        $metadata: { httpStatusCode: 400 },
        message: "Signature expired: the request reached DynamoDB more than five minutes after it was signed",
    });
}

export class Scheduler {
    private readonly context = new AsyncLocalStorage<Task>();
    private readonly waiting: Waiting[] = [];
    private readonly held: Held[] = [];
    /** Released requests whose answer has not reached their task yet, and tracked reads under way. */
    private inFlight = 0;
    /** Arrivals at the gate, timers set and tasks ended: a turn in which this does not change moved nothing. */
    private moves = 0;
    private idle: Array<() => void> = [];
    private nextTaskId = 1;
    private live = 0;

    /**
     * @param time the virtual clock: each released request moves it by `latency()` ms, and tasks sleep on it.
     * @param latency the time a released request takes (drawn from the seed).
     */
    constructor(
        readonly time: VirtualTime,
        private readonly latency: () => number = () => 0,
        /** A request released later than this after it reached the gate is refused, as DynamoDB refuses it (A2). */
        private readonly lifetimeMs = Infinity,
    ) {}

    /** Runs `work` as a task: its DynamoDB requests wait for the scheduler. */
    spawn<T>(label: string, work: () => Promise<T>, task: Task = { id: this.nextTaskId++, label }): Promise<T> {
        this.live++;
        return this.context.run(task, async () => {
            try {
                return await work();
            } finally {
                this.live--;
                this.moves++;
            }
        });
    }

    /** Tasks started and not finished. */
    get tasks(): number {
        return this.live;
    }

    /** The task the calling code runs in, if any. */
    current(): Task | undefined {
        return this.context.getStore();
    }

    /** The requests waiting at the gate, oldest first. */
    get pending(): readonly GatedRequest[] {
        return this.waiting;
    }

    /** Sleeps `ms` on the virtual clock: the schedule fires the timer (`fireTimer`). */
    sleep(ms: number): Promise<void> {
        this.moves++;
        return this.time.sleep(ms);
    }

    /**
     * Fires a due timer, or when `jump` and no timer is due, moves the clock to the earliest and fires it. False when
     * nothing was fired.
     */
    fireTimer(jump: boolean): boolean {
        return this.time.fireDue() || (jump && this.time.fireNext());
    }

    /** Resolves once every branch of every task is stopped at the gate, asleep or finished (see the top). */
    async quiescent(): Promise<void> {
        for (;;) {
            while (this.inFlight > 0) {
                await new Promise<void>((resolve) => this.idle.push(resolve));
            }
            const before = this.moves;
            await nextTurn();
            if (this.inFlight === 0 && this.moves === before) {
                return;
            }
        }
    }

    /**
     * Counts every request `client` sends as in flight until it is answered, without gating it: a read whose answer
     * a task waits for (the stream's records, the checker's own reads), so no move is made while it is under way.
     */
    track(client: { middlewareStack: { add: (middleware: any, options: { step: "initialize"; name: string }) => void } }): void {
        client.middlewareStack.add(
            (next: (args: unknown) => Promise<unknown>) => async (args: unknown) => {
                this.inFlight++;
                try {
                    return await next(args);
                } finally {
                    this.inFlight--;
                    this.moves++;
                    this.wake();
                }
            },
            { step: "initialize", name: "fuzzTracked" },
        );
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
                    this.pass(h.command, h.input, h.send, h.sentAt).then(
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
        this.inFlight++;
        this.time.advance(this.latency());
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
    private async pass(
        command: string,
        input: Record<string, unknown>,
        send: () => Promise<unknown>,
        firstSent?: number,
    ): Promise<unknown> {
        const task = this.context.getStore()!;
        this.moves++;
        const sentAt = firstSent ?? this.time.now();
        const fault = await new Promise<GateFault | undefined>((resume) => this.waiting.push({ task, command, input, resume, sentAt }));
        const expired = this.time.now() - sentAt > this.lifetimeMs;
        const released: Released = { task, command, input, fault: expired ? "expired" : fault, served: false };
        try {
            if (expired) {
                throw signatureExpiredError();
            }
            if (fault === "late") {
                this.held.push({ task, command, input, send, sentAt });
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
            this.moves++;
            this.wake();
        }
    }

    private wake(): void {
        if (this.inFlight === 0) {
            const idle = this.idle;
            this.idle = [];
            for (const resolve of idle) {
                resolve();
            }
        }
    }
}

/**
 * The SDK's standard retry decisions (retry throttling, transient and server errors, up to `maxAttempts`) and its
 * backoff (full jitter, 100 ms base, 500 ms for throttling, capped at 20 s), slept on the virtual clock through
 * `sleep` (the SDK itself is told 0 ms, so it sets no timer of its own); no retry quota. Deterministic for the same
 * sequence of errors and the same seeded `Math.random`.
 */
export function fuzzRetries(sleep: (ms: number) => Promise<void>, maxAttempts = 3): RetryStrategyV2 {
    const token = (count: number): RetryToken => ({ getRetryCount: () => count, getRetryDelay: () => 0 });
    return {
        acquireInitialRetryToken: async () => token(0),
        refreshRetryTokenForRetry: async (previous: RetryToken, error: RetryErrorInfo) => {
            const retryable = error.errorType === "THROTTLING" || error.errorType === "TRANSIENT" || error.errorType === "SERVER_ERROR";
            if (!retryable || previous.getRetryCount() + 1 >= maxAttempts) {
                throw new Error("no retry");
            }
            const base = error.errorType === "THROTTLING" ? 500 : 100;
            await sleep(Math.random() * Math.min(20_000, base * 2 ** previous.getRetryCount()));
            return token(previous.getRetryCount() + 1);
        },
        recordSuccess: () => undefined,
    };
}
