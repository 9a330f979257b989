/**
 * Healing, off the request path: `healKey` brings a quiet key's best-effort back to the truth,
 * `reconcileKey` makes a key's markers agree with its items, and `settle` is one bounded run of both
 * over the heal index and the audit (the settler function).
 *
 * Invariant (heal.ts states why it holds): a heal keeps the mode's bound at every instant, whatever the
 * interleaving with client calls, because it writes only if no client wrote best-effort since its read
 * and the key has been quiet for a window that covers every call's deadline (heal-window.ts).
 */
export {
    healKey,
    planHeal,
    readForHeal,
    writeHeal,
    type HealMode,
    type HealOptions,
    type HealPlan,
    type HealResult,
    type HealSkipReason,
    type ShardHealRead,
    type ShardHealResult,
} from "./heal";
export {
    planReconcile,
    reconcileKey,
    type ReconcileAction,
    type ReconcileOptions,
    type ReconcilePlan,
    type ReconcileResult,
    type ReconcileShard,
} from "./reconcile";
export { settle, SETTLER_DEFAULTS, type SettleOptions, type SettleReport } from "./settle";
export { SETTLER_ENV, settlerConfigFromEnv, settlerEnvironment, type SettlerConfig } from "./settler-config";
