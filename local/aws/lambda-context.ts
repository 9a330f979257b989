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
