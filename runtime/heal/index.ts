/**
 * Healing, off the request path: `healKey` brings a key's best-effort to what its items and its young ledger say,
 * while the key is written; `settle` is one settler run over the heal index and an audit.
 *
 * Invariant (heal.ts says why it holds): a heal keeps the mode's bound at every instant, whatever client calls it
 * meets: it adds a difference that client writes to the young ledger commute with, and guards the rest by the heal
 * generation and the order of its reads.
 */
export { healKey, lifeOf, readItems, type HealOptions, type HealResult, type ShardHealResult } from "./heal";
export { planShardHeal, type LifeView, type ShardHealPlan } from "./plan";
export { settle, dueKeys, SETTLER_DEFAULTS, type DueKey, type SettleOptions, type SettleReport } from "./settle";
export { SETTLER_ENV, settlerConfigFromEnv, settlerEnvironment, type SettlerConfig } from "./settler-config";
export { HEAL_INDEX_NAME, HEAL_SHARDS, HEAL_PARTITION, HEAL_DUE, healShard } from "./index-marks";
export {
    REQUEST_LIFETIME_MS,
    CLOCK_SKEW_MS,
    MIN_CLIENT_DEADLINE_MS,
    MAX_CLIENT_DEADLINE_MS,
    periodFloorMs,
    periodCovers,
    smallestPeriodSeconds,
    settledAfterMs,
} from "./heal-window";
