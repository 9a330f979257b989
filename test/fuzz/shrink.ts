/**
 * Shrinks a failing history to a small one that fails the same way (delta debugging over its events,
 * then fewer concurrent callers, no faults and no items from before the counter where the failure
 * allows), and prints it as a reproduction that runs on its own.
 */
import type { LocalEngine } from "../../local/engine/engine";
import type { History } from "./history";
import { runHistory } from "./run";

/** A violation with its numbers taken out: two runs fail "the same way" when a signature matches. */
export function signature(violation: string): string {
    return violation
        .replace(/#\d+ \{[^}]*\}/g, "#")
        .replace(/#\d+ \w+/g, "#")
        .replace(/\d+/g, "N")
        .slice(0, 80);
}

export interface ShrinkOptions {
    /** Stop shrinking after this long and return the smallest failing history found. */
    readonly deadlineMs?: number;
    readonly onProgress?: (events: number) => void;
}

export async function shrinkHistory(engine: LocalEngine, failing: History, target: string, options: ShrinkOptions = {}): Promise<History> {
    const deadline = Date.now() + (options.deadlineMs ?? 120_000);
    const wanted = signature(target);
    const fails = async (candidate: History): Promise<boolean> => {
        const result = await runHistory(engine, candidate);
        return result.violations.some((v) => signature(v) === wanted);
    };
    let best = failing;
    let parts = 2;
    while (best.events.length >= 2 && Date.now() < deadline) {
        const size = Math.ceil(best.events.length / parts);
        let reduced = false;
        for (let start = 0; start < best.events.length && Date.now() < deadline; start += size) {
            const candidate = { ...best, events: [...best.events.slice(0, start), ...best.events.slice(start + size)] };
            if (await fails(candidate)) {
                best = candidate;
                parts = Math.max(parts - 1, 2);
                reduced = true;
                options.onProgress?.(best.events.length);
                break;
            }
        }
        if (!reduced) {
            if (parts >= best.events.length) {
                break;
            }
            parts = Math.min(best.events.length, parts * 2);
        }
    }
    for (const simpler of [{ concurrency: 1 }, { faultRate: 0 }, { preexisting: [] }]) {
        const candidate = { ...best, ...simpler };
        if (Date.now() < deadline && (await fails(candidate))) {
            best = candidate;
        }
    }
    return best;
}

/** The reproduction a failing seed prints: the history, and how to replay it. */
export function reproduction(history: History, violations: readonly string[], file?: string): string {
    const lines = [
        `history (seed ${history.seed}, ${history.mode}, ${history.events.length} events) broke the contract:`,
        ...violations.slice(0, 10).map((v) => `  - ${v}`),
        `replay it: ${file ? `npm run fuzz -- --replay ${file}` : "save the JSON below and run npm run fuzz -- --replay <file>"}`,
        JSON.stringify(history),
    ];
    return lines.join("\n");
}
