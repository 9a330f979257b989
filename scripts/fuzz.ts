/**
 * The model-based checker, at length: `npm run fuzz -- --seeds 300 --first 5000`.
 *
 * Generates a history per seed, runs it on DynamoDB Local under the deterministic scheduler, checks it against the
 * contract (test/fuzz/run.ts; docs/checker.md), and for a failing seed shrinks the history and writes a reproduction
 * under .local/fuzz/. `--replay <file>` runs one saved history again, `--replay <seed>` one seed's history.
 * `--mutants` runs each mutant (test/fuzz/mutants.ts) over the seeds until one rejects it.
 *
 * A seed alone decides its history (test/fuzz/scheduler.ts): every run prints each history's trace digest, and two
 * runs of the same seeds print the same digests, on any machine at any load.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { COUNTER_SHARDS_MAX } from "../runtime/shared/config";
import { generateHistory, type History, type Mode, type SelectionKind } from "../test/fuzz/history";
import { MUTANTS } from "../test/fuzz/mutants";
import { FUZZ_ENGINE, runHistory, type RunResult } from "../test/fuzz/run";
import { reproduction, shrinkHistory } from "../test/fuzz/shrink";
import { generateRegionsHistory, type RegionsHistory } from "../test/fuzz/regions/history";
import { REGIONS_MUTANTS } from "../test/fuzz/regions/mutants";
import { runRegionsHistory } from "../test/fuzz/regions/run";

export const FUZZ_USAGE = `Usage: npm run fuzz -- [options]

Options:
  --seeds <n>        histories to run (default 20)
  --first <n>        the first seed (default 1)
  --ops <n>          events per history (default 150)
  --mode <m>         utilization | strict (default: chosen by each seed)
  --fault-rate <r>   injected fault probability per request, 0..1 (default: chosen by each seed)
  --selection <s>    client | prefix | attribute (default: chosen by each seed)
  --shards <n>       counterShards of every key, 1..${COUNTER_SHARDS_MAX} (default: 1, 3 or 8, chosen by each seed)
  --horizon <h>      short | long: seconds, or days of virtual time (default: chosen by each seed)
  --regions <n>      multi-region histories over 2 or 3 regions (default: one region)
  --mutant <name>    run the seeds against one mutant (the run fails if no seed rejects it)
  --mutants          run every mutant over the seeds, each until a seed rejects it
  --replay <f|seed>  run one saved history (a reproduction's file), or one seed's history
  --no-shrink        report a failing seed without shrinking it
  --trace            print every released request
  --json             print the summary as JSON`;

/** A bad flag or value: one line naming it, exit code 2. */
export class FuzzUsageError extends Error {}

export interface FuzzOptions {
    readonly seeds: number;
    readonly first: number;
    readonly ops: number;
    readonly mode?: Mode;
    readonly faultRate?: number;
    readonly selection?: SelectionKind;
    readonly counterShards?: number;
    readonly horizon?: "short" | "long";
    readonly regions?: number;
    readonly mutant?: string;
    readonly mutants: boolean;
    readonly replay?: string;
    readonly shrink: boolean;
    readonly trace: boolean;
    readonly json: boolean;
}

function positive(name: string, value: string | undefined, fallback: number): number {
    if (value === undefined) {
        return fallback;
    }
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n < 1) {
        throw new FuzzUsageError(`--${name} must be a positive integer (got "${value}")`);
    }
    return n;
}

function oneOf<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T | undefined {
    if (value !== undefined && !allowed.includes(value as T)) {
        throw new FuzzUsageError(`--${name} must be ${allowed.join(", ")} (got "${value}")`);
    }
    return value as T | undefined;
}

/** The options of `npm run fuzz -- ...`, or "help"; a bad flag or value throws a FuzzUsageError naming it. */
export function parseFuzzArgs(argv: readonly string[]): FuzzOptions | "help" {
    let parsed;
    try {
        parsed = parseArgs({
            args: [...argv],
            options: {
                seeds: { type: "string" },
                first: { type: "string" },
                ops: { type: "string" },
                mode: { type: "string" },
                "fault-rate": { type: "string" },
                selection: { type: "string" },
                shards: { type: "string" },
                horizon: { type: "string" },
                regions: { type: "string" },
                mutant: { type: "string" },
                mutants: { type: "boolean" },
                replay: { type: "string" },
                "no-shrink": { type: "boolean" },
                trace: { type: "boolean" },
                json: { type: "boolean" },
                help: { type: "boolean" },
            },
            strict: true,
        });
    } catch (error) {
        throw new FuzzUsageError((error as Error).message);
    }
    const v = parsed.values;
    if (v.help) {
        return "help";
    }
    const counterShards = v.shards === undefined ? undefined : positive("shards", v.shards, 1);
    if (counterShards !== undefined && counterShards > COUNTER_SHARDS_MAX) {
        throw new FuzzUsageError(`--shards must be at most ${COUNTER_SHARDS_MAX} (got "${v.shards}")`);
    }
    const faultRate = v["fault-rate"] === undefined ? undefined : Number(v["fault-rate"]);
    if (faultRate !== undefined && !(faultRate >= 0 && faultRate <= 1)) {
        throw new FuzzUsageError(`--fault-rate must be between 0 and 1 (got "${v["fault-rate"]}")`);
    }
    const regions = v.regions === undefined ? undefined : positive("regions", v.regions, 2);
    if (regions !== undefined && (regions < 2 || regions > 3)) {
        throw new FuzzUsageError(`--regions must be 2 or 3 (got "${v.regions}")`);
    }
    const mutants: Record<string, unknown> = regions === undefined ? MUTANTS : REGIONS_MUTANTS;
    if (v.mutant !== undefined && !(v.mutant in mutants)) {
        throw new FuzzUsageError(`--mutant must name a mutant: ${Object.keys(mutants).join(", ")} (got "${v.mutant}")`);
    }
    if (v.mutant !== undefined && v.mutants) {
        throw new FuzzUsageError("--mutant and --mutants exclude each other");
    }
    return {
        seeds: positive("seeds", v.seeds, 20),
        first: positive("first", v.first, 1),
        ops: positive("ops", v.ops, 150),
        mode: oneOf("mode", v.mode, ["utilization", "strict"] as const),
        ...(faultRate === undefined ? {} : { faultRate }),
        selection: oneOf("selection", v.selection, ["client", "prefix", "attribute"] as const),
        ...(counterShards === undefined ? {} : { counterShards }),
        horizon: oneOf("horizon", v.horizon, ["short", "long"] as const),
        ...(regions === undefined ? {} : { regions }),
        ...(v.mutant === undefined ? {} : { mutant: v.mutant }),
        mutants: v.mutants ?? false,
        ...(v.replay === undefined ? {} : { replay: v.replay }),
        shrink: !(v["no-shrink"] ?? false),
        trace: v.trace ?? false,
        json: v.json ?? false,
    };
}

function generate(options: FuzzOptions, seed: number): History {
    return generateHistory(seed, {
        ops: options.ops,
        ...(options.mode === undefined ? {} : { mode: options.mode }),
        ...(options.faultRate === undefined ? {} : { faultRate: options.faultRate }),
        ...(options.selection === undefined ? {} : { selection: options.selection }),
        ...(options.counterShards === undefined ? {} : { counterShards: options.counterShards }),
        ...(options.horizon === undefined ? {} : { horizon: options.horizon }),
    });
}

/** One history's line: its shape, what ran, what it found. */
export function describeRun(history: History, result: RunResult): string {
    const s = result.stats;
    return (
        `seed ${history.seed} ${history.mode} ${history.selection} ${history.counterShards} shards ${history.profile.horizon}: ` +
        `${s.events} events, ${s.requests} requests, ${s.faults} faults, ${s.deadLettered} batches dead-lettered, ` +
        `${s.settles} settler runs (${s.healed} heals, ${s.healWrites} corrections, ${s.healWritesLost} answers lost), ${s.backfills} backfills, ${s.admissions} admissions checked, ` +
        `${s.thresholdEvents} threshold events, ${Math.round(s.eventsMs / 60_000)} virtual minutes; ` +
        `${result.violations.length} violations, trace ${result.trace}`
    );
}

interface Summary {
    seeds: number;
    failed: number;
    histories: Array<{ seed: number; requests: number; trace: string; violations: string[] }>;
}

async function runSeeds(engine: LocalEngine, options: FuzzOptions): Promise<Summary> {
    const histories: History[] =
        options.replay === undefined
            ? Array.from({ length: options.seeds }, (_, i) => generate(options, options.first + i))
            : /^\d+$/.test(options.replay) && !existsSync(options.replay)
              ? [generate(options, Number(options.replay))]
              : [JSON.parse(readFileSync(options.replay, "utf8")) as History];
    const mutant = options.mutant === undefined ? undefined : MUTANTS[options.mutant]!.mutate;
    const summary: Summary = { seeds: 0, failed: 0, histories: [] };
    for (const history of histories) {
        const runOptions = {
            ...(mutant === undefined ? {} : { mutant }),
            ...(options.trace ? { trace: (line: string) => process.stderr.write(`  ${line}\n`) } : {}),
        };
        const result = await runHistory(engine, history, runOptions);
        summary.seeds++;
        summary.histories.push({ seed: history.seed, requests: result.stats.requests, trace: result.trace, violations: result.violations });
        process.stderr.write(`${describeRun(history, result)}\n`);
        if (result.violations.length === 0) {
            continue;
        }
        summary.failed++;
        if (mutant !== undefined) {
            process.stderr.write(`  the mutant is rejected: ${result.violations[0]}\n`);
            break;
        }
        await report(engine, options, history, result);
    }
    return summary;
}

/** Shrinks a failing history (unless told not to) and writes its reproduction. */
async function report(engine: LocalEngine, options: FuzzOptions, history: History, result: RunResult): Promise<void> {
    let shown = history;
    let shownResult = result;
    if (options.shrink && options.replay === undefined) {
        process.stderr.write(`  shrinking seed ${history.seed}...\n`);
        ({ history: shown, result: shownResult } = await shrinkHistory(engine, history, result, {
            onProgress: (n) => process.stderr.write(`  ${n} events\n`),
        }));
        const again = await runHistory(engine, shown);
        if (again.trace !== shownResult.trace) {
            process.stderr.write(
                `  the shrunk history did not replay: trace ${shownResult.trace} then ${again.trace}; the schedule let something escape\n`,
            );
        }
    }
    const dir = path.join(".local", "fuzz");
    mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `seed-${history.seed}.json`);
    writeFileSync(file, `${JSON.stringify(shown, null, 2)}\n`);
    process.stderr.write(`${reproduction(shown, shownResult, file)}\n`);
}

/** Every mutant over the seeds, each until one rejects it; the names no seed rejected. */
async function runMutants(engine: LocalEngine, options: FuzzOptions): Promise<Record<string, number | null>> {
    const caught: Record<string, number | null> = {};
    for (const [name, spec] of Object.entries(MUTANTS)) {
        caught[name] = null;
        for (let i = 0; i < options.seeds && caught[name] === null; i++) {
            const history = generate(options, options.first + i);
            const result = await runHistory(engine, history, { mutant: spec.mutate });
            if (result.violations.length > 0) {
                caught[name] = history.seed;
                process.stderr.write(`${name}: rejected by seed ${history.seed}: ${result.violations[0]}\n`);
            }
        }
        if (caught[name] === null) {
            process.stderr.write(
                `${name}: no seed of ${options.first}..${options.first + options.seeds - 1} rejected it (${spec.description})\n`,
            );
        }
    }
    return caught;
}

/** `--regions <n>`: multi-region histories (test/fuzz/regions/), reported per seed; no shrinking. */
async function runRegionsSeeds(engine: LocalEngine, options: FuzzOptions): Promise<Summary> {
    const generate = (seed: number) =>
        generateRegionsHistory(seed, {
            ops: options.ops,
            regions: options.regions!,
            ...(options.mode === undefined ? {} : { mode: options.mode }),
            ...(options.faultRate === undefined ? {} : { faultRate: options.faultRate }),
        });
    const histories: RegionsHistory[] =
        options.replay === undefined
            ? Array.from({ length: options.seeds }, (_, i) => generate(options.first + i))
            : /^\d+$/.test(options.replay) && !existsSync(options.replay)
              ? [generate(Number(options.replay))]
              : [JSON.parse(readFileSync(options.replay, "utf8")) as RegionsHistory];
    const mutant = options.mutant === undefined ? undefined : REGIONS_MUTANTS[options.mutant]!.mutate;
    const summary: Summary = { seeds: 0, failed: 0, histories: [] };
    for (const history of histories) {
        const result = await runRegionsHistory(engine, history, {
            ...(mutant === undefined ? {} : { mutant }),
            ...(options.trace ? { trace: (line: string) => process.stderr.write(`  ${line}\n`) } : {}),
        });
        summary.seeds++;
        summary.histories.push({ seed: history.seed, requests: result.stats.requests, trace: result.trace, violations: result.violations });
        const s = result.stats;
        process.stderr.write(
            `seed ${history.seed} ${history.mode} ${history.regions.length} regions (${history.members.length} members at first) ${history.counterShards} shards: ` +
                `${s.requests} requests, ${s.faults} faults, ${s.replicated} writes replicated (${s.lost} lost to a later one), ${s.ttlDeleted} deleted by TTL, ` +
                `${s.admissions} admissions checked, ${s.settles} settler runs; ${result.violations.length} violations, trace ${result.trace}\n`,
        );
        if (result.violations.length > 0) {
            summary.failed++;
            if (mutant !== undefined) {
                process.stderr.write(`  the mutant is rejected: ${result.violations[0]}\n`);
                break;
            }
            const dir = path.join(".local", "fuzz");
            mkdirSync(dir, { recursive: true });
            const file = path.join(dir, `regions-seed-${history.seed}.json`);
            writeFileSync(file, `${JSON.stringify(history, null, 2)}\n`);
            process.stderr.write(
                `${result.violations
                    .slice(0, 10)
                    .map((v) => `  ${v}`)
                    .join("\n")}\n  replay: npm run fuzz -- --regions ${history.regions.length} --replay ${file}\n`,
            );
        }
    }
    return summary;
}

function fail(message: string): never {
    process.stderr.write(`error: ${message}\n${FUZZ_USAGE}\n`);
    process.exit(2);
}

async function main(): Promise<void> {
    let options: FuzzOptions | "help";
    try {
        options = parseFuzzArgs(process.argv.slice(2));
    } catch (error) {
        if (error instanceof FuzzUsageError) {
            fail(error.message);
        }
        throw error;
    }
    if (options === "help") {
        process.stdout.write(`${FUZZ_USAGE}\n`);
        return;
    }
    const engine = await startEngine(FUZZ_ENGINE);
    try {
        if (options.regions !== undefined) {
            const summary = await runRegionsSeeds(engine, options);
            process.stdout.write(
                options.json ? `${JSON.stringify(summary)}\n` : `${summary.seeds} multi-region histories: ${summary.failed} failed\n`,
            );
            process.exitCode = options.mutant === undefined ? (summary.failed > 0 ? 1 : 0) : summary.failed > 0 ? 0 : 1;
            return;
        }
        if (options.mutants) {
            const caught = await runMutants(engine, options);
            const missed = Object.entries(caught)
                .filter(([, seed]) => seed === null)
                .map(([name]) => name);
            process.stdout.write(
                options.json
                    ? `${JSON.stringify({ caught, missed })}\n`
                    : `${Object.keys(caught).length - missed.length} of ${Object.keys(caught).length} mutants rejected${missed.length > 0 ? `; not: ${missed.join(", ")}` : ""}\n`,
            );
            process.exitCode = missed.length > 0 ? 1 : 0;
            return;
        }
        const summary = await runSeeds(engine, options);
        process.stdout.write(options.json ? `${JSON.stringify(summary)}\n` : `${summary.seeds} histories: ${summary.failed} failed\n`);
        // With a mutant, the run fails when no seed rejected it.
        process.exitCode = options.mutant === undefined ? (summary.failed > 0 ? 1 : 0) : summary.failed > 0 ? 0 : 1;
    } finally {
        await engine.stop();
    }
}

if (require.main === module) {
    void main();
}
