/**
 * The Lambda entry of the limits API (bundled by bundle.ts into `index.handler`). It only wires the
 * environment the Pulumi program set to the pure handler in handler.ts.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HybridCounterClient, clientConfigFromEnv } from "hybrid-counter/runtime";
import { createApiHandler, type CounterClient } from "./handler";
import { apiSettingsFromEnv, limitFor } from "./settings";

const settings = apiSettingsFromEnv(process.env);
const client: CounterClient = new HybridCounterClient({
    ...clientConfigFromEnv(process.env),
    mode: settings.mode,
    dynamodb: new DynamoDBClient({}),
    // A best-effort counter write that failed was absorbed (the count stays on its safe side); log it.
    onBestEffortFailure: ({ key, operation, error }) =>
        console.warn(JSON.stringify({ counterWriteAbsorbed: operation, key, error: String(error) })),
});

export const handler = createApiHandler({ client, limitFor: limitFor(settings) });
