/**
 * Inside the repository an example has no install of its own. `npm link` style, this makes
 * `<example>/node_modules/hybrid-counter` a link to the repository root, so TypeScript and esbuild resolve
 * `hybrid-counter` and its subpaths through the package's own `exports` to the built dist/ (`npm test`
 * builds it first), exactly as they resolve the installed package. An example that already has its own
 * install (its README's `npm install`) is left as it is.
 */
import { existsSync, mkdirSync, rmSync, symlinkSync } from "node:fs";
import * as path from "node:path";

const ROOT = path.resolve(__dirname, "..", "..");

/** Links the package into `exampleDir`; returns the function that removes what it created. */
export function linkPackageInto(exampleDir: string): () => void {
    const modules = path.join(exampleDir, "node_modules");
    const link = path.join(modules, "hybrid-counter");
    if (existsSync(link)) {
        return () => undefined;
    }
    const createdModules = !existsSync(modules);
    mkdirSync(modules, { recursive: true });
    symlinkSync(ROOT, link, "dir");
    return () => rmSync(createdModules ? modules : link, { recursive: true, force: true });
}
