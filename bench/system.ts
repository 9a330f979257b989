/**
 * The system every scenario of the benchmark measures, as every harness builds it: the component deployed on the
 * engine under Pulumi mocks (local/deployment/deployment.ts: its tables as declared, its `clientConfig` output), its
 * shipped functions (the bundles `npm run bench` builds first) behind the mapping emulator with the stream mapping's
 * settings as declared, the first DLQ and its redrive, the fatal queue and the settler, on the local SQS server
 * (local/deployment/pipeline.ts). The API's client is built from `clientConfig` on a DynamoDB client of its own.
 *
 * Meters and injected faults attach to the clients each party sends through: the API's, and the ones the consumer's
 * and the redrive's bundles export (as the twin attaches them). A scenario changes the system only through the
 * component's args, or through the pipeline's options named for what they change (a sweep point's batching).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { HybridCounterComponentArgs } from "../components/args";
import { startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { deployLocally, type LocalDeployment } from "../local/deployment/deployment";
import { startPipeline, type LocalPipeline, type PipelineOptions } from "../local/deployment/pipeline";
import { meterWrites, type CapacityMeter } from "../local/engine/capacity";
import { startEngine, type EngineOptions, type LocalEngine } from "../local/engine/engine";
import { injectFaults, seededRandom } from "../local/engine/faults";
import { LagMeter } from "../local/harness/lag";
import { silencer } from "../local/twin/silence";
import { HybridCounterClient } from "../runtime/client/client";

/** The local servers one measurement runs on. */
export interface BenchServers {
    readonly engine: LocalEngine;
    readonly sqs: LocalSqs;
}

/**
 * Starts a fresh DynamoDB Local and a local SQS server, runs `measure` on them, and stops both. DynamoDB Local slows
 * as a run accumulates data, which would favour whatever runs first: each measurement gets servers of its own.
 */
export async function withServers<T>(options: EngineOptions, measure: (servers: BenchServers) => Promise<T>): Promise<T> {
    const engine = await startEngine(options);
    let sqs: LocalSqs | undefined;
    try {
        sqs = await startLocalSqs();
        return await measure({ engine, sqs });
    } finally {
        await sqs?.stop();
        await engine.stop();
    }
}

export interface BenchSystemOptions {
    /** The component's args (a mode, a placement, shards). @default the component's defaults */
    readonly args?: HybridCounterComponentArgs;
    /** Faults injected on the API's client and on the consumer's and the redrive's (local/engine/faults.ts). */
    readonly faults?: { readonly rate: number; readonly seed: number };
    /** A sweep point's batch size and batching window; every other setting stays the component's. */
    readonly batching?: PipelineOptions["batching"];
    /** Called with every invocation's event and the consumer's response. */
    readonly onInvoked?: PipelineOptions["onInvoked"];
}

export interface BenchSystem {
    readonly deployment: LocalDeployment;
    readonly pipeline: LocalPipeline;
    /** The operator's client: setup and observation, no faults, no meter. */
    readonly admin: DynamoDBClient;
    /** The API's DynamoDB client, and the counter's client built on it from `clientConfig`. */
    readonly api: DynamoDBClient;
    readonly client: HybridCounterClient;
    /** Write-to-commit lag, and the records the consumer counted. */
    readonly lag: LagMeter;
    /** Write units as DynamoDB bills them: the API's, and the consumer's and the redrive's. */
    readonly meters: { readonly api: CapacityMeter; readonly consumer: CapacityMeter; readonly redrive: CapacityMeter };
    /** Releases every client the system made. */
    close(): void;
}

/** Deploys the component as `name` on the servers and starts its pipeline; nothing runs until the caller polls it. */
export async function startBenchSystem(servers: BenchServers, name: string, options: BenchSystemOptions = {}): Promise<BenchSystem> {
    const { engine, sqs } = servers;
    const admin = engine.dynamodb();
    const deployment = await deployLocally(admin, name, options.args ?? {});
    const lag = new LagMeter(deployment.clientLayout);
    // Lambda's logs go to CloudWatch; here they would drown the benchmark's output.
    const silence = silencer();
    const pipeline = await startPipeline(deployment, {
        sqs,
        streams: engine.streams(),
        functions: { kind: "bundles", dynamodbEndpoint: engine.endpoint },
        around: (invocation) => silence(invocation)(),
        onRead: (record, at) => lag.read(record, at),
        onInvoked: (event, response) => {
            lag.invoked(event, response);
            options.onInvoked?.(event, response);
        },
        ...(options.batching === undefined ? {} : { batching: options.batching }),
    });
    const api = engine.dynamodb();
    const meters = {
        api: meterWrites(api),
        consumer: meterWrites(pipeline.clients.consumer),
        redrive: meterWrites(pipeline.clients.redrive),
    };
    for (const functionClient of [pipeline.clients.consumer, pipeline.clients.redrive]) {
        lag.watchCommits(functionClient);
    }
    const faults = options.faults;
    if (faults !== undefined && faults.rate > 0) {
        [api, pipeline.clients.consumer, pipeline.clients.redrive].forEach((client, i) =>
            injectFaults(client, { rate: faults.rate, random: seededRandom(faults.seed + i + 1) }),
        );
    }
    const client = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: api });
    return {
        deployment,
        pipeline,
        admin,
        api,
        client,
        lag,
        meters,
        close() {
            pipeline.close();
            admin.destroy();
            api.destroy();
        },
    };
}

/** Billed write units of the functions that apply records: the consumer's and the redrive's. */
export function consumerUnits(system: Pick<BenchSystem, "meters">): number {
    return system.meters.consumer.billed + system.meters.redrive.billed;
}

/**
 * Moves the process's clock (`Date.now`, which the client, the functions and the heal read) `ms` ahead until the
 * returned function puts it back. DynamoDB Local does not check request signatures' times.
 */
export function clockAhead(ms: number): () => void {
    const now = Date.now;
    Date.now = () => now() + ms;
    return () => {
        Date.now = now;
    };
}

/** Rounds to two decimals. */
export const r2 = (n: number): number => Math.round(n * 100) / 100;
