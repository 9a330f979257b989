/**
 * The runtime stays small enough to hold in one's head: no file of runtime/ over 600 lines, and no function (a
 * declaration, a method, an arrow or a function expression with a body) over 80 lines, counted from its first line
 * to its last. The last test proves the measure counts what it says on a source made to break it.
 */
import { strict as assert } from "node:assert";
import { readdirSync, readFileSync, statSync } from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";

const ROOT = path.resolve(__dirname, "..");
const FILE_LINES_MAX = 600;
const FUNCTION_LINES_MAX = 80;

function sources(dir: string): string[] {
    return readdirSync(path.join(ROOT, dir)).flatMap((name) => {
        const entry = path.join(dir, name);
        return statSync(path.join(ROOT, entry)).isDirectory() ? sources(entry) : entry.endsWith(".ts") ? [entry] : [];
    });
}

/** Every function of `text` longer than `max` lines, as `name (lines)` at its first line. */
function longFunctions(file: string, text: string, max: number): string[] {
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const found: string[] = [];
    const visit = (node: ts.Node): void => {
        if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
            const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
            const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
            if (last - first + 1 > max) {
                const named = (node as { name?: ts.Node }).name ?? (ts.isVariableDeclaration(node.parent) ? node.parent.name : undefined);
                const name = named?.getText(source) ?? "(anonymous)";
                found.push(`${file}:${first + 1} ${name} (${last - first + 1} lines)`);
            }
        }
        ts.forEachChild(node, visit);
    };
    visit(source);
    return found;
}

describe("the runtime's size", () => {
    const files = sources("runtime");

    it(`has no file over ${FILE_LINES_MAX} lines`, () => {
        assert.ok(files.length > 20, `${files.length} files under runtime/`);
        const long = files
            .map((file) => [file, readFileSync(path.join(ROOT, file), "utf8").split("\n").length] as const)
            .filter(([, lines]) => lines > FILE_LINES_MAX)
            .map(([file, lines]) => `${file} (${lines} lines)`);
        assert.deepEqual(long, []);
    });

    it(`has no function over ${FUNCTION_LINES_MAX} lines`, () => {
        assert.deepEqual(
            files.flatMap((file) => longFunctions(file, readFileSync(path.join(ROOT, file), "utf8"), FUNCTION_LINES_MAX)),
            [],
        );
    });

    it("counts a method, an arrow and a nested function, each from its first line to its last", () => {
        const body = (n: number) => Array.from({ length: n }, (_, i) => `    const v${i} = ${i};`).join("\n");
        const text = [
            `export class C {\n    m(): void {\n${body(2)}\n    }\n}`,
            `const arrow = () => {\n${body(3)}\n};`,
            `function outer(): void {\n    function inner(): void {\n${body(1)}\n    }\n}`,
        ].join("\n");
        assert.deepEqual(longFunctions("x.ts", text, 4), ["x.ts:7 arrow (5 lines)", "x.ts:12 outer (5 lines)"]);
        assert.deepEqual(longFunctions("x.ts", text, 3), ["x.ts:2 m (4 lines)", "x.ts:7 arrow (5 lines)", "x.ts:12 outer (5 lines)"]);
    });
});
