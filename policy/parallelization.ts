/**
 * Stack policy: a hybrid counter's consumer runs one batch per stream shard at a time while each key's
 * eventual counter is one item.
 *
 * The consumer counts a batch in one transaction per key, and every transaction of a key updates that key's
 * eventual counter item. With `parallelizationFactor` above 1, Lambda runs that many batches of one shard at
 * once (order is then kept per item, not per partition), so two batches holding records of one key commit
 * transactions on the same item at the same moment: DynamoDB cancels one with a TransactionConflict reason,
 * and the consumer retries it as contention. The count stays exact; the factor buys retries and lag, not
 * throughput. What bounds a hot key is its partition (docs/limits.md), not the consumer's parallelism.
 */

import type { PolicyResource } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { streamMappings } from "./graph";
import { isUnknown, read, show, type Maybe } from "./unknowns";

/**
 * The environment variable every consumer of a hybrid counter is configured by (the user's table name;
 * runtime/shared/config.ts, `ENV.tableName`). Written out here because `policy/` imports nothing outside itself.
 */
export const COUNTER_CONSUMER_VARIABLE = "HYBRID_COUNTER_TABLE_NAME";

/**
 * Items each key's eventual counter is spread over. One for every consumer today: sharded counters are not
 * built, and when they are, the consumer's configuration will carry the count for this policy to read.
 */
export const EVENTUAL_COUNTER_SHARDS: number = 1;

/** Lambda's default parallelizationFactor. */
export const LAMBDA_DEFAULT_PARALLELIZATION_FACTOR = 1;

/** Does this function consume a hybrid counter's stream? Unknown when its environment is not known yet. */
export function isCounterConsumer(fn: PolicyResource): Maybe<boolean> {
    const names = read(() => {
        const variables = fn.props.environment?.variables as Record<string, unknown> | undefined | null;
        return variables === undefined || variables === null ? [] : Object.keys(variables);
    });
    return isUnknown(names) ? names : names.includes(COUNTER_CONSUMER_VARIABLE);
}

export type CounterParallelizationConfig = ExemptionConfig;

export const streamMappingCounterParallelization = stackPolicy<CounterParallelizationConfig>({
    name: "stream-mapping-counter-parallelization",
    description:
        "An event source mapping that invokes a hybrid counter's consumer keeps parallelizationFactor at 1 while each key's eventual counter is one item. " +
        "Without it, Lambda runs several batches of one shard at once, and batches holding the same key commit transactions on that key's one counter item: " +
        "they conflict and are retried as contention, which is slower and never wrong.",
    remediationSteps:
        "Set parallelizationFactor to 1 (Lambda's default and the component's) on the event source mapping. A hot key is bounded by its partition, " +
        "not by the consumer's parallelism; sharded counters will spread a key's counting over several items.",
    enforcementLevel: "advisory",
    config: {},
    check: (args, _config, reportViolation) => {
        const counted = streamMappings(args.resources).map((stream) => ({
            stream,
            consumers: stream.functions.filter((fn) => isCounterConsumer(fn) !== false),
        }));
        if (!counted.some(({ consumers }) => consumers.length > 0)) {
            args.notApplicable("no event source mapping in this stack invokes a hybrid counter's consumer");
        }
        for (const { stream, consumers } of counted) {
            const factor = read(() => stream.mapping.props.parallelizationFactor as unknown);
            if (isUnknown(factor) || EVENTUAL_COUNTER_SHARDS > 1) {
                continue;
            }
            const value = factor ?? LAMBDA_DEFAULT_PARALLELIZATION_FACTOR;
            // A consumer whose environment is unknown during preview is checked during the update.
            for (const fn of consumers.filter((c) => isCounterConsumer(c) === true)) {
                if (typeof value !== "number" || value > 1) {
                    reportViolation(
                        `event source mapping '${stream.mapping.name}' (DynamoDB stream) invokes the counter's consumer '${fn.name}' with ` +
                            `[parallelizationFactor] ${show(value)}; each key's eventual counter is one item, so concurrent batches of one key ` +
                            "conflict on it and are retried as contention (slower, never wrong): set it to 1",
                        stream.mapping.urn,
                    );
                }
            }
        }
    },
});
