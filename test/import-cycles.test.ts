import { strict as assert } from "node:assert";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";

const ROOT = path.resolve(__dirname, "..");
const LAYERS = ["index.ts", "components", "runtime", "policy", "cli", "local", "bench", "scripts", "stack"];

function sources(entry: string): string[] {
    const full = path.join(ROOT, entry);
    if (!existsSync(full)) {
        return [];
    }
    if (statSync(full).isFile()) {
        return full.endsWith(".ts") ? [full] : [];
    }
    return readdirSync(full).flatMap((name) => (name === "node_modules" || name === "dist" ? [] : sources(path.join(entry, name))));
}

/** The relative imports of one file (static, dynamic, `export ... from` and `import type` alike), resolved to files. */
function importsOf(file: string): string[] {
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    return info.importedFiles.flatMap(({ fileName }) => {
        if (!fileName.startsWith(".")) {
            return [];
        }
        const base = path.resolve(path.dirname(file), fileName);
        const found = [`${base}.ts`, path.join(base, "index.ts")].find((candidate) => existsSync(candidate));
        return found ? [found] : [];
    });
}

/** Every cycle of the import graph, each as the files along it (Tarjan's strongly connected components). */
export function importCycles(files: readonly string[]): string[][] {
    const graph = new Map(files.map((file) => [file, importsOf(file)]));
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const cycles: string[][] = [];
    let next = 0;
    const visit = (file: string): void => {
        index.set(file, next);
        low.set(file, next++);
        stack.push(file);
        onStack.add(file);
        for (const target of graph.get(file) ?? []) {
            if (!index.has(target)) {
                visit(target);
                low.set(file, Math.min(low.get(file)!, low.get(target)!));
            } else if (onStack.has(target)) {
                low.set(file, Math.min(low.get(file)!, index.get(target)!));
            }
        }
        if (low.get(file) === index.get(file)) {
            const component: string[] = [];
            let member: string;
            do {
                member = stack.pop()!;
                onStack.delete(member);
                component.push(path.relative(ROOT, member));
            } while (member !== file);
            if (component.length > 1 || (graph.get(file) ?? []).includes(file)) {
                cycles.push(component.sort());
            }
        }
    };
    for (const file of files) {
        if (!index.has(file)) {
            visit(file);
        }
    }
    return cycles;
}

describe("the import graph", () => {
    it("has no circle in the package, the CLI, the local system, the bench or the scripts", () => {
        // Act
        const cycles = importCycles(LAYERS.flatMap(sources));
        // Assess
        assert.deepEqual(cycles, []);
    });

    it("finds a circle when there is one", () => {
        // Prepare: two files that import each other
        const files = [path.join(ROOT, "test", "support", "cycle-a.ts"), path.join(ROOT, "test", "support", "cycle-b.ts")];
        // Act
        const cycles = importCycles(files);
        // Assess
        assert.deepEqual(cycles, [["test/support/cycle-a.ts", "test/support/cycle-b.ts"]]);
    });
});
