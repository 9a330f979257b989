/**
 * How a checker test proves a fix: the history runs as shipped (it must keep the contract) and against the mutant that
 * reverses the fix (it must not, with a violation matching `expected`). Shared by the checker's mutant tests.
 */
import { strict as assert } from "node:assert";
import type { LocalEngine } from "../../local/engine/engine";
import type { History } from "../fuzz/history";
import { runHistory, type FuzzClients, type RunResult } from "../fuzz/run";

/** Runs `history` sound and mutated; asserts both verdicts and resolves with the two runs. */
export async function sharpens(
    engine: LocalEngine,
    history: History,
    mutate: (clients: FuzzClients) => void,
    expected: RegExp,
): Promise<{ sound: RunResult; mutant: RunResult }> {
    const sound = await runHistory(engine, history);
    const mutant = await runHistory(engine, history, { mutate });
    assert.deepEqual(sound.violations, []);
    assert.ok(
        mutant.violations.some((v) => expected.test(v)),
        `the checker missed the mutant: ${mutant.violations.join("; ") || "no violation"}`,
    );
    return { sound, mutant };
}
