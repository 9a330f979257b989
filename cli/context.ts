/**
 * What every command shares: the global flags, the counter's configuration (from `--config` or the
 * table and layout flags), the AWS clients, output (human or `--json`), progress and interruption.
 *
 * Contract: stdout carries only the result; progress, logs and errors go to stderr. Exit 0 (ok), 1 (the
 * operation failed), 2 (usage: a bad flag or config), 130 (interrupted). Errors are one line naming the
 * flag, with the stack only under `--verbose`.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { SQSClient } from "@aws-sdk/client-sqs";
import { SingleBar } from "cli-progress";
import type { Command } from "commander";
import { readFileSync } from "node:fs";
import {
    DEFAULT_LAYOUT,
    counterShardsProblems,
    layoutProblems,
    layoutWithDefaults,
    selectionProblems,
    type CounterTableConfig,
    type CounterTableLayout,
    type FlatSelection,
} from "../runtime/shared/config";
import { removedFieldProblems } from "../runtime/shared/removed-fields";

import { OperationError, UsageError } from "./errors";
import { checkQueueRegions, refuseUnregionedGlobalTable, resolveRegions } from "./regions";

export { OperationError, UsageError } from "./errors";

export const EXIT = Object.freeze({ ok: 0, failed: 1, usage: 2, interrupted: 130 });

export interface GlobalFlags {
    config?: string;
    table?: string;
    countersTable?: string;
    counterShards?: string;
    countedItems?: string;
    countedSortKeyPrefix?: string;
    countedAttributeName?: string;
    countedAttributeValue?: string;
    partitionKey?: string;
    sortKey?: string;
    deletedAttribute?: string;
    tokenAttribute?: string;
    counterPrefix?: string;
    countAttribute?: string;
    fatalQueueUrl?: string;
    firstDlqUrl?: string;
    endpoint?: string;
    sqsEndpoint?: string;
    region?: string;
    profile?: string;
    json?: boolean;
    verbose?: boolean;
}

/** The global flags, added to the root command and inherited by every command. */
export function addGlobalFlags(program: Command): Command {
    return program
        .option("--config <file>", "the component's clientConfig as JSON (`pulumi stack output clientConfig --json`), or - for stdin")
        .option("--table <name>", "the table name (instead of --config)")
        .option("--counters-table <name>", "the counters table (default: the component's own, or --table in the same-table placement)")
        .option(
            "--counter-shards <n>",
            "partitions of the counters table each key's counting spreads over (default 1, or counterShards in --config)",
        )
        .option("--counted-items <kind>", "which items count: client | sortKeyPrefix | attribute (default client)")
        .option("--counted-sort-key-prefix <prefix>", "with --counted-items sortKeyPrefix: the prefix")
        .option("--counted-attribute-name <name>", "with --counted-items attribute: the attribute")
        .option("--counted-attribute-value <value>", "with --counted-items attribute: its value")
        .option("--partition-key <name>", `partition key attribute (default ${DEFAULT_LAYOUT.partitionKey})`)
        .option("--sort-key <name>", `sort key attribute (default ${DEFAULT_LAYOUT.sortKey})`)
        .option("--deleted-attribute <name>", `soft-delete flag (default ${DEFAULT_LAYOUT.deletedAttribute})`)
        .option("--token-attribute <name>", `write token (default ${DEFAULT_LAYOUT.tokenAttribute})`)
        .option("--counter-prefix <prefix>", `counter items' sort-key prefix (default ${DEFAULT_LAYOUT.counterPrefix})`)
        .option("--count-attribute <name>", `counter value attribute (default ${DEFAULT_LAYOUT.countAttribute})`)
        .option("--fatal-queue-url <url>", "the fatal DLQ (the component's fatalDlqUrl output)")
        .option("--first-dlq-url <url>", "the first DLQ (the component's firstDlqUrl output)")
        .option("--endpoint <url>", "DynamoDB endpoint (e.g. DynamoDB Local)")
        .option("--sqs-endpoint <url>", "SQS endpoint (default: the queue URL's own host)")
        .option(
            "--region <region>",
            "AWS region (default: the standard chain, e.g. AWS_REGION); for a multi-region counter, the member region the command runs as (default: regions.current in --config)",
        )
        .option("--profile <name>", "AWS profile (standard credential chain)")
        .option("--json", "print the result as one JSON document")
        .option("--verbose", "print stack traces with errors");
}

export interface CounterTarget {
    readonly table: CounterTableConfig;
    readonly fatalQueueUrl?: string;
    readonly firstDlqUrl?: string;
}

type StringLayoutField = Exclude<keyof CounterTableLayout, "selection">;

const LAYOUT_FLAGS: Record<StringLayoutField | keyof FlatSelection, string> = {
    partitionKey: "--partition-key",
    sortKey: "--sort-key",
    deletedAttribute: "--deleted-attribute",
    tokenAttribute: "--token-attribute",
    counterPrefix: "--counter-prefix",
    countAttribute: "--count-attribute",
    countedItems: "--counted-items",
    countedSortKeyPrefix: "--counted-sort-key-prefix",
    countedAttributeName: "--counted-attribute-name",
    countedAttributeValue: "--counted-attribute-value",
};

/**
 * The counter's table, layout and queues from `--config` JSON and the flags (flags win). The JSON is the
 * clientConfig output itself, or the whole `pulumi stack output --json` with `clientConfig`,
 * `fatalDlqUrl` and `firstDlqUrl`. Pure apart from reading the file: `readText` is injected.
 */
export function resolveTarget(flags: GlobalFlags, readText: (source: string) => string): CounterTarget {
    let fromFile: Record<string, unknown> = {};
    let outputs: Record<string, unknown> = {};
    if (flags.config !== undefined) {
        let text: string;
        try {
            text = readText(flags.config);
        } catch (error) {
            throw new UsageError(
                `--config: cannot read ${flags.config} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
            );
        }
        let parsed: unknown;
        try {
            parsed = JSON.parse(text);
        } catch (error) {
            throw new UsageError(`--config: ${flags.config === "-" ? "stdin" : flags.config} is not JSON (${(error as Error).message})`);
        }
        if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
            throw new UsageError("--config: must be a JSON object (the clientConfig output)");
        }
        outputs = parsed as Record<string, unknown>;
        const nested = outputs.clientConfig;
        fromFile = nested !== null && typeof nested === "object" ? (nested as Record<string, unknown>) : outputs;
    }
    const text = (value: unknown, name: string): string | undefined => {
        if (value === undefined) {
            return undefined;
        }
        if (typeof value !== "string") {
            throw new UsageError(`--config: [${name}] must be a string`);
        }
        return value;
    };
    const removed = removedFieldProblems(fromFile);
    if (removed.length > 0) {
        throw new UsageError(`--config: ${removed[0]!}`);
    }
    const tableName = flags.table ?? text(fromFile.tableName, "tableName");
    if (tableName === undefined || tableName.length === 0) {
        throw new UsageError("--table or --config is required: which table holds the counter?");
    }
    const given: Partial<Record<StringLayoutField | keyof FlatSelection, string>> = {};
    for (const field of Object.keys(LAYOUT_FLAGS) as Array<StringLayoutField | keyof FlatSelection>) {
        const value = flags[field] ?? text(fromFile[field], field);
        if (value !== undefined) {
            given[field] = value;
        }
    }
    const layout = layoutWithDefaults(given);
    const problems = [...layoutProblems(layout), ...selectionProblems(layout)];
    if (problems.length > 0) {
        const field = /^\[(\w+)\]/.exec(problems[0]!)?.[1] as StringLayoutField | keyof FlatSelection | undefined;
        const flag = field !== undefined && field in LAYOUT_FLAGS ? LAYOUT_FLAGS[field] : "--config";
        throw new UsageError(`${flag}: ${problems[0]!.replace(/^\[\w+\] /, "")}`);
    }
    const countersTableName = flags.countersTable ?? text(fromFile.countersTableName, "countersTableName");
    // Every command reads (and heals, and reconciles) every shard of a key: the count must be the deployed one.
    let counterShards: unknown = fromFile.counterShards;
    if (flags.counterShards !== undefined) {
        counterShards = /^\d+$/.test(flags.counterShards) ? Number(flags.counterShards) : flags.counterShards;
    }
    const shardProblems = counterShardsProblems(counterShards, tableName, countersTableName);
    if (shardProblems.length > 0) {
        const flag = flags.counterShards !== undefined ? "--counter-shards" : "--config";
        throw new UsageError(`${flag}: ${shardProblems[0]!.replace(/^\[\w+\] /, "")}`);
    }
    const shards = (counterShards as number | undefined) ?? 1;
    // A multi-region counter (cli/regions.ts): the command runs as --region, else the configuration's current region.
    const { regions, regionAttribute } = resolveRegions(fromFile, flags.region, {
        tableName,
        countersTableName,
        attributes: {
            partitionKey: layout.partitionKey,
            sortKey: layout.sortKey,
            deletedAttribute: layout.deletedAttribute,
            tokenAttribute: layout.tokenAttribute,
        },
    });
    const fatalQueueUrl = flags.fatalQueueUrl ?? text(outputs.fatalDlqUrl, "fatalDlqUrl");
    const firstDlqUrl = flags.firstDlqUrl ?? text(outputs.firstDlqUrl, "firstDlqUrl");
    if (regions !== undefined) {
        checkQueueRegions(regions.current, [
            { url: fatalQueueUrl, name: flags.fatalQueueUrl === undefined ? "--config: [fatalDlqUrl]" : "--fatal-queue-url" },
            { url: firstDlqUrl, name: flags.firstDlqUrl === undefined ? "--config: [firstDlqUrl]" : "--first-dlq-url" },
        ]);
    }
    return {
        table: {
            ...layout,
            tableName,
            ...(countersTableName === undefined ? {} : { countersTableName }),
            ...(shards === 1 ? {} : { counterShards: shards }),
            ...(regions === undefined ? {} : { regions }),
            ...(regionAttribute === undefined ? {} : { regionAttribute }),
        },
        fatalQueueUrl,
        firstDlqUrl,
    };
}

/** The origin of a queue URL that is not an AWS endpoint, or undefined. */
export function localOrigin(queueUrl: string | undefined): string | undefined {
    if (queueUrl === undefined) {
        return undefined;
    }
    let url: URL;
    try {
        url = new URL(queueUrl);
    } catch {
        throw new UsageError(`--fatal-queue-url / --first-dlq-url: "${queueUrl}" is not a URL`);
    }
    return /(^|\.)amazonaws\.com(\.cn)?$/.test(url.hostname) ? undefined : url.origin;
}

function readSource(source: string): string {
    return source === "-" ? readFileSync(0, "utf8") : readFileSync(source, "utf8");
}

export interface Progress {
    start(total: number, label: string): void;
    tick(done: number, detail?: string): void;
    stop(): void;
}

/** A progress bar on a TTY, plain lines otherwise; always on stderr. */
export function progress(stream: NodeJS.WriteStream = process.stderr): Progress {
    if (stream.isTTY) {
        let bar: SingleBar | undefined;
        return {
            start(total, label) {
                bar = new SingleBar({
                    stream,
                    format: `${label} [{bar}] {value}/{total} {detail}`,
                    hideCursor: true,
                    clearOnComplete: false,
                });
                bar.start(total, 0, { detail: "" });
            },
            tick(done, detail = "") {
                bar?.update(done, { detail });
            },
            stop() {
                bar?.stop();
            },
        };
    }
    let name = "";
    let of = 0;
    return {
        start(total, label) {
            name = label;
            of = total;
            stream.write(`${label}: 0/${total}\n`);
        },
        tick(done, detail) {
            stream.write(`${name}: ${done}/${of}${detail ? ` ${detail}` : ""}\n`);
        },
        stop() {},
    };
}

/** Everything a command adapter needs. */
export class CliContext {
    private target?: CounterTarget;
    private globalTableChecked?: Promise<void>;
    private dynamo?: DynamoDBClient;
    private streamsClient?: DynamoDBStreamsClient;
    private sqsClient?: SQSClient;
    /** Aborted by the first Ctrl-C: long commands stop between units of work. */
    readonly abort = new AbortController();

    constructor(
        readonly flags: GlobalFlags,
        readonly out: NodeJS.WritableStream = process.stdout,
        readonly err: NodeJS.WriteStream = process.stderr,
    ) {
        if (flags.profile !== undefined) {
            // The standard credential chain reads the profile from the environment.
            process.env.AWS_PROFILE = flags.profile;
        }
    }

    get json(): boolean {
        return this.flags.json === true;
    }

    counter(): CounterTarget {
        this.target ??= resolveTarget(this.flags, readSource);
        return this.target;
    }

    /**
     * The counter, for a command that reads or writes counts: without `regions`, its table must not be a global
     * table (cli/regions.ts, `refuseUnregionedGlobalTable`); checked once, before the command reads or writes.
     */
    async countedTarget(): Promise<CounterTarget> {
        const target = this.counter();
        if (target.table.regions === undefined) {
            this.globalTableChecked ??= refuseUnregionedGlobalTable(
                this.dynamodb(),
                target.table.tableName,
                this.flags.table !== undefined ? "--table" : "--config: [tableName]",
                (line) => this.note(line),
            );
            await this.globalTableChecked;
        }
        return target;
    }

    fatalQueueUrl(): string {
        const url = this.counter().fatalQueueUrl;
        if (!url) {
            throw new UsageError("--fatal-queue-url is required (or fatalDlqUrl in --config)");
        }
        return url;
    }

    firstDlqUrl(): string {
        const url = this.counter().firstDlqUrl;
        if (!url) {
            throw new UsageError("--first-dlq-url is required (or firstDlqUrl in --config)");
        }
        return url;
    }

    /**
     * The AWS region the clients go to: `--region`; else, for a multi-region counter, the region the command runs as
     * (`regions.current` of `--config`); else the standard chain's.
     */
    private awsRegion(): string | undefined {
        if (this.flags.region) {
            return this.flags.region;
        }
        return this.flags.config === undefined ? undefined : this.counter().table.regions?.current;
    }

    private clientOptions(endpoint: string | undefined) {
        const region = this.awsRegion();
        return { ...(region ? { region } : {}), ...(endpoint ? { endpoint } : {}), maxAttempts: 3 };
    }

    dynamodb(): DynamoDBClient {
        this.dynamo ??= new DynamoDBClient(this.clientOptions(this.flags.endpoint));
        return this.dynamo;
    }

    streams(): DynamoDBStreamsClient {
        this.streamsClient ??= new DynamoDBStreamsClient(this.clientOptions(this.flags.endpoint));
        return this.streamsClient;
    }

    /**
     * SQS at --sqs-endpoint; else, for a queue URL outside AWS (a local server), at that URL's origin;
     * else the region's endpoint.
     */
    sqs(): SQSClient {
        if (!this.sqsClient) {
            const { fatalQueueUrl, firstDlqUrl } = this.counter();
            this.sqsClient = new SQSClient(this.clientOptions(this.flags.sqsEndpoint ?? localOrigin(fatalQueueUrl ?? firstDlqUrl)));
        }
        return this.sqsClient;
    }

    progress(): Progress {
        return progress(this.err);
    }

    /** Writes the result: JSON when --json, else the human text. */
    result(value: unknown, human: () => string): void {
        this.out.write(this.json ? `${JSON.stringify(value, null, 2)}\n` : `${human()}\n`);
    }

    /** A line on stderr (never in the result). */
    note(line: string): void {
        this.err.write(`${line}\n`);
    }

    close(): void {
        this.dynamo?.destroy();
        this.streamsClient?.destroy();
        this.sqsClient?.destroy();
    }
}

/** One line for an error: what failed, naming the flag or resource, without the stack. */
export function describeFailure(error: unknown, flags: GlobalFlags): { message: string; code: number } {
    if (error instanceof UsageError) {
        return { message: error.message, code: EXIT.usage };
    }
    if (error instanceof OperationError) {
        return { message: error.message, code: EXIT.failed };
    }
    const e = error as { name?: string; message?: string; code?: string; cause?: { code?: string } };
    const name = e?.name ?? "Error";
    const message = (e?.message ?? String(error)).split("\n")[0]!;
    const code = e?.code ?? e?.cause?.code;
    if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EHOSTUNREACH" || code === "ETIMEDOUT" || name === "TimeoutError") {
        const where = flags.endpoint ?? flags.sqsEndpoint ?? "the AWS endpoint";
        return { message: `could not reach ${where} (${code ?? name}): check --endpoint, --sqs-endpoint and --region`, code: EXIT.failed };
    }
    if (name === "QueueDoesNotExist" || name === "AWS.SimpleQueueService.NonExistentQueue") {
        return { message: `the queue does not exist: check --fatal-queue-url / --first-dlq-url (${message})`, code: EXIT.failed };
    }
    if (name === "ResourceNotFoundException") {
        return { message: `table not found: check --table / --config and --region (${message})`, code: EXIT.failed };
    }
    if (/Region is missing/i.test(message)) {
        return { message: "no AWS region: pass --region or set AWS_REGION", code: EXIT.usage };
    }
    if (name === "CredentialsProviderError" || /credential/i.test(message)) {
        return { message: `no AWS credentials: pass --profile or set the standard AWS variables (${message})`, code: EXIT.failed };
    }
    return { message: `${name}: ${message}`, code: EXIT.failed };
}
