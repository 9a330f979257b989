/**
 * What each of the component's functions (consumer, redrive, settler, backfill) has besides the function:
 * a log group `${name}-<fn>-logs`, an execution role `${name}-<fn>-role` that only Lambda may assume, and
 * the role's one inline policy `${name}-<fn>-policy`. The callers choose the policy's document (iam.ts,
 * settler.ts, backfill.ts) and when it is created: a policy that names the function comes after it.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { lambdaAssumeRolePolicy, type PolicyDocument } from "./iam";

export interface FunctionLogsAndRoleInputs {
    /** The component's name. */
    readonly name: string;
    /** The function's part of the children's names: `${name}-${fn}-logs`, `${name}-${fn}-role`. */
    readonly fn: string;
    readonly parent: pulumi.Resource;
    readonly logRetentionInDays: pulumi.Input<number>;
    readonly tags?: pulumi.Input<Record<string, pulumi.Input<string>>>;
}

export interface FunctionLogsAndRole {
    readonly logs: aws.cloudwatch.LogGroup;
    readonly role: aws.iam.Role;
}

/** Creates the function's log group and its execution role, in that order, each parented to the component. */
export function createFunctionLogsAndRole(i: FunctionLogsAndRoleInputs): FunctionLogsAndRole {
    const opts = { parent: i.parent };
    const logs = new aws.cloudwatch.LogGroup(`${i.name}-${i.fn}-logs`, { retentionInDays: i.logRetentionInDays, tags: i.tags }, opts);
    const role = new aws.iam.Role(
        `${i.name}-${i.fn}-role`,
        { assumeRolePolicy: JSON.stringify(lambdaAssumeRolePolicy()), tags: i.tags },
        opts,
    );
    return { logs, role };
}

/** Creates the role's inline policy `${name}-${fn}-policy` from its document. */
export function createFunctionRolePolicy(
    i: Pick<FunctionLogsAndRoleInputs, "name" | "fn" | "parent">,
    role: aws.iam.Role,
    document: pulumi.Output<PolicyDocument>,
): aws.iam.RolePolicy {
    return new aws.iam.RolePolicy(
        `${i.name}-${i.fn}-policy`,
        { role: role.id, policy: document.apply((d) => JSON.stringify(d)) },
        { parent: i.parent },
    );
}
