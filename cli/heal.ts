/**
 * `heal [--key K]`: heals best-effort from the table (runtime/heal/heal.ts) for one key, every shard of it (each
 * shard's outcome listed), or runs what the scheduled settler runs (runtime/heal/settle.ts): the keys the heal
 * index lists, then a bounded audit. A key is settled first, as the settler settles it (reconcile removes a late put
 * of a removed life, which a heal would count as live), and not healed when its settle comes back incomplete.
 */
import { healKey, type HealResult } from "../runtime/heal/heal";
import { reconcileKey } from "../runtime/heal/reconcile";
import { settle, type SettleReport } from "../runtime/heal/settle";
import { EXIT, UsageError } from "./context";
import { table } from "./format";
import { integerFlag, modeFlag } from "./options";
import { fatalFor, unparkedLines } from "./reconcile";
import type { CliCommand } from "./command";

interface HealFlags {
    key?: string;
    mode?: string;
    quietWindowSeconds?: string;
    budget?: string;
    auditSegments?: string;
    auditPageSize?: string;
}

export const healCommand: CliCommand = {
    name: "heal",
    register(program, run) {
        program
            .command("heal")
            .description("set best-effort to the live items of quiet keys (held slots come back); without --key, one settler run")
            .requiredOption("--mode <mode>", "the mode every client of the keys uses: utilization or strict")
            .option("--key <key>", "heal this key only")
            .option("--quiet-window-seconds <s>", "only heal keys with no client write for this long, 1..86400 (default 600)")
            .option("--budget <n>", "keys from the heal index per run, 1..100000 (default 200)")
            .option("--audit-segments <n>", "audit Scan segments, 0 turns the audit off (default 4)")
            .option("--audit-page-size <n>", "audit items per segment page (default 100)")
            .action(
                run<HealFlags>(async (ctx, flags) => {
                    const mode = modeFlag(flags.mode);
                    const quietWindowMs = (integerFlag("--quiet-window-seconds", flags.quietWindowSeconds, 1, 86_400) ?? 600) * 1000;
                    if (flags.key?.length === 0) {
                        throw new UsageError("--key must not be empty");
                    }
                    const runFlags = {
                        keyBudget: integerFlag("--budget", flags.budget, 1, 100_000),
                        auditSegments: integerFlag("--audit-segments", flags.auditSegments, 0, 1_000),
                        auditPageSize: integerFlag("--audit-page-size", flags.auditPageSize, 1, 10_000),
                    };
                    const base = { config: (await ctx.countedTarget()).table, dynamodb: ctx.dynamodb(), mode, quietWindowMs };
                    if (flags.key !== undefined) {
                        const fatal = fatalFor(ctx);
                        const { key: _key, ...settled } = await reconcileKey(flags.key, {
                            config: base.config,
                            dynamodb: base.dynamodb,
                            fatal,
                        });
                        if (settled.incomplete) {
                            ctx.result({ key: flags.key, outcome: "unsettled", settled, unparked: fatal.unparked }, () =>
                                [
                                    ...unparkedLines(fatal.unparked),
                                    `${flags.key}: could not be settled yet (contention or throttling), so not healed: run it again`,
                                ].join("\n"),
                            );
                            return EXIT.failed;
                        }
                        const result: HealResult = await healKey(flags.key, base);
                        ctx.result(
                            { ...result, settled, unparked: fatal.unparked },
                            () =>
                                (settled.found > 0
                                    ? `${result.key}: settled first: ${settled.found} found, ${settled.counted} committed, ` +
                                      `${settled.alreadySettled} settled meanwhile\n`
                                    : "") +
                                unparkedLines(fatal.unparked)
                                    .map((line) => `${line}\n`)
                                    .join("") +
                                (result.shards === undefined
                                    ? result.outcome === "healed"
                                        ? `${result.key}: healed, best-effort ${result.before ?? 0} -> ${result.after}`
                                        : `${result.key}: ${result.outcome}${result.reason ? ` (${result.reason})` : ""}; nothing changed`
                                    : [
                                          `${result.key}: ${result.outcome}${result.reason ? ` (${result.reason})` : ""}`,
                                          ...result.shards.map((s) =>
                                              s.outcome === "healed"
                                                  ? `  shard ${s.shard}: healed, best-effort ${s.before ?? 0} -> ${s.after}`
                                                  : `  shard ${s.shard}: ${s.outcome}${s.reason ? ` (${s.reason})` : ""}; nothing changed`,
                                          ),
                                      ].join("\n")),
                        );
                        return fatal.unparked.length > 0 ? EXIT.failed : EXIT.ok;
                    }
                    const fatal = fatalFor(ctx);
                    const report: SettleReport = await settle({ ...base, fatal, ...runFlags });
                    ctx.result({ ...report, unparked: fatal.unparked }, () =>
                        [
                            table(
                                ["keys (index)", "keys (audit)", "healed", "corrected", "drift closed", "raced", "settled"],
                                [
                                    [
                                        report.keysFromIndex,
                                        report.keysFromAudit,
                                        report.healed,
                                        report.corrected,
                                        report.drift,
                                        report.raced,
                                        report.settleCounted,
                                    ],
                                ],
                            ),
                            `${report.readUnits.toFixed(1)} RCU, ${report.writeUnits.toFixed(1)} WCU`,
                            ...(report.failedKeys.length > 0 ? [`failed keys (run it again): ${report.failedKeys.join(", ")}`] : []),
                            ...unparkedLines(fatal.unparked),
                        ].join("\n"),
                    );
                    return report.failedKeys.length > 0 || fatal.unparked.length > 0 ? EXIT.failed : EXIT.ok;
                }),
            );
    },
};
