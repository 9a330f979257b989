// One lint toolchain: typescript-eslint's type-aware rules, plus Pulumi's rules against Outputs in
// template literals (an Output interpolated with `${}` becomes "Calling [toString] on an [Output<T>]...").
import pulumi from "@pulumi/eslint-plugin";
import { fileURLToPath } from "node:url";
import tseslint from "typescript-eslint";

export default tseslint.config(
    { ignores: ["**/node_modules/", "**/dist/", ".local/", "**/*.js", "**/*.mjs"] },
    ...tseslint.configs.recommended,
    {
        files: ["**/*.ts"],
        languageOptions: {
            // import.meta.dirname would need Node.js 20.11.
            parserOptions: { projectService: true, tsconfigRootDir: fileURLToPath(new URL(".", import.meta.url)) },
        },
        plugins: { "@pulumi": pulumi },
        rules: {
            "@pulumi/no-output-in-template-literal": "error",
            "@pulumi/no-output-instance-in-template-literal": "error",
            "@typescript-eslint/no-floating-promises": "error",
            "@typescript-eslint/no-explicit-any": "off",
            "@typescript-eslint/no-require-imports": "error",
            "@typescript-eslint/no-unused-vars": [
                "error",
                { argsIgnorePattern: "^_", varsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" },
            ],
        },
    },
    {
        // The examples are programs of their own (their own tsconfig): type-aware linting would build two more
        // TypeScript programs, each loading @pulumi/aws's types, for a third of the lint's time. They get the
        // syntactic rules here, and the tests type-check each with tsc against the built and the packed package.
        files: ["examples/**/*.ts"],
        ...tseslint.configs.disableTypeChecked,
        rules: {
            ...tseslint.configs.disableTypeChecked.rules,
            "@pulumi/no-output-in-template-literal": "off",
            "@pulumi/no-output-instance-in-template-literal": "off",
        },
    },
);
