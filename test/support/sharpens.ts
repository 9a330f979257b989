/**
 * How a checker test proves a fix: the history runs as shipped (it must keep the contract) and against the mutant that
 * reverses the fix (it must not, with a violation matching `expected`): middleware on a party's client, or a run option
 * that changes the order the settler works in. Shared by the checker's mutant tests.
 */
import { strict as assert } from "node:assert";
import type { LocalEngine } from "../../local/engine/engine";
import type { History } from "../fuzz/history";
import { runHistory, type FuzzClients, type RunOptions, type RunResult } from "../fuzz/run";

/** Runs `history` sound and mutated; asserts both verdicts and resolves with the two runs. */
export async function sharpens(
    engine: LocalEngine,
    history: History,
    mutant: ((clients: FuzzClients) => void) | RunOptions,
    expected: RegExp,
): Promise<{ sound: RunResult; mutant: RunResult }> {
    const sound = await runHistory(engine, history);
    const mutated = await runHistory(engine, history, typeof mutant === "function" ? { mutate: mutant } : mutant);
    assert.deepEqual(sound.violations, []);
    assert.ok(
        mutated.violations.some((v) => expected.test(v)),
        `the checker missed the mutant: ${mutated.violations.join("; ") || "no violation"}`,
    );
    return { sound, mutant: mutated };
}
