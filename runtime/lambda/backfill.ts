/** Lambda entry point: the backfill, continued across invocations (see ../backfill-handler.ts). */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";
import { backfillFromEnv } from "../backfill/env";
import { createBackfillHandler } from "../backfill/handler";

/** The SDK clients the handler uses, exported so a host can add middleware (tracing, local endpoints). */
export const clients = { dynamodb: new DynamoDBClient({}), lambda: new LambdaClient({}) };

export const handler = createBackfillHandler({
    ...backfillFromEnv(process.env),
    dynamodb: clients.dynamodb,
    reinvoke: async (functionArn, event) => {
        await clients.lambda.send(
            new InvokeCommand({ FunctionName: functionArn, InvocationType: "Event", Payload: Buffer.from(JSON.stringify(event)) }),
        );
    },
});
