/**
 * SQS and SNS for local runs and tests.
 *
 * `startLocalSqs()` starts a real SQS- and SNS-protocol server (the `fauxqs` package) on a free 127.0.0.1
 * port: the AWS SDK talks to it over HTTP exactly as it talks to SQS and SNS, and it honours what the
 * counter's queues rely on, checked by test/sqs-server.test.ts: a redrive policy's maxReceiveCount
 * (a message received that many times moves to the dead-letter target), visibility timeouts (a
 * received, undeleted message comes back after the timeout) and long polling (WaitTimeSeconds); and a
 * topic's SQS subscription receives every message published to the topic, in SNS's envelope.
 * What it lacks: StartMessageMoveTask (the CLI's `redrive` moves messages itself, which works on SQS
 * too) and queue policies (ignored).
 *
 * Queue URLs name the server itself (`http://127.0.0.1:<port>/000000000000/<name>`), so an SDK client
 * given only a queue URL reaches the right server without an endpoint setting.
 *
 * `LocalQueues` is an in-process stand-in for the tests that only need a place to send messages to.
 */
import { CreateTopicCommand, SNSClient, SubscribeCommand } from "@aws-sdk/client-sns";
import { SQSClient, type Message, type ServiceInputTypes, type ServiceOutputTypes } from "@aws-sdk/client-sqs";
import { CreateQueueCommand, DeleteMessageCommand, GetQueueAttributesCommand, ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import type { SQSEvent } from "aws-lambda";
import type { InitializeMiddleware } from "@smithy/types";
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";

export const LOCAL_REGION = "us-east-1";
export const LOCAL_CREDENTIALS = { accessKeyId: "hybridcounterlocal", secretAccessKey: "hybridcounterlocal" };

export interface LocalQueue {
    readonly url: string;
    readonly arn: string;
}

export interface LocalSqs {
    /** `http://127.0.0.1:<port>`. */
    readonly endpoint: string;
    /** A new SDK client for this server. */
    client(options?: { maxAttempts?: number }): SQSClient;
    /** Creates a queue through the SQS API (CreateQueue), with the given attributes. */
    createQueue(name: string, attributes?: Record<string, string>): Promise<LocalQueue>;
    /** A new SNS client for this server. */
    sns(): SNSClient;
    /** Creates a topic through the SNS API (CreateTopic); resolves its ARN. */
    createTopic(name: string): Promise<string>;
    /** Subscribes `queue` to the topic (Subscribe, protocol sqs): every message published reaches it in SNS's envelope. */
    subscribe(topicArn: string, queue: LocalQueue): Promise<void>;
    stop(): Promise<void>;
}

interface FastifyLike {
    listen(options: { port: number; host: string }): Promise<string>;
    close(): Promise<void>;
}

/** Finds the installed fauxqs package; throws naming the package when it is missing. */
export function fauxqsHome(): string {
    for (const dir of require.resolve.paths("fauxqs") ?? []) {
        const home = path.join(dir, "fauxqs");
        if (existsSync(path.join(home, "package.json"))) {
            return home;
        }
    }
    throw new Error("the local SQS server needs the npm package `fauxqs`: npm install --save-dev fauxqs@^1.9.2");
}

/**
 * Starts the SQS server on a free loopback port. The server's own `startFauxqs` listens on every
 * interface; this builds its app and listens on 127.0.0.1 only, with queue URLs taken from the
 * request's host.
 */
export async function startLocalSqs(): Promise<LocalSqs> {
    const home = fauxqsHome();
    const load = (file: string): Promise<Record<string, unknown>> =>
        import(pathToFileURL(path.join(home, "dist", file)).href) as Promise<Record<string, unknown>>;
    const app = (await load("app.js")) as { buildApp: (options: unknown) => FastifyLike };
    const { SqsStore } = (await load(path.join("sqs", "sqsStore.js"))) as { SqsStore: new () => { host: string; shutdown(): void } };
    const sqsStore = new SqsStore();
    // Empty host: queue URLs are built from the request's Host header, i.e. this server's address.
    sqsStore.host = "";
    const server = app.buildApp({ logger: false, defaultRegion: LOCAL_REGION, stores: { sqsStore } });
    const address = await server.listen({ port: 0, host: "127.0.0.1" });
    const endpoint = address.replace("localhost", "127.0.0.1");
    const makeClient = (options: { maxAttempts?: number } = {}): SQSClient =>
        new SQSClient({ region: LOCAL_REGION, endpoint, credentials: LOCAL_CREDENTIALS, ...options });
    const admin = makeClient();
    const makeSns = (): SNSClient => new SNSClient({ region: LOCAL_REGION, endpoint, credentials: LOCAL_CREDENTIALS });
    const sns = makeSns();
    let stopped = false;
    return {
        endpoint,
        client: makeClient,
        async createQueue(name, attributes = {}) {
            const created = await admin.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }));
            const url = created.QueueUrl!;
            const attrs = await admin.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }));
            return { url, arn: attrs.Attributes!.QueueArn! };
        },
        sns: makeSns,
        async createTopic(name) {
            return (await sns.send(new CreateTopicCommand({ Name: name }))).TopicArn!;
        },
        async subscribe(topicArn, queue) {
            await sns.send(new SubscribeCommand({ TopicArn: topicArn, Protocol: "sqs", Endpoint: queue.arn }));
        },
        async stop() {
            if (stopped) {
                return;
            }
            stopped = true;
            admin.destroy();
            sns.destroy();
            sqsStore.shutdown();
            await server.close();
        },
    };
}

/** The event Lambda's SQS event source mapping delivers for messages received from a queue. */
export function sqsEventOf(messages: readonly Message[], queueArn: string): SQSEvent {
    return {
        Records: messages.map((m) => ({
            messageId: m.MessageId!,
            receiptHandle: m.ReceiptHandle!,
            body: m.Body ?? "",
            attributes: {
                ApproximateReceiveCount: m.Attributes?.ApproximateReceiveCount ?? "1",
                SentTimestamp: m.Attributes?.SentTimestamp ?? "0",
                SenderId: m.Attributes?.SenderId ?? "local",
                ApproximateFirstReceiveTimestamp: m.Attributes?.ApproximateFirstReceiveTimestamp ?? "0",
            },
            messageAttributes: {},
            md5OfBody: m.MD5OfBody ?? "",
            eventSource: "aws:sqs",
            eventSourceARN: queueArn,
            awsRegion: LOCAL_REGION,
        })),
    };
}

export interface LocalMessage {
    readonly messageId: string;
    readonly receiptHandle: string;
    readonly body: string;
    receiveCount: number;
}

/**
 * The in-process stand-in: answers an SQSClient's SendMessage, ReceiveMessage and DeleteMessage from
 * memory. No visibility timeout, no redrive policy: use startLocalSqs() where those matter.
 */
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
        const client = new SQSClient({ region: LOCAL_REGION, endpoint: "http://127.0.0.1:9", credentials: LOCAL_CREDENTIALS });
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

/** The event Lambda's SQS event source mapping would deliver for these in-process messages. */
export function sqsEvent(messages: readonly LocalMessage[], queueArn: string): SQSEvent {
    return sqsEventOf(
        messages.map((m) => ({
            MessageId: m.messageId,
            ReceiptHandle: m.receiptHandle,
            Body: m.body,
            Attributes: { ApproximateReceiveCount: String(m.receiveCount) },
        })),
        queueArn,
    );
}

/**
 * One pass of Lambda's SQS event source mapping: receives up to `batchSize` messages, invokes the
 * handler, deletes the messages it did not report as failed. A failed message stays in flight until the
 * queue's visibility timeout ends; the server then redelivers it or, after maxReceiveCount receives,
 * moves it to the dead-letter target. Returns how many messages were received and how many deleted.
 */
export async function pollQueueOnce(
    sqs: SQSClient,
    queue: LocalQueue,
    batchSize: number,
    handler: (event: SQSEvent) => Promise<{ batchItemFailures: Array<{ itemIdentifier: string }> }>,
    waitTimeSeconds = 0,
): Promise<{ received: number; deleted: number }> {
    const received = await sqs.send(
        new ReceiveMessageCommand({
            QueueUrl: queue.url,
            MaxNumberOfMessages: Math.min(batchSize, 10),
            WaitTimeSeconds: waitTimeSeconds,
            MessageSystemAttributeNames: ["All"],
        }),
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) {
        return { received: 0, deleted: 0 };
    }
    let failed: Set<string>;
    try {
        const response = await handler(sqsEventOf(messages, queue.arn));
        failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
    } catch {
        // A function error fails the whole batch: every message waits for its visibility timeout.
        failed = new Set(messages.map((m) => m.MessageId!));
    }
    let deleted = 0;
    for (const m of messages) {
        if (!failed.has(m.MessageId!)) {
            await sqs.send(new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: m.ReceiptHandle }));
            deleted++;
        }
    }
    return { received: messages.length, deleted };
}
