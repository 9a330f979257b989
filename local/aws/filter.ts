/**
 * Lambda event filtering, as applied to stream records before invocation: a record is delivered if
 * it matches any of the patterns; records that match none are dropped (and never retried).
 *
 * Supports the pattern syntax Lambda documents for DynamoDB sources: exact values, `exists`,
 * `prefix`, `anything-but` and `numeric`, nested under object keys.
 *
 * Lambda's filters are EventBridge patterns: the record is flattened to its leaf paths, and each rule of a pattern
 * tests the value at its path. So a rule under a parent the record does not have tests an absent value: only
 * `{"exists": false}` matches it (EventBridge, "Content filtering": `exists: false` matches an event that does not
 * have the field; exists matching works on leaf nodes only). A multi-region counter's home region relies on it:
 * `{"hc_region": {"S": [{"exists": false}]}}` matches an image with no stamp, whose `hc_region.S` path is absent
 * because `hc_region` is (docs/design/global-tables.md, "The stream filter").
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export function parsePattern(pattern: string): Record<string, Json> {
    if (pattern.length > 4096) {
        throw new Error("[pattern] must be at most 4096 characters");
    }
    const parsed = JSON.parse(pattern) as Json;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new Error("[pattern] must be a JSON object");
    }
    return parsed;
}

export function matchesAny(record: unknown, patterns: ReadonlyArray<Record<string, Json>>): boolean {
    return patterns.length === 0 || patterns.some((p) => matches(record, p));
}

export function matches(value: unknown, pattern: Record<string, Json>): boolean {
    for (const [key, sub] of Object.entries(pattern)) {
        const field = value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined;
        if (Array.isArray(sub)) {
            if (!sub.some((rule) => matchesRule(field, rule))) {
                return false;
            }
        } else if (sub !== null && typeof sub === "object") {
            // An absent parent: every rule below it tests an absent leaf (only `exists: false` matches one).
            if (!matches(field, sub)) {
                return false;
            }
        } else {
            throw new Error(`[pattern.${key}] must be an object or an array of rules`);
        }
    }
    return true;
}

function matchesRule(field: unknown, rule: Json): boolean {
    if (rule === null || typeof rule !== "object") {
        return field !== undefined && field === rule;
    }
    if (Array.isArray(rule)) {
        throw new Error("a filter rule must not be an array");
    }
    if ("exists" in rule) {
        return rule.exists === (field !== undefined);
    }
    if ("prefix" in rule) {
        return typeof field === "string" && typeof rule.prefix === "string" && field.startsWith(rule.prefix);
    }
    if ("anything-but" in rule) {
        const excluded = rule["anything-but"];
        const list = Array.isArray(excluded) ? excluded : [excluded];
        return field !== undefined && !list.includes(field as Json);
    }
    if ("numeric" in rule && Array.isArray(rule.numeric)) {
        const n = typeof field === "number" ? field : typeof field === "string" ? Number(field) : NaN;
        if (Number.isNaN(n)) {
            return false;
        }
        const ops = rule.numeric;
        for (let i = 0; i + 1 < ops.length; i += 2) {
            const op = ops[i];
            const bound = Number(ops[i + 1]);
            const ok =
                op === "="
                    ? n === bound
                    : op === ">"
                      ? n > bound
                      : op === ">="
                        ? n >= bound
                        : op === "<"
                          ? n < bound
                          : op === "<="
                            ? n <= bound
                            : false;
            if (!ok) {
                return false;
            }
        }
        return true;
    }
    throw new Error(`unsupported filter rule ${JSON.stringify(rule)}`);
}
