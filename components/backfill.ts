/**
 * The backfill on deploy: a function that flags the items the table held before the counter was attached (so that
 * the stream counts each once) and lists their keys for a heal (runtime/backfill/), its role (least privilege), its
 * log group, and one `aws.lambda.Invocation` that starts it once. The invocation only starts the run (the function continues itself asynchronously from its
 * checkpoints), so a deployment does not wait for the backfill, and Lambda's 15-minute limit never
 * stops it. Raising `backfillRun` starts a new run from the beginning.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { backfillEnvironment } from "../runtime/backfill/env";
import type { CounterConfig } from "../runtime/shared/config";
import type { BackfillArgs } from "./args";
import { FIXED } from "./defaults";
import { createFunctionLogsAndRole, createFunctionRolePolicy } from "./function-role";
import { logStatement, tracingStatement, type PolicyDocument, type PolicyStatement } from "./iam";

export const BACKFILL_DEFAULTS = Object.freeze({
    backfillRun: 1,
    backfillSegments: 4,
    backfillTimeout: 900,
    backfillMemorySize: 256,
});

const BACKFILL_NUMBERS = [
    ["backfillRun", 1, 1_000_000, true],
    ["backfillSegments", 1, 1_000, true],
    ["backfillReadUnitsPerSecond", 1, 1_000_000, false],
    ["backfillWriteUnitsPerSecond", 1, 1_000_000, false],
    ["backfillTimeout", 60, 900, true],
] as const;

/** Problems in the backfill args that are knowable now (plain values), each naming its arg. */
export function backfillArgsProblems(args: BackfillArgs): string[] {
    const problems: string[] = [];
    const a = args as Record<string, unknown>;
    for (const [key, min, max, integer] of BACKFILL_NUMBERS) {
        const value = a[key];
        if (value === undefined || pulumi.Output.isInstance(value) || value instanceof Promise) {
            continue;
        }
        if (typeof value !== "number" || (integer && !Number.isInteger(value)) || !(value >= min && value <= max)) {
            problems.push(`[${key}] must be ${integer ? "an integer" : "a number"} between ${min} and ${max}`);
        }
    }
    const share = a.backfillCapacityShare;
    if (share !== undefined && !pulumi.Output.isInstance(share) && !(share instanceof Promise)) {
        if (typeof share !== "number" || !(share > 0 && share <= 1)) {
            problems.push("[backfillCapacityShare] must be a number in (0, 1]");
        }
    }
    const onDeploy = a.backfillOnDeploy;
    if (onDeploy !== undefined && !pulumi.Output.isInstance(onDeploy) && !(onDeploy instanceof Promise) && typeof onDeploy !== "boolean") {
        problems.push("[backfillOnDeploy] must be a boolean");
    }
    return problems;
}

export interface BackfillPolicyInputs {
    readonly tableArn: string;
    readonly countersTableArn: string;
    readonly functionArn: string;
    readonly logGroupArn: string;
    readonly tracing: boolean;
}

/**
 * Inline policy of the backfill role, each action a call of runtime/backfill/: on the user table the Scan,
 * DescribeTable (capacity, approximate size) and the counted flag on the items it finds (UpdateItem); on the
 * counters table the checkpoints (Query, UpdateItem, and DeleteItem once a run completes) and the heal marks of the
 * keys it flagged (UpdateItem); and invoking itself to continue the run.
 */
export function backfillPolicy(p: BackfillPolicyInputs): PolicyDocument {
    const statements: PolicyStatement[] = [
        {
            Sid: "ScanAndFlagItems",
            Effect: "Allow",
            Action: ["dynamodb:Scan", "dynamodb:DescribeTable", "dynamodb:UpdateItem"],
            Resource: p.tableArn,
        },
        {
            Sid: "CheckpointAndMarkKeys",
            Effect: "Allow",
            Action: ["dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            Resource: p.countersTableArn,
        },
        { Sid: "ContinueItself", Effect: "Allow", Action: ["lambda:InvokeFunction"], Resource: p.functionArn },
        logStatement(p.logGroupArn),
    ];
    if (p.tracing) {
        statements.push(tracingStatement());
    }
    return { Version: "2012-10-17", Statement: statements };
}

export interface BackfillResourcesInputs {
    readonly args: BackfillArgs;
    /** The counter's configuration, as every function reads it from its environment. */
    readonly config: pulumi.Input<CounterConfig>;
    readonly table: { readonly arn: pulumi.Input<string> };
    /** The table the counter items live in (the user table when they share it). */
    readonly countersTable: { readonly arn: pulumi.Input<string> };
    readonly bundle: string;
    readonly lambdaRuntime: string;
    readonly architecture: string;
    readonly tracing: boolean;
    readonly logRetentionInDays: number;
    readonly tags?: pulumi.Input<Record<string, pulumi.Input<string>>>;
    /** False when an attached table's settings are wrong: the invocation then sends "skip". @default true */
    readonly tableUsable?: pulumi.Input<boolean>;
}

export interface BackfillResources {
    readonly function: aws.lambda.Function;
    readonly invocation: aws.lambda.Invocation;
}

/**
 * Creates the backfill's resources when `backfillOnDeploy` is not plainly false (an unknown value creates
 * them, and the invocation then sends "skip" when it resolves to false). Returns undefined otherwise.
 */
export function createBackfillResources(name: string, parent: pulumi.Resource, i: BackfillResourcesInputs): BackfillResources | undefined {
    const enabled = i.args.backfillOnDeploy;
    if (enabled === undefined || enabled === false) {
        return undefined;
    }
    const fnRole = { name, fn: "backfill", parent };
    const { logs, role } = createFunctionLogsAndRole({ ...fnRole, logRetentionInDays: i.logRetentionInDays, tags: i.tags });
    const variables = pulumi
        .all([
            i.config,
            i.args.backfillSegments ?? BACKFILL_DEFAULTS.backfillSegments,
            i.args.backfillReadUnitsPerSecond,
            i.args.backfillWriteUnitsPerSecond,
            i.args.backfillCapacityShare,
        ])
        .apply(([config, segments, readUnitsPerSecond, writeUnitsPerSecond, capacityShare]) =>
            backfillEnvironment(config as CounterConfig, { segments, readUnitsPerSecond, writeUnitsPerSecond, capacityShare }),
        );
    const fn = new aws.lambda.Function(
        `${name}-backfill`,
        {
            code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.FileAsset(i.bundle) }),
            handler: FIXED.handler,
            runtime: i.lambdaRuntime,
            architectures: [i.architecture],
            role: role.arn,
            memorySize: BACKFILL_DEFAULTS.backfillMemorySize,
            timeout: i.args.backfillTimeout ?? BACKFILL_DEFAULTS.backfillTimeout,
            environment: { variables },
            loggingConfig: { logFormat: FIXED.logFormat, logGroup: logs.name },
            tracingConfig: { mode: i.tracing ? "Active" : "PassThrough" },
            tags: i.tags,
        },
        { parent, dependsOn: [logs] },
    );
    // After the function: the policy lets it invoke itself.
    const policy = createFunctionRolePolicy(
        fnRole,
        role,
        pulumi
            .all([i.table.arn, i.countersTable.arn, fn.arn, logs.arn])
            .apply(([tableArn, countersTableArn, functionArn, logGroupArn]) =>
                backfillPolicy({ tableArn, countersTableArn, functionArn, logGroupArn, tracing: i.tracing }),
            ),
    );
    const runId = pulumi.output(i.args.backfillRun ?? BACKFILL_DEFAULTS.backfillRun).apply((run) => `deploy-${run}`);
    const invocation = new aws.lambda.Invocation(
        `${name}-backfill-start`,
        {
            functionName: fn.name,
            input: pulumi
                .all([pulumi.output(enabled), runId, i.tableUsable ?? true])
                .apply(([on, id, usable]) => JSON.stringify({ action: on && usable ? "start" : "skip", runId: id })),
            // A new run id replaces the invocation, which starts the new run.
            triggers: { runId },
        },
        { parent, dependsOn: [policy] },
    );
    return { function: fn, invocation };
}
