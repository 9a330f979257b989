/**
 * `usage --key K --days N [--csv]`: a key's usage history over its last N UTC days, today included
 * (runtime/limits/usage.ts): per day that had any, the creates, the deletes, the peak of the eventual count and the
 * limit in force. A human table by default, `--json`, or `--csv` with a header line.
 */
import { readRecentUsage, type RecentUsage } from "../runtime/ops/limits";
import { UsageError } from "./context";
import { table } from "./format";
import { integerFlag, keyFlag } from "./options";
import type { CliCommand } from "./command";

/** The days as CSV: a header line `day,creates,deletes,peak,limit`, then a line per day (limit empty: none). */
export function usageCsv(usage: RecentUsage): string {
    return [
        "day,creates,deletes,peak,limit",
        ...usage.days.map((d) => `${d.day},${d.creates},${d.deletes},${d.peak},${d.limit ?? ""}`),
    ].join("\n");
}

function usageText(usage: RecentUsage): string {
    if (usage.days.length === 0) {
        return `${usage.key}: no usage from ${usage.from} to ${usage.to}`;
    }
    return [
        `${usage.key}: usage from ${usage.from} to ${usage.to} (UTC days with any)`,
        table(
            ["day", "creates", "deletes", "peak", "limit"],
            usage.days.map((d) => [d.day, d.creates, d.deletes, d.peak, d.limit === undefined ? "-" : String(d.limit)]),
        ),
    ].join("\n");
}

export const usageCommand: CliCommand = {
    name: "usage",
    register(program, run) {
        program
            .command("usage")
            .description("a key's usage per UTC day over its last --days days, today included: creates, deletes, peak, limit")
            .requiredOption("--key <key>", "the counter key")
            .requiredOption("--days <n>", "how many days, 1..3650")
            .option("--csv", "print CSV with a header line: day,creates,deletes,peak,limit")
            .action(
                run<{ key: string; days: string; csv?: boolean }>(async (ctx, options) => {
                    const key = keyFlag("--key", options.key);
                    const days = integerFlag("--days", options.days, 1, 3_650)!;
                    if (options.csv && ctx.json) {
                        throw new UsageError("--csv and --json exclude each other");
                    }
                    const usage = await readRecentUsage(ctx.dynamodb(), await ctx.countedConfig(), key, days);
                    if (options.csv) {
                        ctx.out.write(`${usageCsv(usage)}\n`);
                        return;
                    }
                    ctx.result(usage, () => usageText(usage));
                }),
            );
    },
};
