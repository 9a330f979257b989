/**
 * What a page tells a user to type, extracted from its Markdown (pure: no file or process is touched here).
 *
 * A fenced block is a sample: its language is the fence's first word (`sh`, `bash`, `ts`, `typescript`, `json`,
 * `python`, `yaml`, `mermaid`), and the words after it are its tags. The tags the docs use:
 *   - `fragment`: a sample that is not a whole program (it uses names a real program defines first, like
 *     `clientConfig` or `tenantId`): type-checked with those names declared, run with them bound;
 *   - `engine`: a whole program that only the Pulumi engine can run (a policy pack): type-checked, not run.
 * A shell block is split into commands: one per line, split again at `&&`; a `cd` alone on its line moves the
 * lines after it in its block, one joined by `&&` moves only the rest of its line. `a | b` keeps `b` as the
 * command's consumer of stdout, `> file` as its redirection; a `#` starts a comment.
 */
import * as path from "node:path";

export interface Sample {
    readonly page: string;
    /** 1-based line of the opening fence. */
    readonly line: number;
    readonly lang: string;
    readonly tags: ReadonlySet<string>;
    readonly code: string;
}

export interface ShellCommand {
    readonly page: string;
    /** 1-based line of the command in its page. */
    readonly line: number;
    /** The folder it runs in, absolute. */
    readonly cwd: string;
    readonly words: readonly string[];
    /** The words of the command its stdout is piped into (`| jq .`), if any. */
    readonly pipe?: readonly string[];
    /** The file its stdout is redirected to (`> outputs.json`), if any. */
    readonly redirect?: string;
    /** As the page writes it. */
    readonly text: string;
}

export const SHELL_LANGS: ReadonlySet<string> = new Set(["sh", "bash", "shell", "console"]);
export const TS_LANGS: ReadonlySet<string> = new Set(["ts", "typescript"]);

/** Every fenced block of a page, with its language and tags. An unclosed fence is an error naming its line. */
export function samples(page: string, markdown: string): Sample[] {
    const out: Sample[] = [];
    const lines = markdown.split("\n");
    for (let i = 0; i < lines.length; i++) {
        const open = /^```(\S*)(.*)$/.exec(lines[i]!);
        if (open === null) {
            continue;
        }
        const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
        if (end < 0) {
            throw new Error(`${page}:${i + 1}: a code fence that is never closed`);
        }
        out.push({
            page,
            line: i + 1,
            lang: open[1]!.toLowerCase(),
            tags: new Set(open[2]!.trim().split(/\s+/).filter(Boolean)),
            code: lines.slice(i + 1, end).join("\n"),
        });
        i = end;
    }
    return out;
}

/** Splits a command line into words; a quoted word or a `<placeholder ...>` stays one word. */
export function words(command: string): string[] {
    return (command.match(/'[^']*'|"[^"]*"|<[^>]*>\S*|\S+/g) ?? []).map((w) => w.replace(/^'(.*)'$|^"(.*)"$/, "$1$2"));
}

/** The commands of a shell sample, each with the folder it runs in (`root` is where the page's reader stands). */
export function shellCommands(sample: Sample, root: string): ShellCommand[] {
    const out: ShellCommand[] = [];
    let blockCwd = root;
    sample.code.split("\n").forEach((raw, index) => {
        const line = raw.replace(/(^|\s)#.*$/, "").trim();
        if (line === "") {
            return;
        }
        let cwd = blockCwd;
        const commands = line.split("&&").map((c) => c.trim());
        for (const text of commands) {
            const [head, ...piped] = text.split("|").map((p) => p.trim());
            const redirect = /\s>\s*(\S+)$/.exec(head!);
            const command = redirect === null ? head! : head!.slice(0, redirect.index).trim();
            const w = words(command);
            out.push({
                page: sample.page,
                line: sample.line + 1 + index,
                cwd,
                words: w,
                ...(piped.length > 0 ? { pipe: words(piped.join("|")) } : {}),
                ...(redirect === null ? {} : { redirect: redirect[1]! }),
                text,
            });
            if (w[0] === "cd") {
                cwd = path.resolve(cwd, w[1]!);
                if (commands.length === 1) {
                    blockCwd = cwd;
                }
            }
        }
    });
    return out;
}
