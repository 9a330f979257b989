/**
 * Which items count: the one place the selection is applied.
 *
 * Invariant: an item (or a stream image) is *counted* exactly when it is live (selected, owned by this region, not
 * soft-deleted) and carries the counted flag with this counter's generation. The eventual counter moves by
 * `counted(new image) - counted(old image)` for every stream record, so eventual equals the counted items once the
 * stream has drained, whoever wrote them. A live item without the flag (another writer's, one from before the counter)
 * is flagged by the consumer or the backfill; the flag's write is itself a record, which counts it once.
 *
 * - Counter items (sort key under the reserved prefix) are never selected.
 * - "client" selects items whose token attribute is a string, as the client writes it.
 * - Soft-deleted means the deleted attribute is the boolean true; any other value leaves the item live.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { COUNTED_ATTRIBUTE, countingGeneration, type CounterConfig, type CounterTableLayout } from "./config";
import { homeRegion, ownsImage, regionAttributeOf } from "../regions/ownership";
import type { RegionsConfig } from "../regions/config";
import { stringOf } from "./keys";

export type { ItemSelection } from "./config";

/** An item or a stream image: attribute values keyed by name. */
export type ItemImage = Readonly<Record<string, AttributeValue | { readonly [type: string]: unknown }>>;

/** What the predicates need of a configuration. */
export type SelectionScope = CounterTableLayout &
    Pick<CounterConfig, "countersTableName"> & { readonly regions?: RegionsConfig; readonly regionAttribute?: string };

/** True when `item` is a resource the selection counts and this region owns (soft-deleted or not). */
export function isSelected(item: ItemImage | undefined | null, scope: SelectionScope): boolean {
    if (item === undefined || item === null || typeof item !== "object") {
        return false;
    }
    const sortKey = stringOf(item, scope.sortKey);
    if (sortKey === undefined || sortKey.startsWith(scope.counterPrefix) || stringOf(item, scope.partitionKey) === undefined) {
        return false;
    }
    if (scope.regions !== undefined && !ownsImage(scope, item)) {
        return false;
    }
    const selection = scope.selection;
    switch (selection.kind) {
        case "client":
            return stringOf(item, scope.tokenAttribute) !== undefined;
        case "sortKeyPrefix":
            return sortKey.startsWith(selection.prefix);
        case "attribute":
            return stringOf(item, selection.name) === selection.value;
    }
}

/** True when the item is soft-deleted: its deleted attribute is the boolean true. */
export function isSoftDeleted(item: ItemImage, scope: Pick<CounterTableLayout, "deletedAttribute">): boolean {
    const flag = item[scope.deletedAttribute] as { BOOL?: unknown } | undefined;
    return flag !== undefined && flag !== null && typeof flag === "object" && flag.BOOL === true;
}

/** True when the item is selected and not soft-deleted. */
export function isLive(item: ItemImage | undefined | null, scope: SelectionScope): boolean {
    return isSelected(item, scope) && !isSoftDeleted(item as ItemImage, scope);
}

/** True when the item carries this counter's counted flag. */
export function isFlagged(item: ItemImage | undefined | null, scope: SelectionScope): boolean {
    return item !== undefined && item !== null && stringOf(item, COUNTED_ATTRIBUTE) === countingGeneration(scope);
}

/** True when the item counts: live and flagged (the eventual counter's unit). */
export function isCounted(item: ItemImage | undefined | null, scope: SelectionScope): boolean {
    return isLive(item, scope) && isFlagged(item, scope);
}

/** True when the item is live but not flagged: the consumer or the backfill flags it, and it then counts. */
export function wantsFlag(item: ItemImage | undefined | null, scope: SelectionScope): boolean {
    return isLive(item, scope) && !isFlagged(item, scope);
}

/** The counted flag as an attribute, for an item the client creates. */
export function countedFlag(scope: Pick<CounterConfig, "countersTableName">): Record<string, AttributeValue> {
    return { [COUNTED_ATTRIBUTE]: { S: countingGeneration(scope) } };
}

/** A condition expression with the names and values it uses (placeholders prefixed `#sel`/`:sel`). */
export interface ConditionParts {
    readonly expression: string;
    readonly names: Record<string, string>;
    readonly values: Record<string, AttributeValue>;
}

/** "The item is live and not yet flagged", as a condition: what a flag write may change. */
export function flaggableCondition(scope: SelectionScope): ConditionParts {
    const selected = selectionCondition(scope);
    return {
        expression:
            `attribute_exists(#selPk) AND (${selected.expression}) AND (attribute_not_exists(#selDeleted) OR #selDeleted <> :selTrue)` +
            " AND (attribute_not_exists(#selFlag) OR #selFlag <> :selGen)",
        names: { ...selected.names, "#selPk": scope.partitionKey, "#selDeleted": scope.deletedAttribute, "#selFlag": COUNTED_ATTRIBUTE },
        values: { ...selected.values, ":selTrue": { BOOL: true }, ":selGen": { S: countingGeneration(scope) } },
    };
}

/** The selection (and, with regions, this region's ownership) as a condition on an existing item. */
export function selectionCondition(scope: SelectionScope): ConditionParts {
    const selected = selectionOnlyCondition(scope);
    if (scope.regions === undefined) {
        return selected;
    }
    const owned = ownershipCondition(scope.regions, regionAttributeOf(scope));
    return {
        expression: `(${selected.expression}) AND (${owned.expression})`,
        names: { ...selected.names, ...owned.names },
        values: { ...selected.values, ...owned.values },
    };
}

function ownershipCondition(regions: RegionsConfig, regionAttribute: string): ConditionParts {
    const names = { "#selRegion": regionAttribute };
    if (regions.current !== homeRegion(regions)) {
        return { expression: "#selRegion = :selRegion", names, values: { ":selRegion": { S: regions.current } } };
    }
    const others = regions.members.map((m) => m.region).filter((r) => r !== regions.current);
    if (others.length === 0) {
        return { expression: "attribute_exists(#selRegion) OR attribute_not_exists(#selRegion)", names, values: {} };
    }
    const values = Object.fromEntries(others.map((region, i) => [`:selOther${i}`, { S: region }]));
    return { expression: `attribute_not_exists(#selRegion) OR NOT (#selRegion IN (${Object.keys(values).join(", ")}))`, names, values };
}

function selectionOnlyCondition(scope: SelectionScope): ConditionParts {
    const selection = scope.selection;
    switch (selection.kind) {
        case "client":
            return {
                expression: "attribute_type(#selToken, :selS)",
                names: { "#selToken": scope.tokenAttribute },
                values: { ":selS": { S: "S" } },
            };
        case "sortKeyPrefix":
            return {
                expression: "begins_with(#selSk, :selPrefix)",
                names: { "#selSk": scope.sortKey },
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
