/**
 * Stack policy: a hybrid counter's consumer runs several batches of one stream shard at once only when each
 * key's counting is spread over at least as many counter shards.
 *
 * Why (docs/design/sharded-counters.md, "The consumer and the eventual counter"): the consumer counts a batch in
 * transactions grouped by key and counter shard, and each transaction updates that shard's eventual partial (one
 * item per key and shard; runtime/shards/layout.ts). With `parallelizationFactor` F above 1, Lambda runs F
 * batches of one stream shard at once (order is then kept per item, not per partition), so batches holding
 * records of one key commit transactions at the same moment, and two that update the same shard's partial
 * conflict: DynamoDB cancels one with a TransactionConflict reason and the consumer retries it as contention.
 * The count stays exact either way; the factor costs retries and lag, never correctness, hence advisory.
 *
 * - Counter shards N = 1 (the default): every transaction of a key updates the key's one eventual item, so any
 *   two concurrent batches of one key conflict. Reported.
 * - N >= F: the F concurrent batches have as many partials as batches to spread over; a conflict is the
 *   exception (two batches on one shard at one moment), retried like any other. Passes: this is what sharding
 *   a key is for, and what the design asks of a factor above 1.
 * - 1 < N < F: more batches run at once than a key has partials, so some always share one (pigeonhole): fewer
 *   conflicts than with one shard, but not the exception. Reported, at the policy's one level (advisory by
 *   default; a stack policy reports every violation at its own level), with both fixes: N up to F, or F down to N.
 *
 * The shard count is read where the consumer reads it: its `HYBRID_COUNTER_COUNTER_SHARDS` environment variable
 * (absent or empty means 1, as runtime/shared/config.ts reads it). A value the runtime would refuse (not an
 * integer from 1 to 16) spreads nothing, so it counts as 1 and the message shows it.
 */

import type { PolicyResource } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { streamMappings, type StreamMapping } from "./graph";
import { isUnknown, read, show, type Maybe } from "./unknowns";

/**
 * The environment variable every consumer of a hybrid counter is configured by (the user's table name;
 * runtime/shared/config.ts, `ENV.tableName`). Written out here because `policy/` imports nothing outside itself.
 */
export const COUNTER_CONSUMER_VARIABLE = "HYBRID_COUNTER_TABLE_NAME";

/**
 * The environment variable a consumer reads its counter shard count from, set when above 1
 * (runtime/shared/config.ts, `ENV.counterShards`; the component's `counterShards` arg).
 */
export const COUNTER_SHARDS_VARIABLE = "HYBRID_COUNTER_COUNTER_SHARDS";

/** The most counter shards a key's counting may spread over (runtime/shared/config.ts, `COUNTER_SHARDS_MAX`). */
export const COUNTER_SHARDS_MAX = 16;

/** Lambda's default parallelizationFactor. */
export const LAMBDA_DEFAULT_PARALLELIZATION_FACTOR = 1;

function environmentOf(fn: PolicyResource): Maybe<Record<string, unknown>> {
    return read(() => {
        const variables = fn.props.environment?.variables as Record<string, unknown> | undefined | null;
        return variables === undefined || variables === null ? {} : variables;
    });
}

/** Does this function consume a hybrid counter's stream? Unknown when its environment is not known yet. */
export function isCounterConsumer(fn: PolicyResource): Maybe<boolean> {
    const variables = environmentOf(fn);
    const names = isUnknown(variables) ? variables : read(() => Object.keys(variables));
    return isUnknown(names) ? names : names.includes(COUNTER_CONSUMER_VARIABLE);
}

/** A counter consumer's shard count as its environment sets it. */
export interface ConsumerShards {
    /** The variable's value as set (undefined when absent or empty). */
    readonly value: unknown;
    /** The shards each key's counting spreads over; undefined when the value is not a shard count (the consumer refuses it). */
    readonly counterShards: number | undefined;
}

/**
 * The counter shard count a consumer runs with, read from its environment as the runtime reads it (absent or
 * empty: 1; otherwise the number the text is, when an integer from 1 to COUNTER_SHARDS_MAX); unknown while its
 * environment, or the variable, is unknown during preview.
 */
export function counterShardsOf(fn: PolicyResource): Maybe<ConsumerShards> {
    const variables = environmentOf(fn);
    if (isUnknown(variables)) {
        return variables;
    }
    const value = read(() => variables[COUNTER_SHARDS_VARIABLE]);
    if (isUnknown(value)) {
        return value;
    }
    if (value === undefined || value === null || value === "") {
        return { value: undefined, counterShards: 1 };
    }
    // Lambda stores every variable as a string; a number in a program's source becomes its text.
    const count = typeof value === "string" || typeof value === "number" ? Number(value) : NaN;
    return { value, counterShards: Number.isInteger(count) && count >= 1 && count <= COUNTER_SHARDS_MAX ? count : undefined };
}

export type CounterParallelizationConfig = ExemptionConfig;

/**
 * Every event source mapping of the stack with the functions it invokes that may be a hybrid counter's consumer (not
 * certainly another function); the policy is not applicable when none is.
 */
export function countedStreams(args: {
    readonly resources: readonly PolicyResource[];
    readonly notApplicable: (reason?: string) => never;
}): Array<{ readonly stream: StreamMapping; readonly consumers: PolicyResource[] }> {
    const counted = streamMappings(args.resources).map((stream) => ({
        stream,
        consumers: stream.functions.filter((fn) => isCounterConsumer(fn) !== false),
    }));
    if (!counted.some(({ consumers }) => consumers.length > 0)) {
        args.notApplicable("no event source mapping in this stack invokes a hybrid counter's consumer");
    }
    return counted;
}

export const streamMappingCounterParallelization = stackPolicy<CounterParallelizationConfig>({
    name: "stream-mapping-counter-parallelization",
    description:
        "An event source mapping that invokes a hybrid counter's consumer keeps parallelizationFactor at or below the consumer's counter shards " +
        `(${COUNTER_SHARDS_VARIABLE}, the component's counterShards; 1 when unset). ` +
        "Without it, Lambda runs more batches of one stream shard at once than a key has eventual counter items, and batches holding the same key " +
        "commit transactions on one of them: they conflict and are retried as contention, which is slower and never wrong.",
    remediationSteps:
        'Raise the counter shards to at least the factor (the component\'s counterShards, 1..16; it needs counterPlacement "separate"), ' +
        "or lower parallelizationFactor to the counter shards (1, Lambda's default and the component's, when the counters are not sharded).",
    enforcementLevel: "advisory",
    config: {},
    check: (args, _config, reportViolation) => {
        const counted = countedStreams(args);
        for (const { stream, consumers } of counted) {
            const factor = read(() => stream.mapping.props.parallelizationFactor as unknown);
            if (isUnknown(factor)) {
                continue;
            }
            const value = factor ?? LAMBDA_DEFAULT_PARALLELIZATION_FACTOR;
            if (typeof value === "number" && value <= 1) {
                continue;
            }
            // A consumer whose environment is unknown during preview is checked during the update.
            for (const fn of consumers.filter((c) => isCounterConsumer(c) === true)) {
                const shards = counterShardsOf(fn);
                if (isUnknown(shards)) {
                    continue;
                }
                // A value the consumer refuses spreads nothing: it counts as one shard.
                const counterShards = shards.counterShards ?? 1;
                if (typeof value === "number" && counterShards >= value) {
                    continue;
                }
                reportViolation(
                    `event source mapping '${stream.mapping.name}' (DynamoDB stream) invokes the counter's consumer '${fn.name}' with ` +
                        `[parallelizationFactor] ${show(value)}; ${spreadOf(shards)}, so concurrent batches of one key ` +
                        `conflict on ${counterShards === 1 ? "it" : "one of them"} and are retried as contention (slower, never wrong): ` +
                        fixFor(value, counterShards),
                    stream.mapping.urn,
                );
            }
        }
    },
});

/** What the consumer's environment makes of each key's eventual counter, for a message. */
function spreadOf({ value, counterShards }: ConsumerShards): string {
    const variable = `[${COUNTER_SHARDS_VARIABLE}] ${show(value)}`;
    if (counterShards === undefined) {
        return `each key's eventual counter is one item (${variable} is not a shard count, an integer from 1 to ${COUNTER_SHARDS_MAX})`;
    }
    return counterShards === 1
        ? `each key's eventual counter is one item (${variable})`
        : `each key's eventual counter is ${counterShards} items (${variable}), fewer than the batches that run at once`;
}

/** Both ways out: shards up to the factor, or the factor down to the shards. */
function fixFor(factor: unknown, counterShards: number): string {
    return typeof factor === "number"
        ? `raise the counter shards to ${factor}, or set the factor to ${counterShards}`
        : `set the factor to ${counterShards}`;
}
