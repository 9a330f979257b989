// npm's `prepare` hook: runs on `npm install` / `npm ci` in a checkout of this repository (which is what
// `pulumi package add <path | git URL>` does before serving the component to other languages), on
// `npm pack` and on `npm publish`, and when npm installs the package from git. It builds dist/, which
// the package's `main`, the plugin host and the component's Lambda bundles all need.
//
// The build needs the dev dependencies (typescript, esbuild, tsx). An install that leaves them out
// (`--omit=dev`, NODE_ENV=production) cannot build: this stops it with a message that says so, instead of
// leaving a package whose `main` does not exist. Installing the published tarball never runs this hook:
// the tarball already holds dist/.
"use strict";
const { spawnSync } = require("node:child_process");
const path = require("node:path");

const root = path.resolve(__dirname, "..");
const missing = ["typescript", "esbuild", "tsx"].filter((name) => {
    try {
        require.resolve(`${name}/package.json`, { paths: [root] });
        return false;
    } catch {
        return true;
    }
});
if (missing.length > 0) {
    console.error(
        `hybrid-counter: cannot build dist/ because the dev dependencies ${missing.join(", ")} are not installed ` +
            "(npm was run with --omit=dev or NODE_ENV=production). Run `npm install --include=dev` in this folder.",
    );
    process.exit(1);
}
const tsx = require.resolve("tsx/cli", { paths: [root] });
const result = spawnSync(process.execPath, [tsx, path.join(root, "scripts", "build.ts")], { cwd: root, stdio: "inherit" });
process.exit(result.status ?? 1);
