/** Stack policy: the roles of the stream consumers grant no wildcard actions on dynamodb or sqs. */

import type { PolicyResource } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { consumerFunctions, dependenciesOf, TYPES } from "./graph";
import { isUnknown, read } from "./unknowns";

/** A policy document found on a role, with where it came from. */
export interface Document {
    /** The resource that carries the document (reported as the violating resource). */
    readonly holder: PolicyResource;
    /** The property, e.g. `policy` or `inlinePolicies[0].policy`. */
    readonly property: string;
    readonly text: unknown;
}

/** Parses a policy document (JSON text or object); undefined when it is not one. */
export function parseDocument(text: unknown): Record<string, unknown> | undefined {
    if (typeof text === "string") {
        try {
            const parsed: unknown = JSON.parse(text);
            return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
        } catch {
            return undefined;
        }
    }
    return typeof text === "object" && text !== null ? (text as Record<string, unknown>) : undefined;
}

export function asList(value: unknown): unknown[] {
    return value === undefined ? [] : Array.isArray(value) ? [...value] : [value];
}

/**
 * The wildcard actions an `Allow` statement grants on the given services: `*`, `dynamodb:*`,
 * `sqs:Send*`, and any `NotAction` (which allows everything it does not name).
 */
export function wildcardGrants(document: Record<string, unknown>, services: readonly string[]): string[] {
    const found: string[] = [];
    for (const statement of asList(document.Statement)) {
        if (typeof statement !== "object" || statement === null) {
            continue;
        }
        const s = statement as Record<string, unknown>;
        if (s.Effect !== "Allow") {
            continue;
        }
        if (s.NotAction !== undefined) {
            found.push(`NotAction ${JSON.stringify(s.NotAction)}`);
        }
        for (const action of asList(s.Action)) {
            if (typeof action !== "string") {
                continue;
            }
            if (action === "*") {
                found.push(action);
                continue;
            }
            const [service, name = ""] = action.split(":", 2);
            if (services.includes(service.toLowerCase()) && /[*?]/.test(name)) {
                found.push(action);
            }
        }
    }
    return found;
}

/** Every policy document attached to `role`, through whichever resource attaches it. */
export function documentsOf(
    role: PolicyResource,
    resources: readonly PolicyResource[],
): { documents: Document[]; managedArns: { holder: PolicyResource; property: string; arn: string }[] } {
    const documents: Document[] = [];
    const managedArns: { holder: PolicyResource; property: string; arn: string }[] = [];
    const addPolicyArn = (holder: PolicyResource, property: string): void => {
        const policies = dependenciesOf(holder, property, TYPES.policy);
        for (const policy of policies) {
            documents.push({ holder: policy, property: "policy", text: read(() => policy.props.policy as unknown) });
        }
        if (policies.length === 0) {
            const arn = read(() => holder.props[property] as unknown);
            for (const a of asList(isUnknown(arn) ? undefined : arn)) {
                if (typeof a === "string") {
                    managedArns.push({ holder, property, arn: a });
                }
            }
        }
    };

    const inline = read(() => {
        const list = role.props.inlinePolicies as unknown;
        return Array.isArray(list) ? list.map((p: { policy?: unknown }) => read(() => p.policy)) : [];
    });
    if (!isUnknown(inline)) {
        inline.forEach((text, i) => documents.push({ holder: role, property: `inlinePolicies[${i}].policy`, text }));
    }
    addPolicyArn(role, "managedPolicyArns");

    for (const r of resources) {
        if (r.type === TYPES.rolePolicy && dependenciesOf(r, "role", TYPES.role).includes(role)) {
            documents.push({ holder: r, property: "policy", text: read(() => r.props.policy as unknown) });
        } else if (r.type === TYPES.rolePolicyAttachment && dependenciesOf(r, "role", TYPES.role).includes(role)) {
            addPolicyArn(r, "policyArn");
        } else if (r.type === TYPES.policyAttachment && dependenciesOf(r, "roles", TYPES.role).includes(role)) {
            addPolicyArn(r, "policyArn");
        }
    }
    return { documents, managedArns };
}

export interface ConsumerIamConfig extends ExemptionConfig {
    /** Services on which wildcard actions are forbidden. @default ["dynamodb", "sqs"] */
    readonly services: readonly string[];
    /** AWS managed policies (by name) that grant such wildcards and must not be attached. */
    readonly forbiddenManagedPolicies: readonly string[];
}

export const consumerIamNoWildcardActions = stackPolicy<ConsumerIamConfig>({
    name: "consumer-iam-no-wildcard-actions",
    description:
        "IAM policies attached to the roles of the stream consumer and the redrive grant no wildcard actions on dynamodb or sqs. " +
        "Without this, a wildcard lets a bug or a compromised function delete the table, rewrite the counters or purge the failure queues.",
    remediationSteps: "List the exact actions (e.g. dynamodb:UpdateItem, dynamodb:GetRecords, sqs:SendMessage) in the role's policies.",
    enforcementLevel: "mandatory",
    config: {
        services: {
            type: "array",
            items: { type: "string" },
            default: ["dynamodb", "sqs"],
            description: "Services on which wildcard actions are forbidden.",
        },
        forbiddenManagedPolicies: {
            type: "array",
            items: { type: "string" },
            default: ["AdministratorAccess", "PowerUserAccess", "AmazonDynamoDBFullAccess", "AmazonSQSFullAccess"],
            description: "AWS managed policy names that must not be attached to a consumer role.",
        },
    },
    check: (args, config, reportViolation) => {
        const consumers = consumerFunctions(args.resources);
        if (consumers.size === 0) {
            args.notApplicable("no function in this stack consumes a DynamoDB stream or a failure queue");
        }
        const services = config.services.map((s) => s.toLowerCase());
        const seen = new Set<string>();
        for (const [fn, why] of consumers) {
            for (const role of dependenciesOf(fn, "role", TYPES.role)) {
                const { documents, managedArns } = documentsOf(role, args.resources);
                for (const { holder, property, text } of documents) {
                    const parsed = isUnknown(text) ? undefined : read(() => parseDocument(text));
                    if (parsed === undefined || isUnknown(parsed)) {
                        continue;
                    }
                    const grants = read(() => wildcardGrants(parsed, services));
                    if (isUnknown(grants) || grants.length === 0) {
                        continue;
                    }
                    const key = `${holder.urn}|${property}`;
                    if (!seen.has(key)) {
                        seen.add(key);
                        reportViolation(
                            `[${property}] of '${holder.name}' (attached to role '${role.name}' of function '${fn.name}', which ${why}) ` +
                                `allows wildcard actions: ${grants.join(", ")}`,
                            holder.urn,
                        );
                    }
                }
                for (const { holder, property, arn } of managedArns) {
                    const name = arn.slice(arn.lastIndexOf("/") + 1);
                    if (arn.includes(":iam::aws:policy/") && config.forbiddenManagedPolicies.includes(name)) {
                        reportViolation(
                            `[${property}] of '${holder.name}' attaches the AWS managed policy ${name} to role '${role.name}' of function '${fn.name}', which ${why}; it allows wildcard actions`,
                            holder.urn,
                        );
                    }
                }
            }
        }
    },
});
