import * as assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { HybridCounterComponent } from "../index";
import { buildBundles } from "../scripts/bundle";

describe("HybridCounterComponent bundles", () => {
    const dirs: string[] = [];
    after(() => {
        for (const dir of dirs) {
            rmSync(dir, { recursive: true, force: true });
        }
    });

    it("points at built, non-empty bundles inside the package", () => {
        // Assess
        for (const file of Object.values(HybridCounterComponent.bundlePaths)) {
            assert.ok(path.isAbsolute(file), file);
            assert.ok(existsSync(file), `${file} is missing: run npm run build:bundles`);
            assert.ok(statSync(file).size > 0, file);
        }
    });

    it("builds byte-identical bundles twice, exporting a handler with the AWS SDK left external", async () => {
        // Prepare
        const first = mkdtempSync(path.join(tmpdir(), "hc-bundle-a-"));
        const second = mkdtempSync(path.join(tmpdir(), "hc-bundle-b-"));
        dirs.push(first, second);

        // Act
        const a = await buildBundles(first);
        const b = await buildBundles(second);

        // Assess
        assert.deepEqual(Object.keys(a).sort(), ["backfill", "redrive", "settler", "stream-consumer"]);
        for (const name of Object.keys(a)) {
            const bytesA = readFileSync(a[name]);
            const bytesB = readFileSync(b[name]);
            assert.ok(bytesA.length > 0, name);
            assert.ok(bytesA.equals(bytesB), `${name} differs between two builds`);
            const text = bytesA.toString("utf8");
            assert.ok(!text.includes(first) && !text.includes("/work/"), `${name} embeds a path`);
            assert.match(text, /require\("@aws-sdk\/client-dynamodb"\)/, name);
        }
    });
});
