/**
 * Bundles the API function the way hybrid-counter bundles its own functions: esbuild, one minified
 * CommonJS file exporting `handler`, the AWS SDK v3 left to the Lambda runtime, the same bytes for
 * the same source (so a second `pulumi preview` shows no diff).
 */
import { buildSync } from "esbuild";
import * as path from "node:path";

export const API_ENTRY = path.join(__dirname, "app", "lambda.ts");

/** Builds `<outDir>/index.js` and returns its path. */
export function buildApiBundle(outDir: string = path.join(__dirname, "dist", "api")): string {
    const outfile = path.join(outDir, "index.js");
    buildSync({
        entryPoints: [API_ENTRY],
        outfile,
        bundle: true,
        platform: "node",
        target: "node22",
        format: "cjs",
        minify: true,
        sourcemap: false,
        legalComments: "none",
        external: ["@aws-sdk/*", "@smithy/*"],
        // `hybrid-counter/runtime` resolves from node_modules, through the package's exports.
        tsconfig: path.join(__dirname, "tsconfig.json"),
        absWorkingDir: __dirname,
        logLevel: "warning",
    });
    return outfile;
}
