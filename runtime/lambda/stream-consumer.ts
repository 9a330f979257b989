/** Lambda entry point: the consumer of the table's DynamoDB stream. Configured by environment (runtime/shared/config.ts). */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { SNSClient } from "@aws-sdk/client-sns";
import { SQSClient } from "@aws-sdk/client-sqs";
import { handlerConfigFromEnv } from "../shared/config";
import { createStreamHandler } from "../stream/consumer";
import { sqsFatalQueue } from "../stream/fatal";
import { snsEventSink } from "../limits/publish";
import { jsonLogger } from "../shared/telemetry";

/** The SDK clients the handler uses, exported so a host can add middleware (tracing, local endpoints). */
export const clients = {
    dynamodb: new DynamoDBClient({}),
    streams: new DynamoDBStreamsClient({}),
    sqs: new SQSClient({}),
    sns: new SNSClient({}),
};

const config = handlerConfigFromEnv(process.env);
const logger = jsonLogger("hybrid-counter-consumer");

export const handler = createStreamHandler({
    config,
    dynamodb: clients.dynamodb,
    streams: clients.streams,
    fatal: sqsFatalQueue(clients.sqs, config.fatalQueueUrl, logger),
    sendEvents: config.thresholdTopicArn === undefined ? async () => true : snsEventSink(clients.sns, config.thresholdTopicArn, logger),
});
