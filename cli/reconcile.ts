/** `reconcile --key K | --all`: settles keys from the table (what the stream can no longer deliver), with progress. */
import { reconcileAll, reconcileKeys, type ReconcileKeysResult } from "../runtime/ops/reconcile-all";
import { sqsFatalQueue, type FatalMessage, type FatalQueue } from "../runtime/stream/fatal";
import { EXIT, UsageError, type CliContext } from "./context";
import { table } from "./format";
import type { CliCommand } from "./command";

/** A message a command could not park: no fatal queue is configured, or the queue refused it (`queueError`). */
export interface UnparkedMessage extends FatalMessage {
    readonly queueError?: string;
}

/**
 * The fatal queue when it is configured; otherwise the messages are kept for the output. A message the queue refuses is
 * kept too, with the queue's error, so that no command drops one unsaid.
 */
export function fatalFor(ctx: CliContext): FatalQueue & { unparked: UnparkedMessage[] } {
    const url = ctx.counter().fatalQueueUrl;
    const unparked: UnparkedMessage[] = [];
    let queueError = "";
    const queue = url
        ? sqsFatalQueue(ctx.sqs(), url, {
              log(_level, _message, fields) {
                  queueError = String(fields?.error ?? "");
              },
          })
        : undefined;
    return {
        unparked,
        async park(message) {
            if (queue) {
                queueError = "";
                const parked = await queue.park(message);
                if (!parked) {
                    unparked.push({ ...message, queueError: queueError || "not sent" });
                }
                return parked;
            }
            unparked.push(message);
            return true;
        },
    };
}

/** One line per message no queue holds: what was not counted, where, and why it is not in the fatal queue. */
export function unparkedLines(unparked: readonly UnparkedMessage[]): string[] {
    return unparked.map((m) => {
        const why = m.queueError === undefined ? "no --fatal-queue-url to park it" : `the fatal queue refused it: ${m.queueError}`;
        const where = [
            ...(m.counterKey === undefined ? [] : [`key ${JSON.stringify(m.counterKey)}`]),
            ...(m.id === undefined ? [] : [`id ${JSON.stringify(m.id)}`]),
        ];
        return `could not count (${why}): ${m.reason}${where.length > 0 ? ` (${where.join(", ")})` : ""}: ${m.problem}`;
    });
}

export const reconcileCommand: CliCommand = {
    name: "reconcile",
    register(program, run) {
        program
            .command("reconcile")
            .description("count, from the table, the creations and deletions the stream did not deliver; safe beside the consumer")
            .option("--key <key...>", "counter keys to settle")
            .option("--all", "every key that has pending items (scans the table)")
            .action(
                run<{ key?: string[]; all?: boolean }>(async (ctx, options) => {
                    if ((options.key === undefined) === (options.all !== true)) {
                        throw new UsageError(options.all ? "--key and --all exclude each other" : "--key <key> or --all is required");
                    }
                    const fatal = fatalFor(ctx);
                    const target = await ctx.countedTarget();
                    const bar = ctx.progress();
                    const deps = {
                        config: target.table,
                        dynamodb: ctx.dynamodb(),
                        fatal,
                        signal: ctx.abort.signal,
                        onKey: (r: { key: string }, done: number) => bar.tick(done, r.key),
                    };
                    let result: ReconcileKeysResult;
                    try {
                        if (options.all) {
                            result = await reconcileAll({ ...deps, onPlanned: (keys) => bar.start(keys.length, "reconcile") });
                        } else {
                            bar.start(options.key!.length, "reconcile");
                            result = await reconcileKeys(options.key!, deps);
                        }
                    } finally {
                        bar.stop();
                    }
                    const output = { ...result, unparked: fatal.unparked };
                    ctx.result(output, () => {
                        const lines = [
                            table(
                                ["key", "found", "counted", "already settled", "incomplete"],
                                result.results.map((r) => [r.key, r.found, r.counted, r.alreadySettled, String(r.incomplete)]),
                            ),
                        ];
                        if (result.results.length === 0) {
                            lines[0] = "nothing to reconcile";
                        }
                        if (result.notStarted.length > 0) {
                            lines.push(`interrupted: ${result.notStarted.length} keys not started (run it again)`);
                        }
                        if (result.incomplete) {
                            lines.push("some keys could not be settled yet (contention or throttling): run it again");
                        }
                        for (const r of result.refused ?? []) {
                            lines.push(`refused ${JSON.stringify(r.key)}: [key] ${r.problem}; its items can never be counted`);
                        }
                        lines.push(...unparkedLines(fatal.unparked));
                        return lines.join("\n");
                    });
                    if (result.notStarted.length > 0) {
                        return EXIT.interrupted;
                    }
                    return result.incomplete || result.refused !== undefined || fatal.unparked.length > 0 ? EXIT.failed : EXIT.ok;
                }),
            );
    },
};
