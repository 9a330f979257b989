/**
 * Where the prebuilt Lambda bundles live. `npm run build` (or `npm run build:bundles`) writes them with
 * esbuild (scripts/bundle.ts): deterministic, minified CommonJS with the AWS SDK v3 left to the runtime.
 */
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";

const PACKAGE_NAME = "hybrid-counter";

/** The package root: the nearest directory above `from` whose package.json is named "hybrid-counter". */
export function findPackageRoot(from: string = __dirname): string {
    let dir = path.resolve(from);
    for (;;) {
        const manifest = path.join(dir, "package.json");
        if (existsSync(manifest)) {
            try {
                if ((JSON.parse(readFileSync(manifest, "utf8")) as { name?: unknown }).name === PACKAGE_NAME) {
                    return dir;
                }
            } catch {
                // Not a readable manifest: keep walking up.
            }
        }
        const parent = path.dirname(dir);
        if (parent === dir) {
            throw new Error(`cannot find the ${PACKAGE_NAME} package root above ${from}`);
        }
        dir = parent;
    }
}

/** Absolute paths of the bundles the component deploys. */
export interface BundlePaths {
    /** The DynamoDB stream consumer (`index.handler`). */
    readonly streamConsumer: string;
    /** The first-DLQ redrive (`index.handler`). */
    readonly redrive: string;
    /** The backfill (`index.handler`), deployed when `backfillOnDeploy` is set. */
    readonly backfill: string;
    /** The scheduled settler (`index.handler`). */
    readonly settler: string;
}

export function bundlePathsUnder(root: string): BundlePaths {
    return Object.freeze({
        streamConsumer: path.join(root, "dist", "bundles", "stream-consumer", "index.js"),
        redrive: path.join(root, "dist", "bundles", "redrive", "index.js"),
        backfill: path.join(root, "dist", "bundles", "backfill", "index.js"),
        settler: path.join(root, "dist", "bundles", "settler", "index.js"),
    });
}

/** Throws a clear error if a bundle has not been built. */
export function assertBundlesExist(paths: BundlePaths): void {
    const missing = Object.values(paths).filter((file) => !existsSync(file));
    if (missing.length > 0) {
        throw new Error(`Lambda bundle not found: ${missing.join(", ")}. Run \`npm run build\` (or \`npm run build:bundles\`) first.`);
    }
}
