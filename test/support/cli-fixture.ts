/**
 * What the CLI's tests share: the built bin (scripts/bundle-cli.ts), DynamoDB Local and the local SQS server on
 * 127.0.0.1, and counters to run it on: the user's table and its counters table as the component creates them, the
 * queues, an API client, and the consumer behind the stream mapping (local/aws/mapping-emulator.ts) with a tumbling
 * window, as the component configures it. A key in `outage` fails its batches, which Lambda then gives up on: their
 * metadata lands in `gaveUp`, for a test to put where the pipeline would.
 */
import { DynamoDBClient, UpdateItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import type { SQSClient } from "@aws-sdk/client-sqs";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { startEngine, type LocalEngine } from "../../local/engine/engine";
import { createCounterTable, createCountersTable } from "../../local/engine/table";
import { LAMBDA_DEFAULTS, MappingEmulator, type OnFailureRecord } from "../../local/aws/mapping-emulator";
import { startLocalSqs, type LocalQueue, type LocalSqs } from "../../local/aws/sqs";
import { HybridCounterClient } from "../../runtime/client/client";
import { createStreamHandler } from "../../runtime/stream/consumer";
import { sqsFatalQueue } from "../../runtime/stream/fatal";
import { jsonLogger } from "../../runtime/shared/telemetry";
import {
    DEFAULT_LAYOUT,
    type CounterMode,
    type CounterTableLayout,
    type HandlerConfig,
    type RegionsConfig,
} from "../../runtime/shared/config";
import { eventualKey } from "../../runtime/shared/keys";
import { buildCli } from "../../scripts/bundle-cli";
import { runBin, type Ran } from "./cli-bin";

export interface Servers {
    readonly engine: LocalEngine;
    readonly sqs: LocalSqs;
    readonly sqsClient: SQSClient;
    /** The built bin (dist/cli/index.js). */
    readonly bin: string;
    /** Runs the built bin in region us-east-1 (test/support/cli-bin.ts). */
    cli(args: readonly string[], options?: { stdin?: string; env?: Record<string, string> }): Promise<Ran>;
}

/** The built bin, DynamoDB Local and the local SQS server for the tests of one file: started before them, stopped after. */
export function useServers(): () => Servers {
    let servers: Servers | undefined;
    let bin = "";
    before(async () => {
        bin = await buildCli();
        const engine = await startEngine();
        const sqs = await startLocalSqs();
        servers = {
            engine,
            sqs,
            sqsClient: sqs.client(),
            bin,
            cli: (args, options = {}) => runBin(bin, args, { ...options, env: { AWS_REGION: "us-east-1", ...options.env } }),
        };
    });
    after(async () => {
        servers?.sqsClient.destroy();
        await servers?.sqs.stop();
        await servers?.engine.stop();
    });
    return () => {
        if (servers === undefined) {
            throw new Error("the servers are started in the before hook");
        }
        return servers;
    };
}

export interface SystemOptions {
    readonly mode?: CounterMode;
    readonly layout?: CounterTableLayout;
    readonly counterShards?: number;
    /** The counters table is the user's table (the same-table placement). */
    readonly sameTable?: boolean;
}

/** One counter: its tables, queues, client, and consumer. */
export interface CounterSystem {
    readonly tableName: string;
    readonly countersTableName: string;
    readonly streamArn: string;
    readonly config: HandlerConfig;
    readonly admin: DynamoDBClient;
    readonly client: HybridCounterClient;
    readonly fatal: LocalQueue;
    readonly first: LocalQueue;
    /** --endpoint, --table, --counters-table, --mode, the queues' URLs and --json. */
    readonly flags: string[];
    /** Keys whose batches fail; Lambda gives up on them at once. */
    readonly outage: Set<string>;
    /** The on-failure metadata of every batch Lambda gave up on. */
    readonly gaveUp: OnFailureRecord[];
    /** Polls the stream and runs the consumer until nothing is left. */
    drain(): Promise<void>;
}

let systems = 0;

/** A counter named after `name` on the servers (see the header). */
export async function counterSystem(servers: Servers, name: string, options: SystemOptions = {}): Promise<CounterSystem> {
    const layout = options.layout ?? DEFAULT_LAYOUT;
    const tableName = `cli-${name}-${++systems}`;
    const countersTableName = options.sameTable ? tableName : `${tableName}-counters`;
    const admin = servers.engine.dynamodb();
    const { streamArn } = await createCounterTable(admin, tableName, layout, "NEW_AND_OLD_IMAGES", {
        healIndex: options.sameTable === true,
    });
    if (!options.sameTable) {
        await createCountersTable(admin, countersTableName, layout, { healIndex: true });
    }
    const fatal = await servers.sqs.createQueue(`${tableName}-fatal`);
    const first = await servers.sqs.createQueue(`${tableName}-first`);
    const mode = options.mode ?? "utilization";
    const config: HandlerConfig = {
        ...layout,
        tableName,
        countersTableName,
        mode,
        periodMs: 600_000,
        ...(options.counterShards === undefined ? {} : { counterShards: options.counterShards }),
        fatalQueueUrl: fatal.url,
        metricsNamespace: "HybridCounterTest",
        thresholds: [0.8, 1],
        usageRetentionDays: 90,
    };
    const client = new HybridCounterClient({
        ...layout,
        tableName,
        countersTableName,
        counterMode: mode,
        ...(options.counterShards === undefined ? {} : { counterShards: options.counterShards }),
        dynamodb: admin,
    });
    const outage = new Set<string>();
    const gaveUp: OnFailureRecord[] = [];
    const emulator = consumerMapping(servers, streamArn, config, outage, gaveUp);
    const flags = [
        ...["--endpoint", servers.engine.endpoint, "--table", tableName, "--counters-table", countersTableName, "--mode", mode],
        ...(options.counterShards === undefined ? [] : ["--counter-shards", String(options.counterShards)]),
        ...["--fatal-queue-url", fatal.url, "--first-dlq-url", first.url, "--json"],
    ];
    return {
        tableName,
        countersTableName,
        streamArn,
        config,
        admin,
        client,
        fatal,
        first,
        flags,
        outage,
        gaveUp,
        drain: () => emulator.drain(),
    };
}

/** The consumer behind a stream mapping that retries nothing, with a tumbling window and no filter. */
export function consumerMapping(
    servers: Servers,
    streamArn: string,
    config: HandlerConfig,
    outage: ReadonlySet<string>,
    gaveUp: OnFailureRecord[],
): MappingEmulator {
    const handler = createStreamHandler({
        config,
        dynamodb: servers.engine.dynamodb(),
        streams: servers.engine.streams(),
        fatal: sqsFatalQueue(
            servers.sqsClient,
            config.fatalQueueUrl,
            jsonLogger("test", () => undefined),
        ),
        sendEvents: async () => true,
        sink: () => undefined,
    });
    // A context whose clock stands still: these tests are of what the handler does, not how fast.
    const context = { getRemainingTimeInMillis: () => 60_000 } as Parameters<typeof handler>[1];
    return new MappingEmulator({
        streams: servers.engine.streams(),
        streamArn,
        settings: { ...LAMBDA_DEFAULTS, maximumRetryAttempts: 0, reportBatchItemFailures: true, tumblingWindowInSeconds: 900 },
        invoke: async (event) => {
            if (event.Records.some((r) => outage.has(r.dynamodb?.Keys?.[config.partitionKey]?.S ?? ""))) {
                throw new Error("consumer outage");
            }
            return handler(event, context);
        },
        onFailure: (record) => void gaveUp.push(record),
    });
}

/** Sets a counter item's count as if records it applied were lost (its marks stay as they are). */
export async function setCount(
    s: Pick<CounterSystem, "admin" | "config">,
    key: Record<string, AttributeValue>,
    count: number,
): Promise<void> {
    await s.admin.send(
        new UpdateItemCommand({
            TableName: s.config.countersTableName,
            Key: key,
            UpdateExpression: "SET #c = :n",
            ExpressionAttributeNames: { "#c": s.config.countAttribute },
            ExpressionAttributeValues: { ":n": { N: String(count) } },
        }),
    );
}

/** Sets `key`'s eventual count. */
export function setEventual(
    s: Pick<CounterSystem, "admin" | "config">,
    key: string,
    count: number,
    regions?: RegionsConfig,
): Promise<void> {
    return setCount(s, eventualKey({ ...s.config, ...(regions === undefined ? {} : { regions }) }, key), count);
}

const dir = mkdtempSync(path.join(tmpdir(), "hc-cli-config-"));
let files = 0;

/** Writes `value` as JSON to a new file; returns its path. */
export function jsonFile(value: unknown): string {
    const file = path.join(dir, `config-${++files}.json`);
    writeFileSync(file, JSON.stringify(value));
    return file;
}

/** The component's clientConfig output of a counter (the selection flat, as the component writes it). */
export function clientConfigOf(s: Pick<CounterSystem, "config">): Record<string, unknown> {
    const { config } = s;
    const selection = config.selection;
    return {
        tableName: config.tableName,
        countersTableName: config.countersTableName,
        partitionKey: config.partitionKey,
        sortKey: config.sortKey,
        deletedAttribute: config.deletedAttribute,
        tokenAttribute: config.tokenAttribute,
        counterPrefix: config.counterPrefix,
        countAttribute: config.countAttribute,
        countedItems: selection.kind,
        ...(selection.kind === "sortKeyPrefix" ? { countedSortKeyPrefix: selection.prefix } : {}),
        ...(selection.kind === "attribute" ? { countedAttributeName: selection.name, countedAttributeValue: selection.value } : {}),
        counterMode: config.mode,
        healQuietWindowSeconds: config.periodMs / 1000,
        ...(config.counterShards === undefined ? {} : { counterShards: config.counterShards }),
        ...(config.regions === undefined ? {} : { regions: config.regions }),
    };
}

/** Flags without the flags `names` and their values. */
export function without(flags: readonly string[], ...names: string[]): string[] {
    return flags.filter((flag, i) => !names.includes(flag) && !(i > 0 && names.includes(flags[i - 1]!) && flags[i - 1] !== "--json"));
}

/** Flags for the human output: without --json. */
export function human(flags: readonly string[]): string[] {
    return flags.filter((flag) => flag !== "--json");
}

/** One member region of a multi-region counter on one engine: its configuration, API client and consumer. */
export interface RegionSide {
    readonly config: HandlerConfig & { readonly regions: RegionsConfig };
    readonly client: HybridCounterClient;
    drain(): Promise<void>;
}

/** A counter on a global table, every member region reading and writing one table (as if each replica held every write at once). */
export interface RegionsSystem {
    readonly tableName: string;
    readonly countersTableName: string;
    readonly admin: DynamoDBClient;
    readonly home: string;
    readonly members: readonly string[];
    side(region: string): RegionSide;
    /** Runs every region's consumer until nothing is left. */
    drain(): Promise<void>;
    /** The clientConfig output of `current`'s stack. */
    clientConfig(current: string): Record<string, unknown>;
}

/** A multi-region counter whose home is `members[0]`. */
export async function regionsSystem(servers: Servers, name: string, members: readonly string[]): Promise<RegionsSystem> {
    const base = await counterSystem(servers, name);
    const regionsOf = (current: string): RegionsConfig => ({
        current,
        members: members.map((region, i) => (i === 0 ? { region, role: "home" as const } : { region })),
    });
    const sides = new Map<string, RegionSide>();
    for (const region of members) {
        const config = { ...base.config, regions: regionsOf(region) };
        const client = new HybridCounterClient({
            tableName: base.tableName,
            countersTableName: base.countersTableName,
            counterMode: config.mode,
            regions: config.regions,
            dynamodb: base.admin,
        });
        const emulator = consumerMapping(servers, base.streamArn, config, new Set(), []);
        sides.set(region, { config, client, drain: () => emulator.drain() });
    }
    return {
        tableName: base.tableName,
        countersTableName: base.countersTableName,
        admin: base.admin,
        home: members[0]!,
        members,
        side: (region) => sides.get(region)!,
        async drain() {
            for (const side of sides.values()) {
                await side.drain();
            }
        },
        clientConfig: (current) => clientConfigOf({ config: { ...base.config, regions: regionsOf(current) } }),
    };
}
