/**
 * The regions a counter counts in, as configured: which member region this process runs in (`current`), every
 * member, and which one is the home (the owner of every item no member stamped). Pure: no AWS SDK, no Pulumi, and no
 * import of runtime/shared/config.ts (which imports this module to read and check the environment).
 *
 * With no regions configured nothing here applies: every key, request and attribute is the single-region one.
 */
import { ConfigurationError } from "../shared/errors";

/** One member region of a multi-region counter. */
export interface RegionMember {
    /** An AWS region name (`us-east-1`). */
    readonly region: string;
    /** "home": owns every item no member stamped (exactly one member is the home). @default "member" */
    readonly role?: "home" | "member";
}

/** The regions of a counter on a global table (docs/design/global-tables.md). */
export interface RegionsConfig {
    /** The region this client or handler runs in: one of `members`. */
    readonly current: string;
    /** Every member region, exactly one of them the home. */
    readonly members: readonly RegionMember[];
}

/** The stamp attribute's default name: the region whose client created the item's life. */
export const DEFAULT_REGION_ATTRIBUTE = "hc_region";

/** The longest region name accepted (the stamp's size bound). */
export const REGION_NAME_MAX_BYTES = 25;

/** The most member regions a counter may have (each region's stream filter names the others: components/). */
export const REGIONS_MAX = 10;

/** An AWS region name: lower-case words joined by "-", ending in a number (`us-east-1`, `us-gov-west-1`). */
const REGION_NAME = /^[a-z]{2}(-[a-z]+)+-\d{1,2}$/;

/** The problem with `name` as a region name (undefined: none). */
export function regionNameProblem(name: unknown): string | undefined {
    if (typeof name !== "string" || !REGION_NAME.test(name)) {
        return `must be an AWS region name such as "us-east-1" (got ${JSON.stringify(name)})`;
    }
    return Buffer.byteLength(name, "utf8") > REGION_NAME_MAX_BYTES ? `must be at most ${REGION_NAME_MAX_BYTES} bytes` : undefined;
}

/** What regionsProblems needs to know of the rest of the configuration. */
export interface RegionsContext {
    readonly tableName?: string;
    readonly countersTableName?: string;
    /** Attribute names the stamp must differ from, by field name (`partitionKey`: "pk", ...). */
    readonly attributes?: Readonly<Record<string, string | undefined>>;
}

/**
 * Problems with a regions setting and its stamp attribute, each naming its field (`[regions.current]`,
 * `[regions.members]`, `[regionAttribute]`). Nothing is checked when `regions` is undefined but the attribute name.
 */
export function regionsProblems(regions: unknown, regionAttribute: unknown, context: RegionsContext = {}): string[] {
    const problems: string[] = [];
    if (regionAttribute !== undefined) {
        if (typeof regionAttribute !== "string" || regionAttribute.length === 0) {
            problems.push("[regionAttribute] must be a non-empty string");
        } else if (Buffer.byteLength(regionAttribute, "utf8") > 255) {
            problems.push("[regionAttribute] must be at most 255 bytes");
        }
    }
    const stamp = typeof regionAttribute === "string" && regionAttribute.length > 0 ? regionAttribute : DEFAULT_REGION_ATTRIBUTE;
    for (const [field, name] of Object.entries(context.attributes ?? {})) {
        if (name === stamp) {
            problems.push(`[regionAttribute] must differ from [${field}] (both are "${stamp}")`);
        }
    }
    if (regions === undefined) {
        return problems;
    }
    if (regions === null || typeof regions !== "object" || Array.isArray(regions)) {
        return [...problems, '[regions] must be an object: { current: "<region>", members: [{ region, role? }, ...] }'];
    }
    const { current, members } = regions as { current?: unknown; members?: unknown };
    if (!Array.isArray(members) || members.length === 0) {
        problems.push("[regions.members] must be a non-empty list of { region, role? }");
        return problems;
    }
    if (members.length > REGIONS_MAX) {
        problems.push(`[regions.members] must list at most ${REGIONS_MAX} regions (got ${members.length})`);
    }
    const seen = new Set<string>();
    let homes = 0;
    members.forEach((member: unknown, i) => {
        if (member === null || typeof member !== "object") {
            problems.push(`[regions.members[${i}]] must be an object { region, role? }`);
            return;
        }
        const { region, role } = member as { region?: unknown; role?: unknown };
        const problem = regionNameProblem(region);
        if (problem !== undefined) {
            problems.push(`[regions.members[${i}].region] ${problem}`);
        } else if (seen.has(region as string)) {
            problems.push(`[regions.members[${i}].region] lists "${region as string}" twice`);
        } else {
            seen.add(region as string);
        }
        if (role !== undefined && role !== "home" && role !== "member") {
            problems.push(`[regions.members[${i}].role] must be "home" or "member" (got ${JSON.stringify(role)})`);
        }
        homes += role === "home" ? 1 : 0;
    });
    if (homes !== 1) {
        problems.push(`[regions.members] must name exactly one region with role "home" (got ${homes})`);
    }
    const currentProblem = regionNameProblem(current);
    if (currentProblem !== undefined) {
        problems.push(`[regions.current] ${currentProblem}`);
    } else if (!seen.has(current as string)) {
        problems.push(`[regions.current] "${current as string}" must be one of [regions.members] (${[...seen].join(", ")})`);
    }
    if (context.tableName !== undefined && (context.countersTableName === undefined || context.countersTableName === context.tableName)) {
        problems.push(
            "[regions] needs a counters table of its own ([countersTableName]): every region's counter items replicate to every member, apart from the user's items",
        );
    }
    return problems;
}

/**
 * Reads `HYBRID_COUNTER_REGIONS`-style JSON into a RegionsConfig and checks it (with its context). Throws
 * ConfigurationError naming `[field]` (the variable's name, or "regions") for text that is not JSON or a bad setting.
 */
export function parseRegions(text: string, field = "regions", context: RegionsContext = {}): RegionsConfig {
    let parsed: unknown;
    try {
        parsed = JSON.parse(text);
    } catch {
        throw new ConfigurationError([
            `[${field}] must be JSON: {"current":"<region>","members":[{"region":"<region>","role":"home"},...]}`,
        ]);
    }
    const problems = regionsProblems(parsed, undefined, context).map((problem) =>
        field === "regions" ? problem : problem.replace(/^\[regions(?=[.\]])/, `[${field}`),
    );
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    return normalizedRegions(parsed as RegionsConfig);
}

/** A checked regions setting as a frozen copy holding only its fields (members in the order given). */
export function normalizedRegions(regions: RegionsConfig): RegionsConfig {
    return Object.freeze({
        current: regions.current,
        members: Object.freeze(
            regions.members.map((member) =>
                Object.freeze(member.role === undefined ? { region: member.region } : { region: member.region, role: member.role }),
            ),
        ),
    });
}

/** The JSON a regions setting travels as in the environment (`HYBRID_COUNTER_REGIONS`). */
export function regionsJson(regions: RegionsConfig): string {
    return JSON.stringify(normalizedRegions(regions));
}

/**
 * The counter prefix region `region`'s counter items carry: `<counterPrefix>@<region>#`, so that its best-effort item
 * is `<counterPrefix>@<region>#best-effort`, its eventual `...#eventual`, its markers `...#item#<id>`, its settler
 * cursor and backfill runs likewise. A region name holds neither "@" nor "#", so no region's prefix starts another's.
 */
export function regionCounterPrefix(counterPrefix: string, region: string): string {
    return `${counterPrefix}@${region}#`;
}

/**
 * The prefix every counter item this process writes carries: region-qualified when regions are configured, else the
 * counter prefix itself (the single-region keys, byte for byte).
 */
export function regionalCounterPrefix(config: { readonly counterPrefix: string; readonly regions?: RegionsConfig }): string {
    return config.regions === undefined ? config.counterPrefix : regionCounterPrefix(config.counterPrefix, config.regions.current);
}
