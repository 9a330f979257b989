/**
 * `backfill`: counts the items a table held before the counter was attached (runtime/backfill/backfill.ts), by a
 * rate-limited segmented Scan. Resumable: Ctrl-C stops between pages, and the same --run-id resumes from
 * the checkpoints; a second complete run changes nothing.
 */
import { backfill, backfillOptionsProblems, type BackfillOptions, type BackfillReport } from "../runtime/backfill/backfill";
import { EXIT, UsageError } from "./context";
import { table } from "./format";
import { integerFlag, modeFlag, numberFlag, timeFlag } from "./options";
import type { CliCommand } from "./command";

interface BackfillFlags {
    mode?: string;
    runId?: string;
    segments?: string;
    pageSize?: string;
    capacityShare?: string;
    readUnitsPerSecond?: string;
    writeUnitsPerSecond?: string;
    clientsSince?: string;
}

export const backfillCommand: CliCommand = {
    name: "backfill",
    register(program, run) {
        program
            .command("backfill")
            .description("count the items the table held before the counter was attached; resumable, idempotent")
            .requiredOption("--mode <mode>", "the counter's mode: utilization, or strict (also counts the items into best-effort)")
            .option("--run-id <id>", 'names the run: the same id resumes from its checkpoints (default "default")')
            .option("--segments <n>", "parallel Scan segments, 1..1000 (default 4)")
            .option("--page-size <n>", "items per Scan page, 1..10000 (default 500)")
            .option("--capacity-share <r>", "share of a provisioned table's capacity, (0, 1] (default 0.5)")
            .option("--read-units-per-second <n>", "Scan read budget (on-demand tables; default 500)")
            .option("--write-units-per-second <n>", "counters table write budget (on-demand tables; default 500)")
            .option(
                "--clients-since <time>",
                "strict: when this counters table's strict clients began (ISO 8601 or ms); client tokens made before are items from before the counter",
            )
            .action(
                run<BackfillFlags>(async (ctx, flags) => {
                    // The flags first (a bad flag names itself before any config is read), then the counter's
                    // table from --config or --table: the options are checked whole, as backfill() checks them.
                    const flagOptions: Omit<BackfillOptions, "config" | "dynamodb"> = {
                        mode: modeFlag(flags.mode),
                        runId: flags.runId,
                        segments: integerFlag("--segments", flags.segments, 1, 1_000),
                        pageSize: integerFlag("--page-size", flags.pageSize, 1, 10_000),
                        capacityShare: numberFlag("--capacity-share", flags.capacityShare, 0, 1),
                        readUnitsPerSecond: numberFlag("--read-units-per-second", flags.readUnitsPerSecond, 0, 1e9),
                        writeUnitsPerSecond: numberFlag("--write-units-per-second", flags.writeUnitsPerSecond, 0, 1e9),
                        ...(flags.clientsSince === undefined ? {} : { clientsSince: timeFlag("--clients-since", flags.clientsSince)! }),
                    };
                    const options: Omit<BackfillOptions, "dynamodb"> = { ...flagOptions, config: ctx.counter().table };
                    const problems = backfillOptionsProblems(options);
                    if (problems.length > 0) {
                        throw new UsageError(backfillUsage(problems[0]!));
                    }
                    await ctx.countedTarget();
                    const bar = ctx.progress();
                    let started = false;
                    let report: BackfillReport;
                    try {
                        report = await backfill({
                            ...options,
                            dynamodb: ctx.dynamodb(),
                            signal: ctx.abort.signal,
                            onProgress: (p) => {
                                if (!started) {
                                    bar.start(p.segments, "backfill (segments)");
                                    started = true;
                                }
                                const eta = p.etaSeconds === null ? "" : `, ETA ${Math.round(p.etaSeconds)} s`;
                                bar.tick(
                                    p.segmentsDone,
                                    `${p.scanned} scanned, ${p.counted} counted, ${Math.round(p.itemsPerSecond)} items/s${eta}`,
                                );
                            },
                        });
                    } finally {
                        bar.stop();
                    }
                    ctx.result(report, () =>
                        [
                            `backfill ${report.runId}: ${report.status}${report.resumed ? " (resumed)" : ""}${report.alreadyComplete ? " (already complete: nothing to do)" : ""}`,
                            table(
                                ["", "scanned", "counted", "already counted", "skipped"],
                                [
                                    [
                                        "this call",
                                        report.thisCall.scanned,
                                        report.thisCall.counted,
                                        report.thisCall.alreadyCounted,
                                        report.thisCall.skipped,
                                    ],
                                    [
                                        "whole run",
                                        report.total.scanned,
                                        report.total.counted,
                                        report.total.alreadyCounted,
                                        report.total.skipped,
                                    ],
                                ],
                            ),
                            `segments done: ${report.segmentsDone} of ${report.segments}; ${report.thisCall.readUnits.toFixed(1)} RCU, ${report.thisCall.writeUnits.toFixed(1)} WCU`,
                        ].join("\n"),
                    );
                    if (report.status === "aborted") {
                        return EXIT.interrupted;
                    }
                    return report.status === "complete" ? EXIT.ok : EXIT.failed;
                }),
            );
    },
};

/**
 * A problem of backfill()'s options as the flag or config field a user typed: `[pageSize] ...` becomes
 * `--page-size ...`, `[config.counterShards] ...` becomes `--config: [counterShards] ...`.
 */
export function backfillUsage(problem: string): string {
    const config = /^\[config\.(\w+)\] /.exec(problem);
    if (config !== null) {
        return `--config: [${config[1]!}] ${problem.slice(config[0].length)}`;
    }
    return problem.replace(/^\[(\w+)\]/, (_, f: string) => `--${f.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
}
