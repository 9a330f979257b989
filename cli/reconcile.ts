/** `reconcile --key K | --all`: settles keys from the table (what the stream can no longer deliver), with progress. */
import { reconcileAll, reconcileKeys, type ReconcileKeysResult } from "../runtime/ops/reconcile-all";
import { sqsFatalQueue, type FatalMessage, type FatalQueue } from "../runtime/stream/fatal";
import { jsonLogger } from "../runtime/shared/telemetry";
import { EXIT, UsageError, type CliContext } from "./context";
import { table } from "./format";
import type { CliCommand } from "./command";

/** The fatal queue when it is configured; otherwise the messages are kept for the output. */
export function fatalFor(ctx: CliContext): FatalQueue & { unparked: FatalMessage[] } {
    const url = ctx.counter().fatalQueueUrl;
    const unparked: FatalMessage[] = [];
    const queue = url
        ? sqsFatalQueue(
              ctx.sqs(),
              url,
              jsonLogger("hybrid-counter-cli", () => undefined),
          )
        : undefined;
    return {
        unparked,
        async park(message) {
            if (queue) {
                return queue.park(message);
            }
            unparked.push(message);
            return true;
        },
    };
}

/** One line per message that could not be parked (no fatal queue configured): what was not counted, and why. */
export function unparkedLines(unparked: readonly FatalMessage[]): string[] {
    return unparked.map((m) => `could not count (no --fatal-queue-url to park it): ${m.reason}: ${m.problem}`);
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
