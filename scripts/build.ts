/**
 * `npm run build`: the package as it is published, from a clean dist/.
 *
 * 1. dist/ is removed, so a renamed or deleted module never ships.
 * 2. tsc (tsconfig.build.json) compiles index.ts, components/, runtime/ and policy/ to JavaScript and
 *    declarations, without source maps.
 * 3. esbuild writes the Lambda bundles the component deploys (scripts/bundle.ts).
 * 4. dist/policy/ becomes a runnable policy pack: PulumiPolicy.yaml and a package.json whose main is the
 *    compiled pack, so `pulumi preview --policy-pack node_modules/hybrid-counter/dist/policy` works from
 *    an installed package that ships no TypeScript sources.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { buildBundles } from "./bundle";

const root = path.resolve(__dirname, "..");
const dist = path.join(root, "dist");

/** The manifest of the installed policy pack: the repository's policy/package.json, pointed at the compiled pack. */
export function installedPolicyPackManifest(repositoryManifest: { name: string; version: string; description?: string; license?: string }) {
    return {
        name: repositoryManifest.name,
        version: repositoryManifest.version,
        description: repositoryManifest.description,
        license: repositoryManifest.license,
        private: true,
        main: "pack.js",
    };
}

async function main(): Promise<void> {
    rmSync(dist, { recursive: true, force: true });

    const tsc = spawnSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-p", path.join(root, "tsconfig.build.json")], {
        cwd: root,
        stdio: "inherit",
    });
    if (tsc.status !== 0) {
        throw new Error(`tsc -p tsconfig.build.json exited with ${tsc.status}`);
    }

    await buildBundles(path.join(dist, "bundles"));

    const manifest = JSON.parse(readFileSync(path.join(root, "policy", "package.json"), "utf8"));
    writeFileSync(path.join(dist, "policy", "package.json"), `${JSON.stringify(installedPolicyPackManifest(manifest), null, 2)}\n`);
    copyFileSync(path.join(root, "policy", "PulumiPolicy.yaml"), path.join(dist, "policy", "PulumiPolicy.yaml"));
}

if (require.main === module) {
    main().then(
        () => console.error("built dist/ (library, declarations, Lambda bundles, policy pack)"),
        (error: unknown) => {
            console.error(error instanceof Error ? error.message : error);
            process.exit(1);
        },
    );
}
