/**
 * The best-effort counter item, in the counters table, written by the API-side client (never inside a
 * transaction), by a strict backfill (inside its transaction, with the markers it flags) and by the heal of a sharded
 * key (one transaction over the shards it heals). A client write that meets such a transaction is refused with
 * TransactionConflictException, an HTTP 400 that wrote nothing: every write repeats it within the call's deadline,
 * even one sent once (below), so the caller never sees it and the count moves as if the write had come after the
 * transaction. docs/guarantees.md ("Transactions that include best-effort") lists each transaction and what a
 * client write meeting it gets.
 *
 * Every write is `ADD count :delta, hc_version :one SET hc_written_at = :now`: the version and the time tell a
 * heal that a client write happened since it read the counter (its conditional write then changes nothing). A
 * "touch" is the same write with delta 0. In strict mode every write also puts the key on the heal index (a slot
 * reserved or touched may be held by a call that never ends); in utilization mode none does, and a call whose writes
 * may have left best-effort off its items marks the key once, at its end (`markDue`,
 * runtime/shared/best-effort-marks.ts).
 *
 * Each write is retried only in its mode's safe direction. A write whose repetition could break the
 * mode's bound (an increment in utilization mode, a release in strict mode: applied twice after a
 * "500 after commit" they would overcount or free a slot still in use) is sent once: committed at most once
 * (below), and its failure is absorbed: it only loosens the bound. Every absorbed failure reaches `onFailure`.
 *
 * "Sent once" means committed at most once: such a write is repeated only after a refusal that wrote nothing (a
 * TransactionConflictException, or throttling, which DynamoDB answers before serving the request), and only while
 * every earlier attempt was one, so at most its last attempt can commit. A throttled attempt is the write not yet sent:
 * its repeat is the write sent later, within the call's deadline, as the argument below assumes of every write.
 * Why the repeat keeps the heal's argument (runtime/heal/heal.ts): a repeat is sent within the call's deadline like
 * any write of the call (A1). A heal's transaction that includes shard s commits only if no client write landed on s
 * since the heal read it, so:
 * - a strict release: its call wrote s first (the reservation or the delete's touch). Had that write landed before
 *   the heal's read, the call would be counted in the heal's read and every write of it, repeats included, would
 *   have taken effect before the heal's partition read (the argument's (b)), never while its transaction is pending;
 *   so the first write landed after the read, the heal's condition fails and its transaction changes nothing: the
 *   repeat frees the slot on the count it was taken from. Against a strict backfill's transaction (it ADDs units and
 *   flags markers) the repeat commutes with the backfill's ADD.
 * - a utilization increment: a heal counts its item only if the item's token is at least the quiet window older than
 *   the heal's clock, and then the increment took effect, or never will, before that clock (the argument's (c)); so a
 *   heal whose transaction the increment meets did not count the item, and the repeat adds it on top of the heal's
 *   truth, as an increment after the heal would. Never an overcount; and no longer an undercount.
 */
import {
    ConditionalCheckFailedException,
    TransactGetItemsCommand,
    TransactionCanceledException,
    TransactWriteItemsCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
    type TransactWriteItem,
} from "@aws-sdk/client-dynamodb";
import { randomUUID } from "node:crypto";
import type { ClientConfig } from "./validation";
import { bestEffortMarkNames, bestEffortMarkValues, bestEffortUpdate, dueMarkInput, inEpochCondition } from "../shared/best-effort-marks";
import { bestEffortSortKey, COUNTER_ATTRIBUTES, healShard } from "../shared/config";
import { isRetryable, isUnwritten } from "../shared/aws-errors";
import { mayHaveCommitted, sendOnce, withRetries, type CallDeadline } from "../shared/retry";
import { shardPartitionKey } from "../shards/layout";
import type { Rearm } from "../shards/reservation";
import { ledgerAttribute, ledgerEntries, LEDGER_ENTRIES_MARK } from "../ledger/ledger";

/** A failure the client absorbed (the count stays on its safe side, or the call answered "unavailable"). */
export interface BestEffortFailure {
    readonly key: string;
    /**
     * "read": a counter or marker read; "unclaim": giving back a utilization delete's claim; "put": a
     * tryCreate whose deadline passed before its put could be sent (answered "unavailable"); "due": putting a key
     * on the heal index.
     */
    readonly operation: "increment" | "decrement" | "reserve" | "release" | "touch" | "read" | "unclaim" | "put" | "due";
    readonly error: unknown;
}

/** The key's heal epoch as a best-effort write left it (runtime/shared/strict-ledger.ts): 0 while no heal lowered it. */
export interface HealEpoch {
    readonly epoch: number;
    /** The healer's clock when the epoch opened (0 for epoch 0). */
    readonly openedAt: number;
}

/** Watches the attempts of one repeated write: `repeated` once an attempt followed one that may have committed. */
class Doubt {
    private inDoubt = false;
    repeated = false;

    async watch<T>(attempt: Promise<T>): Promise<T> {
        this.repeated ||= this.inDoubt;
        try {
            return await attempt;
        } catch (error) {
            this.inDoubt ||= mayHaveCommitted(error);
            throw error;
        }
    }
}

/**
 * `repeated`: the reservation was sent again after an attempt that may have committed (a slot may be held twice).
 * `armedUnder`, on a sharded key's refusal: the limit the shard's stored quota was set for (runtime/shards/reservation.ts).
 */
export type Reservation =
    | { outcome: "reserved"; value: number; repeated: boolean }
    | { outcome: "limit"; value: number; armedUnder?: number }
    | { outcome: "failed" };

/** One best-effort write's options (`writeItem`). */
interface WriteOptions {
    /** The token of the life the write is for: its ledger entry moves with the count. */
    readonly life?: string;
    readonly limit?: number;
    readonly quota?: boolean;
    /** Only while the key is in this heal epoch. */
    readonly epoch?: number;
}

/** The heal-index shard of a counter key: one definition, shared with the settler (config.ts). */
export { healShard };

export class BestEffortCounter {
    constructor(
        private readonly config: ClientConfig,
        /** Strict mode: every write puts the key on the heal index (see the header). */
        private readonly due: boolean,
        private readonly dynamodb: DynamoDBClient,
        private readonly attempts: number,
        private readonly onFailure: (failure: BestEffortFailure) => void,
        /** The period of the ledger entries this client writes (runtime/ledger/ledger.ts). */
        private readonly ledgerPeriodMs: number,
    ) {}

    /**
     * Strict mode: reserves one slot in shard `shard` of the key, below `limit` when given; with `quota`, on the shard's
     * stored quota while the key is armed under `limit` (a sharded key: runtime/shards/reservation.ts). Retries are
     * safe: an extra slot is held back.
     */
    async reserve(
        key: string,
        shard: number,
        limit: number | undefined,
        deadline: CallDeadline,
        life: string,
        quota = false,
    ): Promise<Reservation> {
        const doubt = new Doubt();
        try {
            const value = await withRetries(
                () => doubt.watch(this.write(key, shard, 1, { life, ...(limit === undefined ? {} : { limit }), quota })),
                isRetryable,
                this.attempts,
                deadline,
                "reserve",
            );
            return { outcome: "reserved", value, repeated: doubt.repeated };
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                const armedUnder = error.Item?.[COUNTER_ATTRIBUTES.quotaLimit]?.N;
                return {
                    outcome: "limit",
                    value: Number(error.Item?.[this.config.countAttribute]?.N ?? "0"),
                    ...(armedUnder === undefined ? {} : { armedUnder: Number(armedUnder) }),
                };
            }
            this.onFailure({ key, operation: "reserve", error });
            return { outcome: "failed" };
        }
    }

    /**
     * A write that is safe to repeat (utilization's decrement before a soft delete: a repeat only
     * undercounts; strict's touch: no count change). `life`: the token of the life a decrement is for (its ledger
     * entry moves with the count). Returns the key's heal epoch as the write left it. Throws its last error.
     */
    async repeatable(
        key: string,
        shard: number,
        delta: -1 | 0,
        deadline: CallDeadline,
        life?: string,
    ): Promise<HealEpoch & { readonly repeated: boolean }> {
        const doubt = new Doubt();
        const written = await withRetries(
            () => doubt.watch(this.writeItem(key, shard, delta, delta === 0 || life === undefined ? {} : { life })),
            isRetryable,
            this.attempts,
            deadline,
            delta === 0 ? "touch" : "decrement",
        );
        return {
            epoch: Number(written[COUNTER_ATTRIBUTES.epoch]?.N ?? "0"),
            openedAt: Number(written[COUNTER_ATTRIBUTES.epochAt]?.N ?? "0"),
            repeated: doubt.repeated,
        };
    }

    /**
     * A write committed at most once: repeated only after a refusal that wrote nothing (see the header); other
     * failures (and a deadline that passed) are absorbed and reported. True when it committed. `life`: the token of
     * the life it is for, whose ledger entry moves with the count (the epoch's entry for a unit without a client token). `epoch`:
     * only while the key is still in that heal epoch (a strict delete's release: the epoch its touch read; a heal since
     * may have counted the item from the table, heal.ts), else it is refused and reported, and the slot is held.
     */
    async once(
        key: string,
        shard: number,
        delta: 1 | -1,
        operation: "increment" | "release",
        deadline: CallDeadline,
        life: string | undefined,
        epoch?: number,
    ): Promise<boolean> {
        const write = { ...(life === undefined ? {} : { life }), ...(epoch === undefined ? {} : { epoch }) };
        try {
            await withRetries(() => this.write(key, shard, delta, write), isUnwritten, this.attempts, deadline, operation);
            return true;
        } catch (error) {
            this.onFailure({ key, operation, error });
            return false;
        }
    }

    /**
     * Every shard's count of `key` in one TransactGetItems: a serializable snapshot (runtime/shards/reservation.ts); a
     * shard with no count yet reads as undefined. Retried while retryable within the call's deadline; undefined when it
     * could not be read (absorbed and reported).
     */
    async snapshot(key: string, shards: number, deadline: CallDeadline): Promise<Array<number | undefined> | undefined> {
        const { countersTableName, countAttribute } = this.config;
        try {
            const response = await withRetries(
                () =>
                    this.dynamodb.send(
                        new TransactGetItemsCommand({
                            TransactItems: Array.from({ length: shards }, (_, shard) => ({
                                Get: {
                                    TableName: countersTableName,
                                    Key: this.key(shardPartitionKey(key, shard)),
                                    ProjectionExpression: "#count",
                                    ExpressionAttributeNames: { "#count": countAttribute },
                                },
                            })),
                        }),
                    ),
                isRetryable,
                this.attempts,
                deadline,
                "read",
            );
            return (response.Responses ?? []).map((item) => {
                const count = item.Item?.[countAttribute]?.N;
                return count === undefined ? undefined : Number(count);
            });
        } catch (error) {
            this.onFailure({ key, operation: "read", error });
            return undefined;
        }
    }

    /**
     * Strict mode, a sharded key: arms every shard under `limit` with `quotas` and reserves one slot in shard `shard`, in
     * one transaction whose every action is conditional on the shard's count as `counts` read it
     * (runtime/shards/reservation.ts). A cancellation (a count moved since the read) is "raced"; a commit in doubt is
     * repeated with the same ClientRequestToken (applied once) and reported as repeated; other failures are absorbed
     * and reported ("failed").
     */
    async rearm(
        key: string,
        shard: number,
        limit: number,
        counts: ReadonlyArray<number | undefined>,
        quotas: readonly number[],
        deadline: CallDeadline,
        life: string,
    ): Promise<Rearm> {
        const { countersTableName, countAttribute } = this.config;
        const now = Date.now();
        const ledger = ledgerAttribute(life, this.ledgerPeriodMs);
        const actions = counts.map((count, s): TransactWriteItem => {
            const own = s === shard;
            return {
                Update: {
                    TableName: countersTableName,
                    Key: this.key(shardPartitionKey(key, s)),
                    UpdateExpression: own
                        ? `${bestEffortUpdate(":delta", this.due, true)}, #quotaLimit = :limit, #quota = :quota`
                        : "SET #quotaLimit = :limit, #quota = :quota",
                    ConditionExpression: count === undefined ? "attribute_not_exists(#count)" : "#count = :read",
                    ExpressionAttributeNames: {
                        "#count": countAttribute,
                        "#quotaLimit": COUNTER_ATTRIBUTES.quotaLimit,
                        "#quota": COUNTER_ATTRIBUTES.quota,
                        ...(own ? bestEffortMarkNames(this.due, ledger) : {}),
                    },
                    ExpressionAttributeValues: {
                        ":limit": { N: String(limit) },
                        ":quota": { N: String(quotas[s]) },
                        ...(count === undefined ? {} : { ":read": { N: String(count) } }),
                        ...(own ? { ":delta": { N: "1" }, ...bestEffortMarkValues(key, now, this.due, this.config) } : {}),
                    },
                },
            };
        });
        const doubt = new Doubt();
        const token = randomUUID();
        try {
            await withRetries(
                () => doubt.watch(this.dynamodb.send(new TransactWriteItemsCommand({ TransactItems: actions, ClientRequestToken: token }))),
                (error) => isRetryable(error) && !(error instanceof TransactionCanceledException),
                this.attempts,
                deadline,
                "reserve",
            );
            return { outcome: "reserved", value: counts.reduce<number>((sum, count) => sum + (count ?? 0), 1), repeated: doubt.repeated };
        } catch (error) {
            if (error instanceof TransactionCanceledException) {
                return { outcome: "raced" };
            }
            this.onFailure({ key, operation: "reserve", error });
            return { outcome: "failed" };
        }
    }

    /**
     * Puts the key on the heal index (best-effort-marks.ts). It moves no count and bumps no version, so it is not
     * bound by the call's deadline: a heal it races either saw the writes it follows or is proven stale by them.
     * Repeated while retryable; a failure is absorbed and reported (the settler's audit still reaches the key).
     */
    async markDue(key: string): Promise<void> {
        try {
            await withRetries(
                () => sendOnce(this.dynamodb, new UpdateItemCommand(dueMarkInput(this.config, key, Date.now()))),
                isRetryable,
                this.attempts,
            );
        } catch (error) {
            this.onFailure({ key, operation: "due", error });
        }
    }

    /**
     * One attempt: ADDs `delta` to shard `shard`'s item (see `writeItem`). Returns the new count.
     */
    private async write(key: string, shard: number, delta: number, options: WriteOptions = {}): Promise<number> {
        return Number((await this.writeItem(key, shard, delta, options))[this.config.countAttribute]?.N ?? "0");
    }

    /**
     * One attempt: ADDs `delta` to shard `shard`'s item and to the ledger entry of `life` (runtime/ledger/ledger.ts),
     * optionally only while its count is below `limit` (with `quota`: below the shard's stored quota while armed under
     * `limit`), or only while the key is in heal epoch `epoch`. Returns the item as the write left it (ALL_NEW costs no
     * more than UPDATED_NEW). A write that leaves more ledger entries than LEDGER_ENTRIES_MARK on an item that is not on
     * the heal index marks it, so that a heal folds them (utilization: nothing else may ever mark the key).
     */
    private async writeItem(
        key: string,
        shard: number,
        delta: number,
        options: WriteOptions = {},
    ): Promise<Record<string, AttributeValue>> {
        const { countersTableName, countAttribute } = this.config;
        const { limit, quota = false, epoch } = options;
        const ledger = delta === 0 ? undefined : ledgerAttribute(options.life, this.ledgerPeriodMs);
        // A first reservation meets no item: it may pass only when the limit leaves room for one. A sharded key's shard
        // admits on its stored quota, only while armed under this call's limit (runtime/shards/reservation.ts).
        const condition =
            epoch !== undefined
                ? inEpochCondition(epoch)
                : limit === undefined
                  ? undefined
                  : quota
                    ? "#quotaLimit = :limit AND (#count < #quota OR (attribute_not_exists(#count) AND #quota > :zero))"
                    : limit > 0
                      ? "attribute_not_exists(#count) OR #count < :limit"
                      : "#count < :limit";
        const response = await sendOnce(
            this.dynamodb,
            new UpdateItemCommand({
                TableName: countersTableName,
                Key: this.key(shardPartitionKey(key, shard)),
                UpdateExpression: bestEffortUpdate(":delta", this.due, ledger !== undefined),
                ConditionExpression: condition,
                ExpressionAttributeNames: {
                    "#count": countAttribute,
                    ...bestEffortMarkNames(this.due, ledger),
                    ...(quota ? { "#quotaLimit": COUNTER_ATTRIBUTES.quotaLimit, "#quota": COUNTER_ATTRIBUTES.quota } : {}),
                    ...(epoch === undefined ? {} : { "#epoch": COUNTER_ATTRIBUTES.epoch }),
                },
                ExpressionAttributeValues: {
                    ":delta": { N: String(delta) },
                    ...bestEffortMarkValues(key, Date.now(), this.due, this.config),
                    ...(limit === undefined ? {} : { ":limit": { N: String(limit) } }),
                    ...(quota ? { ":zero": { N: "0" } } : {}),
                    ...(epoch === undefined ? {} : { ":epoch": { N: String(epoch) } }),
                },
                ReturnValues: "ALL_NEW",
                ReturnValuesOnConditionCheckFailure: limit === undefined ? undefined : "ALL_OLD",
            }),
        );
        const item = response.Attributes ?? {};
        if (!this.due && item[COUNTER_ATTRIBUTES.healShard] === undefined && ledgerEntries(item).length > LEDGER_ENTRIES_MARK) {
            await this.markDue(shardPartitionKey(key, shard));
        }
        return item;
    }

    private key(partitionKey: string): Record<string, AttributeValue> {
        return { [this.config.partitionKey]: { S: partitionKey }, [this.config.sortKey]: { S: bestEffortSortKey(this.config) } };
    }
}
