/**
 * The settler function's configuration: the counter's (the variables every function reads) and the run's budget,
 * and where unsent threshold events go. Pure.
 */
import { ConfigurationError, counterConfigFromEnv, counterEnvironment, ENV, type CounterConfig } from "../shared/config";
import { SETTLER_DEFAULTS } from "./settle";

export const SETTLER_ENV = Object.freeze({
    keyBudget: "HYBRID_COUNTER_SETTLER_KEY_BUDGET",
    auditItems: "HYBRID_COUNTER_SETTLER_AUDIT_ITEMS",
} as const);

export interface SettlerConfig extends CounterConfig {
    readonly keyBudget: number;
    readonly auditItems: number;
    readonly metricsNamespace: string;
    readonly thresholdTopicArn?: string;
}

export function settlerEnvironment(config: SettlerConfig): Record<string, string> {
    return {
        ...counterEnvironment(config),
        [SETTLER_ENV.keyBudget]: String(config.keyBudget),
        [SETTLER_ENV.auditItems]: String(config.auditItems),
        [ENV.metricsNamespace]: config.metricsNamespace,
        ...(config.thresholdTopicArn === undefined ? {} : { [ENV.thresholdTopicArn]: config.thresholdTopicArn }),
    };
}

/** Reads the settler's configuration; throws ConfigurationError naming each missing or bad variable. */
export function settlerConfigFromEnv(env: Readonly<Record<string, string | undefined>>): SettlerConfig {
    const problems: string[] = [];
    let base: CounterConfig | undefined;
    try {
        base = counterConfigFromEnv(env);
    } catch (error) {
        problems.push(...(error as ConfigurationError).problems);
    }
    const integer = (name: string, fallback: number, max: number): number => {
        const raw = env[name];
        if (raw === undefined || raw === "") {
            return fallback;
        }
        const value = Number(raw);
        if (!Number.isInteger(value) || value < 1 || value > max) {
            problems.push(`[${name}] must be an integer from 1 to ${max} (got "${raw}")`);
        }
        return value;
    };
    const keyBudget = integer(SETTLER_ENV.keyBudget, SETTLER_DEFAULTS.keyBudget, 10_000);
    const auditItems = integer(SETTLER_ENV.auditItems, SETTLER_DEFAULTS.auditItems, 10_000);
    if (problems.length > 0) {
        throw new ConfigurationError(problems);
    }
    const topic = env[ENV.thresholdTopicArn];
    return {
        ...base!,
        keyBudget,
        auditItems,
        metricsNamespace: env[ENV.metricsNamespace] || "HybridCounter",
        ...(topic ? { thresholdTopicArn: topic } : {}),
    };
}
