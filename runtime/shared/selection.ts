/**
 * Which items count: the one place the selection is applied.
 *
 * Invariant: an item is *live* exactly when it is selected and not soft-deleted. The consumer (on
 * stream images), reconciliation and backfill (on stored items) call isLive, DynamoDB conditions use
 * the expressions built here, and the mapping's filter patterns (components/defaults.ts) deliver every
 * record whose images isSelected could accept. So they can never disagree about an item.
 *
 * - Counter items (sort key under the reserved prefix) are never selected.
 * - "client" selects items whose token attribute is a string (S), as the client writes it.
 * - Soft-deleted means the deleted attribute is the boolean true; any other value (missing, false, a
 *   string) leaves the item live.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { CounterTableLayout } from "./config";
export type { ItemSelection } from "./config";
import type { ItemSelection } from "./config";
import type { RegionsConfig } from "../regions/config";
import { homeRegion, ownsImage, regionAttributeOf, type OwnershipScope } from "../regions/ownership";

/** A layout with its selection (every layout has one now; kept as a name for healing's signatures). */
export type SelectingLayout = CounterTableLayout & OwnershipScope;

/** The default selection: the items written through the client. */
export const CLIENT_SELECTION: ItemSelection = Object.freeze({ kind: "client" });

/** An item or a stream image: attribute values keyed by name. */
export type ItemImage = Readonly<Record<string, AttributeValue | { readonly [type: string]: unknown }>>;

/**
 * With `regions` (runtime/regions/), an item is selected here only when this process's region owns it: each region
 * counts, heals, backfills and reconciles the lives it owns, and nothing else.
 */
type Layout = Pick<CounterTableLayout, "sortKey" | "counterPrefix" | "tokenAttribute" | "deletedAttribute" | "selection"> & OwnershipScope;

/** True when `item` is a counted resource by the selection (soft-deleted or not). */
export function isSelected(item: ItemImage | undefined | null, layout: Layout): boolean {
    if (item === undefined || item === null || typeof item !== "object") {
        return false;
    }
    const sortKey = stringValue(item[layout.sortKey]);
    if (sortKey === undefined || sortKey.startsWith(layout.counterPrefix)) {
        return false;
    }
    if (layout.regions !== undefined && !ownsImage(layout, item)) {
        return false;
    }
    const selection = layout.selection;
    switch (selection.kind) {
        case "client":
            return stringValue(item[layout.tokenAttribute]) !== undefined;
        case "sortKeyPrefix":
            return sortKey.startsWith(selection.prefix);
        case "attribute":
            return stringValue(item[selection.name]) === selection.value;
    }
}

/** True when the item is soft-deleted: its deleted attribute is the boolean true. */
export function isSoftDeleted(item: ItemImage, layout: Pick<CounterTableLayout, "deletedAttribute">): boolean {
    const flag = item[layout.deletedAttribute] as { BOOL?: unknown } | undefined;
    return flag !== undefined && flag !== null && typeof flag === "object" && flag.BOOL === true;
}

/** True when the item counts now: selected and not soft-deleted. */
export function isLive(item: ItemImage | undefined | null, layout: Layout): boolean {
    return isSelected(item, layout) && !isSoftDeleted(item as ItemImage, layout);
}

/** A condition expression with the names and values it uses (placeholders prefixed `#sel`/`:sel`). */
export interface ConditionParts {
    readonly expression: string;
    readonly names: Record<string, string>;
    readonly values: Record<string, AttributeValue>;
}

/** The selection as a DynamoDB condition on an existing item (counter items excluded by their key, not here). */
export function selectionConditionExpression(layout: Layout): ConditionParts {
    const selected = selectionOnlyConditionExpression(layout);
    if (layout.regions === undefined) {
        return selected;
    }
    const owned = ownershipConditionExpression(layout.regions, regionAttributeOf(layout));
    return {
        expression: `(${selected.expression}) AND (${owned.expression})`,
        names: { ...selected.names, ...owned.names },
        values: { ...selected.values, ...owned.values },
    };
}

/**
 * "This process's region owns the item", as a condition (runtime/regions/ownership.ts): a member's own stamp; for the
 * home, any stamp but another member's, or none.
 */
function ownershipConditionExpression(regions: RegionsConfig, regionAttribute: string): ConditionParts {
    if (regions.current !== homeRegion(regions)) {
        return {
            expression: "#selRegion = :selRegion",
            names: { "#selRegion": regionAttribute },
            values: { ":selRegion": { S: regions.current } },
        };
    }
    const others = regions.members.map((member) => member.region).filter((region) => region !== regions.current);
    if (others.length === 0) {
        return {
            expression: "attribute_exists(#selRegion) OR attribute_not_exists(#selRegion)",
            names: { "#selRegion": regionAttribute },
            values: {},
        };
    }
    const values = Object.fromEntries(others.map((region, i) => [`:selOther${i}`, { S: region }]));
    return {
        expression: `attribute_not_exists(#selRegion) OR NOT (#selRegion IN (${Object.keys(values).join(", ")}))`,
        names: { "#selRegion": regionAttribute },
        values,
    };
}

function selectionOnlyConditionExpression(layout: Layout): ConditionParts {
    const selection = layout.selection;
    switch (selection.kind) {
        case "client":
            return {
                expression: "attribute_type(#selToken, :selS)",
                names: { "#selToken": layout.tokenAttribute },
                values: { ":selS": { S: "S" } },
            };
        case "sortKeyPrefix":
            return {
                expression: "begins_with(#selSk, :selPrefix)",
                names: { "#selSk": layout.sortKey },
                values: { ":selPrefix": { S: selection.prefix } },
            };
        case "attribute":
            return {
                expression: "#selAttr = :selValue",
                names: { "#selAttr": selection.name },
                values: { ":selValue": { S: selection.value } },
            };
    }
}

/** "The item exists and is live", as a condition. */
export function liveConditionExpression(layout: Layout): ConditionParts {
    const selected = selectionConditionExpression(layout);
    return {
        expression: `(${selected.expression}) AND (attribute_not_exists(#selDeleted) OR #selDeleted <> :selTrue)`,
        names: { ...selected.names, "#selDeleted": layout.deletedAttribute },
        values: { ...selected.values, ":selTrue": { BOOL: true } },
    };
}

/** "The item is absent, not selected or soft-deleted", as a condition: the negation of liveConditionExpression. */
export function notLiveConditionExpression(layout: Layout): ConditionParts {
    const live = liveConditionExpression(layout);
    return { ...live, expression: `NOT (${live.expression})` };
}

function stringValue(value: unknown): string | undefined {
    if (value === undefined || value === null || typeof value !== "object") {
        return undefined;
    }
    const s = (value as { S?: unknown }).S;
    return typeof s === "string" ? s : undefined;
}
