/**
 * examples/multi-region under Pulumi mocks: the orders table created in the home region with a replica in each other
 * member, each member's replica read (aws.dynamodb.Table.get through its region's provider) as that region describes
 * it. Call with the package resolved to its source (support/package-source.ts).
 */
import { runProgramWithResult, type ProgramRun } from "../../local/deployment/pulumi-mocks";
import { loadProgram } from "./package-source";

export const ACCOUNT = "123456789012";
export const HOME = "us-east-1";
export const REGIONS = [HOME, "eu-west-1", "ap-southeast-2"];
export const MEMBERS = [
    { region: HOME, role: "home" },
    { region: "eu-west-1", role: "member" },
    { region: "ap-southeast-2", role: "member" },
] as const;

/** A member's stream label, as its read describes it. */
const LABEL = "2026-01-01T00:00:00.000";

export const tableArn = (region: string, name = "orders") => `arn:aws:dynamodb:${region}:${ACCOUNT}:table/${name}`;

/** Each replica's stream: the home's is the created table's (as the mocks label it), a member's as its read describes it. */
export const streamArn = (region: string) =>
    `${tableArn(region)}/stream/${region === HOME ? "2024-01-01T00:00:00.000" : `${LABEL}-${region}`}`;

/** The orders table as `Table.get` reads it through a region's provider: that replica's ARN, stream and other replicas. */
export function replicaDescription(id: string, region: string): Record<string, unknown> {
    return {
        name: id,
        arn: tableArn(region, id),
        hashKey: "tenantId",
        rangeKey: "orderId",
        attributes: [
            { name: "tenantId", type: "S" },
            { name: "orderId", type: "S" },
        ],
        streamEnabled: true,
        streamViewType: "NEW_AND_OLD_IMAGES",
        streamArn: streamArn(region),
        // Each replica keeps point-in-time recovery (the example asks for it) and encryption at rest (always on).
        pointInTimeRecovery: { enabled: true },
        serverSideEncryption: { enabled: true },
        replicas: REGIONS.filter((r) => r !== region).map((regionName) => ({ regionName })),
    };
}

/** examples/multi-region under mocks. */
export function runMultiRegionExample(): Promise<ProgramRun<unknown>> {
    return runProgramWithResult(() => loadProgram("../../examples/multi-region/index.ts"), {
        project: "hybrid-counter-multi-region",
        stack: "dev",
        reads: { "aws:dynamodb/table:Table": replicaDescription },
    });
}
