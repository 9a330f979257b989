/**
 * `tsx scripts/measure-api-install.ts [<git ref>]`: the node_modules size of an API that only needs the
 * runtime client (`hybrid-counter` plus `@aws-sdk/client-dynamodb`), installed offline from a packed
 * tarball (scripts/offline-install.ts). With a git ref, the same for the package as it was at that ref,
 * packed from `git archive` with that ref's own lock, so the two can be compared in one run.
 */
import { execFileSync, execSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { installOffline, packInto, repositoryLock, treeBytes, type Lockfile } from "./offline-install";

const ROOT = path.resolve(__dirname, "..");

function measure(label: string, tarball: string, lock: Lockfile, work: string): void {
    const project = path.join(work, label.replace(/[^A-Za-z0-9]+/g, "-"));
    const client = (lock.packages[""]!.dependencies ?? {})["@aws-sdk/client-dynamodb"]!;
    installOffline(
        project,
        {
            name: "api",
            version: "1.0.0",
            private: true,
            dependencies: { "@aws-sdk/client-dynamodb": client, "hybrid-counter": `file:${path.relative(project, tarball)}` },
        },
        tarball,
        lock,
    );
    const modules = path.join(project, "node_modules");
    const top = ["@pulumi/aws", "@pulumi/pulumi", "@pulumi/awsx", "@pulumi/docker", "@pulumi/docker-build", "@pulumi/policy"]
        .map((p) => {
            try {
                return `${p} ${(treeBytes(path.join(modules, p)) / 1e6).toFixed(1)} MB`;
            } catch {
                return undefined;
            }
        })
        .filter((x) => x !== undefined);
    const packages = execFileSync("npm", ["ls", "--all", "--parseable"], { cwd: project, encoding: "utf8" }).trim().split("\n").length - 1;
    console.log(`${label}: node_modules ${(treeBytes(modules) / 1e6).toFixed(1)} MB, ${packages} packages (${top.join(", ")})`);
}

const work = mkdtempSync(path.join(tmpdir(), "hybrid-counter-api-install-"));
try {
    const ref = process.argv[2];
    if (ref !== undefined) {
        const source = path.join(work, "source");
        mkdirSync(source);
        execSync(`git -C ${JSON.stringify(ROOT)} archive ${ref} | tar -x -C ${JSON.stringify(source)}`);
        const lock = JSON.parse(readFileSync(path.join(source, "package-lock.json"), "utf8")) as Lockfile;
        // The old package had no prepare script: its tarball is what npm pack made of the sources.
        measure(`before (${ref})`, packInto(path.join(work, "before-pack"), source), lock, work);
    }
    measure("after (this tree)", packInto(path.join(work, "after-pack")), repositoryLock(), work);
} finally {
    rmSync(work, { recursive: true, force: true });
}
