/**
 * Lambda entry point: drains the first dead-letter queue. Each message names a stream batch (shard and
 * sequence range); the handler re-reads those records from the stream and counts them again.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { SQSClient } from "@aws-sdk/client-sqs";
import { handlerConfigFromEnv } from "../shared/config";
import { createRedriveHandler } from "../stream/redrive";

/** The SDK clients the handler uses, exported so a host can add middleware (tracing, local endpoints). */
export const clients = { dynamodb: new DynamoDBClient({}), streams: new DynamoDBStreamsClient({}), sqs: new SQSClient({}) };

export const handler = createRedriveHandler({ config: handlerConfigFromEnv(process.env), ...clients });
