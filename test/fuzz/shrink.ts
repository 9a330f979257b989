/**
 * Shrinks a failing history to a small one that fails the same way (delta debugging over its events,
 * then fewer concurrent callers, no faults and no items from before the counter where the failure
 * allows), and prints it as a reproduction that runs on its own.
 *
 * A run is decided by its history alone (scheduler.ts), so a candidate that failed once fails the same way, request for
 * request, on every replay: the shrunk history comes with the violations and the trace digest of its failing run, which
 * `npm run fuzz -- --replay <file>` prints again. The work is bounded by a number of runs, not by the wall clock, so the
 * shrunk history is the same on a quiet machine and a busy one.
 */
import type { LocalEngine } from "../../local/engine/engine";
import type { History } from "./history";
import { runHistory, type RunOptions, type RunResult } from "./run";

/** A violation with its numbers taken out: two runs fail "the same way" when a signature matches. */
export function signature(violation: string): string {
    return violation
        .replace(/#\d+ \{[^}]*\}/g, "#")
        .replace(/#\d+ \w+/g, "#")
        .replace(/\d+/g, "N")
        .slice(0, 80);
}

export interface ShrinkOptions {
    /** Stop after this many runs of candidate histories and return the smallest failing history found. @default 60 */
    readonly maxRuns?: number;
    readonly onProgress?: (events: number) => void;
    /** How each candidate runs (a mutant the failure comes from). */
    readonly run?: RunOptions;
}

/** A shrunk history and its failing run. */
export interface Shrunk {
    readonly history: History;
    readonly result: RunResult;
}

/**
 * Shrinks `failing`, whose run `result` broke the contract, keeping the signature of `result`'s first violation.
 */
export async function shrinkHistory(
    engine: LocalEngine,
    failing: History,
    result: RunResult,
    options: ShrinkOptions = {},
): Promise<Shrunk> {
    let budget = options.maxRuns ?? 60;
    const wanted = signature(result.violations[0]!);
    let best: Shrunk = { history: failing, result };
    /** Runs `candidate`; it becomes the best when it fails the same way. */
    const tryCandidate = async (candidate: History): Promise<boolean> => {
        budget--;
        const run = await runHistory(engine, candidate, options.run);
        if (!run.violations.some((v) => signature(v) === wanted)) {
            return false;
        }
        best = { history: candidate, result: run };
        return true;
    };
    let parts = 2;
    while (best.history.events.length >= 2 && budget > 0) {
        const events = best.history.events;
        const size = Math.ceil(events.length / parts);
        let reduced = false;
        for (let start = 0; start < events.length && budget > 0; start += size) {
            if (await tryCandidate({ ...best.history, events: [...events.slice(0, start), ...events.slice(start + size)] })) {
                parts = Math.max(parts - 1, 2);
                reduced = true;
                options.onProgress?.(best.history.events.length);
                break;
            }
        }
        if (!reduced) {
            if (parts >= events.length) {
                break;
            }
            parts = Math.min(events.length, parts * 2);
        }
    }
    for (const simpler of [{ concurrency: 1 }, { faultRate: 0 }, { preexisting: [] }]) {
        if (budget > 0) {
            await tryCandidate({ ...best.history, ...simpler });
        }
    }
    return best;
}

/** The reproduction a failing seed prints: the history, its failing run's trace, and how to replay it. */
export function reproduction(history: History, result: RunResult, file?: string): string {
    const lines = [
        `history (seed ${history.seed}, ${history.mode}, ${history.events.length} events) broke the contract:`,
        ...result.violations.slice(0, 10).map((v) => `  - ${v}`),
        `trace ${result.trace} (${result.stats.requests} requests): a replay releases the same requests in the same order`,
        `replay it: ${file ? `npm run fuzz -- --replay ${file}` : "save the JSON below and run npm run fuzz -- --replay <file>"}`,
        JSON.stringify(history),
    ];
    return lines.join("\n");
}
