/**
 * Each region's stream filter: the records its consumer counts, and no others (docs/design/global-tables.md,
 * "The stream filter").
 *
 * A region's consumer counts a record when either image is selected and owned by the region. So each pattern is one
 * of the selection's patterns (components/defaults.ts `streamFilterPatterns`) with an owner condition added on the
 * image it names; for the "sortKeyPrefix" selection, which names the record's `Keys`, the owner condition is added on
 * each image beside the keys' prefix.
 * - A member region owns exactly the images stamped with its name: `{"S":["eu-west-1"]}`, one pattern per image: 2.
 * - The home region owns its own stamp, a stamp naming no member (a removed region's) and no stamp at all:
 *   `{"S":[{"anything-but":[<the other members>]}]}` and `{"S":[{"exists":false}]}` (anything-but does not match an
 *   absent value), on each image: 4.
 *
 * Bound (Lambda takes at most 5 filters of at most 4,096 characters each, FACTS.md): at most 4 patterns per region,
 * by the construction above. A pattern's length is a fixed frame of under 110 characters, plus the selection's names
 * and values (each at most 255 bytes: layoutProblems), the region attribute (at most 255 bytes) and, for the home,
 * the other members' names (each at most 25 characters, quoted and comma-separated). The component computes the
 * patterns of every region at validation and refuses a setting whose longest pattern passes 4,096
 * ({@link filterLengthProblems}); with ten regions and the longest names the patterns are under 1,200 characters.
 */
import type { CounterTableLayout } from "../../runtime/shared/config";
import { RegionRole } from "../args";
import { homeRegion, type RegionsSetting } from "./settings";

/** Lambda's limits on one event source mapping's filter criteria. */
export const FILTER_LIMITS = Object.freeze({ filters: 5, patternCharacters: 4096 });

const IMAGES = ["NewImage", "OldImage"] as const;

/** The conditions on the stamp that make an image owned by the current region (ORed: one pattern each). */
function ownerConditions(setting: RegionsSetting): Array<{ S: unknown[] }> {
    if (homeRegion(setting) !== setting.current) {
        return [{ S: [setting.current] }];
    }
    const others = setting.members.map((m) => m.region).filter((r) => r !== setting.current);
    return [{ S: [{ "anything-but": others }] }, { S: [{ exists: false }] }];
}

/** The filter patterns of the current region's stream mapping (2 in a member region, 4 in the home region). */
export function regionalFilterPatterns(layout: CounterTableLayout, setting: RegionsSetting, regionAttribute: string): string[] {
    const selection = layout.selection;
    const patterns: string[] = [];
    for (const image of IMAGES) {
        for (const owner of ownerConditions(setting)) {
            const owned = { [regionAttribute]: owner };
            switch (selection.kind) {
                case "client":
                    patterns.push(
                        JSON.stringify({ dynamodb: { [image]: { [layout.tokenAttribute]: { S: [{ exists: true }] }, ...owned } } }),
                    );
                    break;
                case "attribute":
                    patterns.push(JSON.stringify({ dynamodb: { [image]: { [selection.name]: { S: [selection.value] }, ...owned } } }));
                    break;
                case "sortKeyPrefix":
                    patterns.push(
                        JSON.stringify({
                            dynamodb: { Keys: { [layout.sortKey]: { S: [{ prefix: selection.prefix }] } }, [image]: owned },
                        }),
                    );
                    break;
            }
        }
    }
    return patterns;
}

/**
 * Problems with the filters of every member region's mapping, named `[regions.members]`: more patterns or longer ones
 * than Lambda takes. Checked for every member (each region's component computes its own), so that the first region
 * deployed refuses a setting the home region could not take.
 */
export function filterLengthProblems(layout: CounterTableLayout, setting: RegionsSetting, regionAttribute: string): string[] {
    const problems: string[] = [];
    for (const member of setting.members) {
        const patterns = regionalFilterPatterns(layout, { ...setting, current: member.region }, regionAttribute);
        const longest = Math.max(...patterns.map((p) => p.length));
        if (patterns.length > FILTER_LIMITS.filters || longest > FILTER_LIMITS.patternCharacters) {
            problems.push(
                `[regions.members] makes ${member.role === RegionRole.Home ? "the home" : "a member"} region's stream filter ` +
                    `${patterns.length} patterns, the longest ${longest} characters (${member.region}): Lambda takes at most ` +
                    `${FILTER_LIMITS.filters} patterns of ${FILTER_LIMITS.patternCharacters} characters`,
            );
        }
    }
    return problems;
}
