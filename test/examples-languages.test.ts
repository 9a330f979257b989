/**
 * The YAML and Python examples, checked against the component's schema (schema.json, which
 * test/schema.test.ts keeps equal to the inferred one) as far as possible without the Pulumi CLI:
 * - examples/yaml-program: the YAML parses (with the parser @pulumi/pulumi itself ships), the package entry
 *   names this repository, and every property the program sets on the component exists in the schema with
 *   a value of the schema's type; every output it reads exists.
 * - examples/python-program: python3's own parser (the `ast` module) reads `__main__.py`; every keyword
 *   argument of `HybridCounterComponent(...)`, in camelCase, is a schema input with a value of its type,
 *   enum members exist as the Python SDK spells them, and every output attribute read exists.
 */
import * as assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { COMPONENT_TYPE } from "../index";

const ROOT = path.resolve(__dirname, "..");

interface PropertySpec {
    type?: string;
    $ref?: string;
    items?: PropertySpec;
    additionalProperties?: PropertySpec;
}
interface Schema {
    resources: Record<string, { inputProperties: Record<string, PropertySpec>; properties: Record<string, PropertySpec> }>;
    types: Record<string, { enum?: Array<{ name: string; value: string }> }>;
}
const schema = JSON.parse(readFileSync(path.join(ROOT, "schema.json"), "utf8")) as Schema;
const component = schema.resources[COMPONENT_TYPE]!;

/** A value as a program states it: a literal, a reference to another resource, or an enum member. */
type Value =
    | string
    | number
    | boolean
    | Value[]
    | { [key: string]: Value }
    | { readonly ref: string; readonly type: string }
    | { readonly enum: string; readonly member: string };

const isRef = (v: Value): v is { ref: string; type: string } => typeof v === "object" && v !== null && "ref" in v;
const isEnum = (v: Value): v is { enum: string; member: string } => typeof v === "object" && v !== null && "enum" in v;

/** The problems of `value` against the schema property `spec`, each naming `where`. */
function typeProblems(where: string, spec: PropertySpec, value: Value): string[] {
    if (spec.$ref?.startsWith("#/types/")) {
        const token = spec.$ref.slice("#/types/".length);
        const members = schema.types[token]?.enum;
        assert.ok(members, `${token} is an enum of the schema`);
        if (isEnum(value)) {
            const found = token.endsWith(`:${value.enum}`) && members.some((m) => pythonEnumMember(m.name) === value.member);
            return found ? [] : [`${where}: ${value.enum}.${value.member} is not a member of ${token}`];
        }
        return members.some((m) => m.value === value)
            ? []
            : [`${where}: ${JSON.stringify(value)} is not one of ${members.map((m) => m.value).join(", ")}`];
    }
    if (spec.$ref !== undefined) {
        // A resource reference: /aws/v<version>/schema.json#/resources/aws:dynamodb%2Ftable:Table
        const expected = decodeURIComponent(spec.$ref.split("#/resources/")[1]!);
        return isRef(value) && canonicalToken(value.type) === expected
            ? []
            : [`${where}: expected a reference to a ${expected}, found ${JSON.stringify(value)}`];
    }
    switch (spec.type) {
        case "string":
        case "number":
        case "boolean":
            return typeof value === spec.type ? [] : [`${where}: expected a ${spec.type}, found ${JSON.stringify(value)}`];
        case "array":
            return Array.isArray(value)
                ? value.flatMap((item, i) => typeProblems(`${where}[${i}]`, spec.items!, item))
                : [`${where}: expected a list`];
        case "object":
            if (typeof value !== "object" || value === null || Array.isArray(value) || isRef(value) || isEnum(value)) {
                return [`${where}: expected a map`];
            }
            return Object.entries(value).flatMap(([k, v]) => typeProblems(`${where}.${k}`, spec.additionalProperties!, v));
        default:
            return [`${where}: the schema type ${JSON.stringify(spec)} is not checked here`];
    }
}

/** `aws:dynamodb:Table` (YAML's short form) and `aws:dynamodb/table:Table` name the same resource. */
function canonicalToken(token: string): string {
    const [pkg, module, name] = token.split(":") as [string, string, string];
    return module.includes("/") ? token : `${pkg}:${module}/${name[0]!.toLowerCase()}${name.slice(1)}:${name}`;
}

/** How Pulumi's Python SDK generator spells an enum member: `ConsumerThrottles` -> `CONSUMER_THROTTLES`. */
function pythonEnumMember(name: string): string {
    return name.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();
}

const camel = (snake: string) => snake.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** The problems of a component's properties against the schema's inputs. */
function inputProblems(properties: Record<string, Value>): string[] {
    return Object.entries(properties).flatMap(([name, value]) => {
        const spec = component.inputProperties[name];
        return spec === undefined ? [`${name} is not an input of ${COMPONENT_TYPE}`] : typeProblems(name, spec, value);
    });
}

/** The plugin entry a program's Pulumi.yaml writes: this repository, with its PulumiPlugin.yaml and package name. */
function assertNamesThisPackage(programDir: string, packages: Record<string, string>): void {
    assert.deepEqual(Object.keys(packages), ["hybrid-counter"]);
    const source = path.resolve(programDir, packages["hybrid-counter"]!);
    assert.equal(source, ROOT);
    assert.ok(existsSync(path.join(source, "PulumiPlugin.yaml")));
    assert.equal((JSON.parse(readFileSync(path.join(source, "package.json"), "utf8")) as { name: string }).name, "hybrid-counter");
}

function loadYaml(text: string): any {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the YAML parser @pulumi/pulumi depends on
    const yaml = require(require.resolve("js-yaml", { paths: [path.dirname(require.resolve("@pulumi/pulumi/package.json"))] })) as {
        load(text: string): unknown;
    };
    return yaml.load(text);
}

describe("examples/yaml-program against the schema", () => {
    const dir = path.join(ROOT, "examples", "yaml-program");
    const program = loadYaml(readFileSync(path.join(dir, "Pulumi.yaml"), "utf8")) as {
        name: string;
        runtime: string;
        packages: Record<string, string>;
        resources: Record<string, { type: string; properties: Record<string, unknown> }>;
        outputs: Record<string, string>;
    };
    /** `${name}` is a reference to the resource `name`; other strings and values are literals. */
    const toValue = (v: unknown): Value => {
        if (typeof v === "string") {
            const ref = /^\$\{([A-Za-z0-9_-]+)\}$/.exec(v);
            return ref ? { ref: ref[1]!, type: program.resources[ref[1]!]?.type ?? "(no such resource)" } : v;
        }
        if (Array.isArray(v)) {
            return v.map(toValue);
        }
        if (typeof v === "object" && v !== null) {
            return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toValue(x)]));
        }
        return v as Value;
    };

    it("is a YAML program that adds this repository's package", () => {
        // Assess
        assert.equal(program.runtime, "yaml");
        assertNamesThisPackage(dir, program.packages);
    });

    it("sets only inputs of the component's schema, each with a value of its type, and attaches the table it declares", () => {
        // Prepare
        const counters = Object.entries(program.resources).filter(([, r]) => r.type === COMPONENT_TYPE);
        assert.deepEqual(
            counters.map(([name]) => name),
            ["ordersCounter"],
        );
        const properties = toValue(counters[0]![1].properties) as Record<string, Value>;
        // Act
        const problems = inputProblems(properties);
        // Assess
        assert.deepEqual(problems, []);
        assert.deepEqual(Object.keys(properties), [
            "table",
            "partitionKey",
            "sortKey",
            "architecture",
            "batchSize",
            "maximumRetryAttempts",
            "createAlarmTopic",
            "disabledAlarms",
            "thresholds",
            "createThresholdTopic",
            "tags",
        ]);
        assert.deepEqual(properties.table, { ref: "orders", type: "aws:dynamodb:Table" });
        assert.deepEqual([properties.thresholds, properties.createThresholdTopic], [[0.5, 0.9, 1], true]);
    });

    it("reads only outputs the schema has", () => {
        // Assess
        const read = Object.values(program.outputs).map((o) => /^\$\{ordersCounter\.([A-Za-z]+)\}$/.exec(o)?.[1]);
        assert.deepEqual(read, ["clientConfig", "dashboardName", "alarmTopicArn", "thresholdTopicArn"]);
        for (const output of read) {
            assert.ok(component.properties[output!], `${output} is an output`);
        }
    });

    it("finds a property the schema does not have, and a value of the wrong type", () => {
        // Act
        const problems = inputProblems({
            batchSize: "200",
            partition_key: "tenantId",
            disabledAlarms: ["consumerLag"],
            table: { ref: "q", type: "aws:sqs:Queue" },
        });
        // Assess
        assert.deepEqual(problems, [
            'batchSize: expected a number, found "200"',
            `partition_key is not an input of ${COMPONENT_TYPE}`,
            'disabledAlarms[0]: "consumerLag" is not one of consumerIteratorAge, consumerErrors, consumerThrottles, firstDlqDepth, firstDlqAge, fatalDlqDepth, redriveErrors',
            'table: expected a reference to a aws:dynamodb/table:Table, found {"ref":"q","type":"aws:sqs:Queue"}',
        ]);
    });
});

/** Reads a Python program with python3's `ast` and prints what the component calls and reads, as JSON. */
const PYTHON_READER = String.raw`
import ast, json, sys

tree = ast.parse(open(sys.argv[1]).read())
imports = {a.asname or a.name: a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
constructors = {}

def value(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List):
        return [value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {value(k): value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.Name):
        return {"ref": node.id, "type": constructors.get(node.id, "(unknown)")}
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and isinstance(node.value.value, ast.Name):
        return {"enum": node.value.attr, "member": node.attr, "module": imports.get(node.value.value.id)}
    return {"unsupported": ast.dump(node)}

def dotted(node):
    if isinstance(node, ast.Name):
        return imports.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        return dotted(node.value) + "." + node.attr
    return "?"

calls = []
for statement in tree.body:
    if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call):
        target = statement.targets[0].id
        constructors[target] = dotted(statement.value.func)
        if constructors[target].endswith(".HybridCounterComponent"):
            calls.append({
                "variable": target,
                "constructor": constructors[target],
                "name": [value(a) for a in statement.value.args],
                "keywords": {k.arg: value(k.value) for k in statement.value.keywords},
            })
reads = sorted({n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and any(c["variable"] == n.value.id for c in calls)})
print(json.dumps({"imports": imports, "calls": calls, "reads": reads}))
`;

describe("examples/python-program against the schema", () => {
    const dir = path.join(ROOT, "examples", "python-program");
    let read: {
        imports: Record<string, string>;
        calls: Array<{ variable: string; constructor: string; name: Value[]; keywords: Record<string, Value & { module?: string }> }>;
        reads: string[];
    };

    before(() => {
        read = JSON.parse(execFileSync("python3", ["-c", PYTHON_READER, path.join(dir, "__main__.py")], { encoding: "utf8" }));
    });

    it("is a Python program that adds this repository's package", () => {
        // Prepare
        const project = loadYaml(readFileSync(path.join(dir, "Pulumi.yaml"), "utf8")) as {
            runtime: { name: string };
            packages: Record<string, string>;
        };
        // Assess
        assert.equal(project.runtime.name, "python");
        assertNamesThisPackage(dir, project.packages);
        assert.equal(read.imports.hybrid_counter, "pulumi_hybrid_counter");
    });

    it("passes only keyword arguments that are schema inputs, each with a value of its type", () => {
        // Prepare
        assert.deepEqual(
            read.calls.map((c) => [c.variable, c.constructor, c.name]),
            [["counter", "pulumi_hybrid_counter.HybridCounterComponent", ["orders-counter"]]],
        );
        const keywords = read.calls[0]!.keywords;
        const properties = Object.fromEntries(
            Object.entries(keywords).map(([k, v]) => {
                const enumValue = (x: Value): Value =>
                    isEnum(x) ? { enum: x.enum, member: x.member } : Array.isArray(x) ? x.map(enumValue) : x;
                return [
                    camel(k),
                    isRef(v) ? { ref: v.ref, type: v.type === "pulumi_aws.dynamodb.Table" ? "aws:dynamodb:Table" : v.type } : enumValue(v),
                ];
            }),
        );
        // Act
        const problems = inputProblems(properties);
        // Assess
        assert.deepEqual(problems, []);
        assert.deepEqual(Object.keys(properties), [
            "table",
            "partitionKey",
            "sortKey",
            "architecture",
            "batchSize",
            "maximumRetryAttempts",
            "createAlarmTopic",
            "disabledAlarms",
            "thresholds",
            "createThresholdTopic",
            "tags",
        ]);
        assert.deepEqual(properties.architecture, { enum: "Architecture", member: "ARM64" });
        assert.deepEqual([properties.thresholds, properties.createThresholdTopic], [[0.5, 0.9, 1], true]);
        assert.equal((keywords.architecture as { module?: string }).module, "pulumi_hybrid_counter");
    });

    it("reads only outputs the schema has", () => {
        // Assess
        assert.deepEqual(read.reads, ["alarm_topic_arn", "client_config", "dashboard_name", "threshold_topic_arn"]);
        for (const attribute of read.reads) {
            assert.ok(component.properties[camel(attribute)], `${attribute} is an output`);
        }
    });

    it("spells enum members as the Python SDK does", () => {
        // Assess
        assert.deepEqual(["PayPerRequest", "Arm64", "X86_64", "ConsumerThrottles", "FirstDlqDepth"].map(pythonEnumMember), [
            "PAY_PER_REQUEST",
            "ARM64",
            "X86_64",
            "CONSUMER_THROTTLES",
            "FIRST_DLQ_DEPTH",
        ]);
    });
});
