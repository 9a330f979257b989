/**
 * The API function's configuration, passed from the Pulumi program to Lambda in environment variables.
 * Pure: the program writes the environment with {@link apiEnvironment} from the component's own
 * `apiEnvironment` output; the function reads it back with hybrid-counter's `clientConfigFromEnv` and
 * {@link apiSettingsFromEnv}.
 */

/** The API's own variables. */
export const API_ENV = Object.freeze({
    mode: "LIMITS_API_MODE",
    defaultLimit: "LIMITS_API_DEFAULT_LIMIT",
    tenantLimits: "LIMITS_API_TENANT_LIMITS",
});

export type CounterMode = "strict" | "utilization";

export interface ApiSettings {
    /** `strict` never exceeds a limit; `utilization` can briefly exceed it under concurrent creates. */
    readonly mode: CounterMode;
    /** The limit of every tenant without an entry in `tenantLimits`. */
    readonly defaultLimit: number;
    /** Per-tenant limits. */
    readonly tenantLimits: Readonly<Record<string, number>>;
}

/** Raised for a configuration value that is missing or malformed; names every problem. */
export class ApiSettingsError extends Error {
    constructor(readonly problems: readonly string[]) {
        super(`invalid limits-api settings: ${problems.join("; ")}`);
        this.name = "ApiSettingsError";
    }
}

/** Checks settings (from stack config or the environment); throws ApiSettingsError listing every problem. */
export function validateApiSettings(settings: ApiSettings): ApiSettings {
    const problems: string[] = [];
    if (settings.mode !== "strict" && settings.mode !== "utilization") {
        problems.push(`[mode] must be "strict" or "utilization"; found ${JSON.stringify(settings.mode)}`);
    }
    const limitProblem = (name: string, value: unknown) =>
        typeof value === "number" && Number.isSafeInteger(value) && value >= 0
            ? undefined
            : `[${name}] must be a non-negative integer; found ${JSON.stringify(value)}`;
    const defaultProblem = limitProblem("defaultLimit", settings.defaultLimit);
    if (defaultProblem) {
        problems.push(defaultProblem);
    }
    if (settings.tenantLimits === null || typeof settings.tenantLimits !== "object" || Array.isArray(settings.tenantLimits)) {
        problems.push("[tenantLimits] must be an object of tenant ids to limits");
    } else {
        for (const [tenant, limit] of Object.entries(settings.tenantLimits)) {
            const problem = limitProblem(`tenantLimits.${tenant}`, limit);
            if (problem) {
                problems.push(problem);
            }
        }
    }
    if (problems.length > 0) {
        throw new ApiSettingsError(problems);
    }
    return settings;
}

/** The function's environment: the component's `apiEnvironment` output and the API's settings. */
export function apiEnvironment(counterEnvironment: Readonly<Record<string, string>>, settings: ApiSettings): Record<string, string> {
    validateApiSettings(settings);
    return {
        ...counterEnvironment,
        [API_ENV.mode]: settings.mode,
        [API_ENV.defaultLimit]: String(settings.defaultLimit),
        [API_ENV.tenantLimits]: JSON.stringify(settings.tenantLimits),
    };
}

/** Reads the API's settings back; throws ApiSettingsError naming each bad variable. */
export function apiSettingsFromEnv(env: Readonly<Record<string, string | undefined>>): ApiSettings {
    const mode = env[API_ENV.mode] as CounterMode;
    const limitText = env[API_ENV.defaultLimit] ?? "";
    const defaultLimit = /^\d+$/.test(limitText) ? Number(limitText) : NaN;
    let tenantLimits: Record<string, number>;
    try {
        tenantLimits = JSON.parse(env[API_ENV.tenantLimits] ?? "{}") as Record<string, number>;
    } catch {
        throw new ApiSettingsError([`[${API_ENV.tenantLimits}] must be a JSON object`]);
    }
    return validateApiSettings({ mode, defaultLimit, tenantLimits });
}

/** The limit of one tenant. */
export function limitFor(settings: ApiSettings): (tenant: string) => number {
    return (tenant) =>
        Object.prototype.hasOwnProperty.call(settings.tenantLimits, tenant) ? settings.tenantLimits[tenant]! : settings.defaultLimit;
}
