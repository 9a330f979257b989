// PLACEHOLDER: being written; signature is final.
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { HandlerConfig } from "./config";

export interface RedriveHandlerDeps {
    readonly config: HandlerConfig;
    readonly dynamodb: DynamoDBClient;
    readonly streams: DynamoDBStreamsClient;
    readonly sqs: SQSClient;
}

export function createRedriveHandler(
    deps: RedriveHandlerDeps,
): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse> {
    return async () => {
        throw new Error(`not implemented yet for ${deps.config.tableName}`);
    };
}
