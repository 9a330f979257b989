/**
 * The pieces of a history's schedule that every runner shares (run.ts, regions/run.ts): how an event starts as a task
 * of the scheduler and is tracked until it ends, what the schedule does when no request waits at the gate, and which
 * fault a released request draws. Each draws from the seed's `random` in the same order wherever it is used, so a
 * seed's schedule, and its trace digest, do not depend on which runner holds the loop.
 */
import { FAULT_KINDS, seededRandom, type FaultKind } from "../../local/engine/faults";
import { REQUEST_LIFETIME_MS } from "../../runtime/heal/heal-window";
import { installPauses } from "../../runtime/shared/pauses";
import { VirtualTime } from "./clock";
import { Scheduler } from "./scheduler";

/**
 * Runs `run` on a virtual clock and a scheduler drawn from the seed, then puts the clock, Math.random and the pauses
 * back. A released request takes 1 to 20 ms of virtual time (fewer in a history that asks: `latencyMs`). The system's
 * own random choices come from the seed too (the client's first shard turn, so which shard each life is homed in; the
 * consumer's partial per transaction; backoff jitter), and so do its tokens' random bits: with the schedule's, every
 * draw is made in the order the seed decides.
 */
export async function onSeededClock<T>(
    history: { readonly seed: number; readonly latencyMs?: number },
    run: (scheduler: Scheduler) => Promise<T>,
): Promise<T> {
    const time = new VirtualTime();
    const latency = seededRandom((history.seed ^ 0x27d4eb2f) >>> 0);
    const most = history.latencyMs ?? 20;
    const scheduler = new Scheduler(time, () => 1 + Math.floor(latency() * most), REQUEST_LIFETIME_MS);
    time.install();
    const random = Math.random;
    Math.random = seededRandom((history.seed ^ 0x3c6ef372) >>> 0);
    const bits = seededRandom((history.seed ^ 0x165667b1) >>> 0);
    const restorePauses = installPauses({
        sleep: (ms) => scheduler.sleep(ms),
        bytes: (size) => Uint8Array.from({ length: size }, () => Math.floor(bits() * 256)),
    });
    try {
        return await run(scheduler);
    } finally {
        restorePauses();
        Math.random = random;
        time.restore();
    }
}

/** The commands that read: a fault on one of them is a throttle or a 500 before the table, never a write's kinds. */
export const READS: ReadonlySet<string> = new Set(["GetItemCommand", "QueryCommand", "BatchGetItemCommand", "ScanCommand"]);

/**
 * Starts `work` as a scheduler task named `label`, kept in `running` until it ends; `ended` hears its end whatever
 * the outcome, `failed` an error it threw (an event's failure is a violation to its runner, not a crash of the run).
 */
export function startTracked(
    scheduler: Scheduler,
    running: Set<Promise<void>>,
    label: string,
    work: () => Promise<void>,
    ended: () => void,
    failed: (error: unknown) => void,
): void {
    const tracked: Promise<void> = scheduler
        .spawn(label, work)
        .finally(ended)
        .then(() => undefined, failed);
    running.add(tracked);
    void tracked.finally(() => running.delete(tracked));
}

/**
 * No request waits at the gate: "done" when every event has started (`allStarted`) and no task runs; else the clock
 * moves to the earliest timer (every running task is asleep) and the loop goes on ("advanced"). A task that neither
 * waits at the gate nor on the clock means the schedule is stuck: that throws.
 */
export function whenGateEmpty(scheduler: Scheduler, allStarted: boolean, running: ReadonlySet<Promise<void>>): "done" | "advanced" {
    if (allStarted && running.size === 0) {
        return "done";
    }
    if (scheduler.fireTimer(true)) {
        return "advanced";
    }
    throw new Error(`the schedule is stuck: ${running.size} tasks run, none waits at the gate or on the clock`);
}

/** The fault a released `command` draws at `faultRate`, or undefined: reads draw only a throttle or a 500 before the table. */
export function drawFault(random: () => number, faultRate: number, command: string): FaultKind | undefined {
    if (random() >= faultRate) {
        return undefined;
    }
    const eligible = READS.has(command) ? FAULT_KINDS.filter((k) => k === "throttle" || k === "500-before") : FAULT_KINDS;
    return eligible[Math.floor(random() * eligible.length)];
}
