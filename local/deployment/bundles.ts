/**
 * Loading the shipped Lambda bundles (the files `pulumi up` uploads) in this process, as Lambda loads them: the
 * function's environment in process.env while its module loads (each load a fresh module, so two functions, or one
 * function in two regions, never share a module), and every SDK client the bundle exports sent to the local servers
 * whatever the environment says when a request is made (the SDK may resolve an endpoint after another bundle changed
 * the environment).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import type { SNSClient } from "@aws-sdk/client-sns";
import type { SQSClient } from "@aws-sdk/client-sqs";
import type { AbsoluteLocation, FinalizeRequestHandlerOptions, FinalizeRequestMiddleware } from "@smithy/types";
import { LOCAL_CREDENTIALS, LOCAL_REGION } from "../aws/sqs";

/** What a bundle exports: its handler and the SDK clients it uses (those it does not use are absent). */
export interface Bundle<H> {
    readonly handler: H;
    readonly clients: {
        readonly dynamodb: DynamoDBClient;
        readonly streams?: DynamoDBStreamsClient;
        readonly sqs?: SQSClient;
        readonly sns?: SNSClient;
    };
}

/** Where a bundle's clients send their requests. */
export interface BundleEndpoints {
    /** DynamoDB and its streams (one engine). */
    readonly dynamodb: string;
    /** SQS and SNS (the local server). */
    readonly messaging: string;
}

/** The counter's settings (`HYBRID_COUNTER_*`) as the process started with them. */
const STARTING_SETTINGS: Readonly<Record<string, string | undefined>> = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => name.startsWith("HYBRID_COUNTER_")),
);

/**
 * Puts the counter's settings back as the process started with them: an environment leaves out a setting at its
 * default (one shard, no topic), so a bundle loaded after another deployment's would otherwise read that deployment's
 * value (its shard count) where its own environment says nothing.
 */
function forgetEarlierEnvironments(): void {
    for (const name of Object.keys(process.env).filter((n) => n.startsWith("HYBRID_COUNTER_"))) {
        const own = STARTING_SETTINGS[name];
        if (own === undefined) {
            delete process.env[name];
        } else {
            process.env[name] = own;
        }
    }
}

/** Loads `file` with `environment` (and no other deployment's settings), its clients pinned to `endpoints`. */
export function loadBundle<H>(file: string, environment: Readonly<Record<string, string>>, endpoints: BundleEndpoints): Bundle<H> {
    forgetEarlierEnvironments();
    Object.assign(process.env, environment, {
        AWS_REGION: process.env.AWS_REGION ?? LOCAL_REGION,
        AWS_ACCESS_KEY_ID: LOCAL_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: LOCAL_CREDENTIALS.secretAccessKey,
        AWS_ENDPOINT_URL_DYNAMODB: endpoints.dynamodb,
        AWS_ENDPOINT_URL_DYNAMODB_STREAMS: endpoints.dynamodb,
        AWS_ENDPOINT_URL_SQS: endpoints.messaging,
        AWS_ENDPOINT_URL_SNS: endpoints.messaging,
    });
    delete require.cache[require.resolve(file)];
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a built bundle, loaded as Lambda loads it
    const mod = require(file) as Bundle<H>;
    if (typeof mod.handler !== "function" || mod.clients === undefined) {
        throw new Error(`${file} does not export handler and clients`);
    }
    const { dynamodb, streams, sqs, sns } = mod.clients;
    const pins: Array<[AnyClient | undefined, string]> = [
        [dynamodb as AnyClient, endpoints.dynamodb],
        [streams as AnyClient | undefined, endpoints.dynamodb],
        [sqs as AnyClient | undefined, endpoints.messaging],
        [sns as AnyClient | undefined, endpoints.messaging],
    ];
    for (const [client, endpoint] of pins) {
        if (client !== undefined) {
            pinEndpoint(client, endpoint);
        }
    }
    return mod;
}

/** Any SDK client: what pinning needs of it. */
interface AnyClient {
    readonly middlewareStack: {
        add(middleware: FinalizeRequestMiddleware<object, object>, options: FinalizeRequestHandlerOptions & AbsoluteLocation): void;
    };
}

/** Sends every request of `client` to `endpoint`, whatever the environment says when the request is made. */
function pinEndpoint(client: AnyClient, endpoint: string): void {
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
        { step: "finalizeRequest", name: "pinLocalEndpoint" },
    );
}
