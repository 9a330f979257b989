/**
 * Builds the Lambda bundles the component deploys: one minified CommonJS file per handler.
 *
 * The output is deterministic (same source, same bytes), so a second `pulumi preview` shows no diff.
 * The AWS SDK v3 stays external: the nodejs22.x runtime provides it.
 */
import { build } from "esbuild";
import { mkdirSync } from "node:fs";
import * as path from "node:path";
import { buildCli } from "./bundle-cli";

export const BUNDLE_ENTRIES = {
    "stream-consumer": "runtime/lambda/stream-consumer.ts",
    redrive: "runtime/lambda/redrive.ts",
    backfill: "runtime/lambda/backfill.ts",
    settler: "runtime/lambda/settler.ts",
} as const;

const root = path.resolve(__dirname, "..");

export async function buildBundles(outRoot = path.join(root, "dist", "bundles")): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const [name, entry] of Object.entries(BUNDLE_ENTRIES)) {
        const outdir = path.join(outRoot, name);
        mkdirSync(outdir, { recursive: true });
        const outfile = path.join(outdir, "index.js");
        await build({
            entryPoints: [path.join(root, entry)],
            outfile,
            bundle: true,
            platform: "node",
            target: "node22",
            format: "cjs",
            minify: true,
            sourcemap: false,
            legalComments: "none",
            external: ["@aws-sdk/*", "@smithy/*"],
            logLevel: "warning",
            // Paths in the output would make the bytes depend on where the repository is checked out.
            absWorkingDir: root,
        });
        out[name] = outfile;
    }
    return out;
}

if (require.main === module) {
    // Build lines go to stderr: `npm start --silent -- --json` keeps stdout for the report alone.
    Promise.all([buildBundles(), buildCli()]).then(
        ([files, cli]) => {
            for (const [name, file] of Object.entries({ ...files, cli })) {
                process.stderr.write(`${name}: ${path.relative(root, file)}\n`);
            }
        },
        (error: unknown) => {
            console.error(error);
            process.exit(1);
        },
    );
}
