/**
 * `limits get --key K | set (--key K | --default) --limit N|none | list`: the stored limits (runtime/limits/limits.ts):
 * a key's own, the counter's default, and where the limit a key runs under comes from. A key's limit is one item
 * every region shares; a change applies to the next call (docs/limits.md).
 */
import { readLimits, resolveLimit, writeDefaultLimit, writeKeyLimit, type ResolvedLimit } from "../runtime/limits/limits";
import { listLimits } from "../runtime/ops/limits";
import { UsageError } from "./context";
import { table } from "./format";
import { keyFlag, limitFlag } from "./options";
import type { CliCommand } from "./command";

const SOURCE: Record<ResolvedLimit["source"], string> = { key: "the key's own", default: "the counter's default", none: "" };

function setFlags(options: { key?: string; default?: boolean; limit?: string }): { key?: string; limit: number | null } {
    if ((options.key === undefined) === (options.default !== true)) {
        throw new UsageError(options.key === undefined ? "--key <key> or --default is required" : "--key and --default exclude each other");
    }
    if (options.limit === undefined) {
        throw new UsageError("--limit <n> is required: a non-negative integer, or none to remove the limit");
    }
    const limit = limitFlag(options.limit);
    return options.key === undefined ? { limit } : { key: keyFlag("--key", options.key), limit };
}

export const limitsCommand: CliCommand = {
    name: "limits",
    register(program, run) {
        const limits = program.command("limits").description("read and store limits: a key's own, and the counter's default");
        limits
            .command("get")
            .description("the limit a key runs under and where it comes from: key, default or none")
            .requiredOption("--key <key>", "the counter key")
            .action(
                run<{ key: string }>(async (ctx, options) => {
                    const key = keyFlag("--key", options.key);
                    const resolved = resolveLimit(await readLimits(ctx.dynamodb(), ctx.target().config, key));
                    ctx.result({ key, limit: resolved.limit ?? null, source: resolved.source }, () =>
                        resolved.limit === undefined ? `${key}: no limit` : `${key}: limit ${resolved.limit} (${SOURCE[resolved.source]})`,
                    );
                }),
            );
        limits
            .command("set")
            .description("store a key's limit (--key) or the default (--default); --limit none removes it")
            .option("--key <key>", "the counter key")
            .option("--default", "the counter's default limit, for keys without one of their own")
            .option("--limit <n>", "a non-negative integer, or none")
            .action(
                run<{ key?: string; default?: boolean; limit?: string }>(async (ctx, options) => {
                    const { key, limit } = setFlags(options);
                    const config = ctx.target().config;
                    if (key === undefined) {
                        await writeDefaultLimit(ctx.dynamodb(), config, limit);
                        ctx.result({ default: limit }, () => (limit === null ? "default limit removed" : `default limit set to ${limit}`));
                        return;
                    }
                    await writeKeyLimit(ctx.dynamodb(), config, key, limit);
                    ctx.result({ key, limit }, () =>
                        limit === null
                            ? `${key}: its own limit removed (it runs under the default, if any)`
                            : `${key}: limit set to ${limit}`,
                    );
                }),
            );
        limits
            .command("list")
            .description("every key with a limit of its own, and the default (scans the counters table)")
            .action(
                run<object>(async (ctx) => {
                    const stored = await listLimits(ctx.dynamodb(), ctx.target().config, { signal: ctx.abort.signal });
                    ctx.result({ default: stored.default ?? null, keys: stored.keys }, () =>
                        [
                            stored.default === undefined ? "no default limit" : `default limit ${stored.default}`,
                            stored.keys.length === 0
                                ? "no key has a limit of its own"
                                : table(
                                      ["key", "limit"],
                                      stored.keys.map((k) => [k.key, k.limit]),
                                  ),
                        ].join("\n"),
                    );
                }),
            );
    },
};
