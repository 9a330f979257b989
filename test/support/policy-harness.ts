/**
 * Runs CrossGuard policies against recorded resources, without the Pulumi engine and without
 * constructing a `PolicyPack` (which would start a gRPC server and may exit the process).
 *
 * It builds `ResourceValidationArgs` / `StackValidationArgs` the way @pulumi/policy's analyzer server
 * does: properties wrapped in `unknownCheckingProxy`, `stackTags`, `provider`, `notApplicable`,
 * parent, `dependencies` and `propertyDependencies` resolved to resource objects, per-policy
 * enforcement levels and config from the pack config, disabled policies skipped, and
 * `UnknownValueError` turned into an advisory "can't run during preview" note instead of a failure.
 */

import {
    EnforcementLevel,
    Policies,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
    unknownCheckingProxy,
    UnknownValueError,
} from "@pulumi/policy";
import type { Resource } from "@pulumi/pulumi";

/** The sentinels the engine uses for values unknown during preview (from @pulumi/policy's proxy module). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const sentinels = require("@pulumi/policy/proxy") as Record<string, string>;
export const unknownValue = {
    string: sentinels.unknownStringValue,
    number: sentinels.unknownNumberValue,
    boolean: sentinels.unknownBooleanValue,
    array: sentinels.unknownArrayValue,
    object: sentinels.unknownObjectValue,
} as const;

export const PROJECT = "hybrid-counter-policy-test";
export const STACK = "test";

/** A resource as a program registered it: type token, logical name, inputs, and what it depends on. */
export interface RecordedResource {
    readonly type: string;
    readonly name: string;
    readonly inputs: Readonly<Record<string, unknown>>;
    /** Defaults to `urnOf(type, name)`. */
    readonly urn?: string;
    /** Logical name of the parent resource. */
    readonly parent?: string;
    /** Logical names of the resources this one depends on. */
    readonly dependencies?: readonly string[];
    /** Logical names of the resources each input was computed from. */
    readonly propertyDependencies?: Readonly<Record<string, readonly string[]>>;
    readonly provider?: { readonly type: string; readonly name: string; readonly props?: Record<string, unknown> };
}

/** Pulumi policy pack config: `all`, and per policy a level or config values with an optional level. */
export type PackConfig = Readonly<Record<string, EnforcementLevel | Readonly<Record<string, unknown>>>>;

export interface RunOptions {
    readonly config?: PackConfig;
    readonly stackTags?: Readonly<Record<string, string>>;
    /** The pack-wide default level (PolicyPackArgs.enforcementLevel). @default "advisory" */
    readonly packEnforcementLevel?: EnforcementLevel;
}

export interface Violation {
    readonly policy: string;
    readonly message: string;
    /** Logical name of the reported resource, when the violation names one. */
    readonly resource?: string;
    readonly level: EnforcementLevel;
}

export interface PolicyRun {
    readonly violations: Violation[];
    readonly notApplicable: { readonly policy: string; readonly reason?: string }[];
    /** What the engine would show as "can't run policy ... during preview". */
    readonly unknownValueErrors: { readonly policy: string; readonly message: string }[];
}

export function urnOf(type: string, name: string): string {
    return `urn:pulumi:${STACK}::${PROJECT}::${type}::${name}`;
}

function resourceNameOfUrn(urn: string): string {
    return urn.slice(urn.lastIndexOf("::") + 2);
}

const EMPTY_OPTIONS: PolicyResourceOptions = Object.freeze({
    protect: false,
    ignoreChanges: [],
    aliases: [],
    customTimeouts: { createSeconds: 0, updateSeconds: 0, deleteSeconds: 0 },
    additionalSecretOutputs: [],
});

class NotApplicable extends Error {
    constructor(readonly reason?: string) {
        super(reason ?? "Policy does not apply");
    }
}

function notApplicable(reason?: string): never {
    throw new NotApplicable(reason);
}

function freezeMap(tags: Readonly<Record<string, string>> | undefined): ReadonlyMap<string, string> {
    return new Map(Object.entries(tags ?? {}));
}

function isTypeOf(type: string, resourceClass: unknown): boolean {
    const token = (resourceClass as { __pulumiType?: unknown }).__pulumiType;
    if (typeof token === "string" && token !== "") {
        return token === type;
    }
    const isInstance = (resourceClass as { isInstance?: unknown }).isInstance;
    return typeof isInstance === "function" && isInstance({ __pulumiType: type }) === true;
}

function providerOf(r: RecordedResource): PolicyProviderResource | undefined {
    if (r.provider === undefined) {
        return undefined;
    }
    return {
        type: r.provider.type,
        name: r.provider.name,
        urn: urnOf(r.provider.type, r.provider.name),
        props: unknownCheckingProxy(r.provider.props ?? {}),
    };
}

function levelOf(policy: { name: string; enforcementLevel?: EnforcementLevel }, options: RunOptions): EnforcementLevel {
    const entry = options.config?.[policy.name];
    const own = typeof entry === "string" ? entry : (entry?.enforcementLevel as EnforcementLevel | undefined);
    const all = options.config?.all;
    return own ?? (typeof all === "string" ? all : undefined) ?? policy.enforcementLevel ?? options.packEnforcementLevel ?? "advisory";
}

function configOf(policyName: string, options: RunOptions): () => object {
    return () => {
        const entry = options.config?.[policyName];
        if (entry === undefined || typeof entry === "string") {
            return {};
        }
        const { enforcementLevel: _level, ...values } = entry;
        return values;
    };
}

/** `ResourceValidationArgs` for one recorded resource, as the analyzer builds them. */
export function resourceValidationArgs(r: RecordedResource, policyName: string, options: RunOptions = {}): ResourceValidationArgs {
    const props = unknownCheckingProxy({ ...r.inputs }) as Record<string, unknown>;
    const opts: PolicyResourceOptions = r.parent === undefined ? EMPTY_OPTIONS : { ...EMPTY_OPTIONS, parent: urnOf("parent", r.parent) };
    const args: ResourceValidationArgs = {
        type: r.type,
        props,
        urn: r.urn ?? urnOf(r.type, r.name),
        name: r.name,
        opts,
        stackTags: freezeMap(options.stackTags),
        isType: (cls) => isTypeOf(r.type, cls),
        asType: <TResource extends Resource, TArgs>(cls: { new (name: string, args: TArgs, ...rest: any[]): TResource }) =>
            (isTypeOf(r.type, cls) ? props : undefined) as never,
        getConfig: configOf(policyName, options) as ResourceValidationArgs["getConfig"],
        notApplicable,
    };
    const provider = providerOf(r);
    if (provider !== undefined) {
        args.provider = provider;
    }
    return args;
}

/** `StackValidationArgs` for a set of recorded resources, with dependencies resolved to resource objects. */
export function stackValidationArgs(
    resources: readonly RecordedResource[],
    policyName: string,
    options: RunOptions = {},
): StackValidationArgs {
    const byName = new Map<string, PolicyResource>();
    const built = resources.map((r) => {
        const props = unknownCheckingProxy({ ...r.inputs }) as Record<string, unknown>;
        const resource: PolicyResource = {
            type: r.type,
            props,
            urn: r.urn ?? urnOf(r.type, r.name),
            name: r.name,
            opts: EMPTY_OPTIONS,
            dependencies: [],
            propertyDependencies: {},
            isType: (cls) => isTypeOf(r.type, cls),
            asType: (cls) => (isTypeOf(r.type, cls) ? props : undefined) as never,
        };
        const provider = providerOf(r);
        if (provider !== undefined) {
            resource.provider = provider;
        }
        if (byName.has(r.name)) {
            throw new Error(`two recorded resources are named '${r.name}'`);
        }
        byName.set(r.name, resource);
        return { r, resource };
    });
    const lookup = (owner: string, name: string): PolicyResource => {
        const found = byName.get(name);
        if (found === undefined) {
            throw new Error(`'${owner}' depends on '${name}', which is not a recorded resource`);
        }
        return found;
    };
    for (const { r, resource } of built) {
        if (r.parent !== undefined) {
            resource.parent = lookup(r.name, r.parent);
            resource.opts = { ...EMPTY_OPTIONS, parent: resource.parent.urn };
        }
        const propertyDependencies = r.propertyDependencies ?? {};
        resource.propertyDependencies = Object.fromEntries(
            Object.entries(propertyDependencies).map(([k, names]) => [k, names.map((n) => lookup(r.name, n))]),
        );
        const all = new Set([...(r.dependencies ?? []), ...Object.values(propertyDependencies).flat()]);
        resource.dependencies = [...all].map((n) => lookup(r.name, n));
    }
    return {
        resources: built.map((b) => b.resource),
        stackTags: freezeMap(options.stackTags),
        getConfig: configOf(policyName, options) as StackValidationArgs["getConfig"],
        notApplicable,
    };
}

function isStackPolicy(p: ResourceValidationPolicy | StackValidationPolicy): p is StackValidationPolicy {
    return typeof (p as StackValidationPolicy).validateStack === "function";
}

/**
 * Runs every enabled policy: resource policies on each resource, stack policies on the stack.
 * Errors other than "not applicable" and "unknown during preview" propagate, as they would fail the
 * engine's analysis.
 */
export async function runPolicies(
    policies: Policies,
    resources: readonly RecordedResource[],
    options: RunOptions = {},
): Promise<PolicyRun> {
    const run: PolicyRun = { violations: [], notApplicable: [], unknownValueErrors: [] };
    const guard = async (policy: string, body: () => Promise<void>): Promise<void> => {
        try {
            await body();
        } catch (e) {
            if (e instanceof NotApplicable) {
                run.notApplicable.push({ policy, reason: e.reason });
            } else if (e instanceof UnknownValueError) {
                run.unknownValueErrors.push({ policy, message: (e as Error).message });
            } else {
                throw e;
            }
        }
    };
    for (const policy of policies) {
        const level = levelOf(policy, options);
        if (level === "disabled") {
            continue;
        }
        const reported = level === "remediate" ? "mandatory" : level;
        if (isStackPolicy(policy)) {
            await guard(policy.name, async () => {
                await policy.validateStack(stackValidationArgs(resources, policy.name, options), (message, urn) => {
                    run.violations.push({
                        policy: policy.name,
                        message,
                        resource: urn === undefined ? undefined : resourceNameOfUrn(urn),
                        level: reported,
                    });
                });
            });
            continue;
        }
        const validations =
            policy.validateResource === undefined
                ? []
                : Array.isArray(policy.validateResource)
                  ? policy.validateResource
                  : [policy.validateResource];
        for (const r of resources) {
            for (const validate of validations) {
                const token = (validate as { __pulumiType?: unknown }).__pulumiType;
                if (typeof token === "string" && token !== r.type) {
                    continue;
                }
                await guard(policy.name, async () => {
                    await validate(resourceValidationArgs(r, policy.name, options), (message) => {
                        run.violations.push({ policy: policy.name, message, resource: r.name, level: reported });
                    });
                });
            }
        }
    }
    return run;
}

/**
 * Deep copy of a stack with one resource changed by `change`, which may edit its inputs and, where
 * the change removes or adds a reference to another resource, its property dependencies.
 */
export function withChange(
    stack: readonly RecordedResource[],
    name: string,
    change: (inputs: Record<string, any>, propertyDependencies: Record<string, string[]>) => void,
): RecordedResource[] {
    let found = false;
    const copy = stack.map((r) => {
        const inputs = structuredClone(r.inputs) as Record<string, any>;
        const propertyDependencies = structuredClone(r.propertyDependencies ?? {}) as Record<string, string[]>;
        if (r.name === name) {
            found = true;
            change(inputs, propertyDependencies);
        }
        return { ...r, inputs, propertyDependencies };
    });
    if (!found) {
        throw new Error(`no recorded resource is named '${name}'`);
    }
    return copy;
}

/** Copy of a stack without the named resources (and without dependencies on them). */
export function without(stack: readonly RecordedResource[], ...names: string[]): RecordedResource[] {
    const drop = (list: readonly string[] | undefined): string[] | undefined => list?.filter((n) => !names.includes(n));
    return stack
        .filter((r) => !names.includes(r.name))
        .map((r) => ({
            ...r,
            dependencies: drop(r.dependencies),
            propertyDependencies:
                r.propertyDependencies === undefined
                    ? undefined
                    : Object.fromEntries(Object.entries(r.propertyDependencies).map(([k, v]) => [k, drop(v) ?? []])),
        }));
}
