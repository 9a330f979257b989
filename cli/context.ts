/**
 * What every command shares: the global flags, the counter (cli/target.ts), the AWS clients, output (human or
 * `--json`), progress and interruption.
 *
 * Contract: stdout carries only the result; progress, logs and errors go to stderr. Exit 0 (ok), 1 (the operation
 * failed, or found something it was asked to refuse), 2 (usage: a bad flag or config), 130 (interrupted). Errors are
 * one line naming the flag, with the stack only under `--verbose`.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { SQSClient } from "@aws-sdk/client-sqs";
import { SingleBar } from "cli-progress";
import type { Command } from "commander";
import { readFileSync } from "node:fs";
import { DEFAULT_LAYOUT, DEFAULT_PERIOD_SECONDS, type CounterConfig } from "../runtime/shared/config";
import { OperationError, UsageError } from "./errors";
import { refuseUnregionedGlobalTable } from "./regions";
import { resolveTarget, type CounterTarget, type GlobalFlags } from "./target";

export { OperationError, UsageError } from "./errors";
export type { CounterTarget, GlobalFlags } from "./target";

export const EXIT = Object.freeze({ ok: 0, failed: 1, usage: 2, interrupted: 130 });

/** The global flags, added to the root command and inherited by every command. */
export function addGlobalFlags(program: Command): Command {
    return program
        .option(
            "--config <file>",
            "the component's outputs as JSON (`pulumi stack output --json`, or its clientConfig alone), or - for stdin",
        )
        .option("--table <name>", "the table name (instead of --config)")
        .option(
            "--counters-table <name>",
            "the counters table (default: countersTableName in --config, else --table: the same-table placement)",
        )
        .option(
            "--counter-shards <n>",
            "partitions of the counters table each key's best-effort spreads over (default 1, or counterShards in --config)",
        )
        .option(
            "--mode <mode>",
            "the counter's mode, utilization or strict (default: counterMode in --config; one that differs is refused)",
        )
        .option(
            "--quiet-window-seconds <s>",
            `the counter's ledger period, 1..86400 (default: healQuietWindowSeconds in --config, else ${DEFAULT_PERIOD_SECONDS}; one that differs is refused)`,
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
    private resolved?: CounterTarget;
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

    target(): CounterTarget {
        this.resolved ??= resolveTarget(this.flags, readSource);
        return this.resolved;
    }

    /**
     * The counter, for a command that reads or writes counts: without `regions`, its table must not be a global
     * table (cli/regions.ts, `refuseUnregionedGlobalTable`); checked once, before the command reads or writes.
     */
    async countedConfig(): Promise<CounterConfig> {
        const { config } = this.target();
        if (config.regions === undefined) {
            this.globalTableChecked ??= refuseUnregionedGlobalTable(
                this.dynamodb(),
                config.tableName,
                this.flags.table !== undefined ? "--table" : "--config: [tableName]",
                (line) => this.note(line),
            );
            await this.globalTableChecked;
        }
        return config;
    }

    /** The counter, for a command whose writes depend on its mode: the mode must have been given. */
    modedConfig(command: string): CounterConfig {
        const target = this.target();
        if (!target.modeGiven) {
            throw new UsageError(
                `--mode is required (or counterMode in --config): ${command} works by the counter's mode, utilization or strict`,
            );
        }
        return target.config;
    }

    fatalQueueUrl(): string {
        const url = this.target().fatalQueueUrl;
        if (!url) {
            throw new UsageError("--fatal-queue-url is required (or fatalDlqUrl in --config)");
        }
        return url;
    }

    firstDlqUrl(): string {
        const url = this.target().firstDlqUrl;
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
        return this.flags.config === undefined ? undefined : this.target().config.regions?.current;
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

    /** SQS at --sqs-endpoint; else, for a queue URL outside AWS (a local server), at its origin; else the region's. */
    sqs(): SQSClient {
        if (!this.sqsClient) {
            const { fatalQueueUrl, firstDlqUrl } = this.target();
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
