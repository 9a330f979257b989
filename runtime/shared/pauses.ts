/**
 * Where the runtime waits and draws chance that is not the caller's: every backoff of the client, the consumer and
 * reconcile sleeps through `pause`, and every client token draws its random bits through `tokenBytes`.
 *
 * By default these are the process's timers and `crypto.randomBytes`. A simulation (the model-based checker,
 * test/fuzz/) installs its own for one run with `installPauses`: a virtual clock whose sleeps resume when its
 * schedule says, and random bits drawn from its seed, so that the seed alone decides every history. Time itself is
 * read through `Date.now`, which the simulation replaces for the run as well.
 */
import { randomBytes } from "node:crypto";

export interface Pauses {
    /** Resolves after `ms` milliseconds. */
    sleep(ms: number): Promise<void>;
    /** `size` random bytes. */
    bytes(size: number): Uint8Array;
}

const systemPauses: Pauses = {
    sleep: (ms) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    bytes: (size) => randomBytes(size),
};

let current: Pauses = systemPauses;

/** Waits `ms` milliseconds on the installed clock (the process's timers unless a simulation installed its own). */
export function pause(ms: number): Promise<void> {
    return current.sleep(ms);
}

/** `size` random bytes from the installed source (`crypto.randomBytes` unless a simulation installed its own). */
export function tokenBytes(size: number): Uint8Array {
    return current.bytes(size);
}

/** Installs `pauses` in place of the process's timers and random bytes; the returned function puts them back. */
export function installPauses(pauses: Pauses): () => void {
    const previous = current;
    current = pauses;
    return () => {
        current = previous;
    };
}
