/**
 * Loading one region's Lambda bundles in one process: each region's function is its own module, loaded with its
 * region's environment, and its DynamoDB client sends every request to its region's engine whatever the environment
 * says later (the SDK may resolve an endpoint from the environment after the next region's bundle changed it).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, DynamoDBBatchResponse, DynamoDBStreamEvent, SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { LocalEngine } from "../engine/engine";

export type StreamHandler = (event: DynamoDBStreamEvent, context: Context) => Promise<DynamoDBBatchResponse>;
export type QueueHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;
export interface Bundle<H> {
    handler: H;
    clients: { dynamodb: DynamoDBClient; sqs: SQSClient };
}

/**
 * Loads a bundle for one region as Lambda loads it there: a fresh module (each region's function is its own), with
 * the region's environment in process.env while it loads, and its DynamoDB client pinned to the region's engine.
 */
export function loadRegionBundle<H>(file: string, environment: Record<string, string>, engine: LocalEngine): Bundle<H> {
    Object.assign(process.env, environment, {
        AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
        AWS_ENDPOINT_URL_DYNAMODB_STREAMS: engine.endpoint,
    });
    delete require.cache[require.resolve(file)];
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a built bundle, loaded as Lambda loads it
    const mod = require(file) as Bundle<H>;
    if (typeof mod.handler !== "function" || !mod.clients) {
        throw new Error(`${file} does not export handler and clients`);
    }
    pinEndpoint(mod.clients.dynamodb, engine.endpoint);
    return mod;
}

/** Sends every request of `client` to `endpoint`, whatever the environment says when the request is made. */
function pinEndpoint(client: DynamoDBClient, endpoint: string): void {
    const url = new URL(endpoint);
    client.middlewareStack.add(
        (next) => async (args) => {
            const request = args.request as { protocol?: string; hostname?: string; port?: number } | undefined;
            if (request !== undefined && typeof request.hostname === "string") {
                request.protocol = url.protocol;
                request.hostname = url.hostname;
                request.port = Number(url.port);
            }
            return next(args);
        },
        { step: "finalizeRequest", name: "pinRegionEndpoint" },
    );
}
