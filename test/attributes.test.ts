/**
 * Every `hc_*` attribute the runtime writes is in docs/design/core.md's attribute table (with its writer, remover and
 * size bound), and every row of the table names an attribute the runtime still writes; and there are at most 20 of
 * them. The names are read from the runtime's code itself: every string and template literal (a template's name up to
 * its first substitution, `hc_y_${period}`, is the family `hc_y_<...>`), comments left out.
 */
import { strict as assert } from "node:assert";
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import * as ts from "typescript";

const root = path.resolve(__dirname, "..");

function files(dir: string): string[] {
    return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() ? files(`${dir}/${entry.name}`) : entry.name.endsWith(".ts") ? [`${dir}/${entry.name}`] : [],
    );
}

/** The `hc_*` names in a literal's text: a name that ends in `_` at the literal's end is a family (`hc_y_`). */
function namesIn(text: string, family: boolean): string[] {
    return [...text.matchAll(/\bhc_[a-z]+(?:_[a-z]+)*_?/g)].map((m) =>
        family && m.index! + m[0].length === text.length && m[0].endsWith("_") ? `${m[0]}*` : m[0].replace(/_$/, "_*"),
    );
}

/** The names the runtime's code writes or reads, by file. */
function codeNames(): Map<string, Set<string>> {
    const found = new Map<string, Set<string>>();
    for (const file of files("runtime")) {
        const source = ts.createSourceFile(file, readFileSync(path.join(root, file), "utf8"), ts.ScriptTarget.Latest, true);
        const visit = (node: ts.Node): void => {
            const names =
                ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)
                    ? namesIn(node.text, false)
                    : ts.isTemplateHead(node)
                      ? namesIn(node.text, true)
                      : [];
            for (const name of names) {
                found.set(name, (found.get(name) ?? new Set()).add(file));
            }
            ts.forEachChild(node, visit);
        };
        visit(source);
    }
    return found;
}

/** The attribute table's rows: name (a family as `hc_y_*`) and its cells. */
function tableRows(): Map<string, string[]> {
    const page = readFileSync(path.join(root, "docs", "design", "core.md"), "utf8");
    const section = page.slice(page.indexOf("## Every attribute the counting writes"));
    const rows = new Map<string, string[]>();
    for (const line of section.split("\n")) {
        const match = /^\| `(hc_[a-z_]+)(<[^>]+>)?`(?:, `(hc_[a-z_]+)`)? \|(.*)\|$/.exec(line);
        if (match === null) {
            continue;
        }
        const cells = match[4]!.split("|").map((cell) => cell.trim());
        rows.set(match[2] === undefined ? match[1]! : `${match[1]}*`, cells);
        if (match[3] !== undefined) {
            rows.set(match[3], cells);
        }
    }
    return rows;
}

describe("the attributes the counting writes (docs/design/core.md's table)", () => {
    const code = codeNames();
    const rows = tableRows();

    it("names in the table every hc_* attribute the runtime's code names", () => {
        const missing = [...code.keys()].filter((name) => !rows.has(name)).map((name) => `${name} (${[...code.get(name)!].join(", ")})`);
        assert.deepEqual(missing, []);
    });

    it("has no row for an attribute the runtime no longer names", () => {
        assert.deepEqual(
            [...rows.keys()].filter((name) => !code.has(name)),
            [],
        );
    });

    it("gives every row where it lives, its writer, its remover and its size bound", () => {
        for (const [name, cells] of rows) {
            assert.equal(cells.length, 4, name);
            assert.ok(
                cells.every((cell) => cell.length > 0),
                `${name}: an empty cell`,
            );
        }
    });

    it("keeps the runtime to at most 20 hc_* names", () => {
        assert.ok(code.size <= 20, `${code.size} names: ${[...code.keys()].sort().join(", ")}`);
        assert.ok(code.size >= 15, "the scan found too few names to be reading the code");
    });
});
