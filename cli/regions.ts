/**
 * A multi-region counter from the CLI's side (runtime/regions/, docs/design/global-tables.md): which region a command
 * runs as, and where its clients go.
 *
 * With `regions` in `--config` (the component's clientConfig carries `regions` and `regionAttribute`), every command
 * runs as one member region R: `--region` when given, else `regions.current`. The runtime gets the configuration with
 * `regions.current = R`, so it reads and writes R's counter items only (`<counterPrefix>@R#...`) and counts the lives R
 * owns; the AWS clients go to R's endpoint. `--region` naming no member is a usage error before anything is read or
 * written: writing another region's counter items from here would break the rule that no two regions write one item.
 *
 * Without `regions` nothing here applies: `--region` is the AWS SDK's region, as it always was.
 */
import { DescribeTableCommand, type DynamoDBClient, type TableDescription } from "@aws-sdk/client-dynamodb";
import { isMember, memberRegions } from "../runtime/regions/ownership";
import { normalizedRegions, regionsProblems, type RegionsConfig } from "../runtime/regions/config";
import { UsageError } from "./errors";

/** What the regions settings of `--config` resolve to for one command run. */
export interface RegionsTarget {
    readonly regions?: RegionsConfig;
    readonly regionAttribute?: string;
}

/** The attribute names the stamp must differ from, by config field. */
type Attributes = Readonly<Record<string, string | undefined>>;

/**
 * The regions setting of a `--config` object, checked, with `current` set to `--region` when given. Throws a
 * UsageError naming `--config: [regions...]` for a bad setting and `--region` for a region that is not a member.
 */
export function resolveRegions(
    fromFile: Readonly<Record<string, unknown>>,
    region: string | undefined,
    context: { readonly tableName: string; readonly countersTableName?: string; readonly attributes: Attributes },
): RegionsTarget {
    const { regions, regionAttribute } = fromFile;
    if (regions === undefined) {
        // A stamp attribute alone changes nothing the CLI does (only a multi-region counter reads it).
        return {};
    }
    const problems = regionsProblems(regions, regionAttribute, context);
    if (problems.length > 0) {
        throw new UsageError(`--config: ${problems[0]!}`);
    }
    const configured = normalizedRegions(regions as RegionsConfig);
    if (region !== undefined && !isMember(configured, region)) {
        throw new UsageError(
            `--region: "${region}" is not a member region of this counter (members: ${memberRegions(configured).join(", ")})`,
        );
    }
    return {
        regions: region === undefined ? configured : normalizedRegions({ ...configured, current: region }),
        ...(regionAttribute === undefined ? {} : { regionAttribute: regionAttribute as string }),
    };
}

/** The AWS region of an AWS queue URL (`https://sqs.eu-west-1.amazonaws.com/...`), undefined for any other URL. */
export function queueRegion(queueUrl: string | undefined): string | undefined {
    if (queueUrl === undefined) {
        return undefined;
    }
    let host: string;
    try {
        host = new URL(queueUrl).hostname;
    } catch {
        return undefined;
    }
    return /^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/.exec(host)?.[1];
}

/**
 * Each region has queues of its own (its stack's `fatalDlqUrl`, `firstDlqUrl`): a queue of another region would park
 * R's batches where R's redrive never reads them, or hand R's records to another region. Throws a UsageError naming
 * the flag (or config field) of an AWS queue URL in a region other than `region`.
 */
export function checkQueueRegions(region: string, queues: ReadonlyArray<{ readonly url?: string; readonly name: string }>): void {
    for (const { url, name } of queues) {
        const at = queueRegion(url);
        if (at !== undefined && at !== region) {
            throw new UsageError(
                `${name}: the queue is in ${at}, but the command runs as region ${region}: pass ${region}'s queue (its stack's outputs)`,
            );
        }
    }
}

/**
 * Why a counter given without `regions` cannot run on `table`, or undefined: a table with replicas (a global table)
 * is counted per region, and a command run as one region would read and write counter items that `count()` of a
 * multi-region counter never reads, and count every region's lives as its own. `source` names where the table came
 * from (`--table`, `--config: [tableName]`).
 */
export function globalTableProblem(table: TableDescription | undefined, source: string): string | undefined {
    const replicas = (table?.Replicas ?? []).map((r) => r.RegionName).filter((r): r is string => r !== undefined);
    if (replicas.length === 0) {
        return undefined;
    }
    return (
        `${source}: ${table?.TableName ?? "the table"} is a global table (replicas in ${replicas.join(", ")}), and the counter ` +
        "was given no regions: pass --config with the component's clientConfig output of the region to run as (it sets " +
        "regions; --region picks another member)"
    );
}

/**
 * Refuses, before anything is read or written, a counter without `regions` on a global table (`globalTableProblem`).
 * A DescribeTable this identity may not call leaves the check undone, with a line on `warn`; any other failure
 * (a missing table, no region) is the command's to report.
 */
export async function refuseUnregionedGlobalTable(
    dynamodb: DynamoDBClient,
    tableName: string,
    source: string,
    warn: (line: string) => void,
): Promise<void> {
    let table: TableDescription | undefined;
    try {
        table = (await dynamodb.send(new DescribeTableCommand({ TableName: tableName }))).Table;
    } catch (error) {
        if ((error as { name?: string }).name === "AccessDeniedException") {
            warn(`could not check whether ${tableName} is a global table (dynamodb:DescribeTable is denied); going on as one region`);
            return;
        }
        throw error;
    }
    const problem = globalTableProblem(table, source);
    if (problem !== undefined) {
        throw new UsageError(problem);
    }
}
