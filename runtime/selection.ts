/**
 * Which items of the user's table count. One rule, used by every writer and reader of the counters.
 */

export type ItemSelection =
    /** Items carrying the client's token attribute (written through the client). */
    | { readonly kind: "client" }
    /** Every item whose sort key begins with `prefix`. */
    | { readonly kind: "sortKeyPrefix"; readonly prefix: string }
    /** Every item whose attribute `name` equals `value` (type S). */
    | { readonly kind: "attribute"; readonly name: string; readonly value: string };
