/**
 * Lambda entry point: drains the first dead-letter queue. Each message names a stream batch Lambda gave up on (shard and
 * sequence range); the handler applies it, and every range still open before it, from the stream.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { SNSClient } from "@aws-sdk/client-sns";
import { SQSClient } from "@aws-sdk/client-sqs";
import { handlerConfigFromEnv } from "../shared/config";
import { createRedriveHandler } from "../stream/redrive";
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
const logger = jsonLogger("hybrid-counter-redrive");

export const handler = createRedriveHandler({
    config,
    dynamodb: clients.dynamodb,
    streams: clients.streams,
    fatal: sqsFatalQueue(clients.sqs, config.fatalQueueUrl, logger),
    sendEvents: config.thresholdTopicArn === undefined ? async () => true : snsEventSink(clients.sns, config.thresholdTopicArn, logger),
});
