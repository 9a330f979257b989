/**
 * The consumer's part of the heal index: it puts on the index the keys whose best-effort a record shows may have
 * moved away from the live items, where no client call knew it (runtime/shared/best-effort-marks.ts).
 *
 * The client's own writes keep best-effort exact, or the call itself marks the key: a put with its token (INSERT),
 * a soft delete (MODIFY to deleted = true, same token), the removal of a soft-deleted item (REMOVE) and updates that
 * change no membership need no heal. Every other change of a live item does, whoever made it:
 *   - REMOVE of a live item: TTL or another writer deleted it (a client life's unit, or a strict backfill's, is held
 *     in strict mode and above the live items in utilization mode);
 *   - MODIFY that changes membership other than by a soft delete (another writer moved it across the selection), or
 *     that changes the client token (another writer replaced a client item, or put a client life over its item);
 *   - a late put attempt of a removed life, which the consumer removes (runtime/stream/markers.ts): a heal may have
 *     counted it while it was in the table.
 * A drifted key's mark is one conditional write per key per batch (`attribute_exists(count)`: a key no client or
 * backfill ever wrote has no best-effort to heal), after the batch's transactions. It never fails the batch: a mark
 * that cannot be written is logged and counted (`HealDueFailures`), and the settler's audit still reaches the key.
 *
 * A sharded key (runtime/shards/layout.ts) is marked the same way, on shard 0's best-effort item (the key's own
 * partition key, the item the heal index maps back to the key). Its units may all be homed in other shards, so
 * shard 0 may have no best-effort item while the key has best-effort to heal: when the conditional mark finds
 * none and the key has more than one shard, the key's counters are read (every shard, runtime/shards/read.ts),
 * and if any shard holds a best-effort count the mark is written without the condition (it then creates shard
 * 0's item with the mark alone, as the client's own mark does). A key no client or backfill wrote in any shard
 * is still left alone. A key the shard count refuses (`shardedKeyProblem`) is never marked: its records are
 * parked (records.ts), and its partition key could name another key's shard.
 */
import { ConditionalCheckFailedException, UpdateItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { describeError, isRetryable } from "../shared/aws-errors";
import { dueMarkInput } from "../shared/best-effort-marks";
import type { CounterTableConfig } from "../shared/config";
import { readKeyCounters } from "../shards/read";
import { shardCount, shardedKeyProblem } from "../shards/layout";
import type { ClassifyingLayout } from "./records";
import { FOREIGN_DELETE_ATTRIBUTE, ownsImage } from "../regions/ownership";
import { withRetries } from "../shared/retry";
import { isLive, isSelected, isSoftDeleted, type ItemImage } from "../shared/selection";
import type { Logger, Metrics } from "../shared/telemetry";

/** The consumer's log message for a mark it could not write (the key is then the audit's). */
export const HEAL_DUE_FAILED = "could not put the key on the heal index; the settler's audit will reach it";

/** Attempts of one key's mark (retryable errors only). */
const MARK_ATTEMPTS = 3;

/** The counter key whose best-effort the record may have moved away from its items, if any (see the header). */
export function driftedKey(record: DynamoDBRecord, layout: ClassifyingLayout): string | undefined {
    const stream = record?.dynamodb;
    const key = (stream?.Keys?.[layout.partitionKey] as { S?: unknown } | undefined)?.S;
    const id = (stream?.Keys?.[layout.sortKey] as { S?: unknown } | undefined)?.S;
    if (typeof key !== "string" || typeof id !== "string" || id.startsWith(layout.counterPrefix)) {
        return undefined;
    }
    if (shardedKeyProblem(key, shardCount(layout)) !== undefined) {
        return undefined;
    }
    const before = image(stream?.OldImage);
    const after = image(stream?.NewImage);
    if (layout.regions !== undefined) {
        // Regions (runtime/regions/): this region heals only its own lives' units. A soft delete another region made
        // of a life this region owns moved no unit (its client cannot write this region's items): heal it back.
        if (!ownsImage(layout, before) && !ownsImage(layout, after)) {
            return undefined;
        }
        if (
            record.eventName === "MODIFY" &&
            after !== undefined &&
            (after[FOREIGN_DELETE_ATTRIBUTE] as { S?: unknown } | undefined)?.S !== undefined
        ) {
            return isLive(before, layout) && ownsImage(layout, before) ? key : undefined;
        }
    }
    if (record.eventName === "REMOVE") {
        return isLive(before, layout) ? key : undefined;
    }
    if (record.eventName !== "MODIFY" || before === undefined || after === undefined) {
        return undefined;
    }
    const token = (item: ItemImage): unknown => (item[layout.tokenAttribute] as { S?: unknown } | undefined)?.S;
    if (token(before) !== token(after)) {
        return key;
    }
    const softDelete = isLive(before, layout) && isSelected(after, layout) && isSoftDeleted(after, layout);
    return isLive(before, layout) !== isLive(after, layout) && !softDelete ? key : undefined;
}

/** Puts each of `keys` that has a best-effort item on the heal index; never throws (see the header). */
export async function markKeysDue(
    keys: ReadonlySet<string>,
    deps: {
        readonly config: CounterTableConfig;
        readonly dynamodb: DynamoDBClient;
        readonly logger: Logger;
        readonly metrics: Metrics;
        readonly now?: () => number;
    },
): Promise<void> {
    const now = deps.now ?? Date.now;
    const mark = (key: string, onlyIfCounted: boolean) =>
        withRetries(
            () => deps.dynamodb.send(new UpdateItemCommand(dueMarkInput(deps.config, key, now(), { onlyIfCounted }))),
            isRetryable,
            MARK_ATTEMPTS,
        );
    for (const key of keys) {
        try {
            try {
                await mark(key, true);
            } catch (error) {
                if (!(error instanceof ConditionalCheckFailedException) || shardCount(deps.config) === 1) {
                    throw error;
                }
                // Shard 0 holds no best-effort: mark it still when another shard does (see the header).
                const counters = await withRetries(
                    () => readKeyCounters(deps.dynamodb, deps.config, key, [deps.config.countAttribute]),
                    isRetryable,
                    MARK_ATTEMPTS,
                );
                if (!counters.shards.some((shard) => shard.bestEffort?.[deps.config.countAttribute] !== undefined)) {
                    throw error;
                }
                await mark(key, false);
            }
            deps.metrics.add("KeysMarkedDue");
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                continue;
            }
            deps.metrics.add("HealDueFailures");
            deps.logger.log("warn", HEAL_DUE_FAILED, {
                counterKey: key,
                error: describeError(error),
            });
        }
    }
}

function image(value: unknown): ItemImage | undefined {
    return value !== null && typeof value === "object" ? (value as ItemImage) : undefined;
}
