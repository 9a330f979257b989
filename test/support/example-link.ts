/**
 * Inside the repository an example has no install of its own. `npm link` style, this makes
 * `<example>/node_modules/hybrid-counter` a link to the repository root, so TypeScript and esbuild resolve
 * `hybrid-counter` and its subpaths through the package's own `exports` to the built dist/ (`npm test`
 * builds it first), exactly as they resolve the installed package. An example that already has its own
 * install (its README's `npm install`) is left as it is.
 *
 * Test files run two at a time, in separate processes, and more than one links the same example: the link is
 * shared. Each process that uses it leaves a file named after itself beside it, and the last one to finish removes
 * the link (and the node_modules it was created in). Taking and leaving the link happen under a lock (a directory,
 * which mkdir creates or refuses atomically), so one process cannot remove the link while another takes it.
 */
import {
    existsSync,
    lstatSync,
    mkdirSync,
    readFileSync,
    readdirSync,
    renameSync,
    rmSync,
    statSync,
    symlinkSync,
    writeFileSync,
} from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
/** A lock older than this was left by a process that died holding it. */
const STALE_LOCK_MS = 30_000;

/** Links the package into `exampleDir`; returns the function that gives the link up (removing it when no one else uses it). */
export function linkPackageInto(exampleDir: string): () => void {
    const modules = path.join(exampleDir, "node_modules");
    const link = path.join(modules, "hybrid-counter");
    const users = path.join(modules, ".hybrid-counter-link");
    const user = path.join(users, `${process.pid}-${Math.random().toString(36).slice(2)}`);
    const taken = locked(exampleDir, () => {
        if (existsSync(link) && (!isLink(link) || !existsSync(users))) {
            return false; // the example's own install, or a link someone made by hand
        }
        if (!isLink(link)) {
            // What a run killed while it held the link left, with no link left to share.
            rmSync(users, { recursive: true, force: true });
        }
        if (!existsSync(users)) {
            mkdirSync(users, { recursive: true });
            // Removed with the link when node_modules held nothing else before.
            writeFileSync(path.join(users, "created-modules"), String(readdirSync(modules).length === 1));
        }
        if (!isLink(link)) {
            symlinkSync(ROOT, link, "dir");
        }
        writeFileSync(user, "");
        return true;
    });
    if (!taken) {
        return () => undefined;
    }
    return () =>
        locked(exampleDir, () => {
            rmSync(user, { force: true });
            const others = readdirSync(users).filter((name) => name !== "created-modules" && processAlive(Number(name.split("-")[0])));
            if (others.length > 0) {
                return;
            }
            const createdModules = readFileText(path.join(users, "created-modules")) === "true";
            rmSync(createdModules ? modules : link, { recursive: true, force: true });
            rmSync(users, { recursive: true, force: true });
        });
}

/** Runs `fn` holding the example's link lock. */
function locked<T>(exampleDir: string, fn: () => T): T {
    const lock = path.join(exampleDir, ".hybrid-counter-link.lock");
    for (;;) {
        try {
            mkdirSync(lock);
            break;
        } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== "EEXIST") {
                throw error;
            }
            if (Date.now() - (statMs(lock) ?? Date.now()) > STALE_LOCK_MS) {
                // Left by a process killed inside its few filesystem calls. Moved aside, then looked at again: two
                // processes may both have found it stale, and the second may have moved the lock the first has just
                // taken, which it gives back.
                const aside = `${lock}.stale-${process.pid}-${Math.random().toString(36).slice(2)}`;
                try {
                    renameSync(lock, aside);
                } catch {
                    continue; // another process moved it first
                }
                if (Date.now() - (statMs(aside) ?? 0) > STALE_LOCK_MS) {
                    rmSync(aside, { recursive: true, force: true });
                } else {
                    try {
                        renameSync(aside, lock);
                    } catch {
                        rmSync(aside, { recursive: true, force: true });
                    }
                }
            } else {
                Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
            }
        }
    }
    try {
        return fn();
    } finally {
        rmSync(lock, { recursive: true, force: true });
    }
}

function isLink(file: string): boolean {
    try {
        return lstatSync(file).isSymbolicLink();
    } catch {
        return false;
    }
}

function statMs(file: string): number | undefined {
    try {
        return statSync(file).mtimeMs;
    } catch {
        return undefined;
    }
}

function readFileText(file: string): string | undefined {
    try {
        return readFileSync(file, "utf8");
    } catch {
        return undefined;
    }
}

/** True when a process with this id runs (a user file of a process that died does not keep the link). */
function processAlive(pid: number): boolean {
    try {
        process.kill(pid, 0);
        return true;
    } catch (error) {
        return (error as NodeJS.ErrnoException).code === "EPERM";
    }
}
