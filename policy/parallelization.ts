/**
 * Stack policies on the event source mapping of a hybrid counter's consumer: the stream shard's batches one at a
 * time (`parallelizationFactor` 1), and the event naming its stream shard (a tumbling window).
 *
 * Why (docs/design/core.md, "Eventual: one conditional write per key per batch"): the consumer keeps, on each key's
 * eventual item, a mark per stream shard (the last record of that shard it applied to the key), and on each stream
 * shard's progress item the ranges its batches opened. It applies a key's records above the mark and moves the mark
 * to the last of them; a batch that begins above an open range takes that range as one Lambda gave up on and re-reads
 * it from the stream. Both rest on Lambda delivering a shard's batches one after another:
 * - with `parallelizationFactor` F above 1, Lambda runs F batches of one stream shard at once, ordered per item only:
 *   a later batch can move a key's mark past records of the key an earlier batch still holds, which then count as
 *   applied and never are. The count is wrong, not slow: mandatory;
 * - the marks and the ranges are keyed by the stream shard the event names (`shardId`), which Lambda sets only when
 *   the mapping has a tumbling window (`tumblingWindowInSeconds` 1..900); without one the consumer refuses every
 *   batch, and nothing is counted: mandatory.
 *
 * A consumer is a function whose environment names the counter's table (`HYBRID_COUNTER_TABLE_NAME`).
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

export type CounterParallelizationConfig = ExemptionConfig;

/** The largest tumbling window Lambda takes (s). */
export const LAMBDA_MAX_TUMBLING_WINDOW_SECONDS = 900;

/** Runs `check` on every stream mapping that invokes a function known to be a counter's consumer. */
function eachCounterMapping(
    args: Parameters<typeof countedStreams>[0],
    check: (stream: StreamMapping, consumer: PolicyResource) => void,
): void {
    for (const { stream, consumers } of countedStreams(args)) {
        // A consumer whose environment is unknown during preview is checked during the update.
        const known = consumers.find((c) => isCounterConsumer(c) === true);
        if (known !== undefined) {
            check(stream, known);
        }
    }
}

export const streamMappingCounterParallelization = stackPolicy<CounterParallelizationConfig>({
    name: "stream-mapping-counter-parallelization",
    description:
        "An event source mapping that invokes a hybrid counter's consumer keeps parallelizationFactor at 1 (Lambda's default): the consumer marks, " +
        "on each key, the last record of each stream shard it applied, which needs the batches of one stream shard applied one at a time. " +
        "Without it, a later batch moves a key's mark past records an earlier batch still holds, and they are never counted.",
    remediationSteps: "Set parallelizationFactor to 1 (or leave it unset) on the event source mapping; the component always does.",
    enforcementLevel: "mandatory",
    config: {},
    check: (args, _config, reportViolation) =>
        eachCounterMapping(args, ({ mapping }, fn) => {
            const factor = read(() => mapping.props.parallelizationFactor as unknown);
            if (isUnknown(factor) || (factor ?? LAMBDA_DEFAULT_PARALLELIZATION_FACTOR) === 1) {
                return;
            }
            reportViolation(
                `event source mapping '${mapping.name}' (DynamoDB stream) invokes the counter's consumer '${fn.name}' with ` +
                    `[parallelizationFactor] ${show(factor)}; the consumer's marks need the batches of one stream shard applied one at a time: set it to 1`,
                mapping.urn,
            );
        }),
});

export type CounterTumblingWindowConfig = ExemptionConfig;

export const streamMappingCounterTumblingWindow = stackPolicy<CounterTumblingWindowConfig>({
    name: "stream-mapping-counter-tumbling-window",
    description:
        "An event source mapping that invokes a hybrid counter's consumer sets tumblingWindowInSeconds (1 to 900), so that each event names " +
        "its stream shard (shardId), by which the consumer keys its marks and its open ranges. Without it the consumer refuses every batch, " +
        "and nothing is counted.",
    remediationSteps: "Set tumblingWindowInSeconds between 1 and 900 on the event source mapping (the component sets 900).",
    enforcementLevel: "mandatory",
    config: {},
    check: (args, _config, reportViolation) =>
        eachCounterMapping(args, ({ mapping }, fn) => {
            const window = read(() => mapping.props.tumblingWindowInSeconds as unknown);
            if (isUnknown(window)) {
                return;
            }
            if (typeof window === "number" && Number.isInteger(window) && window >= 1 && window <= LAMBDA_MAX_TUMBLING_WINDOW_SECONDS) {
                return;
            }
            reportViolation(
                `event source mapping '${mapping.name}' (DynamoDB stream) invokes the counter's consumer '${fn.name}' with ` +
                    `[tumblingWindowInSeconds] ${show(window)}; the event names its stream shard, which the consumer's marks are keyed by, ` +
                    `only with a tumbling window: set it between 1 and ${LAMBDA_MAX_TUMBLING_WINDOW_SECONDS}`,
                mapping.urn,
            );
        }),
});
