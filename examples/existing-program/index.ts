/**
 * The orders service's infrastructure: the orders table, a bucket for nightly exports and a queue the
 * service notifies other teams on. It adds a per-tenant order counter to the table it already owns.
 *
 * Every line marked "hybrid counter" is what adding the counter took; everything else was here before.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HybridCounterComponent } from "hybrid-counter"; // hybrid counter

const tags = { service: "orders", stack: pulumi.getStack() };

// One item per order: partition key tenantId, sort key orderId.
const orders = new aws.dynamodb.Table("orders", {
    attributes: [
        { name: "tenantId", type: "S" },
        { name: "orderId", type: "S" },
    ],
    hashKey: "tenantId",
    rangeKey: "orderId",
    billingMode: "PAY_PER_REQUEST",
    pointInTimeRecovery: { enabled: true },
    serverSideEncryption: { enabled: true },
    // hybrid counter: the consumer reads new and old images from the table's stream. Enabling a stream
    // is an in-place update of the table; its items and its ARN stay the same.
    streamEnabled: true,
    streamViewType: "NEW_AND_OLD_IMAGES",
    tags,
});

const exportsBucket = new aws.s3.Bucket("orders-exports", { tags });
new aws.s3.BucketPublicAccessBlock("orders-exports", {
    bucket: exportsBucket.id,
    blockPublicAcls: true,
    blockPublicPolicy: true,
    ignorePublicAcls: true,
    restrictPublicBuckets: true,
});
new aws.s3.BucketServerSideEncryptionConfiguration("orders-exports", {
    bucket: exportsBucket.id,
    rules: [{ applyServerSideEncryptionByDefault: { sseAlgorithm: "AES256" } }],
});

const notifications = new aws.sqs.Queue("order-notifications", {
    sqsManagedSseEnabled: true,
    messageRetentionSeconds: 345_600,
    tags,
});

// hybrid counter: count each tenant's orders on the table above. The keys are the table's own.
const orderCounter = new HybridCounterComponent("orders-counter", {
    table: orders,
    partitionKey: "tenantId",
    sortKey: "orderId",
    createAlarmTopic: true,
    tags,
});

export const ordersTableName = orders.name;
export const exportsBucketName = exportsBucket.bucket;
export const notificationsQueueUrl = notifications.url;
// hybrid counter: what the orders API passes to HybridCounterClient, and where the alarms go.
export const counterClientConfig = orderCounter.clientConfig;
export const counterAlarmTopicArn = orderCounter.alarmTopicArn;
export const counterDashboardName = orderCounter.dashboardName;
