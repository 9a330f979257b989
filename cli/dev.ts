/**
 * `dev`: a local counter pipeline for developing an API against (cli/dev-pipeline.ts): DynamoDB Local and the local
 * SQS server, the tables, and the shipped consumer, redrive and settler bundles with the component's mapping settings.
 * Prints the endpoint, then a live per-key view (runtime/ops/status-read.ts `readTableStatus`), until Ctrl-C.
 */
import { readTableStatus } from "../runtime/ops/status-read";
import type { KeyStatus, TableStatus } from "../runtime/ops/status";
import { EXIT, OperationError, type CliContext } from "./context";
import { MissingPackageError, startDev, type DevPipeline } from "./dev-pipeline";
import { table } from "./format";
import { integerFlag } from "./options";
import type { CliCommand } from "./command";

export const DEV_TABLE = "hybrid-counter-dev";

const COLUMNS = ["key", "best-effort", "eventual", "live", "pending", "held slots", "drift"];
const row = (s: KeyStatus) => [s.key, s.bestEffort, s.eventual, s.live, s.pendingCreates + s.pendingDeletes, s.heldSlots, s.drift];
const LEGEND =
    "best-effort: your API's counter | eventual: the stream consumer's | live: items that exist | " +
    "pending: not flagged yet, or tombstones the settler removes | drift: eventual - counted";

function readyText(dev: DevPipeline): string {
    return [
        `DynamoDB endpoint: ${dev.dynamodbEndpoint} (region us-east-1, any credentials)`,
        `tables: ${dev.tableName} (items), ${dev.countersTableName} (counters)`,
        `SQS endpoint: ${dev.sqsEndpoint} (first DLQ ${dev.firstDlqUrl}, fatal DLQ ${dev.fatalDlqUrl})`,
        "Point your API's DynamoDBClient at the endpoint. Ctrl-C stops.",
        "",
    ].join("\n");
}

/** Draws the live view: a JSON line per change, a redrawn block on a terminal, or blocks one after another. */
function renderer(ctx: CliContext, dev: DevPipeline, shown: number): (status: TableStatus) => void {
    const tty = !ctx.json && (ctx.out as NodeJS.WriteStream).isTTY === true;
    let drawn = 0;
    let previous = "";
    return (status) => {
        const view = { keys: status.keys, exactKeys: status.exactKeys, totals: status.totals, shown: status.all.slice(0, shown) };
        const text = JSON.stringify(view);
        if (text === previous) {
            return;
        }
        previous = text;
        if (ctx.json) {
            ctx.out.write(`${JSON.stringify({ event: "status", ...view })}\n`);
            return;
        }
        const lines = [
            `${status.keys} keys, ${status.exactKeys} exact | consumer invocations ${dev.stats.consumerInvocations}, ` +
                `batches to the first DLQ ${dev.stats.batchesToFirstDlq}, redriven ${dev.stats.batchesRedriven}, settler runs ${dev.stats.settlerRuns}`,
            LEGEND,
            ...table(COLUMNS, view.shown.map(row)).split("\n"),
        ];
        ctx.out.write(
            tty ? `${drawn > 0 ? `\x1b[${drawn}A` : ""}${lines.map((l) => `\x1b[2K${l}`).join("\n")}\n` : `${lines.join("\n")}\n\n`,
        );
        drawn = lines.length;
    };
}

export const devCommand: CliCommand = {
    name: "dev",
    register(program, run) {
        program
            .command("dev")
            .description(
                `run the counter locally for your API: DynamoDB Local, a local SQS server, the tables (--table, default ${DEV_TABLE}, ` +
                    "and its counters table, default <table>-counters; or the layout of --config) and the shipped consumer, redrive and settler; " +
                    "prints the endpoint and a live per-key view until Ctrl-C",
            )
            .option("--keys <n>", "keys in the live view, worst first, 1..1000", "20")
            .action(
                run<{ keys: string }>(async (ctx, options) => {
                    const shown = integerFlag("--keys", options.keys, 1, 1_000)!;
                    if (ctx.flags.config === undefined) {
                        ctx.flags.table ??= DEV_TABLE;
                        // The component's default placement: the counter items in a table of their own.
                        ctx.flags.countersTable ??= `${ctx.flags.table}-counters`;
                    }
                    const config = ctx.target().config;
                    let dev: DevPipeline;
                    try {
                        dev = await startDev({
                            config,
                            ...(ctx.flags.verbose ? { handlerLog: (line: string) => ctx.note(line) } : {}),
                            onError: (error) =>
                                ctx.note(`poll failed (retrying): ${error instanceof Error ? error.message : String(error)}`),
                        });
                    } catch (error) {
                        throw error instanceof MissingPackageError ? new OperationError(error.message) : error;
                    }
                    const ready = {
                        event: "ready",
                        dynamodbEndpoint: dev.dynamodbEndpoint,
                        sqsEndpoint: dev.sqsEndpoint,
                        region: "us-east-1",
                        tableName: dev.tableName,
                        countersTableName: dev.countersTableName,
                        counterMode: config.mode,
                        firstDlqUrl: dev.firstDlqUrl,
                        fatalDlqUrl: dev.fatalDlqUrl,
                    };
                    ctx.out.write(ctx.json ? `${JSON.stringify(ready)}\n` : readyText(dev));
                    const dynamodb = dev.dynamodb();
                    const render = renderer(ctx, dev, shown);
                    try {
                        while (!ctx.abort.signal.aborted) {
                            render(await readTableStatus({ config, dynamodb, limit: shown }));
                            await new Promise<void>((resolve) => {
                                const timer = setTimeout(resolve, 1_000);
                                ctx.abort.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
                            });
                        }
                    } finally {
                        dynamodb.destroy();
                        await dev.stop();
                        ctx.note("stopped DynamoDB Local and the local SQS server");
                    }
                    return EXIT.ok;
                }),
            );
    },
};
