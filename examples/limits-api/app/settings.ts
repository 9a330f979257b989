/**
 * The limits the Pulumi program stores when it deploys: every tenant's default, and the limits of the tenants that
 * have their own. Pure: the program checks them with {@link validateLimitSettings} and sends them to the function
 * once per change, as a {@link StoreLimitsEvent} (an `aws.lambda.Invocation`); the function stores them with the
 * counter's own `setDefaultLimit` and `setLimit`, and every create is then checked against the stored limits.
 */

export interface LimitSettings {
    /** The limit of every tenant without one of its own. */
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

/** The problem with a limit (undefined: none): a non-negative safe integer. */
export function limitProblem(name: string, value: unknown): string | undefined {
    return typeof value === "number" && Number.isSafeInteger(value) && value >= 0
        ? undefined
        : `[${name}] must be a non-negative integer; found ${JSON.stringify(value)}`;
}

/** Checks the settings (from stack config); throws ApiSettingsError listing every problem. */
export function validateLimitSettings(settings: LimitSettings): LimitSettings {
    const problems: string[] = [];
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

/** What the program's deploy-time invocation sends the function: store these limits. */
export interface StoreLimitsEvent extends LimitSettings {
    readonly action: "storeLimits";
}

/** The event that stores `settings` (checked first). */
export function storeLimitsEvent(settings: LimitSettings): StoreLimitsEvent {
    validateLimitSettings(settings);
    return { action: "storeLimits", defaultLimit: settings.defaultLimit, tenantLimits: settings.tenantLimits };
}

/** Is this invocation the program's, rather than an HTTP request? */
export function isStoreLimitsEvent(event: unknown): event is StoreLimitsEvent {
    return typeof event === "object" && event !== null && (event as { action?: unknown }).action === "storeLimits";
}
