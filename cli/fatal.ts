/**
 * `fatal list | show <id> | replay [--to first-dlq] | delete <id>`: reads the fatal DLQ, explains each message in the
 * words of docs/operating.md (runtime/ops/fatal-explain.ts), replays what can still be counted (fatal-replay.ts) and
 * deletes only settled messages (fatal-ops.ts). What the fatal queue refuses during a replay is listed, never dropped.
 */
import {
    deleteFatal,
    FatalMessageNotFoundError,
    listFatal,
    NotSettledError,
    showFatal,
    type FatalEntry,
    type UnparkedMessage,
} from "../runtime/ops/fatal-ops";
import { replayFatal, type ReplayResult } from "../runtime/ops/fatal-replay";
import { thresholdsProblems } from "../runtime/shared/config";
import { EXIT, OperationError, UsageError, type CliContext } from "./context";
import { integerFlag } from "./options";
import { table } from "./format";
import type { CliCommand } from "./command";

function queueOptions(ctx: CliContext) {
    return { sqs: ctx.sqs(), queueUrl: ctx.fatalQueueUrl(), partitionKey: ctx.target().config.partitionKey, signal: ctx.abort.signal };
}

function describe(e: FatalEntry): string {
    const x = e.explanation;
    const range = x.range;
    return [
        `message ${e.id} (${x.kind}${e.sentAt ? `, sent ${e.sentAt}` : ""}, received ${e.receiveCount} times)`,
        `  means: ${x.meaning}`,
        ...(x.problem ? [`  problem: ${x.problem}`] : []),
        ...(x.counterKeys.length > 0 ? [`  keys: ${x.counterKeys.join(", ")}`] : []),
        ...(range
            ? [
                  `  range: shard ${range.shardId}, ${range.startSequenceNumber === undefined ? "up" : `${range.startSequenceNumber}`} to ${range.endSequenceNumber}`,
              ]
            : []),
        ...(x.recordsExpireAt ? [`  records expire: ${x.recordsExpireAt}`] : []),
        `  do: ${x.action}`,
    ].join("\n");
}

/** One line per message the fatal queue refused: what was not parked, where, and the queue's error. */
export function unparkedLines(unparked: readonly UnparkedMessage[]): string[] {
    return unparked.map((m) => {
        const where = [
            ...(m.counterKey === undefined ? [] : [`key ${JSON.stringify(m.counterKey)}`]),
            ...(m.id === undefined ? [] : [`id ${JSON.stringify(m.id)}`]),
        ];
        return `could not park (the fatal queue refused it: ${m.queueError}): ${m.reason}${where.length > 0 ? ` (${where.join(", ")})` : ""}: ${m.problem}`;
    });
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

function replayText(results: readonly ReplayResult[]): string {
    if (results.length === 0) {
        return "the fatal DLQ is empty";
    }
    return [
        table(
            ["message", "kind", "outcome", "detail"],
            results.map((r) => [r.id, r.kind, r.outcome, r.detail ?? ""]),
        ),
        ...unparkedLines(results.flatMap((r) => r.unparked ?? [])),
    ].join("\n");
}

interface ReplayFlags {
    readonly to?: string;
    readonly thresholds?: string;
    readonly usageRetentionDays?: string;
}

/**
 * The settings a replayed batch is applied with, as the deployed functions apply it: the flags, else the component's
 * `thresholds` and `usageRetentionDays` outputs in `--config`, else the component's defaults (what the runtime takes
 * when none is given).
 */
function handlerSettings(ctx: CliContext, flags: ReplayFlags): { thresholds?: readonly number[]; usageRetentionDays?: number } {
    const target = ctx.target();
    let thresholds = target.thresholds;
    if (flags.thresholds !== undefined) {
        const values = flags.thresholds.split(",").map((t) => (t.trim() === "" ? NaN : Number(t)));
        if (thresholdsProblems(values).length > 0) {
            throw new UsageError(
                `--thresholds must be fractions of the limit, each above 0 and at most 1, none twice (got "${flags.thresholds}")`,
            );
        }
        thresholds = [...values].sort((a, b) => a - b);
    }
    const usageRetentionDays = integerFlag("--usage-retention-days", flags.usageRetentionDays, 1, 3_650) ?? target.usageRetentionDays;
    return {
        ...(thresholds === undefined ? {} : { thresholds }),
        ...(usageRetentionDays === undefined ? {} : { usageRetentionDays }),
    };
}

async function replay(ctx: CliContext, flags: ReplayFlags): Promise<number> {
    const { to } = flags;
    if (to !== undefined && to !== "first-dlq") {
        throw new UsageError(`--to must be first-dlq (got "${to}")`);
    }
    const settings = handlerSettings(ctx, flags);
    const options = queueOptions(ctx);
    const firstDlqUrl = to === "first-dlq" ? ctx.firstDlqUrl() : undefined;
    const config = await ctx.countedConfig();
    const bar = ctx.progress();
    let started = false;
    let results: ReplayResult[];
    try {
        results = await replayFatal({
            ...options,
            ...settings,
            config,
            dynamodb: ctx.dynamodb(),
            streams: ctx.streams(),
            ...(firstDlqUrl === undefined ? {} : { toFirstDlq: true, firstDlqUrl }),
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
    ctx.result(results, () => replayText(results));
    if (ctx.abort.signal.aborted) {
        return EXIT.interrupted;
    }
    return results.some((r) => r.outcome === "kept") ? EXIT.failed : EXIT.ok;
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
                "count what can still be counted (batches applied from the stream, keys reconciled) and delete each message once settled",
            )
            .option("--to <queue>", "first-dlq: send the batches back to the first DLQ instead of applying them here")
            .option(
                "--thresholds <fractions>",
                "the threshold fractions the functions announce, comma-separated (default: thresholds in --config, else 0.8,1)",
            )
            .option(
                "--usage-retention-days <days>",
                "the days of usage history the functions keep, 1..3650 (default: usageRetentionDays in --config, else 90)",
            )
            .action(run<ReplayFlags>(async (ctx, options) => replay(ctx, options)));
        fatal
            .command("delete")
            .description("delete one message, only if it is settled (its batch applied, or what it names reconciled)")
            .argument("<id>", "the message id (from `fatal list`)")
            .action(
                run<object>(async (ctx, _options, [id]) => {
                    const options = queueOptions(ctx);
                    const config = await ctx.countedConfig();
                    const entry = await refusing(() => deleteFatal(id!, { ...options, config, dynamodb: ctx.dynamodb() }));
                    ctx.result(
                        { deleted: entry.id, kind: entry.explanation.kind },
                        () => `deleted ${entry.id} (${entry.explanation.kind})`,
                    );
                }),
            );
    },
};
