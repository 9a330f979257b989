/**
 * Layout fields the package no longer has. A config that still sets one is refused by name rather than
 * ignored, since whoever set it expects it to matter: the layout and environment readers (config.ts), the
 * client's and the component's validation and the CLI call these. Pure; not a public entry point's export.
 */

/** Each removed layout field, with its environment variable and why it went. */
export const REMOVED_LAYOUT_FIELDS = Object.freeze({
    processedAttribute: {
        env: "HYBRID_COUNTER_PROCESSED_ATTRIBUTE",
        why: "nothing reads or writes it (the stream consumer keeps its idempotency in markers)",
    },
} as const);

/** One problem per removed layout field that `source` sets, named as `source` spells it. */
export function removedFieldProblems(source: object): string[] {
    const given = source as Record<string, unknown>;
    return Object.entries(REMOVED_LAYOUT_FIELDS)
        .filter(([field]) => given[field] !== undefined)
        .map(([field, { why }]) => `[${field}] was removed: ${why}; drop it`);
}

/** One problem per removed layout field whose environment variable `env` sets. */
export function removedEnvProblems(env: Readonly<Record<string, string | undefined>>): string[] {
    return Object.values(REMOVED_LAYOUT_FIELDS)
        .filter(({ env: name }) => env[name] !== undefined)
        .map(({ env: name, why }) => `[${name}] was removed: ${why}; unset it`);
}
