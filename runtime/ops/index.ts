/**
 * Operating a deployed counter, as the CLI does it: reconciling a key whose records were lost.
 *
 * Invariant: an operation here changes a count only by a write conditional on what it read (reconcile.ts).
 */
export { reconcileKey, type ReconcileOptions, type ReconcileResult } from "./reconcile";
