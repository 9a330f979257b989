/** A Lambda invocation context for handlers run locally: what matters to them is the time left. */
import type { Context } from "aws-lambda";
import { randomUUID } from "node:crypto";

export function lambdaContext(functionName: string, timeoutMs: number, now: () => number = Date.now): Context {
    const deadline = now() + timeoutMs;
    return {
        callbackWaitsForEmptyEventLoop: false,
        functionName,
        functionVersion: "$LATEST",
        invokedFunctionArn: `arn:aws:lambda:ddblocal:000000000000:function:${functionName}`,
        memoryLimitInMB: "256",
        awsRequestId: randomUUID(),
        logGroupName: `/aws/lambda/${functionName}`,
        logStreamName: "local",
        getRemainingTimeInMillis: () => Math.max(0, deadline - now()),
        done: () => undefined,
        fail: () => undefined,
        succeed: () => undefined,
    };
}

/**
 * A context whose time never runs out (its clock stands still): for a test of what a handler does, not of how fast.
 * A wall-clock budget fails such a test on a busy machine, where the same work takes longer.
 */
export function untimedContext(functionName: string, timeoutMs = 10_000): Context {
    return lambdaContext(functionName, timeoutMs, () => 0);
}
