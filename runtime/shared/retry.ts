/**
 * How the client sends its writes: each HTTP attempt is one `sendOnce` (the SDK's own retries are
 * turned off for it), and every repetition is decided here, by the client, under the call's deadline.
 *
 * Why the SDK may not retry a client write: an SDK retry is invisible to the caller, so it cannot look
 * at the table between two attempts, and it may send an attempt at any time. The client retries only
 * writes that are safe to repeat (recognised by their token, or moving a counter in its mode's safe
 * direction), looks at the table first where a repetition could write a second life of an item, and
 * sends nothing later than the call's deadline (what healing's quiet window rests on).
 */
import type {
    DynamoDBClient,
    PutItemCommand,
    PutItemCommandOutput,
    UpdateItemCommand,
    UpdateItemCommandOutput,
} from "@aws-sdk/client-dynamodb";
import type { FinalizeRequestMiddleware } from "@smithy/types";
import { DeadlineExceededError } from "./errors";
import { pause } from "./pauses";

const BACKOFF_BASE_MS = 10;
const BACKOFF_CAP_MS = 400;

/**
 * The time by which a call must have sent its last write: `ms` after its first write. It starts when
 * the first write asks whether it may be sent.
 */
export class CallDeadline {
    private started: number | undefined;

    /**
     * @param startedAt when the call's clock starts, if before its first write: a create's starts when its token
     * is made, since the heal reads the token's time as the call's start (heal.ts, A1).
     */
    constructor(
        readonly ms: number,
        startedAt?: number,
    ) {
        this.started = startedAt;
    }

    /** True when a write may be sent now (starts the clock on the call's first write). */
    open(): boolean {
        this.started ??= Date.now();
        return Date.now() < this.started + this.ms;
    }

    /** Epoch ms after which no write of the call is sent (Infinity before the first write). */
    get at(): number {
        return this.started === undefined ? Number.POSITIVE_INFINITY : this.started + this.ms;
    }
}

/** Wraps an error so that the SDK's retry strategy does not retry the attempt that raised it. */
class SingleAttemptError extends Error {
    constructor(readonly original: unknown) {
        super("single attempt failed");
        this.name = "SingleAttemptError";
    }
}

/**
 * Sends `command` as exactly one HTTP attempt: a middleware placed after the SDK's retry middleware
 * turns any error into one the SDK does not retry (no retryable trait, status or cause), and it is
 * unwrapped here, so the caller sees DynamoDB's own error.
 */
export async function sendOnce(dynamodb: DynamoDBClient, command: PutItemCommand): Promise<PutItemCommandOutput>;
export async function sendOnce(dynamodb: DynamoDBClient, command: UpdateItemCommand): Promise<UpdateItemCommandOutput>;
export async function sendOnce(
    dynamodb: DynamoDBClient,
    command: PutItemCommand | UpdateItemCommand,
): Promise<PutItemCommandOutput | UpdateItemCommandOutput> {
    const single: FinalizeRequestMiddleware<any, any> = (next) => async (args) => {
        try {
            return await next(args);
        } catch (error) {
            throw new SingleAttemptError(error);
        }
    };
    // A command of its own per attempt: a command sent twice would carry the middleware twice.
    const attempt = new (command.constructor as new (input: unknown) => PutItemCommand | UpdateItemCommand)(command.input);
    attempt.middlewareStack.addRelativeTo(single, {
        relation: "after",
        toMiddleware: "retryMiddleware",
        name: "hybridCounterSingleAttempt",
    });
    try {
        return await dynamodb.send(attempt as UpdateItemCommand);
    } catch (error) {
        throw error instanceof SingleAttemptError ? error.original : error;
    }
}

/**
 * True unless DynamoDB answered the attempt with a 4xx: a 4xx (validation, condition, throttling,
 * conflict, missing table, access denied) means the request was refused and wrote nothing, while a
 * 5xx, a timeout or a broken connection may follow a commit whose answer was lost.
 */
export function mayHaveCommitted(error: unknown): boolean {
    const status = (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
    return !(typeof status === "number" && status >= 400 && status < 500);
}

/** Waits the backoff before attempt `attempt + 1`; false when that attempt would start after the deadline. */
export async function backoff(attempt: number, deadline?: CallDeadline): Promise<boolean> {
    const delay = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt) * Math.random();
    if (deadline !== undefined && Date.now() + delay >= deadline.at) {
        // The next attempt would start after the deadline: it is abandoned.
        return false;
    }
    await pause(delay);
    return deadline === undefined || deadline.open();
}

/**
 * Calls `fn` up to `attempts` times while `retryable` says its error is worth another try. With a
 * deadline, no attempt starts after it: the last error is thrown instead, or DeadlineExceededError
 * naming `operation` when the deadline passed before the first attempt.
 */
export async function withRetries<T>(
    fn: () => Promise<T>,
    retryable: (error: unknown) => boolean,
    attempts: number,
    deadline?: CallDeadline,
    operation = "write",
): Promise<T> {
    if (deadline !== undefined && !deadline.open()) {
        throw new DeadlineExceededError(operation, deadline.ms);
    }
    for (let attempt = 1; ; attempt++) {
        try {
            return await fn();
        } catch (error) {
            if (attempt >= attempts || !retryable(error) || !(await backoff(attempt, deadline))) {
                throw error;
            }
        }
    }
}
