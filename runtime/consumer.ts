// PLACEHOLDER: being written; signature is final.
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import type { HandlerConfig } from "./config";

export interface StreamHandlerDeps {
    readonly config: HandlerConfig;
    readonly dynamodb: DynamoDBClient;
    readonly sqs: SQSClient;
}

export function createStreamHandler(
    deps: StreamHandlerDeps,
): (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse> {
    return async () => {
        throw new Error(`not implemented yet for ${deps.config.tableName}`);
    };
}
