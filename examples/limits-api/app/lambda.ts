/**
 * The Lambda entry of the limits API (bundled by bundle.ts into `index.handler`). It builds the counter's client from
 * the environment the Pulumi program set (the component's `apiEnvironment`: the tables, the layout and the counter's
 * mode), and routes each invocation: an HTTP request to the pure handler in handler.ts, the program's deploy-time
 * event to `storeLimits`.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { APIGatewayProxyEventV2 } from "aws-lambda";
import { HybridCounterClient, clientConfigFromEnv } from "hybrid-counter/runtime";
import { createApiHandler, storeLimits, type CounterClient } from "./handler";
import { isStoreLimitsEvent, type StoreLimitsEvent } from "./settings";

const client: CounterClient = new HybridCounterClient({
    ...clientConfigFromEnv(process.env),
    dynamodb: new DynamoDBClient({}),
    // A best-effort counter write that failed was absorbed (the count stays on its safe side); log it.
    onBestEffortFailure: ({ key, operation, error }) =>
        console.warn(JSON.stringify({ counterWriteAbsorbed: operation, key, error: String(error) })),
});
const api = createApiHandler({ client });

export const handler = (event: APIGatewayProxyEventV2 | StoreLimitsEvent) =>
    isStoreLimitsEvent(event) ? storeLimits(client, event) : api(event);
