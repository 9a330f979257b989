/**
 * The benchmark (`npm run bench`): the system the component deploys (bench/system.ts), measured on DynamoDB Local
 * against the other approaches under the same faults, with the hot tenant, the backfill and the healing of busy keys;
 * or one of its scenarios alone (`--scenario`), the hot-key ceiling, or the performance sweep (`--sweep`).
 *
 * Throughput is reported as a ratio to the raw PutItem rate of the same engine in the same run: DynamoDB Local on a
 * shared 2-core machine is the bottleneck, and absolute figures mean little. The report goes to stdout (one JSON
 * document with --json), the progress to stderr. The flags are checked before anything heavy is loaded.
 */
import { BENCH_USAGE, BenchUsageError, parseOptions } from "./options";

export { BENCH_USAGE, BenchUsageError, parseOptions, type Options } from "./options";

async function main(): Promise<void> {
    if (process.argv.includes("--sweep")) {
        const { runSweep } = await import("./sweep.js");
        await runSweep(process.argv.slice(2).filter((a) => a !== "--sweep"));
        return;
    }
    const options = parseOptions(process.argv.slice(2));
    if (options === "help") {
        process.stdout.write(BENCH_USAGE);
        return;
    }
    // Progress goes to stderr: the functions run in this process, and their stdout is muted while they run.
    const { describeParity } = await import("../local/engine/parity.js");
    const { reportLines, runBench, runCeiling } = await import("./scenarios.js");
    const log = (line: string) => process.stderr.write(`${line}\n`);
    const print = (line: string) => process.stdout.write(`${line}\n`);
    if (options.ceiling !== undefined) {
        await runCeiling(options.ceiling, options.json, log, print);
        return;
    }
    log(
        options.scenarios.approaches || options.scenarios.hotTenant
            ? `${options.ops} operations per run, concurrency ${options.concurrency}, ${options.faults} fault rate; fresh servers per run; ` +
                  (options.parity
                      ? "parity layer on (AWS's partition throughput, transaction size and billing enforced; --no-parity to compare)"
                      : describeParity(undefined))
            : "fresh servers per run",
    );
    const report = await runBench(options, log);
    if (options.json) {
        print(JSON.stringify(report));
        return;
    }
    reportLines(report, options).forEach(print);
}

if (require.main === module) {
    main().then(
        () => process.exit(0),
        (error: unknown) => {
            if (error instanceof BenchUsageError) {
                process.stderr.write(`error: ${error.message} (npm run bench -- --help lists the options)\n`);
                process.exit(2);
            }
            process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
            process.exit(1);
        },
    );
}
