/**
 * In-process SQS queues for local runs and tests: DynamoDB Local has no SQS beside it. `attach()`
 * answers an SQSClient's SendMessage, ReceiveMessage and DeleteMessage from memory (the request
 * never leaves the process), so handler code runs unchanged against it.
 */
import { SQSClient, type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-sqs";
import type { SQSEvent } from "aws-lambda";
import type { InitializeMiddleware } from "@smithy/types";
import { randomUUID } from "node:crypto";

export interface LocalMessage {
    readonly messageId: string;
    readonly receiptHandle: string;
    readonly body: string;
    receiveCount: number;
}

export class LocalQueues {
    private readonly queues = new Map<string, LocalMessage[]>();
    readonly sent = new Map<string, number>();

    /** Every message still in the queue, oldest first. */
    messages(url: string): LocalMessage[] {
        return this.queues.get(url) ?? [];
    }

    send(url: string, body: string): string {
        const message: LocalMessage = { messageId: randomUUID(), receiptHandle: randomUUID(), body, receiveCount: 0 };
        this.queue(url).push(message);
        this.sent.set(url, (this.sent.get(url) ?? 0) + 1);
        return message.messageId;
    }

    /** Takes up to `max` messages off the queue, counting the receive. Callers delete or return them. */
    receive(url: string, max: number): LocalMessage[] {
        const taken = this.queue(url).splice(0, max);
        for (const m of taken) {
            m.receiveCount++;
        }
        return taken;
    }

    /** Puts received messages back (their visibility timeout expired without a delete). */
    release(url: string, messages: readonly LocalMessage[]): void {
        this.queue(url).unshift(...messages);
    }

    /**
     * A new SQS client served by these queues. Its endpoint is the loopback discard port, so a call the
     * queues do not serve fails here instead of reaching any network.
     */
    client(): SQSClient {
        const client = new SQSClient({
            region: "us-east-1",
            endpoint: "http://127.0.0.1:9",
            credentials: { accessKeyId: "hybridcounterlocal", secretAccessKey: "hybridcounterlocal" },
        });
        this.attach(client);
        return client;
    }

    /** Serves the client's calls from these queues. */
    attach(client: SQSClient): void {
        const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (_next, context) => async (args) => {
            const input = args.input as { QueueUrl?: string; MessageBody?: string; MaxNumberOfMessages?: number };
            const url = input.QueueUrl ?? "";
            const $metadata = { httpStatusCode: 200 };
            switch (context.commandName) {
                case "SendMessageCommand":
                    if (typeof input.MessageBody !== "string" || input.MessageBody.length === 0) {
                        throw new Error("[MessageBody] must be a non-empty string");
                    }
                    return { output: { MessageId: this.send(url, input.MessageBody), $metadata }, response: {} };
                case "ReceiveMessageCommand":
                    return {
                        output: {
                            Messages: this.receive(url, input.MaxNumberOfMessages ?? 1).map((m) => ({
                                MessageId: m.messageId,
                                ReceiptHandle: m.receiptHandle,
                                Body: m.body,
                            })),
                            $metadata,
                        },
                        response: {},
                    };
                case "DeleteMessageCommand":
                    return { output: { $metadata }, response: {} };
                default:
                    throw new Error(`local SQS does not serve ${context.commandName}`);
            }
        };
        client.middlewareStack.add(middleware, { step: "initialize", name: "hybridCounterLocalSqs", priority: "high" });
    }

    private queue(url: string): LocalMessage[] {
        let q = this.queues.get(url);
        if (!q) {
            q = [];
            this.queues.set(url, q);
        }
        return q;
    }
}

/** The event Lambda's SQS event source mapping would deliver for these received messages. */
export function sqsEvent(messages: readonly LocalMessage[], queueArn: string): SQSEvent {
    return {
        Records: messages.map((m) => ({
            messageId: m.messageId,
            receiptHandle: m.receiptHandle,
            body: m.body,
            attributes: {
                ApproximateReceiveCount: String(m.receiveCount),
                SentTimestamp: "0",
                SenderId: "local",
                ApproximateFirstReceiveTimestamp: "0",
            },
            messageAttributes: {},
            md5OfBody: "",
            eventSource: "aws:sqs",
            eventSourceARN: queueArn,
            awsRegion: "us-east-1",
        })),
    };
}
