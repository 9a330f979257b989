/**
 * The component's multi-language schema, inferred the way the Pulumi plugin host infers it when a
 * Python, Go, C#, Java or YAML program uses this package (`pulumi package add`): `ComponentProvider` from
 * `@pulumi/pulumi/provider/experimental` analyzes components/args.ts and the component's outputs.
 *
 * `npm run schema:update` writes it to schema.json; test/schema.test.ts fails when the two differ, so every
 * change to the component's API is a visible schema.json diff.
 */
import { readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { ComponentProvider } from "@pulumi/pulumi/provider/experimental/provider";
import { HybridCounterComponent } from "../components/component";

export const ROOT = path.resolve(__dirname, "..");
export const SCHEMA_FILE = path.join(ROOT, "schema.json");
export const SCHEMA_UPDATE_COMMAND = "npm run schema:update";

/** The provider name the plugin host derives from package.json's name (scope dropped, other characters as `-`). */
export function providerName(packageName: string): string {
    return packageName.replace(/^@[^/]+\//, "").replace(/[^-a-zA-Z0-9_]/g, "-");
}

/** A provider serving this package's components, as the plugin host builds it. */
export function componentProvider(): ComponentProvider {
    const manifest = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { name: string };
    return new ComponentProvider({ components: [HybridCounterComponent], dirname: ROOT, name: providerName(manifest.name) });
}

/** The schema as the plugin host infers it, formatted as schema.json holds it. */
export async function inferSchemaText(provider: ComponentProvider = componentProvider()): Promise<string> {
    return `${JSON.stringify(JSON.parse(await provider.getSchema()), null, 2)}\n`;
}

if (require.main === module) {
    inferSchemaText().then(
        (text) => {
            if (process.argv.includes("--write")) {
                writeFileSync(SCHEMA_FILE, text);
                console.error(`wrote ${path.relative(process.cwd(), SCHEMA_FILE)}`);
            } else {
                process.stdout.write(text);
            }
        },
        (error: unknown) => {
            console.error(error instanceof Error ? error.message : error);
            process.exit(1);
        },
    );
}
