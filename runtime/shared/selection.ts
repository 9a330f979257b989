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

/** A layout with its selection (every layout has one now; kept as a name for healing's signatures). */
export type SelectingLayout = CounterTableLayout;

/** The default selection: the items written through the client. */
export const CLIENT_SELECTION: ItemSelection = Object.freeze({ kind: "client" });

/** An item or a stream image: attribute values keyed by name. */
export type ItemImage = Readonly<Record<string, AttributeValue | { readonly [type: string]: unknown }>>;

type Layout = Pick<CounterTableLayout, "sortKey" | "counterPrefix" | "tokenAttribute" | "deletedAttribute" | "selection">;

/** True when `item` is a counted resource by the selection (soft-deleted or not). */
export function isSelected(item: ItemImage | undefined | null, layout: Layout): boolean {
    if (item === undefined || item === null || typeof item !== "object") {
        return false;
    }
    const sortKey = stringValue(item[layout.sortKey]);
    if (sortKey === undefined || sortKey.startsWith(layout.counterPrefix)) {
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
