/**
 * What the component accepts of replicated (global) tables, checked before anything is created.
 *
 * Why a replicated table miscounts without counting per region (docs/design/global-tables.md, "What goes wrong"):
 * - in global tables version 2019.11.21 each replica's stream carries every write to the table, wherever it was
 *   made, and no attribute marks a replicated write, so a consumer in each region counts each write once per region;
 * - with multi-region eventual consistency, concurrent writes to one item resolve last-writer-wins, so two regions'
 *   updates of one counter item lose one of them.
 *
 * What is checked, and where:
 * - the `regions` setting ({@link regionsProblems}), before anything is created: its shape, the home region, the
 *   current region among the members, a counters table of its own (placement "separate"), the user's table attached
 *   (the component does not create a global table), the counters table's name in a member region and not in the
 *   home, and the region attribute;
 * - the table's replicas against the setting ({@link replicatedTableProblems}), once the table's outputs resolve
 *   (`replicas` on the table passed as `table`, or in the description of a table attached by name or `tableArn`):
 *   without `regions` a replicated table is refused; with it, the table's regions must be exactly the members, and
 *   the table the component reads must be the replica in `regions.current` ({@link tableRegionProblems}). Refused
 *   through `ready()` with the stream mapping registered disabled and no backfill started, like every other problem
 *   of an attached table;
 * - `aws.dynamodb.TableReplica` resources name the table they replicate; the table does not name them, and a
 *   component sees only its args, so the policy pack's `counter-table-replicas` reports those (policy/regions.ts).
 */
import * as pulumi from "@pulumi/pulumi";
import type { CounterTableLayout } from "../../runtime/shared/config";
import { CounterPlacement, RegionRole, type CounterRegionsArgs, type HybridCounterComponentArgs } from "../args";
import { DEFAULT_REGION_ATTRIBUTE, homeRegion, regionsSetting, type RegionsSetting } from "./settings";

/** Where counting per region is designed; refusals point there. */
export const GLOBAL_TABLES_DESIGN = "docs/design/global-tables.md";

/** An AWS region name: `us-east-1`, `eu-central-2`, `ap-southeast-4`, `us-gov-west-1`, `cn-north-1`. */
const REGION_NAME = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;

const ROLES: readonly string[] = Object.values(RegionRole);

const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;

/** DynamoDB's limit on an attribute name. */
const ATTRIBUTE_NAME_MAX_BYTES = 255;

/**
 * Every problem with the `regions` arg's own shape, each naming its field; empty when it is not set or right.
 */
export function regionsShapeProblems(regions: CounterRegionsArgs | undefined): string[] {
    if (regions === undefined) {
        return [];
    }
    if (regions === null || typeof regions !== "object" || Array.isArray(regions)) {
        return ["[regions] must be an object { current, members }"];
    }
    const problems: string[] = [];
    const current: unknown = regions.current;
    if (typeof current !== "string" || !REGION_NAME.test(current)) {
        problems.push(`[regions.current] must be an AWS region name such as "us-east-1" (got ${JSON.stringify(current) ?? "undefined"})`);
    }
    const members: unknown = regions.members;
    if (!Array.isArray(members) || members.length < 2) {
        problems.push(
            "[regions.members] must list at least 2 regions, each { region, role }: one region is not a multi-region counter " +
                "(leave [regions] unset for a table without replicas)",
        );
        return problems;
    }
    const seen = new Set<string>();
    let homes = 0;
    members.forEach((member: unknown, i) => {
        const at = `[regions.members[${i}]`;
        if (member === null || typeof member !== "object") {
            problems.push(`${at}] must be an object { region, role }`);
            return;
        }
        const { region, role } = member as { region?: unknown; role?: unknown };
        if (typeof region !== "string" || !REGION_NAME.test(region)) {
            problems.push(`${at}.region] must be an AWS region name such as "us-east-1" (got ${JSON.stringify(region) ?? "undefined"})`);
        } else if (seen.has(region)) {
            problems.push(`${at}.region] must name each region once ("${region}" is listed twice)`);
        } else {
            seen.add(region);
        }
        if (role !== undefined && (typeof role !== "string" || !ROLES.includes(role))) {
            problems.push(`${at}.role] must be ${ROLES.map((r) => `"${r}"`).join(" or ")} (got ${JSON.stringify(role)})`);
        }
        if (role === RegionRole.Home) {
            homes += 1;
        }
    });
    if (homes !== 1) {
        problems.push(
            `[regions.members] must give exactly one region the role "home" (found ${homes}): ` +
                "the home region counts the items no client stamped with its region",
        );
    }
    if (typeof current === "string" && REGION_NAME.test(current) && !seen.has(current)) {
        problems.push(`[regions.current] must be one of [regions.members] (got "${current}", members are ${[...seen].join(", ")})`);
    }
    return problems;
}

/**
 * Every problem with the multi-region args (`regions`, `regionAttribute`) and the args they constrain, each naming
 * its field; empty for a counter without them. `layout` is the layout the args describe (checked on its own).
 */
export function regionsProblems(args: HybridCounterComponentArgs, layout: CounterTableLayout): string[] {
    const problems: string[] = [];
    const attribute: unknown = args.regionAttribute;
    if (args.regions === undefined) {
        if (attribute !== undefined) {
            problems.push("[regionAttribute] must not be set without [regions]: only a multi-region counter stamps items with a region");
        }
        return problems;
    }
    const shape = regionsShapeProblems(args.regions);
    problems.push(...shape);
    if ((args.counterPlacement ?? CounterPlacement.Separate) !== CounterPlacement.Separate) {
        problems.push(
            `[counterPlacement] must be "separate" with [regions] (got ${JSON.stringify(args.counterPlacement)}): each region writes ` +
                "only its own counter items, in a counters table replicated to every member, not in the user's table",
        );
    }
    if (args.table === undefined && args.tableArn === undefined) {
        problems.push(
            "[regions] needs the user's global table attached with [table] or [tableArn] (the replica in [regions.current]): " +
                "the component does not create a replicated table",
        );
    }
    if (attribute !== undefined) {
        if (typeof attribute !== "string" || attribute.length === 0) {
            problems.push("[regionAttribute] must be a non-empty string");
        } else if (Buffer.byteLength(attribute, "utf8") > ATTRIBUTE_NAME_MAX_BYTES) {
            problems.push(`[regionAttribute] must be at most ${ATTRIBUTE_NAME_MAX_BYTES} bytes`);
        }
    }
    const regionAttribute = typeof attribute === "string" && attribute.length > 0 ? attribute : DEFAULT_REGION_ATTRIBUTE;
    const selection = layout.selection;
    const taken: Array<[string, string | undefined]> = [
        ["partitionKey", layout.partitionKey],
        ["sortKey", layout.sortKey],
        ["deletedAttribute", layout.deletedAttribute],
        ["tokenAttribute", layout.tokenAttribute],
        ["countedAttributeName", selection.kind === "attribute" ? selection.name : undefined],
    ];
    for (const [field, name] of taken) {
        if (name === regionAttribute) {
            problems.push(`[regionAttribute] must differ from [${field}] (both are "${regionAttribute}")`);
        }
    }
    if (shape.length > 0) {
        return problems;
    }
    const setting = regionsSetting(args.regions);
    const countersTableName: unknown = args.regions.countersTableName;
    if (homeRegion(setting) === setting.current) {
        if (countersTableName !== undefined) {
            problems.push(
                "[regions.countersTableName] must not be set in the home region: the home region's component creates the counters " +
                    "table, with a replica in every other member",
            );
        }
    } else if (countersTableName === undefined) {
        problems.push(
            `[regions.countersTableName] must be set in a member region ("${setting.current}"): the name of the counters table the ` +
                "home region's component created (its countersTableName output), which has a replica here",
        );
    } else if (!pulumi.Output.isInstance(countersTableName) && !(countersTableName instanceof Promise)) {
        if (typeof countersTableName !== "string" || !TABLE_NAME.test(countersTableName)) {
            problems.push("[regions.countersTableName] must be a table name: 3 to 255 characters of letters, digits, '_', '-' and '.'");
        }
    }
    return problems;
}

/**
 * The problems with an attached table's replicas, as its outputs describe them (the regions of `replicas` on an
 * `aws.dynamodb.Table`, or of the `replicas` that `getTable` and `Table.get` read from the table's description).
 * Without `regions` a table with replicas is refused. With it, the table and its replicas must be in exactly the
 * member regions: a member without a replica would count nothing, and a replica outside the members would be
 * counted by nobody but the home region, which owns no stamp written there. A table that shows no replicas is taken
 * with the members as given: its replicas may be `aws.dynamodb.TableReplica` resources, which it does not show.
 */
export function replicatedTableProblems(replicaRegions: readonly string[] | undefined, setting?: RegionsSetting): string[] {
    const replicas = replicaRegions ?? [];
    if (setting === undefined) {
        if (replicas.length === 0) {
            return [];
        }
        return [
            `[table] must not have replicas (found ${replicas.map((r) => `"${r}"`).join(", ")}) unless [regions] says how regions count: ` +
                "it is a global table, whose stream in each region carries every region's writes, so a consumer per region would " +
                "count each write once per region, and two regions' updates of one counter item would lose one to last-writer-wins. " +
                `Set [regions] in every region's component; see ${GLOBAL_TABLES_DESIGN}`,
        ];
    }
    const members = setting.members.map((m) => m.region);
    // A table's description lists its replicas in the other regions; its own region is the current one.
    const tableRegions = new Set([setting.current, ...replicas]);
    const problems: string[] = [];
    const outside = [...tableRegions].filter((r) => !members.includes(r));
    if (outside.length > 0) {
        problems.push(
            `[regions.members] must list every region of [table]'s replicas: ${outside.map((r) => `"${r}"`).join(", ")} ` +
                "would be counted by no region's consumer of its own",
        );
    }
    // A table of this program whose replicas are `aws.dynamodb.TableReplica` resources shows none in its own outputs
    // (the two ways are exclusive): an empty list cannot tell those from a table without replicas, so the members are
    // then taken as given (the policy pack's counter-table-replicas sees the TableReplica resources).
    const missing = replicas.length === 0 ? [] : members.filter((r) => !tableRegions.has(r));
    if (missing.length > 0) {
        problems.push(
            `[regions.members] lists ${missing.map((r) => `"${r}"`).join(", ")}, where [table] has no replica ` +
                `(its replicas: ${replicas.length === 0 ? "none" : replicas.map((r) => `"${r}"`).join(", ")})`,
        );
    }
    return problems;
}

/**
 * The problem with the region of the table a multi-region component reads: it must be the replica in
 * `regions.current`, whose stream carries the writes of that region's replica (another region's stream would
 * belong to that region's consumer). Known from the table's ARN once it resolves.
 */
export function tableRegionProblems(tableArn: string, setting: RegionsSetting): string[] {
    const region = tableArn.split(":")[3];
    if (region === setting.current) {
        return [];
    }
    return [
        `[table] must be the table's replica in [regions.current] "${setting.current}" (its ARN is in ${JSON.stringify(region ?? "")}): ` +
            "attach it with aws.dynamodb.Table.get(name, tableName, {}, { provider }) or [tableArn] in that region, " +
            "and create the component with that region's provider",
    ];
}
