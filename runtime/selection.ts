/**
 * Which items a counter counts: one rule, used by the consumer, reconcile, backfill and healing.
 *
 * An item is selected when it is not a counter item (its sort key is not under `counterPrefix`) and it
 * matches the layout's selection; it is live when it is selected and not soft-deleted.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { CounterTableLayout } from "./config";

export type ItemSelection =
    /** default: items carrying the client's token attribute */
    | { readonly kind: "client" }
    /** every item whose sort key begins with prefix */
    | { readonly kind: "sortKeyPrefix"; readonly prefix: string }
    /** every item with attribute name = value (S) */
    | { readonly kind: "attribute"; readonly name: string; readonly value: string };

export const DEFAULT_SELECTION: ItemSelection = Object.freeze({ kind: "client" });

/** A layout that may carry a selection (the client's items when it has none). */
export type SelectingLayout = CounterTableLayout & { readonly selection?: ItemSelection };

/** True when the item is one the counter counts (whatever its deleted flag); false for counter items. */
export function isSelected(item: Record<string, AttributeValue>, layout: SelectingLayout): boolean {
    const sk = item[layout.sortKey]?.S;
    if (sk === undefined || sk.startsWith(layout.counterPrefix)) {
        return false;
    }
    const selection = layout.selection ?? DEFAULT_SELECTION;
    switch (selection.kind) {
        case "client":
            return item[layout.tokenAttribute]?.S !== undefined;
        case "sortKeyPrefix":
            return sk.startsWith(selection.prefix);
        case "attribute":
            return item[selection.name]?.S === selection.value;
    }
}

/** Selected and not soft-deleted. */
export function isLive(item: Record<string, AttributeValue>, layout: SelectingLayout): boolean {
    return isSelected(item, layout) && item[layout.deletedAttribute]?.BOOL !== true;
}
