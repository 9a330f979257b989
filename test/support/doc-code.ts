/**
 * The TypeScript samples of the docs, type-checked and run (test/support/doc-samples.ts extracts them).
 *
 * Each sample becomes a module (`.mts`: an ES module, so a sample may `await` at its top level, as a program of the
 * reader's would) under .local/docs-samples/, inside this package, so that `import ... from "hybrid-counter"` is
 * the package's own name: type-checked against its sources (the `exports` map, mapped to the .ts files), and run
 * against its build (dist/, through the `exports` map itself, as an installed package resolves).
 *   - A whole program (no tag) runs under Pulumi mocks when it builds a component, and must record the component.
 *   - A `fragment` uses names a real program defines first (FRAGMENT_NAMES): type-checked with them declared; a
 *     fragment that calls the runtime (`hybrid-counter/runtime`) runs with them bound to a local deployment.
 *   - An `engine` program (a policy pack) needs the Pulumi engine: type-checked only.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";
import type { Sample } from "./doc-samples";

/** The names a fragment may use without defining them, with their types (type-check) and values (run). */
export const FRAGMENT_NAMES = {
    clientConfig: { type: 'import("hybrid-counter").HybridCounterClientConfig', value: "JSON.parse(process.env.HC_DOCS_CLIENT_CONFIG!)" },
    dynamodb: { type: 'import("@aws-sdk/client-dynamodb").DynamoDBClient', value: "new DocsDynamoDBClient({})" },
    tenantId: { type: "string", value: '"tenant-42"' },
    orderId: { type: "string", value: '"order-1"' },
} as const;

/** The package's public entries, as its `exports` map names them, mapped to their sources for type-checking. */
const ENTRIES: Record<string, string> = {
    "hybrid-counter": "index.ts",
    "hybrid-counter/runtime": "runtime/index.ts",
    "hybrid-counter/runtime/client": "runtime/client/index.ts",
    "hybrid-counter/policy": "policy/index.ts",
};

export interface SampleFile {
    readonly sample: Sample;
    readonly file: string;
    readonly fragment: boolean;
    /** What running it takes: Pulumi mocks, the local world, or nothing (type-checked only). */
    readonly run: "pulumi" | "runtime" | "none";
}

/** The used fragment names of a sample (an identifier the sample never declares). */
function usedNames(code: string): string[] {
    return Object.keys(FRAGMENT_NAMES).filter(
        (name) => new RegExp(`\\b${name}\\b`).test(code) && !new RegExp(`(const|let|var|function)\\s+${name}\\b`).test(code),
    );
}

/** Writes each TypeScript sample as a module under `dir`; a fragment gets its names declared (or bound, to run). */
export function writeSamples(samples: readonly Sample[], dir: string): SampleFile[] {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    return samples.map((sample, i) => {
        const fragment = sample.tags.has("fragment");
        const names = fragment ? usedNames(sample.code) : [];
        const run = sample.tags.has("engine")
            ? "none"
            : fragment
              ? /from "hybrid-counter\/runtime"/.test(sample.code)
                  ? "runtime"
                  : "none"
              : /new HybridCounterComponent\(/.test(sample.code)
                ? "pulumi"
                : "none";
        const base = `${sample.page.replace(/[^\w]+/g, "-")}-${sample.line}-${i}`;
        const typed = [
            ...names.map((n) => `declare const ${n}: ${FRAGMENT_NAMES[n as keyof typeof FRAGMENT_NAMES].type};`),
            sample.code,
            "export {};",
        ];
        writeFileSync(path.join(dir, `${base}.check.mts`), typed.join("\n"));
        if (run === "runtime") {
            const bound = [
                'import { DynamoDBClient as DocsDynamoDBClient } from "@aws-sdk/client-dynamodb";',
                ...names.map((n) => `const ${n} = ${FRAGMENT_NAMES[n as keyof typeof FRAGMENT_NAMES].value};`),
                sample.code,
                "export {};",
            ];
            writeFileSync(path.join(dir, `${base}.mts`), bound.join("\n"));
        } else if (run === "pulumi") {
            // Run in process under the mocks: CommonJS, so that it shares the process's @pulumi/pulumi.
            writeFileSync(path.join(dir, `${base}.ts`), sample.code);
        }
        const file = path.join(dir, run === "runtime" ? `${base}.mts` : run === "pulumi" ? `${base}.ts` : `${base}.check.mts`);
        return { sample, file, fragment, run };
    });
}

/** Type errors of every sample, as `page:line: message`; empty when every sample type-checks. */
export function typeErrors(files: readonly SampleFile[], root: string): string[] {
    const checked = files.map((f) => f.file.replace(/(\.check)?\.m?ts$/, ".check.mts"));
    const program = ts.createProgram(checked, {
        strict: true,
        noEmit: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.Node16,
        moduleResolution: ts.ModuleResolutionKind.Node16,
        esModuleInterop: true,
        skipLibCheck: true,
        types: ["node"],
        baseUrl: root,
        paths: Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, [file]])),
    });
    const out: string[] = [];
    checked.forEach((fileName, i) => {
        const source = program.getSourceFile(fileName)!;
        for (const diagnostic of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
            const { line } = source.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
            out.push(
                `${files[i]!.sample.page}:${files[i]!.sample.line} (sample line ${line + 1}): ${ts.flattenDiagnosticMessageText(diagnostic.messageText, " ")}`,
            );
        }
    });
    return out;
}
