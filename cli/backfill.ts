/**
 * `backfill`: brings the items a table held before the counter was attached into the count (runtime/backfill/
 * backfill.ts): it flags every live item that does not count yet, and the stream counts each flag once, by a
 * rate-limited segmented Scan. Resumable: Ctrl-C stops between pages, and the same --run-id resumes from its
 * checkpoints; a run that completed leaves none, and running it again flags nothing new.
 */
import { backfill, backfillOptionsProblems, type BackfillOptions, type BackfillReport } from "../runtime/backfill/backfill";
import { ConfigurationError } from "../runtime/shared/errors";
import { EXIT, UsageError } from "./context";
import { table } from "./format";
import { integerFlag, numberFlag } from "./options";
import type { CliCommand } from "./command";

interface BackfillFlags {
    runId?: string;
    segments?: string;
    pageSize?: string;
    capacityShare?: string;
    readUnitsPerSecond?: string;
    writeUnitsPerSecond?: string;
}

/**
 * A problem of backfill()'s options as the flag or config field a user typed: `[pageSize] ...` becomes
 * `--page-size ...`, `[config.tableName] ...` becomes `--config: [tableName] ...`.
 */
export function backfillUsage(problem: string): string {
    const config = /^\[config\.(\w+)\] /.exec(problem);
    if (config !== null) {
        return `--config: [${config[1]!}] ${problem.slice(config[0].length)}`;
    }
    return problem.replace(/^\[(\w+)\]/, (_, f: string) => `--${f.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`);
}

function reportText(report: BackfillReport): string {
    const row = (label: string, c: BackfillReport["total"]) => [label, c.scanned, c.counted, c.alreadyCounted, c.skipped];
    return [
        `backfill ${report.runId}: ${report.status}${report.resumed ? " (resumed)" : ""}`,
        table(
            ["", "scanned", "flagged", "already counted", "skipped"],
            [row("this call", report.thisCall), row("whole run", report.total)],
        ),
        `segments done: ${report.segmentsDone} of ${report.segments}; ${report.thisCall.keysListed} keys listed for a heal; ` +
            `${report.thisCall.readUnits.toFixed(1)} RCU, ${report.thisCall.writeUnits.toFixed(1)} WCU`,
    ].join("\n");
}

export const backfillCommand: CliCommand = {
    name: "backfill",
    register(program, run) {
        program
            .command("backfill")
            .description(
                "count the items the table held before the counter was attached (the stream counts each once it is flagged); resumable, idempotent",
            )
            .option("--run-id <id>", 'names the run: the same id resumes from its checkpoints (default "default")')
            .option("--segments <n>", "parallel Scan segments, 1..1000 (default 4)")
            .option("--page-size <n>", "items per Scan page, 1..10000 (default 500)")
            .option("--capacity-share <r>", "share of a provisioned table's capacity, (0, 1] (default 0.5)")
            .option("--read-units-per-second <n>", "Scan read budget (on-demand tables; default 500)")
            .option("--write-units-per-second <n>", "flag write budget (on-demand tables; default 500)")
            .action(
                run<BackfillFlags>(async (ctx, flags) => {
                    // The flags first (a bad flag names itself before any config is read), then the counter, checked
                    // whole as backfill() checks it.
                    const flagOptions: Omit<BackfillOptions, "config" | "dynamodb"> = {
                        ...(flags.runId === undefined ? {} : { runId: flags.runId }),
                        segments: integerFlag("--segments", flags.segments, 1, 1_000),
                        pageSize: integerFlag("--page-size", flags.pageSize, 1, 10_000),
                        capacityShare: numberFlag("--capacity-share", flags.capacityShare, 0, 1),
                        readUnitsPerSecond: numberFlag("--read-units-per-second", flags.readUnitsPerSecond, 0, 1e9),
                        writeUnitsPerSecond: numberFlag("--write-units-per-second", flags.writeUnitsPerSecond, 0, 1e9),
                    };
                    const problems = backfillOptionsProblems({ ...flagOptions, config: ctx.target().config });
                    if (problems.length > 0) {
                        throw new UsageError(backfillUsage(problems[0]!));
                    }
                    const config = await ctx.countedConfig();
                    const bar = ctx.progress();
                    let started = false;
                    let report: BackfillReport;
                    try {
                        report = await backfill({
                            ...flagOptions,
                            config,
                            dynamodb: ctx.dynamodb(),
                            signal: ctx.abort.signal,
                            onProgress: (p) => {
                                if (!started) {
                                    bar.start(p.segments, "backfill (segments)");
                                    started = true;
                                }
                                bar.tick(p.segmentsDone, `${p.scanned} scanned, ${p.counted} flagged`);
                            },
                        });
                    } catch (error) {
                        // A run resumed with another number of segments names the flag.
                        throw error instanceof ConfigurationError ? new UsageError(backfillUsage(error.problems[0]!)) : error;
                    } finally {
                        bar.stop();
                    }
                    ctx.result(report, () => reportText(report));
                    if (report.status === "aborted") {
                        return EXIT.interrupted;
                    }
                    return report.status === "complete" ? EXIT.ok : EXIT.failed;
                }),
            );
    },
};
