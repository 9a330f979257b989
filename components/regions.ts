/**
 * The component's stand on replicated (global) tables: refuse what would miscount.
 *
 * Why a replicated table miscounts today (docs/design/global-tables.md, "What goes wrong"):
 * - in global tables version 2019.11.21 each replica's stream carries every write to the table, wherever it was
 *   made, and no attribute marks a replicated write, so a consumer in each region counts each write once per region;
 * - with multi-region eventual consistency, concurrent writes to one item resolve last-writer-wins, so two regions'
 *   updates of one counter item lose one of them.
 *
 * What is refused, and where:
 * - `replicas` on the table passed as `table`, or in the description of a table attached by name
 *   (`aws.dynamodb.Table.get`) or by `tableArn` (`aws.dynamodb.getTableOutput`): known only once the table's outputs
 *   resolve, so refused through `ready()` with the stream mapping registered disabled and no backfill started, like
 *   every other problem of an attached table ({@link replicatedTableProblems});
 * - the `regions` setting itself, checked before anything is created ({@link regionsProblems}): its shape is checked
 *   in full, and a valid setting is then refused as not supported yet, because counting per region is designed but
 *   not built, and accepting it would miscount;
 * - `aws.dynamodb.TableReplica` resources name the table they replicate; the table does not name them, and a
 *   component sees only its args, so the policy pack's `counter-table-replicas` reports those (policy/regions.ts).
 */
import { RegionRole, type CounterRegionsArgs } from "./args";

/** Where counting per region is designed; every refusal points there. */
export const GLOBAL_TABLES_DESIGN = "docs/design/global-tables.md";

/** An AWS region name: `us-east-1`, `eu-central-2`, `ap-southeast-4`, `us-gov-west-1`, `cn-north-1`. */
const REGION_NAME = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;

const ROLES: readonly string[] = Object.values(RegionRole);

/**
 * Every problem with the `regions` arg, each naming its field; empty when it is not set. A setting whose shape is
 * right is refused with one problem naming `[regions]`: counting per region is not built yet.
 */
export function regionsProblems(regions: CounterRegionsArgs | undefined): string[] {
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
    if (problems.length === 0) {
        problems.push(
            `[regions] is not supported yet: counting per region is designed in ${GLOBAL_TABLES_DESIGN} but not built, ` +
                "and this version refuses a multi-region counter rather than count a write once per region",
        );
    }
    return problems;
}

/**
 * The problem with an attached table's replicas, as its outputs describe them (the regions of `replicas` on an
 * `aws.dynamodb.Table`, or of the `replicas` that `getTable` and `Table.get` read from the table's description).
 * Empty for a table without replicas.
 */
export function replicatedTableProblems(replicaRegions: readonly string[] | undefined): string[] {
    if (replicaRegions === undefined || replicaRegions.length === 0) {
        return [];
    }
    return [
        `[table] must not have replicas (found ${replicaRegions.map((r) => `"${r}"`).join(", ")}): it is a global table, whose stream in ` +
            "each region carries every region's writes, so a consumer per region would count each write once per region, and " +
            "two regions' updates of one counter item would lose one to last-writer-wins. A global table is refused until counting " +
            `per region ([regions]) is built; see ${GLOBAL_TABLES_DESIGN}`,
    ];
}
