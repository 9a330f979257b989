/**
 * `fatal list | show <id> | replay [--to first-dlq] | delete <id>`: reads the fatal DLQ, explains each
 * message in the words of docs/operating.md, replays what can still be counted and deletes only settled messages.
 */
import {
    deleteFatal,
    listFatal,
    NotSettledError,
    FatalMessageNotFoundError,
    replayFatal,
    showFatal,
    type FatalEntry,
} from "../runtime/ops/fatal-ops";
import { EXIT, OperationError, UsageError, type CliContext } from "./context";
import { table } from "./format";
import type { CliCommand } from "./command";

function queueOptions(ctx: CliContext) {
    return { sqs: ctx.sqs(), queueUrl: ctx.fatalQueueUrl(), partitionKey: ctx.counter().table.partitionKey, signal: ctx.abort.signal };
}

function describe(e: FatalEntry): string {
    const x = e.explanation;
    return [
        `message ${e.id} (${x.kind}${e.sentAt ? `, sent ${e.sentAt}` : ""}, received ${e.receiveCount} times)`,
        `  means: ${x.meaning}`,
        ...(x.problem ? [`  problem: ${x.problem}`] : []),
        ...(x.counterKeys.length > 0 ? [`  keys: ${x.counterKeys.join(", ")}`] : []),
        ...(x.range ? [`  range: shard ${x.range.shardId}, ${x.range.startSequenceNumber} to ${x.range.endSequenceNumber}`] : []),
        `  do: ${x.action}`,
    ].join("\n");
}

/** Maps the runtime's refusals to one-line failures (exit 1). */
async function refusing<T>(work: () => Promise<T>): Promise<T> {
    try {
        return await work();
    } catch (error) {
        if (error instanceof NotSettledError || error instanceof FatalMessageNotFoundError) {
            throw new OperationError(error.message);
        }
        throw error;
    }
}

export const fatalCommand: CliCommand = {
    name: "fatal",
    register(program, run) {
        const fatal = program.command("fatal").description("read, explain, replay and delete the fatal DLQ's messages");
        fatal
            .command("list")
            .description("every message, what it means and what to do (the queue is left as it was)")
            .action(
                run<object>(async (ctx) => {
                    const entries = await listFatal(queueOptions(ctx));
                    ctx.result(
                        entries.map(({ body: _body, ...e }) => e),
                        () => (entries.length === 0 ? "the fatal DLQ is empty" : entries.map(describe).join("\n\n")),
                    );
                }),
            );
        fatal
            .command("show")
            .description("one message in full, explained")
            .argument("<id>", "the message id (from `fatal list`)")
            .action(
                run<object>(async (ctx, _options, [id]) => {
                    const entry = await refusing(() => showFatal(id!, queueOptions(ctx)));
                    let body: unknown = entry.body;
                    try {
                        body = JSON.parse(entry.body);
                    } catch {
                        // Not JSON: shown as sent.
                    }
                    ctx.result(
                        { ...entry, body },
                        () => `${describe(entry)}\n\n${typeof body === "string" ? body : JSON.stringify(body, null, 2)}`,
                    );
                }),
            );
        fatal
            .command("replay")
            .description(
                "count what can still be counted (exhausted batches re-read from the stream, poison messages' keys reconciled) " +
                    "and delete each message once settled",
            )
            .option("--to <queue>", "first-dlq: send exhausted batches back to the first DLQ instead of counting them here")
            .action(
                run<{ to?: string }>(async (ctx, options) => {
                    if (options.to !== undefined && options.to !== "first-dlq") {
                        throw new UsageError(`--to must be first-dlq (got "${options.to}")`);
                    }
                    const target = await ctx.countedTarget();
                    const bar = ctx.progress();
                    let started = false;
                    let results;
                    try {
                        results = await replayFatal({
                            ...queueOptions(ctx),
                            config: target.table,
                            dynamodb: ctx.dynamodb(),
                            streams: ctx.streams(),
                            toFirstDlq: options.to === "first-dlq",
                            firstDlqUrl: options.to === "first-dlq" ? ctx.firstDlqUrl() : target.firstDlqUrl,
                            onMessage: (r, done, total) => {
                                if (!started) {
                                    bar.start(total, "replay");
                                    started = true;
                                }
                                bar.tick(done, `${r.id} ${r.outcome}`);
                            },
                        });
                    } finally {
                        bar.stop();
                    }
                    ctx.result(results, () =>
                        results.length === 0
                            ? "the fatal DLQ is empty"
                            : table(
                                  ["message", "kind", "outcome", "detail"],
                                  results.map((r) => [r.id, r.kind, r.outcome, r.detail ?? ""]),
                              ),
                    );
                    if (ctx.abort.signal.aborted) {
                        return EXIT.interrupted;
                    }
                    return results.some((r) => r.outcome === "kept") ? EXIT.failed : EXIT.ok;
                }),
            );
        fatal
            .command("delete")
            .description("delete one message, only if it is settled (its keys, or the table, have nothing pending)")
            .argument("<id>", "the message id (from `fatal list`)")
            .action(
                run<object>(async (ctx, _options, [id]) => {
                    const target = await ctx.countedTarget();
                    const entry = await refusing(() =>
                        deleteFatal(id!, { ...queueOptions(ctx), config: target.table, dynamodb: ctx.dynamodb() }),
                    );
                    ctx.result(
                        { deleted: entry.id, kind: entry.explanation.kind },
                        () => `deleted ${entry.id} (${entry.explanation.kind})`,
                    );
                }),
            );
    },
};
