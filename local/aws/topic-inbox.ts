/**
 * A topic on the local SNS server with an SQS subscription a harness reads: what a subscriber of the topic receives,
 * message by message, in SNS's envelope (the published message is the envelope's `Message`).
 */
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { LocalQueue, LocalSqs } from "./sqs";

export class TopicInbox<T = unknown> {
    /** Every message received so far, parsed, in the order received. */
    readonly received: T[] = [];

    private constructor(
        readonly topicArn: string,
        readonly queue: LocalQueue,
        private readonly sqs: SQSClient,
    ) {}

    /** Creates topic `name` and a queue subscribed to it. */
    static async start<T = unknown>(server: LocalSqs, name: string): Promise<TopicInbox<T>> {
        const topicArn = await server.createTopic(name);
        const queue = await server.createQueue(`${name}-subscriber`);
        await server.subscribe(topicArn, queue);
        return new TopicInbox<T>(topicArn, queue, server.client());
    }

    /** Receives (and deletes) every message waiting, until the queue answers empty; resolves how many. */
    async receive(): Promise<number> {
        let total = 0;
        for (;;) {
            const { Messages: messages = [] } = await this.sqs.send(
                new ReceiveMessageCommand({ QueueUrl: this.queue.url, MaxNumberOfMessages: 10 }),
            );
            if (messages.length === 0) {
                return total;
            }
            for (const message of messages) {
                const envelope = JSON.parse(message.Body ?? "{}") as { Message?: string };
                this.received.push(JSON.parse(envelope.Message ?? "null") as T);
            }
            await this.sqs.send(
                new DeleteMessageBatchCommand({
                    QueueUrl: this.queue.url,
                    Entries: messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
                }),
            );
            total += messages.length;
        }
    }

    close(): void {
        this.sqs.destroy();
    }
}
