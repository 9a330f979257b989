/** Lambda entry point: the consumer of the table's DynamoDB stream. Configured by environment (see ../config.ts). */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SQSClient } from "@aws-sdk/client-sqs";
import { handlerConfigFromEnv } from "../shared/config";
import { createStreamHandler } from "../stream/consumer";

/** The SDK clients the handler uses, exported so a host can add middleware (tracing, local endpoints). */
export const clients = { dynamodb: new DynamoDBClient({}), sqs: new SQSClient({}) };

export const handler = createStreamHandler({ config: handlerConfigFromEnv(process.env), ...clients });
