/**
 * The client's writes to resource items: the conditional put of a new item, a utilization delete's
 * claim, and the soft delete; and a strict delete's take of the unit a backfill added for an item (the
 * marker's hc_be).
 *
 * Every write stores a per-call token (a UUIDv7, runtime/shared/tokens.ts), so a retry after a lost response
 * recognises its own earlier commit ("mine") instead of taking it for another caller's item ("taken")
 * or a vanished one ("gone"). Each HTTP attempt is sent once (no SDK retry) and repeated by the client
 * under the call's deadline (runtime/shared/retry.ts).
 *
 * The put is never repeated blindly. A repeat after an attempt that may have committed could write a
 * second life of the id: the first life may have been deleted and removed in between, and a second
 * life with the same token would be "mine" while the delete already took back the count (or the slot)
 * of the first. So before each repeat the client reads the item and its marker (the marker's hc_life
 * holds the token of the life the consumer last applied; the consumer removes a soft-deleted item in
 * the same transaction that writes the marker):
 *   - the item carries my token: my earlier attempt committed ("mine");
 *   - another item holds the id: "taken";
 *   - no item, and the marker's life is my token: my earlier attempt committed and that life is
 *     already deleted and removed ("mine": the delete accounted for it, nothing is written again);
 *   - no item, and the marker names a life at least as recent as mine (less the clock skew allowed):
 *     another life came and went while my attempt was in doubt, so whether mine committed cannot be
 *     told: nothing is written ("taken", in doubt);
 *   - otherwise no life of mine can have been removed: the put is sent again.
 * In strict mode, before the first such repeat the client marks the life on its marker (`hc_pending`), so that a
 * delete of it gives its slot back once even if an attempt lands again after its removal
 * (runtime/shared/strict-ledger.ts); when that mark cannot be written, the put is not repeated (the slot is held).
 * This adds no new answer and no new error: every outcome is one an SDK retry could already give
 * ("mine" after a lost response, "taken" when another item holds the id), and a failed read ends the
 * call with the put's own last error, as an exhausted retry did.
 */
import {
    ConditionalCheckFailedException,
    DeleteItemCommand,
    GetItemCommand,
    PutItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { BestEffortFailure } from "./best-effort";
import type { ClientConfig, CounterMode } from "./validation";
import { COUNTER_ATTRIBUTES, markerSortKey } from "../shared/config";
import { lifeShard, markerShard, shardCount, shardPartitionKey, tokenHomedIn } from "../shards/layout";
import { FOREIGN_DELETE_ATTRIBUTE, ownsImage, regionAttributeOf } from "../regions/ownership";
import { DeadlineExceededError } from "../shared/errors";
import { isRetryable } from "../shared/aws-errors";
import { backoff, mayHaveCommitted, sendOnce, withRetries, type CallDeadline } from "../shared/retry";
import {
    hasBackfillUnit,
    markerOnLife,
    markPendingUpdate,
    prunableLegacyMarks,
    releasePath,
    takeReleaseUpdate,
    type ReleasePath,
} from "../shared/strict-ledger";
import { newToken, tokenTime } from "../shared/tokens";
import { CLOCK_SKEW_MS, MAX_CLIENT_DEADLINE_MS } from "../heal/heal-window";

/**
 * How far another machine's clock may be behind ours when the client compares a marker's life token
 * with its own (both UUIDv7, stamped by the clocks of the machines that made them).
 */
export const MAX_CLOCK_SKEW_MS = CLOCK_SKEW_MS;

/**
 * Strict mode: whether the call that created the life `token` names may still send a put attempt of it (a repeat
 * is sent within its deadline, at most MAX_CLIENT_DEADLINE_MS from the token's time, on a clock up to
 * CLOCK_SKEW_MS from ours). A delete of such a young life takes its release on the marker (strict-ledger.ts).
 */
export function mayStillBeRepeated(token: string, now: number): boolean {
    const created = tokenTime(token);
    return created === undefined || now <= created + MAX_CLIENT_DEADLINE_MS + CLOCK_SKEW_MS;
}

/** A resource item ready to put, with the token that marks this call's write. */
export interface ResourceItem {
    readonly key: string;
    readonly id: string;
    readonly item: Record<string, AttributeValue>;
    readonly token: string;
}

/** "mine": this call's write committed. "taken": another write owns the item. "gone": no such item (life). */
export type WriteOutcome = "mine" | "taken" | "gone";

/**
 * The put's answer. `doubt`: some attempt may have committed (a 5xx, a timeout) and the client could
 * not tell whether that life of the item existed: a strict slot must then be kept.
 */
export type PutResult =
    | { readonly outcome: "mine" }
    | { readonly outcome: "taken"; readonly doubt: boolean }
    | { readonly outcome: "failed"; readonly error: unknown; readonly doubt: boolean };

/** A live item as read before a delete. */
/** A strict delete's take of a backfill's unit off the marker: the flag and the life it names go together. */
export const TAKE_BACKFILL_UNIT = "REMOVE #be, #beLife";

export interface LiveItem {
    /** The creation token that names this life of the id (null for an item written without one). */
    readonly createToken: string | null;
    /** Best-effort accounts for it: it carries the client's token, or its marker says hc_be = true. */
    readonly clientCounted: boolean;
    /** Strict mode, an item carrying a token: how its delete gives the slot back (strict-ledger.ts, `releasePath`). */
    readonly release?: ReleasePath;
    /** Strict mode: marks of earlier versions the delete may remove (strict-ledger.ts, `prunableLegacyMarks`). */
    readonly prune?: readonly string[];
    /**
     * Strict mode: the heal epoch of the backfill unit its marker holds (`hc_be`; 0 for a flag written before epochs),
     * when it holds one.
     */
    readonly unitEpoch?: number;
    /** The life that unit was added for (`hc_be_life`), when the backfill flagged an item carrying a token. */
    readonly unitLife?: string;
    /**
     * False when an attribute selection leaves the item out (another writer moved it): a heal since may have taken
     * its unit out of best-effort, so a delete of it may leave best-effort off its items.
     */
    readonly selected: boolean;
    /**
     * Regions (runtime/regions/): true when another region owns the life (its stamp names another member, or it has
     * none and this region is not the home). The delete then moves no unit: only the owner writes its counter items.
     */
    readonly foreign?: boolean;
}

export class ResourceWriter {
    constructor(
        private readonly config: ClientConfig,
        private readonly mode: CounterMode,
        private readonly dynamodb: DynamoDBClient,
        private readonly attempts: number,
        private readonly deleteTokenAttribute: string,
        private readonly onFailure: (failure: BestEffortFailure) => void,
    ) {}

    /** Builds the item for `id` under `key` from already-marshalled caller attributes. */
    item(key: string, id: string, extra: Record<string, AttributeValue>): ResourceItem {
        const { partitionKey, sortKey, tokenAttribute, selection } = this.config;
        const token = newToken();
        return {
            key,
            id,
            token,
            item: {
                ...extra,
                ...(selection.kind === "attribute" ? { [selection.name]: { S: selection.value } } : {}),
                // Regions: the stamp of the region that creates the life (runtime/regions/ownership.ts).
                ...(this.config.regions === undefined ? {} : { [regionAttributeOf(this.config)]: { S: this.config.regions.current } }),
                [partitionKey]: { S: key },
                [sortKey]: { S: id },
                [tokenAttribute]: { S: token },
            },
        };
    }

    /**
     * The item again with a token homed in shard `shard` (runtime/shards/layout.ts): a strict reservation taken in
     * another shard than its token's home. Tokens are drawn until one is (1 in N draws on average); nothing was
     * written with the old one.
     */
    rehome(resource: ResourceItem, shard: number): ResourceItem {
        const shards = shardCount(this.config);
        const token = lifeShard(resource.token, shards) === shard ? resource.token : tokenHomedIn(shard, shards, tokenTime(resource.token));
        return { ...resource, token, item: { ...resource.item, [this.config.tokenAttribute]: { S: token } } };
    }

    /** Puts the item if absent; see the module's header for how a repeat is decided. */
    async put(resource: ResourceItem, deadline: CallDeadline): Promise<PutResult> {
        const { tableName, partitionKey, tokenAttribute } = this.config;
        let doubt = false;
        let stop = false;
        let marked = false;
        let lastError: unknown;
        for (let attempt = 1; ; attempt++) {
            let mayRepeat = !stop && attempt <= this.attempts && (attempt === 1 || (await backoff(attempt - 1, deadline)));
            if (doubt && mayRepeat && !marked && this.mode === "strict") {
                // Before the inspection that may lead to a repeat (strict-ledger.ts): no repeat without the mark.
                const mark = await this.markRepeated(resource, deadline).catch(() => "failed" as const);
                if (mark === "released") {
                    // A delete read an item of this life and gave its slot back: the life existed, and has ended.
                    return { outcome: "mine" };
                }
                if (mark === "later") {
                    // A later life's slot was given back: whether this one's put committed cannot be told.
                    return { outcome: "taken", doubt };
                }
                marked = mark === "marked";
                mayRepeat = marked;
            }
            if (doubt) {
                // An earlier attempt may have committed: look before sending again (or before giving up).
                const seen = await this.inspect(resource).catch(() => "unreadable" as const);
                if (seen === "mine") {
                    return { outcome: "mine" };
                }
                if (seen === "taken" || seen === "unknown") {
                    return { outcome: "taken", doubt };
                }
                if (seen === "unreadable") {
                    break;
                }
            }
            if (!mayRepeat || !deadline.open()) {
                break;
            }
            try {
                await sendOnce(
                    this.dynamodb,
                    new PutItemCommand({
                        TableName: tableName,
                        Item: resource.item,
                        ConditionExpression: "attribute_not_exists(#pk)",
                        ExpressionAttributeNames: { "#pk": partitionKey },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                );
                return { outcome: "mine" };
            } catch (error) {
                if (error instanceof ConditionalCheckFailedException) {
                    return error.Item?.[tokenAttribute]?.S === resource.token ? { outcome: "mine" } : { outcome: "taken", doubt };
                }
                lastError = error;
                doubt ||= mayHaveCommitted(error);
                stop = !isRetryable(error);
            }
        }
        // No attempt sent at all: the deadline passed first.
        return { outcome: "failed", error: lastError ?? new DeadlineExceededError("put", deadline.ms), doubt };
    }

    /**
     * Strict mode: marks the life `resource` creates as one whose put is about to be repeated (`hc_pending`,
     * strict-ledger.ts). "released": a delete of this life already gave its slot back (the put is then not
     * repeated); "later": a later life's was. The mark takes a tombstone's expiry off the marker, so that it outlives
     * every attempt of the life.
     */
    private async markRepeated({ key, id, token }: ResourceItem, deadline: CallDeadline): Promise<"marked" | "released" | "later"> {
        const written = await this.updateMarker(key, id, markPendingUpdate(token), deadline, "mark");
        if (written.outcome === "done") {
            return "marked";
        }
        // Refused: a release at or above the token, or a mark at or above it already there (which covers this life; an
        // earlier attempt of this very write whose answer was lost also ends here).
        const seen = markerOnLife(written.item, token);
        if (seen === "open") {
            throw new Error("the mark was refused on a marker that does not show why");
        }
        return seen === "covered" ? "marked" : seen;
    }

    /**
     * Strict mode: takes the one release of a life through its marker (strict-ledger.ts), by moving `hc_released` up
     * to `createToken`, before the soft delete; `prune` names marks of earlier versions to remove in the same write.
     * True when this call moved it; false when it was at or above the token already (the delete that ended this life
     * took it: this item is a late attempt of it; or a later life's release covers it), lost to a concurrent delete,
     * or the write failed (reported): the slot is then held, never freed twice.
     */
    async takeRelease(key: string, id: string, createToken: string, prune: readonly string[], deadline: CallDeadline): Promise<boolean> {
        const write = takeReleaseUpdate(createToken, prune);
        return this.takeOnMarker(key, id, write.update, write.condition, write.names, write.values, deadline);
    }

    /**
     * Strict mode: removes marks of earlier versions that no retry can need (strict-ledger.ts, `prunableLegacyMarks`),
     * from a delete that writes nothing else to the marker. Its failure costs nothing but the marks' bytes: the next
     * delete of the id, or the consumer, removes them.
     */
    async pruneMarks(key: string, id: string, prune: readonly string[], deadline: CallDeadline): Promise<void> {
        if (prune.length === 0) {
            return;
        }
        const names = Object.fromEntries(prune.map((name, i) => [`#prune${i}`, name]));
        await this.updateMarker(
            key,
            id,
            {
                update: `REMOVE ${Object.keys(names).join(", ")}`,
                condition: "attribute_exists(#sk)",
                names: { ...names, "#sk": this.config.sortKey },
                values: {},
            },
            deadline,
            "prune",
        ).catch(() => undefined);
    }

    /** Reads the item, then its marker: whether a life of mine exists or existed (see the header). */
    private async inspect({ key, id, token }: ResourceItem): Promise<"mine" | "taken" | "unknown" | "absent"> {
        const { tableName, countersTableName, tokenAttribute } = this.config;
        // Item first: the consumer removes a soft-deleted item in the transaction that writes its marker,
        // so when the item is absent now, the marker read after it shows that removal.
        const item = await this.dynamodb.send(
            new GetItemCommand({
                TableName: tableName,
                Key: this.key(key, id),
                ConsistentRead: true,
                ProjectionExpression: "#token",
                ExpressionAttributeNames: { "#token": tokenAttribute },
            }),
        );
        if (item.Item !== undefined) {
            return item.Item[tokenAttribute]?.S === token ? "mine" : "taken";
        }
        const marker = await this.dynamodb.send(
            new GetItemCommand({ TableName: countersTableName, Key: this.markerKey(key, id), ConsistentRead: true }),
        );
        // A delete of my life gave its slot back before its soft delete (strict-ledger.ts): my life existed and ended.
        const seen = markerOnLife(marker.Item, token);
        if (seen === "released") {
            return "mine";
        }
        if (seen === "later") {
            return "unknown";
        }
        const life = marker.Item?.[COUNTER_ATTRIBUTES.life]?.S;
        if (life === undefined) {
            return "absent";
        }
        if (life === token) {
            return "mine";
        }
        const lifeTime = tokenTime(life);
        const mine = tokenTime(token) ?? Date.now();
        return lifeTime !== undefined && lifeTime < mine - MAX_CLOCK_SKEW_MS ? "absent" : "unknown";
    }

    /**
     * Reads the item before a delete and, when asked (strict mode), its marker after it: hc_be, how the delete of the
     * life read gives its slot back, and the marks of earlier versions it may remove (strict-ledger.ts: the marker
     * must be read after the item). Undefined when the item is missing or already deleted.
     */
    async liveItem(key: string, id: string, readMarker: boolean): Promise<LiveItem | undefined> {
        const { tableName, deletedAttribute, tokenAttribute, selection } = this.config;
        const names: Record<string, string> = { "#deleted": deletedAttribute, "#token": tokenAttribute };
        if (selection.kind === "attribute") {
            names["#selection"] = selection.name;
        }
        if (this.config.regions !== undefined) {
            names["#region"] = regionAttributeOf(this.config);
        }
        // Before the item's read: a life sealed by then (strict-ledger.ts) has no item after it but the one read.
        const readAt = Date.now();
        const response = await withRetries(
            () =>
                this.dynamodb.send(
                    new GetItemCommand({
                        TableName: tableName,
                        Key: this.key(key, id),
                        ConsistentRead: true,
                        ProjectionExpression: Object.keys(names).join(", "),
                        ExpressionAttributeNames: names,
                    }),
                ),
            isRetryable,
            this.attempts,
        );
        if (response.Item === undefined || response.Item[deletedAttribute]?.BOOL === true) {
            return undefined;
        }
        const createToken = response.Item[tokenAttribute]?.S ?? null;
        const selected = selection.kind !== "attribute" || response.Item[selection.name]?.S === selection.value;
        // The soft delete is conditional on this life's token, and no client re-stamps a life: the stamp read here is
        // the one the soft delete finds (runtime/regions/ownership.ts).
        if (this.config.regions !== undefined && !ownsImage(this.config, response.Item)) {
            return { createToken, clientCounted: createToken !== null, selected, foreign: true };
        }
        if (!readMarker) {
            return { createToken, clientCounted: createToken !== null, selected };
        }
        const marker = await this.readMarker(key, id);
        if (marker === "unread") {
            return { createToken, clientCounted: createToken !== null, selected, ...(createToken !== null ? { release: "hold" } : {}) };
        }
        return {
            createToken,
            clientCounted: createToken !== null || hasBackfillUnit(marker),
            selected,
            ...(createToken !== null ? { release: releasePath(createToken, marker, mayStillBeRepeated(createToken, readAt)) } : {}),
            prune: prunableLegacyMarks(marker, createToken ?? undefined, readAt),
            ...(hasBackfillUnit(marker) ? { unitEpoch: Number(marker?.[COUNTER_ATTRIBUTES.beCounted]?.N ?? "0") } : {}),
            ...(marker?.[COUNTER_ATTRIBUTES.beLife]?.S === undefined ? {} : { unitLife: marker[COUNTER_ATTRIBUTES.beLife]!.S! }),
        };
    }

    /**
     * The whole marker (bounded: strict-ledger.ts; its hc_be, its ledger values and any marks of earlier versions).
     * A failed read is reported and answers "unread": the delete then holds the slot (not knowing that best-effort
     * accounts for the item, or that the life's release was not taken already, only holds a slot back).
     */
    private async readMarker(key: string, id: string): Promise<Record<string, AttributeValue> | undefined | "unread"> {
        try {
            const response = await withRetries(
                () =>
                    this.dynamodb.send(
                        new GetItemCommand({
                            TableName: this.config.countersTableName,
                            Key: this.markerKey(key, id),
                            ConsistentRead: true,
                        }),
                    ),
                isRetryable,
                this.attempts,
            );
            return response.Item;
        } catch (error) {
            this.onFailure({ key, operation: "read", error });
            return "unread";
        }
    }

    /**
     * Strict mode: takes the unit a strict-mode backfill added to best-effort for `id`, by removing its
     * marker's hc_be on the condition that it is set. True when this call removed it: the caller may then
     * release one slot. False when the flag was gone (another delete took the unit) or the write failed
     * (reported; a lost response after a commit also ends here): the slot is then held back, never freed twice.
     */
    async takeBackfillUnit(key: string, id: string, epoch: number, deadline: CallDeadline): Promise<boolean> {
        // Only a unit added in the key's current heal epoch: a heal since then absorbed or re-derived it.
        // Flags written before epochs (BOOL true) belong to epoch 0.
        const condition = epoch === 0 ? "#be = :epoch OR #be = :true" : "#be = :epoch";
        const values: Record<string, AttributeValue> =
            epoch === 0 ? { ":epoch": { N: "0" }, ":true": { BOOL: true } } : { ":epoch": { N: String(epoch) } };
        return this.takeOnMarker(
            key,
            id,
            TAKE_BACKFILL_UNIT,
            condition,
            { "#be": COUNTER_ATTRIBUTES.beCounted, "#beLife": COUNTER_ATTRIBUTES.beLife },
            values,
            deadline,
        );
    }

    /**
     * A conditional update of the marker of `id` that takes a strict release's right: true when this call's
     * update committed; false when its condition failed (the right was taken already) or the write failed
     * (reported; a lost response after a commit also ends here): the slot is then held, never freed twice.
     */
    private async takeOnMarker(
        key: string,
        id: string,
        update: string,
        condition: string,
        names: Record<string, string>,
        values: Record<string, AttributeValue>,
        deadline: CallDeadline,
    ): Promise<boolean> {
        try {
            return (await this.updateMarker(key, id, { update, condition, names, values }, deadline, "release")).outcome === "done";
        } catch (error) {
            this.onFailure({ key, operation: "release", error });
            return false;
        }
    }

    /**
     * One conditional update of the marker of `id`, retried while retryable under the call's deadline. "refused":
     * its condition failed (a repeat after a lost response also ends here), with the marker as it was then. Throws any
     * other last error.
     */
    private async updateMarker(
        key: string,
        id: string,
        write: {
            readonly update: string;
            readonly condition: string;
            readonly names: Record<string, string>;
            readonly values: Record<string, AttributeValue>;
        },
        deadline: CallDeadline,
        operation: string,
    ): Promise<{ readonly outcome: "done" } | { readonly outcome: "refused"; readonly item?: Record<string, AttributeValue> }> {
        try {
            await withRetries(
                () =>
                    sendOnce(
                        this.dynamodb,
                        new UpdateItemCommand({
                            TableName: this.config.countersTableName,
                            Key: this.markerKey(key, id),
                            UpdateExpression: write.update,
                            ConditionExpression: write.condition,
                            ExpressionAttributeNames: write.names,
                            ...(Object.keys(write.values).length > 0 ? { ExpressionAttributeValues: write.values } : {}),
                            ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                        }),
                    ),
                isRetryable,
                this.attempts,
                deadline,
                operation,
            );
            return { outcome: "done" };
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                return error.Item === undefined ? { outcome: "refused" } : { outcome: "refused", item: error.Item };
            }
            throw error;
        }
    }

    /**
     * Utilization mode: claims the delete of the life `createToken` names, by storing `claim` as its
     * delete token. It fails ("taken") while another delete's claim is younger than `takeoverAfterMs`
     * (its caller may still be decrementing) or the item is deleted. An older claim was abandoned: its
     * caller sends nothing after its deadline, so taking it over can at most decrement twice for one
     * life, which only undercounts.
     */
    async claim(
        key: string,
        id: string,
        createToken: string | null,
        claim: string,
        takeoverAfterMs: number,
        deadline: CallDeadline,
    ): Promise<WriteOutcome> {
        // UUIDv7 text sorts by its leading time: a claim made before `expired`'s time sorts below it.
        const expired = newToken((tokenTime(claim) ?? Date.now()) - takeoverAfterMs).slice(0, 13);
        return this.conditionalUpdate(
            key,
            id,
            createToken,
            "SET #deleteToken = :token",
            "(attribute_not_exists(#deleteToken) OR #deleteToken < :expired)",
            { ":expired": { S: expired } },
            claim,
            deadline,
            "claim",
        );
    }

    /**
     * Gives back a claim whose delete failed before its soft delete committed, so that a retried delete
     * need not wait for the claim to expire. Conditional on the claim and on the item being live: it can
     * never undo a committed soft delete, and a soft delete still in flight then fails on its condition.
     */
    async unclaim(key: string, id: string, claim: string, deadline: CallDeadline): Promise<void> {
        try {
            await withRetries(
                () =>
                    sendOnce(
                        this.dynamodb,
                        new UpdateItemCommand({
                            TableName: this.config.tableName,
                            Key: this.key(key, id),
                            UpdateExpression: "REMOVE #deleteToken",
                            ConditionExpression: "#deleteToken = :claim AND (attribute_not_exists(#deleted) OR #deleted = :false)",
                            ExpressionAttributeNames: {
                                "#deleteToken": this.deleteTokenAttribute,
                                "#deleted": this.config.deletedAttribute,
                            },
                            ExpressionAttributeValues: { ":claim": { S: claim }, ":false": { BOOL: false } },
                        }),
                    ),
                isRetryable,
                this.attempts,
                deadline,
                "unclaim",
            );
        } catch (error) {
            if (!(error instanceof ConditionalCheckFailedException)) {
                this.onFailure({ key, operation: "unclaim", error });
            }
        }
    }

    /**
     * Sets `deleted = true` on the life of the id that was read (`createToken`), if it is not deleted.
     * With `claim`, only while the claim is still this call's (the delete token is already stored);
     * without, the delete's own token is stored with it. The creation token is never overwritten: a
     * retry after a lost response recognises this call's write, and can never soft-delete a newer
     * item that reused the id.
     */
    async softDelete(
        key: string,
        id: string,
        createToken: string | null,
        claim: string | undefined,
        deadline: CallDeadline,
        deletedIn?: string,
    ): Promise<WriteOutcome> {
        if (deletedIn !== undefined) {
            // A life another region owns (runtime/regions/): the deleting region goes with the soft delete, so that the
            // owner's consumer tells it from its own client's delete and marks the key due for a heal.
            return this.conditionalUpdate(
                key,
                id,
                createToken,
                "SET #deleted = :true, #deleteToken = :token, #deletedIn = :deletedIn",
                "attribute_exists(#pk)",
                { ":true": { BOOL: true }, ":deletedIn": { S: deletedIn } },
                newToken(),
                deadline,
                "soft delete",
                { "#deletedIn": FOREIGN_DELETE_ATTRIBUTE },
            );
        }
        if (claim !== undefined) {
            return this.conditionalUpdate(
                key,
                id,
                createToken,
                "SET #deleted = :true",
                "#deleteToken = :token",
                { ":true": { BOOL: true } },
                claim,
                deadline,
                "soft delete",
            );
        }
        return this.conditionalUpdate(
            key,
            id,
            createToken,
            "SET #deleted = :true, #deleteToken = :token",
            "attribute_exists(#pk)",
            { ":true": { BOOL: true } },
            newToken(),
            deadline,
            "soft delete",
        );
    }

    /**
     * Removes the life of the id that was read (`createToken`), if it is not deleted, as another writer's delete would:
     * the delete of an item another writer grew until the soft delete's attributes no longer fit under DynamoDB's
     * 400 KB (client.ts, `delete`). With `claim`, only while the claim is still this call's. The consumer counts the
     * removal as it counts another writer's delete (the eventual counter moves, the key is due for a heal). "mine": it
     * committed. "gone": no such life now, which is also what a retry finds after a lost response (the caller then
     * treats the life as ended by someone else: a strict slot is held until a heal). "taken": the life is deleted
     * already, or another call's claim holds it.
     */
    async remove(
        key: string,
        id: string,
        createToken: string | null,
        claim: string | undefined,
        deadline: CallDeadline,
    ): Promise<WriteOutcome> {
        const { tableName, tokenAttribute } = this.config;
        const life = this.liveLife(createToken);
        const names: Record<string, string> = { ...life.names };
        const values: Record<string, AttributeValue> = { ...life.values };
        let condition = life.condition;
        if (claim !== undefined) {
            names["#deleteToken"] = this.deleteTokenAttribute;
            values[":claim"] = { S: claim };
            condition += " AND #deleteToken = :claim";
        }
        const attempt = async (): Promise<WriteOutcome> => {
            try {
                await sendOnce(
                    this.dynamodb,
                    new DeleteItemCommand({
                        TableName: tableName,
                        Key: this.key(key, id),
                        ConditionExpression: condition,
                        ExpressionAttributeNames: names,
                        ExpressionAttributeValues: values,
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                );
                return "mine";
            } catch (error) {
                if (error instanceof ConditionalCheckFailedException) {
                    const item = error.Item;
                    return item === undefined || (item[tokenAttribute]?.S ?? null) !== createToken ? "gone" : "taken";
                }
                throw error;
            }
        };
        return withRetries(attempt, isRetryable, this.attempts, deadline, "remove");
    }

    /**
     * An update of the live life `createToken` names, recognised by `token` in the delete token
     * attribute, retried while safe. "mine": it committed, possibly on an attempt whose response was
     * lost. "taken": the condition failed on an item another write owns (or already deleted). "gone":
     * the condition failed on no item, or on a newer life of the id.
     */
    private async conditionalUpdate(
        key: string,
        id: string,
        createToken: string | null,
        update: string,
        extraCondition: string,
        extraValues: Record<string, AttributeValue>,
        token: string,
        deadline: CallDeadline,
        operation: string,
        extraNames: Record<string, string> = {},
    ): Promise<WriteOutcome> {
        const { tableName, tokenAttribute } = this.config;
        const life = this.liveLife(createToken);
        const names: Record<string, string> = { ...extraNames, ...life.names, "#deleteToken": this.deleteTokenAttribute };
        const attempt = async (): Promise<WriteOutcome> => {
            try {
                await sendOnce(
                    this.dynamodb,
                    new UpdateItemCommand({
                        TableName: tableName,
                        Key: this.key(key, id),
                        UpdateExpression: update,
                        ConditionExpression: `${life.condition} AND ${extraCondition}`,
                        ExpressionAttributeNames: names,
                        ExpressionAttributeValues: { ":token": { S: token }, ...extraValues, ...life.values },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    }),
                );
                return "mine";
            } catch (error) {
                if (error instanceof ConditionalCheckFailedException) {
                    const item = error.Item;
                    if (item === undefined) {
                        return "gone";
                    }
                    if ((item[tokenAttribute]?.S ?? null) !== createToken) {
                        return "gone";
                    }
                    // Only this call stores `token`: finding it means an earlier attempt of this write committed.
                    if (item[this.deleteTokenAttribute]?.S === token) {
                        return "mine";
                    }
                    return "taken";
                }
                throw error;
            }
        };
        return withRetries(attempt, isRetryable, this.attempts, deadline, operation);
    }

    /**
     * The condition every write of one life carries: the item exists, is not deleted, and is the life `createToken`
     * names (null: a life with no token, from before the counter).
     */
    private liveLife(createToken: string | null): {
        condition: string;
        names: Record<string, string>;
        values: Record<string, AttributeValue>;
    } {
        const { partitionKey, deletedAttribute, tokenAttribute } = this.config;
        return {
            condition:
                "attribute_exists(#pk) AND (attribute_not_exists(#deleted) OR #deleted = :false) AND " +
                (createToken === null ? "attribute_not_exists(#createToken)" : "#createToken = :createToken"),
            names: { "#pk": partitionKey, "#deleted": deletedAttribute, "#createToken": tokenAttribute },
            values: { ":false": { BOOL: false }, ...(createToken === null ? {} : { ":createToken": { S: createToken } }) },
        };
    }

    /** The key of `id`'s marker: in its shard of the counters table (runtime/shards/layout.ts). */
    private markerKey(key: string, id: string): Record<string, AttributeValue> {
        return this.key(shardPartitionKey(key, markerShard(id, shardCount(this.config))), markerSortKey(this.config, id));
    }

    private key(key: string, sk: string): Record<string, AttributeValue> {
        return { [this.config.partitionKey]: { S: key }, [this.config.sortKey]: { S: sk } };
    }
}
