/** `redrive`: moves the batches in the fatal DLQ back to the first DLQ, where the redrive function applies them. */
import { redriveToFirstDlq, type RedriveResult } from "../runtime/ops/fatal-ops";
import { EXIT } from "./context";
import type { CliCommand } from "./command";

function resultText(result: RedriveResult): string {
    return [
        `moved ${result.moved.length} batches to the first DLQ; ${result.left} other messages stay in the fatal DLQ`,
        ...result.failed.map((f) => `could not move ${f.id} (the first DLQ refused it: ${f.queueError}): it stays in the fatal DLQ`),
    ].join("\n");
}

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
                    const config = await ctx.countedConfig();
                    const bar = ctx.progress();
                    let started = false;
                    let result: RedriveResult;
                    try {
                        result = await redriveToFirstDlq({
                            sqs: ctx.sqs(),
                            queueUrl: fatalQueueUrl,
                            firstDlqUrl,
                            partitionKey: config.partitionKey,
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
                    ctx.result(result, () => resultText(result));
                    if (ctx.abort.signal.aborted) {
                        return EXIT.interrupted;
                    }
                    return result.failed.length > 0 ? EXIT.failed : EXIT.ok;
                }),
            );
    },
};
