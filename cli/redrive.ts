/** `redrive`: moves the exhausted batches in the fatal DLQ back to the first DLQ, where the redrive function re-reads them. */
import { redriveToFirstDlq } from "../runtime/ops/fatal-ops";
import { EXIT } from "./context";
import type { CliCommand } from "./command";

export const redriveCommand: CliCommand = {
    name: "redrive",
    register(program, run) {
        program
            .command("redrive")
            .description(
                "move the batches that exhausted the first DLQ's receives (now in the fatal DLQ) back to the first DLQ; " +
                    "do it while the records are younger than 24 hours",
            )
            .action(
                run<object>(async (ctx) => {
                    const fatalQueueUrl = ctx.fatalQueueUrl();
                    const firstDlqUrl = ctx.firstDlqUrl();
                    const target = await ctx.countedTarget();
                    const bar = ctx.progress();
                    let started = false;
                    let result;
                    try {
                        result = await redriveToFirstDlq({
                            sqs: ctx.sqs(),
                            queueUrl: fatalQueueUrl,
                            firstDlqUrl,
                            partitionKey: target.table.partitionKey,
                            signal: ctx.abort.signal,
                            onMessage: (id, done, total) => {
                                if (!started) {
                                    bar.start(total, "redrive");
                                    started = true;
                                }
                                bar.tick(done, id);
                            },
                        });
                    } finally {
                        bar.stop();
                    }
                    ctx.result(
                        result,
                        () => `moved ${result.moved.length} batches to the first DLQ; ${result.left} other messages stay in the fatal DLQ`,
                    );
                    return ctx.abort.signal.aborted ? EXIT.interrupted : EXIT.ok;
                }),
            );
    },
};
