/**
 * Stack policy: a hybrid counter's consumer reads a replicated (global) table only with the multi-region setting, and
 * that setting's members are exactly the table's regions.
 *
 * Why (docs/design/global-tables.md, "What goes wrong"): in global tables version 2019.11.21 each replica's stream
 * carries every write to the table, wherever it was made, and no attribute marks a replicated write. A consumer per
 * region therefore counts each write once per region, and with multi-region eventual consistency two regions' updates
 * of one counter item resolve last-writer-wins, losing one. The count is wrong, not slow: mandatory.
 *
 * What makes a table replicated, as the stack shows it:
 * - `replicas` on the `aws:dynamodb/table:Table` whose stream the counter's consumer reads (a non-empty list);
 * - an `aws:dynamodb/tableReplica:TableReplica` whose `globalTableArn` was computed from that table (its property
 *   dependency), or, for a table this stack reads by ARN, whose known `globalTableArn` is the table ARN of the
 *   mapping's known stream ARN. The component cannot see these: a table does not name its TableReplica resources,
 *   and a component sees only its args. The stack does, so this policy is where they are caught.
 *
 * What says how regions count: the consumer's `HYBRID_COUNTER_REGIONS` environment variable, the component's
 * `regions` arg as JSON (`{"current":"us-east-1","members":[{"region":"us-east-1","role":"home"},...]}`), read by
 * the per-region counting that docs/design/global-tables.md specifies. A value that is not such a setting (not
 * JSON, fewer than two members, not exactly one home, `current` not a member) says nothing, and the message shows
 * it. The component sets it on every function of a counter given `regions` (components/regions/settings.ts), and
 * refuses a table that shows replicas without it; the TableReplica resources it cannot see are this policy's.
 *
 * With the setting, the table's regions (its own, and those of its replicas: `replicas` and TableReplica resources)
 * must be exactly the members: a member without a replica would count nothing, and a replica outside the members
 * would be counted by nobody but the home region, which owns no stamp written there. The table's own region is its
 * known stream ARN's (the mapping's `eventSourceArn`), else its known `arn`'s, else its provider's, else the setting's
 * `current` (the component refuses a table read in another region). A TableReplica's region is its `region`, else its
 * provider's. A table this stack does not hold (attached by ARN) has no replicas to compare.
 */

import type { PolicyResource } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { dependenciesOf, TYPES, type StreamMapping } from "./graph";
import { countedStreams, isCounterConsumer } from "./parallelization";
import { isUnknown, read, show, type Maybe } from "./unknowns";

/** The consumer's multi-region setting (components/regions/settings.ts `REGIONS_ENV`; docs/design/global-tables.md). */
export const COUNTER_REGIONS_VARIABLE = "HYBRID_COUNTER_REGIONS";

const ROLES = ["home", "member"];

/**
 * Is this value a multi-region setting: JSON of `{ current, members: [{ region, role }] }` with at least two distinct
 * members, exactly one of them "home", and `current` one of them?
 */
export function isRegionsSetting(value: unknown): boolean {
    if (typeof value !== "string") {
        return false;
    }
    let parsed: unknown;
    try {
        parsed = JSON.parse(value);
    } catch {
        return false;
    }
    if (parsed === null || typeof parsed !== "object") {
        return false;
    }
    const { current, members } = parsed as { current?: unknown; members?: unknown };
    if (typeof current !== "string" || !Array.isArray(members) || members.length < 2) {
        return false;
    }
    const regions = members.map((m: unknown) => (m !== null && typeof m === "object" ? (m as { region?: unknown }).region : undefined));
    const roles = members.map((m: unknown) =>
        m !== null && typeof m === "object" ? ((m as { role?: unknown }).role ?? "member") : undefined,
    );
    return (
        regions.every((r) => typeof r === "string" && r.length > 0) &&
        new Set(regions).size === regions.length &&
        roles.every((r) => typeof r === "string" && ROLES.includes(r)) &&
        roles.filter((r) => r === "home").length === 1 &&
        regions.includes(current)
    );
}

/** The consumer's `HYBRID_COUNTER_REGIONS` as set (undefined when absent or empty); unknown during preview. */
function regionsSettingOf(fn: PolicyResource): Maybe<unknown> {
    return read(() => {
        const variables = fn.props.environment?.variables as Record<string, unknown> | undefined | null;
        const value = variables?.[COUNTER_REGIONS_VARIABLE];
        return value === "" || value === null ? undefined : value;
    });
}

/** The regions of a table's known `replicas`: empty for none, unknown during preview. */
function replicaRegionsOf(table: PolicyResource): Maybe<string[]> {
    const replicas = read(() => table.props.replicas as unknown);
    if (isUnknown(replicas)) {
        return replicas;
    }
    if (!Array.isArray(replicas)) {
        return [];
    }
    return replicas.map((replica: unknown) => {
        const region = read(() => (replica as { regionName?: unknown } | null)?.regionName);
        return typeof region === "string" ? region : "(a region unknown until the update)";
    });
}

/** The members of a setting `isRegionsSetting` accepts. */
function membersOf(setting: string): string[] {
    return (JSON.parse(setting) as { members: Array<{ region: string }> }).members.map((m) => m.region);
}

/** The region an ARN names (its fourth field), when it is a known ARN. */
function regionOfArn(arn: unknown): string | undefined {
    return typeof arn === "string" && arn.startsWith("arn:") && arn.split(":")[3] ? arn.split(":")[3] : undefined;
}

/** The region a resource's provider is configured with, when known. */
function providerRegion(resource: PolicyResource): string | undefined {
    const region = read(() => resource.provider?.props.region as unknown);
    return typeof region === "string" && region.length > 0 ? region : undefined;
}

/** `arn:...:table/<name>` of a known stream ARN `arn:...:table/<name>/stream/<label>`; undefined otherwise. */
function tableArnOfStream(streamArn: unknown): string | undefined {
    if (typeof streamArn !== "string") {
        return undefined;
    }
    const at = streamArn.indexOf("/stream/");
    return at > 0 ? streamArn.slice(0, at) : undefined;
}

export type CounterTableReplicasConfig = ExemptionConfig;

/** Reports each violation once: one resource can be reached through several mappings and consumers. */
type Report = (urn: string, message: string) => void;

/** The stack's TableReplica resources that replicate a stream's table: by dependency, or by a known table ARN. */
function replicasOf(
    stream: StreamMapping,
    replicaResources: readonly PolicyResource[],
): Array<{ replica: PolicyResource; replicated: string }> {
    const streamTableArn = tableArnOfStream(read(() => stream.mapping.props.eventSourceArn as unknown));
    const found: Array<{ replica: PolicyResource; replicated: string }> = [];
    for (const replica of replicaResources) {
        const fromTable = dependenciesOf(replica, "globalTableArn", TYPES.table).find((t) => stream.tables.includes(t));
        const globalTableArn = read(() => replica.props.globalTableArn as unknown);
        if (fromTable !== undefined) {
            found.push({ replica, replicated: `table '${fromTable.name}'` });
        } else if (streamTableArn !== undefined && globalTableArn === streamTableArn) {
            found.push({ replica, replicated: `table ${streamTableArn}` });
        }
    }
    return found;
}

/** A replica's region: its `region`, else its provider's; unknown during preview. */
function replicaRegion(replica: PolicyResource): Maybe<string | undefined> {
    const region = read(() => replica.props.region as unknown);
    if (isUnknown(region)) {
        return region;
    }
    return typeof region === "string" && region.length > 0 ? region : providerRegion(replica);
}

/** A consumer without a (valid) multi-region setting on a replicated table: every replica is reported. */
function reportMissingSetting(
    stream: StreamMapping,
    fn: PolicyResource,
    setting: unknown,
    replicas: ReturnType<typeof replicasOf>,
    report: Report,
): void {
    const without =
        setting === undefined
            ? `its consumer '${fn.name}' has no [${COUNTER_REGIONS_VARIABLE}]`
            : `its consumer '${fn.name}' has [${COUNTER_REGIONS_VARIABLE}] ${show(setting)}, which is not a multi-region setting ` +
              '({"current":<region>,"members":[{"region":<region>,"role":"home"|"member"},...]}, two regions or more, one home)';
    const consequence = "so each region's stream carries every region's writes and a consumer per region counts each write once per region";
    const via = `event source mapping '${stream.mapping.name}'`;
    for (const table of stream.tables) {
        const regions = replicaRegionsOf(table);
        if (!isUnknown(regions) && regions.length > 0) {
            report(
                table.urn,
                `table '${table.name}' has [replicas] in ${regions.join(", ")} and feeds a hybrid counter through ${via}, but ${without}, ${consequence}`,
            );
        }
    }
    for (const { replica, replicated } of replicas) {
        const region = read(() => replica.props.region as unknown);
        const where = typeof region === "string" ? ` in ${region}` : "";
        report(
            replica.urn,
            `table replica '${replica.name}'${where} replicates ${replicated} ([globalTableArn]), which feeds a hybrid counter through ${via}, ` +
                `but ${without}, ${consequence}`,
        );
    }
}

/** A consumer with a multi-region setting: the table's regions must be exactly its members. */
function reportMembersMismatch(
    stream: StreamMapping,
    fn: PolicyResource,
    setting: string,
    replicas: ReturnType<typeof replicasOf>,
    report: Report,
): void {
    const members = membersOf(setting);
    const current = (JSON.parse(setting) as { current: string }).current;
    const fromResources = replicas.map(({ replica }) => replicaRegion(replica));
    if (fromResources.some(isUnknown)) {
        return;
    }
    for (const table of stream.tables) {
        const listed = replicaRegionsOf(table);
        if (isUnknown(listed)) {
            continue;
        }
        const own =
            regionOfArn(read(() => stream.mapping.props.eventSourceArn as unknown)) ??
            regionOfArn(read(() => table.props.arn as unknown)) ??
            providerRegion(table) ??
            current;
        const regions = [...new Set([own, ...listed, ...fromResources.map((r) => (r as string | undefined) ?? "(a region unknown)")])];
        const missing = members.filter((m) => !regions.includes(m));
        const outside = regions.filter((r) => !members.includes(r));
        if (missing.length === 0 && outside.length === 0) {
            continue;
        }
        const why = [
            ...(missing.length > 0 ? [`${missing.join(", ")} has no replica of it, so that region's consumer would count nothing`] : []),
            ...(outside.length > 0
                ? [`${outside.join(", ")} is no member, so writes made there would be counted by no region of their own`]
                : []),
        ];
        report(
            table.urn,
            `table '${table.name}' is in ${regions.join(", ")} (its own region and its replicas'), but its consumer '${fn.name}' counts for ` +
                `[${COUNTER_REGIONS_VARIABLE}] members ${members.join(", ")} (event source mapping '${stream.mapping.name}'): ${why.join("; ")}; ` +
                "the members must be exactly the table's regions",
        );
    }
}

export const counterTableReplicas = stackPolicy<CounterTableReplicasConfig>({
    name: "counter-table-replicas",
    description:
        "A hybrid counter's consumer reads the stream of a replicated (global) table only when its environment says how regions count " +
        `(${COUNTER_REGIONS_VARIABLE}, the component's regions), and that setting's members are exactly the table's regions. ` +
        "Without the setting, each region's stream carries every region's writes, so a consumer per region counts each write once per region, " +
        "and two regions' updates of one counter item resolve last-writer-wins and lose one. A member without a replica counts nothing, " +
        "and a replica outside the members is counted by no region of its own.",
    remediationSteps:
        "Set the component's regions arg in every region's component (the regions and their roles, one home; docs/deploying.md, " +
        '"A global table"), listing exactly the regions of the table and its replicas, or count a table without replicas.',
    enforcementLevel: "mandatory",
    config: {},
    check: (args, _config, reportViolation) => {
        const counted = countedStreams(args);
        const replicaResources = args.resources.filter((r) => r.type === TYPES.tableReplica);
        const reported = new Set<string>();
        const report: Report = (urn, message) => {
            if (!reported.has(`${urn} ${message}`)) {
                reported.add(`${urn} ${message}`);
                reportViolation(message, urn);
            }
        };
        for (const { stream, consumers } of counted) {
            const replicas = replicasOf(stream, replicaResources);
            // A consumer whose environment is unknown during preview is checked during the update.
            for (const fn of consumers.filter((c) => isCounterConsumer(c) === true)) {
                const setting = regionsSettingOf(fn);
                if (isUnknown(setting)) {
                    continue;
                }
                if (isRegionsSetting(setting)) {
                    reportMembersMismatch(stream, fn, setting as string, replicas, report);
                } else {
                    reportMissingSetting(stream, fn, setting, replicas, report);
                }
            }
        }
    },
});
