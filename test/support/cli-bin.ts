/**
 * The built CLI bin (dist/cli/index.js, scripts/bundle-cli.ts) run as a user runs it: a subprocess with a clean
 * environment and local credentials, never blocking this process (servers the tests start answer from it).
 */
import { strict as assert } from "node:assert";
import { spawn } from "node:child_process";

/** What a run printed, and its exit code. */
export interface Ran {
    code: number | null;
    stdout: string;
    stderr: string;
}

/** Runs `bin` with `args`; `env` is added to PATH, HOME and the local credentials, `stdin` is written and closed. */
export function runBin(bin: string, args: readonly string[], options: { stdin?: string; env?: Record<string, string> } = {}): Promise<Ran> {
    return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [bin, ...args], {
            env: {
                PATH: process.env.PATH,
                HOME: process.env.HOME,
                AWS_ACCESS_KEY_ID: "hybridcounterlocal",
                AWS_SECRET_ACCESS_KEY: "hybridcounterlocal",
                // No NODE_NO_WARNINGS: stderr is exactly what an operator sees, warnings included.
                ...options.env,
            },
            stdio: ["pipe", "pipe", "pipe"],
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        child.on("error", reject);
        child.on("close", (code) => resolve({ code, stdout, stderr }));
        child.stdin.end(options.stdin ?? "");
    });
}

/** The JSON a run printed, after asserting it exited 0. */
export function parsedJson(ran: Ran): unknown {
    assert.equal(ran.code, 0, `exit ${ran.code}: ${ran.stderr}`);
    return JSON.parse(ran.stdout);
}

/** A usage error as the contract says: exit 2, one line on stderr naming the field, nothing on stdout, no stack. */
export function assertUsage(ran: Ran, line: string): void {
    assert.equal(ran.code, 2, ran.stderr);
    assert.equal(ran.stdout, "");
    assert.equal(ran.stderr, `error: ${line}\n`);
}
