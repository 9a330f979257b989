/**
 * The model-based checker, long: `npm run fuzz -- --seeds 200 --ops 500`.
 *
 * Generates a history per seed, runs it on DynamoDB Local under the deterministic scheduler, checks it
 * against the contract, and for a failing seed shrinks the history and writes a reproduction under
 * .local/fuzz/. `--replay <file>` runs one saved history again, `--replay <seed>` one seed's history.
 *
 * A seed alone decides its history (test/fuzz/scheduler.ts): every run prints each history's trace digest (stderr, and
 * `histories` with --json), and two runs of the same seeds print the same digests, on any machine at any load.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { startEngine } from "../local/engine/engine";
import { generateHistory, type History, type Mode, type SelectionKind } from "../test/fuzz/history";
import { COUNTER_SHARDS_MAX } from "../runtime/shared/config";
import { FUZZ_ENGINE, runHistory, type RunResult } from "../test/fuzz/run";
import { reproduction, shrinkHistory } from "../test/fuzz/shrink";
import { generateRegionsHistory, REGIONS_MAX, REGIONS_MIN, type RegionsHistory } from "../test/fuzz/regions/history";
import { runRegionsHistory } from "../test/fuzz/regions/run";
import type { LocalEngine } from "../local/engine/engine";

export const FUZZ_USAGE = `Usage: npm run fuzz -- [options]

Options:
  --seeds <n>        histories to run (default 20)
  --first <n>        the first seed (default 1)
  --ops <n>          events per history (default 200)
  --mode <m>         utilization | strict (default: chosen by each seed)
  --fault-rate <r>   injected fault probability per request, 0..1 (default: chosen by each seed)
  --selection <s>    client | prefix | attribute: what counts; prefix and attribute add other writers
                     and items there before the counter, attribute also moves items in and out of the
                     selection (default: chosen by each seed)
  --shards <n>       counterShards of every key, 1..16 (default: 1, 3 or 8, chosen by each seed);
                     above 1 the counters get a table of their own
  --regions <n>      multi-region histories: ${REGIONS_MIN}..${REGIONS_MAX} member regions on one engine (the first the home),
                     no replication, every event in a region drawn by the seed; client selection, one shard
                     (default: one region, today's histories)
  --replay <f|seed>  run one saved history (a reproduction's file), or one seed's history (with the
                     flags it ran with), and report it with its trace digest
  --no-shrink        report a failing seed without shrinking it
  --trace            print every released request (with --replay, to read a reproduction)
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
    readonly regions?: number;
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
                regions: { type: "string" },
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
    if (v.mode !== undefined && v.mode !== "utilization" && v.mode !== "strict") {
        throw new FuzzUsageError(`--mode must be utilization or strict (got "${v.mode}")`);
    }
    if (v.selection !== undefined && v.selection !== "client" && v.selection !== "prefix" && v.selection !== "attribute") {
        throw new FuzzUsageError(`--selection must be client, prefix or attribute (got "${v.selection}")`);
    }
    const counterShards = v.shards === undefined ? undefined : positive("shards", v.shards, 1);
    if (counterShards !== undefined && counterShards > COUNTER_SHARDS_MAX) {
        throw new FuzzUsageError(`--shards must be at most ${COUNTER_SHARDS_MAX} (got "${v.shards}")`);
    }
    const regions = v.regions === undefined ? undefined : positive("regions", v.regions, REGIONS_MIN);
    if (regions !== undefined && (regions < REGIONS_MIN || regions > REGIONS_MAX)) {
        throw new FuzzUsageError(`--regions must be from ${REGIONS_MIN} to ${REGIONS_MAX} (got "${v.regions}")`);
    }
    if (regions !== undefined && ((v.selection !== undefined && v.selection !== "client") || (counterShards ?? 1) !== 1)) {
        throw new FuzzUsageError("--regions runs the client selection with one shard: leave out --selection and --shards");
    }
    const faultRate = v["fault-rate"] === undefined ? undefined : Number(v["fault-rate"]);
    if (faultRate !== undefined && !(faultRate >= 0 && faultRate <= 1)) {
        throw new FuzzUsageError(`--fault-rate must be between 0 and 1 (got "${v["fault-rate"]}")`);
    }
    return {
        seeds: positive("seeds", v.seeds, 20),
        first: positive("first", v.first, 1),
        ops: positive("ops", v.ops, 200),
        mode: v.mode as Mode | undefined,
        faultRate,
        selection: v.selection as SelectionKind | undefined,
        counterShards,
        regions,
        replay: v.replay,
        shrink: !(v["no-shrink"] ?? false),
        trace: v.trace ?? false,
        json: v.json ?? false,
    };
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
    const { seeds, first, ops, faultRate } = options;

    const engine = await startEngine(FUZZ_ENGINE);
    if (options.regions !== undefined) {
        try {
            await mainRegions(engine, options, options.regions);
        } finally {
            await engine.stop();
        }
        return;
    }
    let failed = 0;
    const histories: Array<{ seed: number; requests: number; trace: string; violations: string[] }> = [];
    const totals = {
        seeds: 0,
        events: 0,
        requests: 0,
        faults: 0,
        observations: 0,
        deadLettered: 0,
        otherWrites: 0,
        otherWritesFailed: 0,
        livesEnded: 0,
        backfills: 0,
        backfillCounted: 0,
        backfillAlreadyCounted: 0,
        settles: 0,
        healed: 0,
        busySettles: 0,
        expired: 0,
        flips: 0,
        held: 0,
        latePutsBack: 0,
        latePutsAfterAnotherLife: 0,
        latePutsAHealMayCount: 0,
        ledgerUnsealed: 0,
        ledgerSealed: 0,
    };
    try {
        const generate = (seed: number) =>
            generateHistory({
                seed,
                ops,
                mode: options.mode,
                faultRate,
                selection: options.selection,
                counterShards: options.counterShards,
            });
        const toRun: History[] =
            options.replay === undefined
                ? Array.from({ length: seeds }, (_, i) => generate(first + i))
                : /^\d+$/.test(options.replay) && !existsSync(options.replay)
                  ? [generate(Number(options.replay))]
                  : [JSON.parse(readFileSync(options.replay, "utf8")) as History];
        for (const history of toRun) {
            const result = await runHistory(engine, history, options.trace ? { trace: (line) => process.stderr.write(`  ${line}\n`) } : {});
            histories.push({ seed: history.seed, requests: result.stats.requests, trace: result.trace, violations: result.violations });
            totals.seeds++;
            totals.events += result.stats.events;
            totals.requests += result.stats.requests;
            totals.faults += result.stats.faults;
            totals.observations += result.stats.observations;
            totals.deadLettered += result.stats.deadLettered;
            totals.otherWrites += history.events.filter(
                (e) => e.op === "otherPut" || e.op === "otherDelete" || e.op === "ttlDelete" || e.op === "otherRetoken",
            ).length;
            totals.flips += history.events.filter((e) => e.op === "otherFlip").length;
            totals.settles += result.stats.settles;
            totals.healed += result.stats.healed;
            totals.busySettles += result.stats.busySettles;
            totals.expired += result.stats.expired;
            totals.otherWritesFailed += result.stats.otherWritesFailed;
            totals.livesEnded += result.stats.livesEnded;
            totals.backfills += result.stats.backfills;
            totals.backfillCounted += result.stats.backfillCounted;
            totals.backfillAlreadyCounted += result.stats.backfillAlreadyCounted;
            totals.held += result.stats.held;
            totals.latePutsBack += result.stats.latePutsBack;
            totals.latePutsAfterAnotherLife += result.stats.latePutsAfterAnotherLife;
            totals.latePutsAHealMayCount += result.stats.latePutsAHealMayCount;
            totals.ledgerUnsealed += result.stats.ledgerUnsealed;
            totals.ledgerSealed += result.stats.ledgerSealed;
            const line =
                `seed ${history.seed} ${history.mode} ${history.selection ?? "client"} ${history.counterShards ?? 1} shards: ` +
                `${result.stats.events} events, ` +
                `${result.stats.requests} requests, ${result.stats.faults} faults, ${result.stats.backfills} backfills, ` +
                `${result.stats.settles} settler runs (${result.stats.healed} heals, ${result.stats.busySettles} with calls in flight, ` +
                `${result.stats.expired} requests expired), ` +
                `${result.stats.held} put attempts held (${result.stats.latePutsBack} landed over a removed life, ` +
                `${result.stats.latePutsAfterAnotherLife} after another life, ${result.stats.latePutsAHealMayCount} a heal may count), ` +
                `${result.stats.ledgerUnsealed} ledger values read unsealed (${result.stats.ledgerSealed} sealed), ` +
                `${result.violations.length} violations, trace ${result.trace}`;
            process.stderr.write(`${line}\n`);
            if (result.violations.length === 0) {
                continue;
            }
            failed++;
            let shown = history;
            let shownResult: RunResult = result;
            if (options.shrink && !options.replay) {
                process.stderr.write(`  shrinking seed ${history.seed}...\n`);
                ({ history: shown, result: shownResult } = await shrinkHistory(engine, history, result, {
                    onProgress: (n) => process.stderr.write(`  ${n} events\n`),
                }));
                // The shrunk history's failing run is its replay: one more run proves it, request for request.
                const again = await runHistory(engine, shown);
                if (again.trace !== shownResult.trace) {
                    process.stderr.write(
                        `  the shrunk history did not replay: trace ${shownResult.trace} then ${again.trace} ` +
                            `(${shownResult.stats.requests} then ${again.stats.requests} requests); the schedule let something escape\n`,
                    );
                }
            }
            const dir = path.join(".local", "fuzz");
            mkdirSync(dir, { recursive: true });
            const file = path.join(dir, `seed-${history.seed}.json`);
            writeFileSync(file, `${JSON.stringify(shown, null, 2)}\n`);
            process.stderr.write(`${reproduction(shown, shownResult, file)}\n`);
        }
    } finally {
        await engine.stop();
    }
    const summary = { ...totals, failed, histories };
    process.stdout.write(
        options.json
            ? `${JSON.stringify(summary)}\n`
            : `${summary.seeds} histories, ${summary.events} events, ${summary.requests} requests, ${summary.faults} injected faults, ` +
                  `${summary.deadLettered} batches dead-lettered, ${summary.otherWrites} other writes (${summary.otherWritesFailed} not served, ` +
                  `${summary.livesEnded} client lives ended), ${summary.backfills} backfills (${summary.backfillCounted} items counted, ` +
                  `${summary.backfillAlreadyCounted} found counted), ${summary.flips} selection moves, ` +
                  `${summary.settles} settler runs (${summary.healed} heals, ${summary.busySettles} with calls in flight, ` +
                  `${summary.expired} requests expired), ${summary.held} put attempts held ` +
                  `(${summary.latePutsBack} landed over a removed life, ${summary.latePutsAfterAnotherLife} after another life, ` +
                  `${summary.latePutsAHealMayCount} a heal may count), ` +
                  `${summary.ledgerUnsealed} ledger values read unsealed (${summary.ledgerSealed} sealed): ` +
                  `${failed} failed\n`,
    );
    process.exitCode = failed > 0 ? 1 : 0;
}

/** `--regions <n>`: multi-region histories (test/fuzz/regions/), reported per seed and per region; no shrinking. */
async function mainRegions(engine: LocalEngine, options: FuzzOptions, regions: number): Promise<void> {
    const generate = (seed: number) =>
        generateRegionsHistory({ seed, ops: options.ops, mode: options.mode, faultRate: options.faultRate, regions });
    const toRun: RegionsHistory[] =
        options.replay === undefined
            ? Array.from({ length: options.seeds }, (_, i) => generate(options.first + i))
            : /^\d+$/.test(options.replay) && !existsSync(options.replay)
              ? [generate(Number(options.replay))]
              : [JSON.parse(readFileSync(options.replay, "utf8")) as RegionsHistory];
    const totals = { seeds: 0, events: 0, requests: 0, faults: 0, observations: 0, deadLettered: 0, settles: 0, healed: 0, backfills: 0 };
    const histories: Array<{ seed: number; requests: number; trace: string; violations: string[] }> = [];
    let failed = 0;
    for (const history of toRun) {
        const result = await runRegionsHistory(
            engine,
            history,
            options.trace ? { trace: (line) => process.stderr.write(`  ${line}\n`) } : {},
        );
        histories.push({ seed: history.seed, requests: result.stats.requests, trace: result.trace, violations: result.violations });
        totals.seeds++;
        for (const field of ["events", "requests", "faults", "observations", "deadLettered", "settles", "healed", "backfills"] as const) {
            totals[field] += result.stats[field];
        }
        const perRegion = Object.entries(result.stats.perRegion)
            .map(([region, r]) => `${region} ${r.calls} calls, eventual ${r.eventual}, best-effort ${r.bestEffort}`)
            .join("; ");
        process.stderr.write(
            `seed ${history.seed} ${history.mode} ${history.regions} regions: ${result.stats.events} events, ${result.stats.requests} requests, ` +
                `${result.stats.faults} faults, ${result.stats.observations} observations, ${result.stats.settles} settler runs ` +
                `(${result.stats.healed} heals), ${result.stats.backfills} backfills; ${perRegion}; ` +
                `${result.violations.length} violations, trace ${result.trace}\n`,
        );
        if (result.violations.length > 0) {
            failed++;
            const dir = path.join(".local", "fuzz");
            mkdirSync(dir, { recursive: true });
            const file = path.join(dir, `regions-seed-${history.seed}.json`);
            writeFileSync(file, `${JSON.stringify(history, null, 2)}\n`);
            process.stderr.write(
                `${result.violations.map((v) => `  ${v}`).join("\n")}\n  replay: npm run fuzz -- --regions ${regions} --replay ${file}\n`,
            );
        }
    }
    const summary = { ...totals, regions, failed, histories };
    process.stdout.write(
        options.json
            ? `${JSON.stringify(summary)}\n`
            : `${summary.seeds} histories over ${regions} regions, ${summary.events} events, ${summary.requests} requests, ` +
                  `${summary.faults} injected faults, ${summary.observations} observations, ${summary.deadLettered} batches dead-lettered, ` +
                  `${summary.settles} settler runs (${summary.healed} heals), ${summary.backfills} backfills: ${failed} failed\n`,
    );
    process.exitCode = failed > 0 ? 1 : 0;
}

if (require.main === module) {
    void main();
}
