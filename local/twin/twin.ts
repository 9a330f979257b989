/**
 * The local twin (`npm start`): runs the system HybridCounterComponent deploys on DynamoDB Local and the local SQS and
 * SNS server, drives it with a workload, and reports what it measured (local/twin/run.ts; with `--regions`, several
 * regions of a global table: local/twin/regions.ts).
 *
 * Pass: 0 API errors; every key exact (its eventual counter equals its live items once the stream has drained); no
 * utilization overcount and no strict key over its limit; every threshold crossing of the stream received by the
 * topic's subscriber (`thresholds.missed` 0); every key's usage history what the stream says (`usage.exact`).
 */
import { printRegionsReport, runRegionsTwin } from "./regions";
import { parseTwinArgs, UsageError, USAGE, type TwinOptions } from "./options";
import { printTwinReport } from "./report";
import { runTwin } from "./run";

export { API_ERRORS_LISTED, parseTwinArgs, UsageError, USAGE, type TwinOptions } from "./options";
export { deployTwin, runTwin, TWIN_NAME } from "./run";
export { worstKeys, type TwinReport } from "./report";
export { SETTLER_COMPRESSION } from "./settler";

function parseOrExit(argv: readonly string[]): TwinOptions | "help" {
    try {
        return parseTwinArgs(argv);
    } catch (error) {
        if (error instanceof UsageError) {
            process.stderr.write(`error: ${error.message}\n\n${USAGE}\n`);
            process.exit(2);
        }
        throw error;
    }
}

/**
 * The first Ctrl-C stops the workload: the pipeline drains, and the report and chart cover what ran. A second one
 * exits at once (the engine's exit hook stops DynamoDB Local).
 */
function stopOnInterrupt(): AbortSignal {
    const stop = new AbortController();
    process.on("SIGINT", () => {
        if (stop.signal.aborted) {
            process.stderr.write("\ninterrupted again: stopping DynamoDB Local\n");
            process.exit(130);
        }
        process.stderr.write("\ninterrupted: draining, then the report (Ctrl-C again to quit at once)\n");
        stop.abort();
    });
    return stop.signal;
}

async function main(): Promise<void> {
    const options = parseOrExit(process.argv.slice(2));
    if (options === "help") {
        process.stdout.write(`${USAGE}\n`);
        return;
    }
    const log = (line: string) => (options.json ? process.stderr : process.stdout).write(`${line}\n`);
    const stop = stopOnInterrupt();
    if (options.regions !== undefined) {
        const regional = await runRegionsTwin(
            { ...options, regions: options.regions, replicationDelayMs: options.replicationDelayMs ?? 100 },
            log,
            stop,
        );
        if (options.json) {
            process.stdout.write(`${JSON.stringify(regional)}\n`);
        } else {
            printRegionsReport(regional, log);
        }
        return;
    }
    const report = await runTwin(options, log, options.json ? null : process.stdout, stop);
    if (options.json) {
        process.stdout.write(`${JSON.stringify(report)}\n`);
    } else {
        printTwinReport(report, log);
    }
}

if (require.main === module) {
    main().then(
        () => process.exit(0),
        (error: unknown) => {
            process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
            process.exit(1);
        },
    );
}
