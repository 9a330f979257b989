/**
 * Installs a packed hybrid-counter tarball into a new project the way a user's `npm install` would, but
 * offline: the project gets a package-lock.json cut from this repository's lock (the same versions, the
 * same hoisted layout), so `npm ci --offline` takes every tarball from npm's cache, which the repository's
 * own `npm ci` filled. Used by test/package.test.ts and by `tsx scripts/offline-install.ts --measure`.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, lstatSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";

interface LockEntry {
    version?: string;
    resolved?: string;
    integrity?: string;
    license?: string;
    dev?: boolean;
    devOptional?: boolean;
    optional?: boolean;
    peer?: boolean;
    dependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    [key: string]: unknown;
}
export interface Lockfile {
    name: string;
    version: string;
    lockfileVersion: number;
    requires: boolean;
    packages: Record<string, LockEntry>;
}
export interface ConsumerManifest {
    name: string;
    version: string;
    private: true;
    dependencies: Record<string, string>;
    devDependencies?: Record<string, string>;
}

const ROOT = path.resolve(__dirname, "..");

/** The lock path a package named `name` resolves to from the package at `from`, as Node walks node_modules. */
function resolveIn(packages: Record<string, LockEntry>, from: string, name: string): string | undefined {
    let dir = from;
    for (;;) {
        const candidate = `${dir === "" ? "" : `${dir}/`}node_modules/${name}`;
        if (packages[candidate]) {
            return candidate;
        }
        if (dir === "") {
            return undefined;
        }
        const cut = dir.lastIndexOf("/node_modules/");
        dir = cut < 0 ? "" : dir.slice(0, cut);
    }
}

function requiredDependencies(entry: LockEntry): string[] {
    const optionalPeers = new Set(
        Object.entries(entry.peerDependenciesMeta ?? {})
            .filter(([, m]) => m.optional)
            .map(([n]) => n),
    );
    return [
        ...Object.keys(entry.dependencies ?? {}),
        ...Object.keys(entry.optionalDependencies ?? {}),
        ...Object.keys(entry.peerDependencies ?? {}).filter((n) => !optionalPeers.has(n)),
    ];
}

/**
 * A lock for `manifest` (which depends on the tarball at `tarball` as `hybrid-counter`), holding exactly the
 * entries of `source` that the project's dependencies reach.
 */
export function consumerLock(source: Lockfile, manifest: ConsumerManifest, projectDir: string, tarball: string): Lockfile {
    const packed = JSON.parse(execFileSync("tar", ["-xOzf", tarball, "package/package.json"], { encoding: "utf8" })) as LockEntry & {
        version: string;
    };
    const hybridCounter: LockEntry = {
        version: packed.version,
        resolved: `file:${path.relative(projectDir, tarball)}`,
        integrity: `sha512-${createHash("sha512").update(readFileSync(tarball)).digest("base64")}`,
        license: packed.license as string,
        dependencies: packed.dependencies,
        peerDependencies: packed.peerDependencies,
        peerDependenciesMeta: packed.peerDependenciesMeta,
        engines: packed.engines,
    };
    const packages: Record<string, LockEntry> = { ...source.packages, "node_modules/hybrid-counter": hybridCounter };
    const out: Record<string, LockEntry> = {
        "": {
            name: manifest.name,
            version: manifest.version,
            dependencies: manifest.dependencies,
            devDependencies: manifest.devDependencies,
        },
    };
    const queue: Array<[string, string]> = Object.keys({ ...manifest.dependencies, ...manifest.devDependencies }).map((n) => ["", n]);
    while (queue.length > 0) {
        const [from, name] = queue.shift()!;
        const at = resolveIn(packages, from, name);
        if (at === undefined) {
            throw new Error(`${name} (needed by ${from || "the project"}) is not in the source lock`);
        }
        if (out[at]) {
            continue;
        }
        const { dev: _dev, devOptional, peer: _peer, ...entry } = packages[at]!;
        out[at] = devOptional ? { ...entry, optional: true } : entry;
        for (const dependency of requiredDependencies(entry)) {
            queue.push([at, dependency]);
        }
    }
    return { name: manifest.name, version: manifest.version, lockfileVersion: 3, requires: true, packages: out };
}

/** Writes the project and runs `npm ci --offline` in it; install scripts stay off (they would download Pulumi plugins). */
export function installOffline(projectDir: string, manifest: ConsumerManifest, tarball: string, source: Lockfile = repositoryLock()): void {
    mkdirSync(projectDir, { recursive: true });
    writeFileSync(path.join(projectDir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
    writeFileSync(
        path.join(projectDir, "package-lock.json"),
        `${JSON.stringify(consumerLock(source, manifest, projectDir, tarball), null, 2)}\n`,
    );
    execFileSync("npm", ["ci", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"], {
        cwd: projectDir,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, npm_config_update_notifier: "false" },
    });
}

export function repositoryLock(): Lockfile {
    return JSON.parse(readFileSync(path.join(ROOT, "package-lock.json"), "utf8")) as Lockfile;
}

/** Bytes of the regular files under `dir`, symlinks not followed (what `du -b` counts, without directories). */
export function treeBytes(dir: string): number {
    let total = 0;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) {
            total += treeBytes(full);
        } else if (entry.isFile()) {
            total += lstatSync(full).size;
        }
    }
    return total;
}

/** npm pack into a new temporary folder; returns the tarball's path. */
export function packInto(dir: string = mkdtempSync(path.join(tmpdir(), "hybrid-counter-pack-")), cwd: string = ROOT): string {
    mkdirSync(dir, { recursive: true });
    const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dir, "--loglevel=error"], {
        cwd,
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
    });
    const [{ filename }] = JSON.parse(out) as Array<{ filename: string }>;
    return path.join(dir, filename);
}
