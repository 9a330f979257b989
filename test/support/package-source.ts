/**
 * Programs under test import the package by name, as a user's program does. Inside the repository (where an example
 * has no install of its own) `resolvePackageToSource()` makes `hybrid-counter` resolve to the package's source for the
 * running process, until the function it returns is called.
 */
import Module from "node:module";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");
type ResolveFilename = (request: string, ...rest: unknown[]) => string;
const internals = Module as unknown as { _resolveFilename: ResolveFilename };

/** Resolves `hybrid-counter` to the package's index.ts; returns the function that restores the resolution. */
export function resolvePackageToSource(): () => void {
    const original = internals._resolveFilename;
    internals._resolveFilename = function (request: string, ...rest: unknown[]) {
        return original.call(this, request === "hybrid-counter" ? path.join(ROOT, "index.ts") : request, ...rest);
    };
    return () => {
        internals._resolveFilename = original;
    };
}

/** Loads a program's entry module afresh: its top level registers the resources. */
export function loadProgram(file: string): unknown {
    const resolved = require.resolve(file);
    delete require.cache[resolved];
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- a fresh load after clearing the cache
    return require(resolved) as unknown;
}
