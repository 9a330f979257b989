/**
 * `heal [--key K]`: with a key, heals its best-effort from its items and its young ledger, every shard of it
 * (runtime/heal/heal.ts `healKey`), and removes the tombstones no put attempt can reach any more; without, one settler
 * run (runtime/heal/settle.ts `settle`): the keys the heal index lists as due, then a page of the audit (which heals
 * the keys nobody listed that look off). Both work by
 * the counter's mode and period, as the deployed settler does; Ctrl-C stops them between shards or keys.
 */
import { healKey, type HealResult } from "../runtime/heal/heal";
import { settle, SETTLER_DEFAULTS, type SettleReport } from "../runtime/heal/settle";
import { EXIT } from "./context";
import { table } from "./format";
import { integerFlag, keyFlag } from "./options";
import type { CliCommand } from "./command";

interface HealFlags {
    key?: string;
    budget?: string;
    auditPageSize?: string;
}

function healText(result: HealResult): string {
    const shards = result.shards.map(
        (s) =>
            `${result.shards.length > 1 || result.shards[0]!.shard > 0 ? `shard ${s.shard}: ` : ""}best-effort ${s.before} -> ${s.after}`,
    );
    const lines = [
        `${result.key}: ${result.healed ? "healed" : "not healed: writes met every attempt (the key stays listed; run it again)"}`,
    ];
    lines.push(...shards.map((s) => `  ${s}`));
    if (result.removed > 0) {
        lines.push(`  ${result.removed} tombstone(s) removed`);
    }
    if (result.dueAgainAt !== undefined) {
        lines.push(`  listed again for ${new Date(result.dueAgainAt).toISOString()}: young lives, claims or tombstones to settle then`);
    }
    return lines.join("\n");
}

function settleText(report: SettleReport): string {
    return [
        table(
            ["due", "healed", "corrected", "drift closed", "raced", "tombstones removed", "audited", "healed by the audit"],
            [[report.due, report.healed, report.corrected, report.drift, report.raced, report.removed, report.audited, report.auditHealed]],
        ),
        ...(report.failedKeys.length > 0 ? [`failed keys (run it again): ${report.failedKeys.join(", ")}`] : []),
    ].join("\n");
}

export const healCommand: CliCommand = {
    name: "heal",
    register(program, run) {
        program
            .command("heal")
            .description(
                "bring best-effort to what the items and the young ledger say (held slots come back, tombstones go), by the " +
                    "counter's mode; without --key, one settler run",
            )
            .option("--key <key>", "heal this key only")
            .option("--budget <n>", `keys from the heal index per run, 1..10000 (default ${SETTLER_DEFAULTS.keyBudget})`)
            .option("--audit-page-size <n>", `counter items the audit reads per run, 1..10000 (default ${SETTLER_DEFAULTS.auditItems})`)
            .action(
                run<HealFlags>(async (ctx, flags) => {
                    const key = flags.key === undefined ? undefined : keyFlag("--key", flags.key);
                    const keyBudget = integerFlag("--budget", flags.budget, 1, 10_000);
                    const auditItems = integerFlag("--audit-page-size", flags.auditPageSize, 1, 10_000);
                    ctx.modedConfig("heal");
                    const base = { config: await ctx.countedConfig(), dynamodb: ctx.dynamodb(), signal: ctx.abort.signal };
                    if (key !== undefined) {
                        const result = await healKey(key, base);
                        ctx.result(result, () => healText(result));
                        if (result.healed) {
                            return EXIT.ok;
                        }
                        return ctx.abort.signal.aborted ? EXIT.interrupted : EXIT.failed;
                    }
                    const report = await settle({
                        ...base,
                        ...(keyBudget === undefined ? {} : { keyBudget }),
                        ...(auditItems === undefined ? {} : { auditItems }),
                    });
                    ctx.result(report, () => settleText(report));
                    if (ctx.abort.signal.aborted) {
                        return EXIT.interrupted;
                    }
                    return report.failedKeys.length > 0 ? EXIT.failed : EXIT.ok;
                }),
            );
    },
};
