import { strict as assert } from "node:assert";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { COMMANDS } from "../cli/registry";
import { parseTwinArgs } from "../local/twin/twin";
import { CONFIG_KEYS, CONFIG_NAMESPACE, stackSettingsFromConfig } from "../stack/config";

const root = path.resolve(__dirname, "..");
const readme = readFileSync(path.join(root, "README.md"), "utf8");
const scripts = (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;

/** Every command of the README's `sh` blocks, split at `&&`, with the folder it runs in. */
function shellCommands(markdown: string): Array<{ cwd: string; words: string[] }> {
    const out: Array<{ cwd: string; words: string[] }> = [];
    for (const block of markdown.matchAll(/```sh\n([\s\S]*?)```/g)) {
        for (const line of block[1]!.split("\n").filter((l) => l.trim() !== "")) {
            let cwd = root;
            for (const command of line.split("&&").map((c) => c.trim())) {
                const words = command.match(/'[^']*'|\S+/g)!.map((w) => w.replace(/^'(.*)'$/, "$1"));
                if (words[0] === "cd") {
                    cwd = path.resolve(cwd, words[1]!);
                }
                out.push({ cwd, words });
            }
        }
    }
    return out;
}

describe("the README's commands are true", () => {
    const commands = shellCommands(readme);

    it("names, for every Guarantees row, a test file that exists or the model-based checker", () => {
        const table = readme.slice(readme.indexOf("## Guarantees"), readme.indexOf("\n\n", readme.indexOf("| --- | --- | --- | --- |")));
        const rows = table.split("\n").filter((line) => line.startsWith("| **"));
        assert.ok(rows.length >= 10, `${rows.length} rows`);
        for (const row of rows) {
            const cells = row.split(" | ");
            const proof = cells[cells.length - 1]!.replace(/ \|$/, "");
            const named = proof.split(";").map((part) => part.trim().split(" ")[0]!);
            assert.ok(named.length > 0 && proof.length > 0, `${cells[0]} names no proof`);
            for (const name of named) {
                if (name !== "checker:") {
                    assert.ok(existsSync(path.join(root, "test", `${name}.test.ts`)), `${cells[0]}: test/${name}.test.ts does not exist`);
                }
            }
        }
    });

    it("has the two commands of a fresh machine", () => {
        const lines = readme.split("\n");
        assert.ok(lines.includes("npm ci && npm start"));
        assert.ok(lines.includes("npm test"));
    });

    for (const { cwd, words } of commands) {
        const text = words.join(" ");
        it(`${path.relative(root, cwd) || "."}$ ${text}`, () => {
            const [tool, verb, ...rest] = words;
            switch (tool) {
                case "npm":
                    if (verb === "ci") {
                        assert.ok(existsSync(path.join(cwd, "package-lock.json")), "npm ci needs a lock file");
                    } else if (verb === "install") {
                        assert.ok(existsSync(path.join(cwd, "package.json")));
                    } else if (verb === "start" || verb === "test") {
                        assert.ok(scripts[verb], `package.json has no ${verb} script`);
                        if (verb === "start" && rest[0] === "--") {
                            assert.notEqual(parseTwinArgs(rest.slice(1)), undefined);
                        }
                    } else {
                        assert.equal(verb, "run");
                        assert.ok(scripts[rest[0]!], `package.json has no ${rest[0]} script`);
                    }
                    return;
                case "cd":
                    assert.ok(existsSync(path.join(cwd, "Pulumi.yaml")), `${cwd} is a Pulumi project`);
                    return;
                case "pulumi":
                    // Needs the Pulumi CLI, which cannot be installed here: check what it would read.
                    assert.ok(existsSync(path.join(cwd, "Pulumi.yaml")), `${cwd} is a Pulumi project`);
                    if (verb === "config" && rest[0] === "set") {
                        const args = rest.slice(1).filter((w) => w !== "--path");
                        const [key, value] = args as [string, string];
                        const [namespace, name] = key.split(":") as [string, string];
                        if (namespace !== "aws") {
                            assert.equal(namespace, CONFIG_NAMESPACE);
                            const top = name.split(".")[0]!;
                            assert.ok(top in CONFIG_KEYS, `${top} is a setting of the root program`);
                            const config =
                                top === "tags"
                                    ? { [`${namespace}:tags`]: JSON.stringify({ [name.split(".")[1]!]: value }) }
                                    : { [key]: value };
                            assert.doesNotThrow(() => stackSettingsFromConfig(config));
                        }
                    }
                    for (const [i, w] of words.entries()) {
                        if (w === "--policy-pack") {
                            assert.ok(existsSync(path.join(cwd, words[i + 1]!, "PulumiPolicy.yaml")), "the policy pack exists");
                        }
                    }
                    return;
                case "npx":
                    // The package's own bin, with one of its commands.
                    assert.equal(verb, "hybrid-counter");
                    assert.ok(
                        COMMANDS.some((c) => c.name === rest[0]),
                        `${rest[0]} is a command of the CLI`,
                    );
                    return;
                case "apt-get":
                case "aws":
                    // Operator commands for the user's own machine and account.
                    assert.ok(["install", "sqs"].includes(verb!), text);
                    return;
                default:
                    assert.fail(`the README runs an unchecked command: ${text}`);
            }
        });
    }

    it("links only to files that exist", () => {
        for (const [, target] of readme.matchAll(/\]\(([^)#]+)(?:#[^)]*)?\)/g)) {
            if (!/^https?:/.test(target!)) {
                assert.ok(existsSync(path.join(root, target!)), `${target} exists`);
            }
        }
    });
});
