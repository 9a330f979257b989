/**
 * The local SQS server speaks the real SQS wire protocol and honours what the counter's queues rely
 * on: maxReceiveCount moves a message to the dead-letter target, a received and undeleted message
 * comes back after the visibility timeout, a long poll waits for a message, and a missing queue is
 * the real QueueDoesNotExist error. Its SNS side delivers what a topic publishes to the topic's SQS subscription.
 */
import { ReceiveMessageCommand, SendMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { strict as assert } from "node:assert";
import { PublishBatchCommand } from "@aws-sdk/client-sns";
import { pollQueueOnce, startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { TopicInbox } from "../local/aws/topic-inbox";

describe("local SQS server", () => {
    let server: LocalSqs;
    let sqs: SQSClient;
    before(async () => {
        server = await startLocalSqs();
        sqs = server.client();
    });
    after(async () => {
        sqs.destroy();
        await server.stop();
    });

    it("listens on 127.0.0.1 and names queues by its own address", async () => {
        // Prepare / Act
        const queue = await server.createQueue("naming");
        // Assess
        assert.match(server.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
        assert.equal(queue.url, `${server.endpoint}/000000000000/naming`);
        assert.equal(queue.arn, "arn:aws:sqs:us-east-1:000000000000:naming");
    });

    it("moves a message to the dead-letter target after maxReceiveCount receives", async () => {
        // Prepare
        const dlq = await server.createQueue("redrive-target");
        const source = await server.createQueue("redrive-source", {
            VisibilityTimeout: "1",
            RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: 2 }),
        });
        await sqs.send(new SendMessageCommand({ QueueUrl: source.url, MessageBody: "batch" }));
        const failAll = async (event: { Records: Array<{ messageId: string }> }) => ({
            batchItemFailures: event.Records.map((r) => ({ itemIdentifier: r.messageId })),
        });
        // Act: two failed receives, each followed by the visibility timeout; the third receive finds it moved.
        const first = await pollQueueOnce(sqs, source, 10, failAll, 2);
        const second = await pollQueueOnce(sqs, source, 10, failAll, 2);
        const third = await pollQueueOnce(sqs, source, 10, failAll, 2);
        const moved = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq.url, WaitTimeSeconds: 1 }));
        // Assess
        assert.deepEqual(first, { received: 1, deleted: 0 });
        assert.deepEqual(second, { received: 1, deleted: 0 });
        assert.deepEqual(third, { received: 0, deleted: 0 });
        assert.deepEqual(
            moved.Messages?.map((m) => m.Body),
            ["batch"],
        );
    });

    it("hides a received message for the visibility timeout, then delivers it again", async () => {
        // Prepare
        const queue = await server.createQueue("visibility", { VisibilityTimeout: "1" });
        await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: "m" }));
        // Act
        const first = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.url, MessageSystemAttributeNames: ["All"] }));
        const hidden = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.url }));
        const started = Date.now();
        const again = await sqs.send(
            new ReceiveMessageCommand({ QueueUrl: queue.url, WaitTimeSeconds: 3, MessageSystemAttributeNames: ["All"] }),
        );
        const waited = Date.now() - started;
        // Assess
        assert.equal(first.Messages?.[0]?.Attributes?.ApproximateReceiveCount, "1");
        assert.equal(hidden.Messages, undefined);
        assert.equal(again.Messages?.[0]?.Body, "m");
        assert.equal(again.Messages?.[0]?.Attributes?.ApproximateReceiveCount, "2");
        assert.ok(waited >= 500, `redelivered after ${waited} ms, before the 1 s timeout`);
    });

    it("long polling returns as soon as a message arrives", async () => {
        // Prepare
        const queue = await server.createQueue("long-poll");
        const sender = setTimeout(() => void sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: "late" })), 300);
        // Act
        const started = Date.now();
        const received = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.url, WaitTimeSeconds: 10 }));
        const waited = Date.now() - started;
        clearTimeout(sender);
        // Assess
        assert.deepEqual(
            received.Messages?.map((m) => m.Body),
            ["late"],
        );
        assert.ok(waited >= 250 && waited < 5_000, `long poll returned after ${waited} ms`);
    });

    it("answers a queue that does not exist with QueueDoesNotExist", async () => {
        // Act / Assess
        await assert.rejects(sqs.send(new ReceiveMessageCommand({ QueueUrl: `${server.endpoint}/000000000000/missing` })), {
            name: "QueueDoesNotExist",
        });
    });

    it("delivers every message a topic publishes to the topic's SQS subscription, once, in SNS's envelope", async () => {
        // Prepare
        const inbox = await TopicInbox.start<{ id: string }>(server, "events");
        const sns = server.sns();

        // Act
        const published = await sns.send(
            new PublishBatchCommand({
                TopicArn: inbox.topicArn,
                PublishBatchRequestEntries: ["a", "b", "c"].map((id, i) => ({ Id: String(i), Message: JSON.stringify({ id }) })),
            }),
        );
        const received = await inbox.receive();
        const again = await inbox.receive();

        // Assess
        assert.equal(inbox.topicArn, "arn:aws:sns:us-east-1:000000000000:events");
        assert.deepEqual([published.Successful?.length, published.Failed ?? []], [3, []]);
        assert.deepEqual([received, again], [3, 0]);
        assert.deepEqual(inbox.received.map((m) => m.id).sort(), ["a", "b", "c"]);
        sns.destroy();
        inbox.close();
    });
});
