/**
 * Policy definitions, their configuration and enforcement levels.
 *
 * Every policy is built by a factory from its defaults, so that the same object serves three uses:
 * - the pack (`pack.ts`) builds every policy with its shipped defaults;
 * - an organisation can build its own pack in code and change levels or thresholds, awsguard-style:
 *   `hybridCounterPolicies({ all: "mandatory", "stream-mapping-bounded-retries": { maximumRetryAttempts: 3 } })`;
 * - the engine's pack config (`--policy-pack-config`, or the organisation's policy group config)
 *   overrides levels and values at run time. The same JSON shape works in all three places.
 *
 * A policy reads its effective configuration as its defaults overlaid with whatever the engine
 * passes, so a policy behaves the same whether or not the engine filled in the schema defaults.
 */

import { validateResourceOfType } from "@pulumi/policy";
import type {
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
} from "@pulumi/policy";
import type { PolicyConfigJSONSchema } from "@pulumi/policy/schema";
import type { Resource } from "@pulumi/pulumi";

/** The enforcement levels a policy can be set to. */
export const ENFORCEMENT_LEVELS: readonly EnforcementLevel[] = ["advisory", "mandatory", "remediate", "disabled"];

/** Config every policy accepts: logical names (or URNs) of resources the policy must not report. */
export interface ExemptionConfig {
    /** Logical names or URNs of resources this policy skips. @default [] */
    readonly exemptResources: readonly string[];
}

/**
 * A policy's setting: either an enforcement level, or config values with an optional level.
 * This is the shape of one entry of Pulumi's policy pack config.
 */
export type PolicySetting<C> = EnforcementLevel | ({ readonly enforcementLevel?: EnforcementLevel } & Partial<C>);

/** JSON schema of each config property, with its default. */
export type ConfigProperties<C> = { readonly [K in keyof C]-?: PolicyConfigJSONSchema & { readonly default: C[K] } };

interface PolicyMetadata<C> {
    /** kebab-case policy name, unique in the pack. */
    readonly name: string;
    /** What the policy enforces and what goes wrong without it. */
    readonly description: string;
    /** How to fix a violation. */
    readonly remediationSteps: string;
    /** Level the policy ships with. */
    readonly enforcementLevel: EnforcementLevel;
    /** Schema and shipped default of every config value except `exemptResources`, which every policy has. */
    readonly config: ConfigProperties<Omit<C, keyof ExemptionConfig>>;
}

/** A resource policy specification: `check` runs on every resource of `resourceType` with the effective config. */
export interface ResourcePolicySpec<C extends ExemptionConfig> extends PolicyMetadata<C> {
    /** The Pulumi type token the policy applies to. */
    readonly resourceType: string;
    readonly check: (args: ResourceValidationArgs, config: C, reportViolation: ReportViolation) => void;
}

/** A stack policy specification: `check` runs once per stack with the effective config. */
export interface StackPolicySpec<C extends ExemptionConfig> extends PolicyMetadata<C> {
    readonly check: (args: StackValidationArgs, config: C, reportViolation: ReportViolation) => void;
}

/** Builds a policy from a setting (level and/or config values over the shipped defaults). */
export type PolicyFactory<C, P> = ((setting?: PolicySetting<C>) => P) & {
    readonly policyName: string;
    readonly defaults: C;
};

const EXEMPTION_SCHEMA: ConfigProperties<ExemptionConfig> = {
    exemptResources: {
        type: "array",
        items: { type: "string" },
        default: [],
        description: "Logical names or URNs of resources this policy does not report.",
    },
};

function isEnforcementLevel(value: unknown): value is EnforcementLevel {
    return typeof value === "string" && (ENFORCEMENT_LEVELS as readonly string[]).includes(value);
}

function typeMatches(schema: PolicyConfigJSONSchema, value: unknown): boolean {
    switch (schema.type) {
        case "integer":
            return typeof value === "number" && Number.isInteger(value);
        case "number":
            return typeof value === "number" && Number.isFinite(value);
        case "boolean":
            return typeof value === "boolean";
        case "string":
            return typeof value === "string";
        case "array":
            return Array.isArray(value);
        default:
            return true;
    }
}

/**
 * Checks config values against the subset of JSON schema the policies use (type, minimum, maximum,
 * enum, array items). The engine validates pack config itself; this covers config passed in code.
 */
export function configProblems(
    policyName: string,
    properties: Record<string, PolicyConfigJSONSchema>,
    values: Record<string, unknown>,
): string[] {
    const problems: string[] = [];
    for (const [key, value] of Object.entries(values)) {
        if (key === "enforcementLevel") {
            if (!isEnforcementLevel(value)) {
                problems.push(`[${policyName}.enforcementLevel] must be one of ${ENFORCEMENT_LEVELS.join(", ")}`);
            }
            continue;
        }
        const schema = properties[key];
        if (schema === undefined) {
            problems.push(`[${policyName}.${key}] is not a config value of this policy`);
            continue;
        }
        if (!typeMatches(schema, value)) {
            problems.push(`[${policyName}.${key}] must be of type ${String(schema.type)}`);
            continue;
        }
        if (typeof value === "number") {
            if (schema.minimum !== undefined && value < schema.minimum) {
                problems.push(`[${policyName}.${key}] must be at least ${schema.minimum}`);
            }
            if (schema.maximum !== undefined && value > schema.maximum) {
                problems.push(`[${policyName}.${key}] must be at most ${schema.maximum}`);
            }
        }
        const items = Array.isArray(value) ? value : [value];
        const itemSchema = Array.isArray(value) && typeof schema.items === "object" && !Array.isArray(schema.items) ? schema.items : schema;
        if (itemSchema.enum !== undefined) {
            for (const item of items) {
                if (!itemSchema.enum.includes(item as never)) {
                    problems.push(`[${policyName}.${key}] must be one of ${itemSchema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
                }
            }
        } else if (Array.isArray(value) && itemSchema.type === "string") {
            if (!value.every((item) => typeof item === "string")) {
                problems.push(`[${policyName}.${key}] must be a list of strings`);
            }
        }
    }
    return problems;
}

/** Thrown when a policy setting passed in code is invalid. Lists every problem. */
export class PolicyConfigError extends Error {
    constructor(readonly problems: readonly string[]) {
        super(`invalid policy configuration:\n  ${problems.join("\n  ")}`);
        this.name = "PolicyConfigError";
    }
}

interface Resolved<C> {
    readonly level: EnforcementLevel;
    readonly defaults: C;
    readonly configSchema: PolicyConfigSchema;
    readonly problems: readonly string[];
}

function resolve<C extends ExemptionConfig>(spec: PolicyMetadata<C>, setting: PolicySetting<C> | undefined): Resolved<C> {
    const properties: Record<string, PolicyConfigJSONSchema & { default: unknown }> = { ...spec.config, ...EXEMPTION_SCHEMA };
    const shipped: Record<string, unknown> = {};
    for (const [key, schema] of Object.entries(properties)) {
        shipped[key] = schema.default;
    }
    let level = spec.enforcementLevel;
    let overrides: Record<string, unknown> = {};
    let problems: string[] = [];
    if (typeof setting === "string") {
        problems = configProblems(spec.name, properties, { enforcementLevel: setting });
        level = setting;
    } else if (setting !== undefined) {
        problems = configProblems(spec.name, properties, setting as Record<string, unknown>);
        const { enforcementLevel, ...values } = setting as Record<string, unknown>;
        if (isEnforcementLevel(enforcementLevel)) {
            level = enforcementLevel;
        }
        overrides = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
    }
    const defaults = { ...shipped, ...overrides } as unknown as C;
    const configSchema: PolicyConfigSchema = {
        properties: Object.fromEntries(
            Object.entries(properties).map(([key, schema]) => [
                key,
                { ...schema, default: (defaults as unknown as Record<string, unknown>)[key] },
            ]),
        ) as PolicyConfigSchema["properties"],
    };
    return { level, defaults, configSchema, problems };
}

/** The effective config: the policy's defaults overlaid with what the engine passes. */
function effectiveConfig<C>(defaults: C, fromEngine: object): C {
    const values = Object.fromEntries(
        Object.entries(fromEngine).filter(([k, v]) => k !== "enforcementLevel" && v !== undefined && v !== null),
    );
    return { ...defaults, ...values } as C;
}

function resourceNameOfUrn(urn: string): string {
    const at = urn.lastIndexOf("::");
    return at < 0 ? urn : urn.slice(at + 2);
}

function isExempt(config: ExemptionConfig, urn: string | undefined, name?: string): boolean {
    if (urn === undefined) {
        return false;
    }
    const resourceName = name ?? resourceNameOfUrn(urn);
    return config.exemptResources.includes(urn) || config.exemptResources.includes(resourceName);
}

function factory<C extends ExemptionConfig, P>(spec: PolicyMetadata<C>, build: (resolved: Resolved<C>) => P): PolicyFactory<C, P> {
    const make = (setting?: PolicySetting<C>): P => {
        const resolved = resolve(spec, setting);
        if (resolved.problems.length > 0) {
            throw new PolicyConfigError(resolved.problems);
        }
        return build(resolved);
    };
    return Object.assign(make, { policyName: spec.name, defaults: resolve(spec, undefined).defaults });
}

/**
 * A stand-in resource class for `validateResourceOfType`: it carries only the type token, so the pack
 * does not load the whole AWS provider SDK to check a handful of types.
 */
export function resourceClassOf(token: string): new (name: string, args: Record<string, unknown>, ...rest: unknown[]) => Resource {
    class TypeToken {
        static readonly __pulumiType = token;
        static isInstance(obj: unknown): boolean {
            return typeof obj === "object" && obj !== null && (obj as { __pulumiType?: unknown }).__pulumiType === token;
        }
    }
    return TypeToken as unknown as new (name: string, args: Record<string, unknown>, ...rest: unknown[]) => Resource;
}

/** Defines a resource policy. */
export function resourcePolicy<C extends ExemptionConfig>(spec: ResourcePolicySpec<C>): PolicyFactory<C, ResourceValidationPolicy> {
    return factory(spec, ({ level, defaults, configSchema }) => ({
        name: spec.name,
        description: spec.description,
        remediationSteps: spec.remediationSteps,
        enforcementLevel: level,
        configSchema,
        validateResource: validateResourceOfType(resourceClassOf(spec.resourceType), (_props, args, reportViolation) => {
            const config = effectiveConfig(defaults, args.getConfig<object>());
            if (isExempt(config, args.urn, args.name)) {
                args.notApplicable(`'${args.name}' is listed in exemptResources`);
            }
            spec.check(args, config, reportViolation);
        }),
    }));
}

/** Defines a stack policy. Violations of exempt resources are dropped. */
export function stackPolicy<C extends ExemptionConfig>(spec: StackPolicySpec<C>): PolicyFactory<C, StackValidationPolicy> {
    return factory(spec, ({ level, defaults, configSchema }) => ({
        name: spec.name,
        description: spec.description,
        remediationSteps: spec.remediationSteps,
        enforcementLevel: level,
        configSchema,
        validateStack: (args: StackValidationArgs, reportViolation: ReportViolation): void => {
            const config = effectiveConfig(defaults, args.getConfig<object>());
            const report: ReportViolation = (message, urn) => {
                if (!isExempt(config, urn)) {
                    reportViolation(message, urn);
                }
            };
            spec.check(args, config, report);
        },
    }));
}
