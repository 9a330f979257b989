/**
 * `dev`: a local counter pipeline for developing an API against: DynamoDB Local and the local SQS server,
 * the table, and the shipped consumer and redrive bundles with the component's mapping settings and
 * filters. Prints the endpoint, then a live per-key view, until Ctrl-C.
 */
import { MissingPackageError, startDev } from "../local/twin/dev-engine";
import { readTableStatus, type KeyStatus, type TableStatus } from "../runtime/ops/status";
import { EXIT, OperationError } from "./context";
import { table } from "./format";
import type { CliCommand } from "./command";

export const DEV_TABLE = "hybrid-counter-dev";

const COLUMNS = ["key", "best-effort", "eventual", "live", "pending", "held slots", "drift"];
const row = (s: KeyStatus) => [s.key, s.bestEffort, s.eventual, s.live, s.pendingCreates + s.pendingDeletes, s.heldSlots, s.drift];
const LEGEND =
    "best-effort: your API's counter | eventual: the stream consumer's | live: items that exist | " +
    "pending: not counted yet | drift: eventual - live";

export const devCommand: CliCommand = {
    name: "dev",
    register(program, run) {
        program
            .command("dev")
            .description(
                `run the counter locally for your API: DynamoDB Local, a local SQS server, the table (--table, default ${DEV_TABLE}) ` +
                    "and the shipped consumer and redrive; prints the endpoint and a live per-key view until Ctrl-C",
            )
            .option("--keys <n>", "keys in the live view, worst first", "20")
            .action(
                run<{ keys: string }>(async (ctx, options) => {
                    if (ctx.flags.table === undefined && ctx.flags.config === undefined) {
                        ctx.flags.table = DEV_TABLE;
                    }
                    const config = ctx.counter().table;
                    const shown = Number(options.keys);
                    let dev;
                    try {
                        dev = await startDev({
                            config,
                            handlerLog: ctx.flags.verbose ? (line) => ctx.note(line) : undefined,
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
                        firstDlqUrl: dev.firstDlqUrl,
                        fatalDlqUrl: dev.fatalDlqUrl,
                    };
                    ctx.out.write(
                        ctx.json
                            ? `${JSON.stringify(ready)}\n`
                            : [
                                  `DynamoDB endpoint: ${dev.dynamodbEndpoint} (region us-east-1, any credentials)`,
                                  `table: ${dev.tableName}`,
                                  `SQS endpoint: ${dev.sqsEndpoint} (first DLQ ${dev.firstDlqUrl}, fatal DLQ ${dev.fatalDlqUrl})`,
                                  "Point your API's DynamoDBClient at the endpoint. Ctrl-C stops.",
                                  "",
                              ].join("\n"),
                    );
                    const dynamodb = dev.dynamodb();
                    const tty = !ctx.json && (ctx.out as NodeJS.WriteStream).isTTY === true;
                    let drawn = 0;
                    let previous = "";
                    const render = (status: TableStatus) => {
                        const view = {
                            keys: status.keys,
                            exactKeys: status.exactKeys,
                            totals: status.totals,
                            shown: status.all.slice(0, shown),
                        };
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
                                `batches to the first DLQ ${dev.stats.batchesToFirstDlq}, redriven ${dev.stats.batchesRedriven}`,
                            LEGEND,
                            ...table(COLUMNS, view.shown.map(row)).split("\n"),
                        ];
                        ctx.out.write(
                            tty
                                ? `${drawn > 0 ? `\x1b[${drawn}A` : ""}${lines.map((l) => `\x1b[2K${l}`).join("\n")}\n`
                                : `${lines.join("\n")}\n\n`,
                        );
                        drawn = lines.length;
                    };
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
