/**
 * Which items of a key are counted resources: one rule, used by every part that decides membership.
 *
 * An item is selected when it is not a counter item (its sort key is not under the counter prefix) and
 * it matches the layout's selection. It is live when it is selected and not soft-deleted.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import type { CounterTableLayout } from "./config";

/** A layout with the selection it counts by (absent: the items written through the client). */
export type SelectingLayout = CounterTableLayout & { readonly selection?: ItemSelection };

export type ItemSelection =
    /** Items carrying the client's token attribute (the default). */
    | { readonly kind: "client" }
    /** Every item whose sort key begins with `prefix`. */
    | { readonly kind: "sortKeyPrefix"; readonly prefix: string }
    /** Every item whose attribute `name` equals `value` (type S). */
    | { readonly kind: "attribute"; readonly name: string; readonly value: string };

/** The default selection: the items written through the client. */
export const CLIENT_SELECTION: ItemSelection = Object.freeze({ kind: "client" });

/** True when the item is a counted resource under the layout's selection. Counter items never are. */
export function isSelected(item: Record<string, AttributeValue>, layout: SelectingLayout): boolean {
    const pk = item[layout.partitionKey]?.S;
    const sk = item[layout.sortKey]?.S;
    if (pk === undefined || sk === undefined || sk.startsWith(layout.counterPrefix)) {
        return false;
    }
    const selection = layout.selection ?? CLIENT_SELECTION;
    switch (selection.kind) {
        case "client":
            return item[layout.tokenAttribute]?.S !== undefined;
        case "sortKeyPrefix":
            return sk.startsWith(selection.prefix);
        case "attribute":
            return item[selection.name]?.S === selection.value;
    }
}

/** Selected and not soft-deleted (only a BOOL true soft-deletes). */
export function isLive(item: Record<string, AttributeValue>, layout: SelectingLayout): boolean {
    return isSelected(item, layout) && item[layout.deletedAttribute]?.BOOL !== true;
}
