/**
 * The API-side client: creates and soft-deletes resources, keeps the best-effort counter, reads
 * `max(best-effort, eventual)` and enforces limits. It raises only the errors of its contract (see
 * the per-method contracts below and docs/client.md, "The client's contract").
 *
 * Two modes, fixed per counter key (every client writing a key must use the same mode). "Client-
 * counted" items are those best-effort accounts for: items carrying the client's token, or whose
 * marker says hc_be = true (set by a strict-mode backfill).
 *
 * - `utilization` (default): best-effort is a lower bound of the live client-counted items.
 *   Invariant: bestEffort <= live.
 *   Order of writes: create is put -> increment; delete is claim -> decrement -> soft delete.
 *   Why it holds: an increment is sent only after the put answered "mine", and at most once (no SDK
 *   retry: a repeat after a lost response would overcount), so every +1 stands for a live item that
 *   was written first. A decrement precedes the soft delete of the life it is for, and the soft delete
 *   is conditional on the claim this call stored on that life: a life is soft-deleted only by the
 *   holder of its claim, after that holder's decrement, so every -1 that matches a soft delete came
 *   before it. Concurrent deletes of one life meet the claim and send no decrement. A second decrement
 *   for one life needs the claim to change hands: taken over when older than the client deadline plus a
 *   margin (its holder sends nothing after its deadline, or crashed), or given back by a holder whose
 *   delete failed before its soft delete committed. Either way the extra -1 is an undercount, never an
 *   overcount. Failures only drop +1s (an increment not sent) or add -1s (a decrement whose soft delete
 *   was not sent): both keep bestEffort <= live.
 *   Limits are checked on max(best-effort, eventual) before creating, so concurrent tryCreate calls
 *   can pass a limit by as many as raced, and a read can be low by best-effort's undercount while
 *   eventual lags.
 *
 * - `strict`: best-effort is an upper bound of the live client-counted items, and (for keys only ever
 *   written through tryCreate) the limit is never exceeded. Invariant: live <= bestEffort <= limit.
 *   Order of writes: create is reserve -> put (-> release when the put certainly wrote nothing);
 *   delete is touch -> soft delete -> release.
 *   Why it holds: the reservation (conditional +1, "count < limit", also on a key with no counter item
 *   yet) comes before the put, so every live item holds a slot before it exists. A slot is given back
 *   only (a) by the call that reserved it, when its put certainly wrote nothing (a conditional check
 *   failure on another life, or a 4xx on every attempt), or (b) after the soft delete of a client-counted
 *   life committed by this call ("mine"), once (no SDK retry: a repeat after a lost response would free
 *   a slot still in use); for an item without the client's token, only by the delete that removes its
 *   marker's hc_be (conditionally), so a strict backfill's unit is given back once, whatever lives the id
 *   has after. The put is never repeated over a life of the same call that was already
 *   deleted (runtime/client/resource-writes.ts), so one reservation never backs two lives; and a life whose put
 *   was repeated gives its slot back once, through its marker, even when a late attempt of it lands again after
 *   its removal (runtime/shared/strict-ledger.ts). Failures only keep
 *   slots (a reservation whose put is in doubt, a release not sent): both keep live <= bestEffort.
 *
 * Every write of one call that moves a count or an item is sent within `deadlineMs` of the call's first write
 * (runtime/shared/retry.ts): healing's quiet window and a delete claim's takeover both rest on it. The one write
 * that may come later, putting the key on the heal index when the call may have left best-effort off its items
 * (`call`), moves neither.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { BestEffortCounter, type BestEffortFailure } from "./best-effort";
import {
    checkId,
    checkItemSize,
    checkKey,
    checkLimit,
    marshalAttributes,
    resolveClientOptions,
    type ClientConfig,
    type CounterMode,
} from "./validation";
import type { CounterTableLayout, FlatSelection, RegionsConfig } from "../shared/config";
import { isRetryable } from "../shared/aws-errors";
import { DeadlineExceededError } from "../shared/errors";
import { ResourceWriter, type ResourceItem, type WriteOutcome } from "./resource-writes";
import { CallDeadline, withRetries } from "../shared/retry";
import type { ItemSelection } from "../shared/selection";
import { Metrics, stdoutSink, type LineSink } from "../shared/telemetry";
import { reservedInEpoch } from "../shared/strict-ledger";
import { newToken, tokenTime } from "../shared/tokens";
import { homeShard, lifeShard, shardCount } from "../shards/layout";
import { readKeyCounters } from "../shards/read";
import { reserveAcrossShards, type ShardReservation } from "../shards/reservation";
import { baseQuota } from "../regions/quotas";
import { readRegionsCounters, type RegionCounters } from "../regions/read";

export type { BestEffortFailure } from "./best-effort";
export type { CounterMode } from "./validation";

export interface CounterValue {
    /** The best-effort counter, written by the API right after each create or delete. */
    readonly bestEffort: number;
    /** The eventual counter, written exactly once per record by the stream consumer. */
    readonly eventual: number;
    /**
     * max(bestEffort, eventual): what limits are enforced on. With regions, the sum over regions of each region's
     * max(bestEffort_R, eventual_R) (each region's two counters estimate the lives it owns).
     */
    readonly value: number;
    /** With regions (runtime/regions/): each member region's counters, sorted by region, as the local replica shows them. */
    readonly regions?: readonly RegionCounters[];
}

export interface CreateResult {
    /** True when this call created the item; false when an item with this id already exists. */
    readonly created: boolean;
}

export interface DeleteResult {
    /** True when this call soft-deleted the item; false when it did not exist or was already deleted. */
    readonly deleted: boolean;
}

export interface TryCreateResult {
    readonly created: boolean;
    /**
     * The count the decision was made on, plus one when this call created the item. In strict mode
     * it is the best-effort upper bound (with regions: this region's, against its quota of the limit). Null only when
     * `reason` is "unavailable".
     */
    readonly count: number | null;
    /** Why nothing was created: the limit is reached, the id exists, or the counter could not be read or reserved. */
    readonly reason?: "limit" | "exists" | "unavailable";
}

/** The client's EMF metrics: absorbed failures by operation, and "unavailable" answers. */
export const CLIENT_METRIC_NAMES = [
    "IncrementFailures",
    "DecrementFailures",
    "ReserveFailures",
    "ReleaseFailures",
    "TouchFailures",
    "ReadFailures",
    "UnclaimFailures",
    "PutFailures",
    "DueFailures",
    "Unavailable",
    "ForeignDeletes",
] as const;

export type ClientMetricName = (typeof CLIENT_METRIC_NAMES)[number];

const FAILURE_METRIC: Record<BestEffortFailure["operation"], ClientMetricName> = {
    increment: "IncrementFailures",
    decrement: "DecrementFailures",
    reserve: "ReserveFailures",
    release: "ReleaseFailures",
    touch: "TouchFailures",
    read: "ReadFailures",
    unclaim: "UnclaimFailures",
    put: "PutFailures",
    due: "DueFailures",
};

/** What a call says where its best-effort may have moved away from its items (true) (HybridCounterClient.call). */
type Drifted = (drift: boolean) => void;

/** A delete's claim may be taken over this long after the client deadline (requests still in flight). */
export const CLAIM_TAKEOVER_MARGIN_MS = 5_000;

/**
 * The client's options. The selection is given as `selection`, or flat (`countedItems`, `countedSortKeyPrefix`,
 * `countedAttributeName`, `countedAttributeValue`) as the component's `clientConfig` output carries it, so that
 * `{ ...clientConfig, dynamodb }` counts the items the consumer counts; `selection` wins when both are given.
 */
export interface HybridCounterClientOptions extends Partial<CounterTableLayout>, FlatSelection {
    readonly tableName: string;
    /**
     * Which items count: those the client writes (default), every item whose sort key begins with a
     * prefix (the client then refuses other ids), or every item with an attribute equal to a value (the
     * client sets it on every item it creates). @default { kind: "client" }, or the flat fields' selection
     */
    readonly selection?: ItemSelection;
    /**
     * The table holding the counter items: the component's clientConfig `countersTableName`. Required (the
     * constructor raises ConfigurationError without it): pass `tableName` again for the same-table placement.
     */
    readonly countersTableName?: string;
    /**
     * The deployed settler's quiet window (the component's clientConfig `healQuietWindowSeconds`): when given,
     * a `deadlineMs` the window does not cover is refused (runtime/heal/heal-window.ts).
     */
    readonly healQuietWindowSeconds?: number;
    /**
     * The period of the ledger entries the client writes on best-effort (runtime/ledger/ledger.ts), in whole seconds
     * (1..86400): a heal of a busy key folds whole periods. Every client of a key may use its own. @default a tenth of
     * `healQuietWindowSeconds`, or 60 when that is not given; a harness that compresses the settler's window passes the
     * tenth of the compressed one.
     */
    readonly ledgerPeriodSeconds?: number;
    /**
     * Shards of every key's counting (the component's clientConfig `counterShards`; runtime/shards/layout.ts): must
     * be the value the consumer runs with. Above 1 a key must not hold U+0000. @default 1
     */
    readonly counterShards?: number;
    /**
     * The regions the counter counts in, on a global table (the component's clientConfig `regions`; runtime/regions/):
     * this client's region (`current`) and every member, one of them the home. The client stamps `current` on every
     * item it creates, moves units only on its own region's counter items, and `count()` sums every region's.
     * Needs a counters table of its own. @default one region
     */
    readonly regions?: RegionsConfig;
    /** The region stamp's attribute (the component's clientConfig `regionAttribute`). @default "hc_region" */
    readonly regionAttribute?: string;
    /** The DynamoDB client to use: its endpoint, credentials and middleware apply (the client makes its own write retries). */
    readonly dynamodb: DynamoDBClient;
    /** @default "utilization" */
    readonly mode?: CounterMode;
    /**
     * Attempts per write (the client turns the SDK's retries off for its writes and retries itself):
     * the resource put, the claim and the soft delete (recognised by their token) and safe-direction
     * counter writes. A TransactionConflictException on the soft delete (the consumer is writing the same
     * item) is retried this way. @default 10
     */
    readonly attempts?: number;
    /**
     * No write of one call is sent later than this after the call's first write; a write not sent in
     * time is abandoned (which only holds a strict slot back or undercounts). Healing's quiet window must
     * be longer. @default 10000
     */
    readonly deadlineMs?: number;
    /** Called for every absorbed failure (counter writes and reads), for logs or metrics. @default no-op */
    readonly onBestEffortFailure?: (failure: BestEffortFailure) => void;
    /** Writes CloudWatch EMF lines (one per call that had something to report). @default none */
    readonly metrics?: { readonly namespace: string; readonly sink?: LineSink };
}

export class HybridCounterClient {
    readonly mode: CounterMode;
    private readonly config: ClientConfig;
    private readonly dynamodb: DynamoDBClient;
    private readonly attempts: number;
    private readonly deadlineMs: number;
    private readonly headroom: number;
    private readonly reserved: ReadonlySet<string>;
    private readonly resources: ResourceWriter;
    private readonly bestEffort: BestEffortCounter;
    private readonly onFailure: (failure: BestEffortFailure) => void;
    private readonly metrics: Metrics<ClientMetricName> | undefined;
    /** Shards of every key's counting (runtime/shards/layout.ts): 1 unless the deployment spreads a hot key. */
    private readonly shards: number;
    /** The shard the last new life was homed in (sharded keys take the shards in turn, from a random one). */
    private turn: number;

    /** Throws ConfigurationError naming every bad option. */
    constructor(options: HybridCounterClientOptions) {
        const resolved = resolveClientOptions(options);
        this.config = resolved.config;
        this.shards = shardCount(this.config);
        this.turn = Math.floor(Math.random() * this.shards);
        this.mode = resolved.mode;
        this.attempts = resolved.attempts;
        this.deadlineMs = resolved.deadlineMs;
        this.headroom = resolved.headroom;
        this.reserved = resolved.reserved;
        this.dynamodb = options.dynamodb;
        this.metrics = options.metrics
            ? new Metrics(options.metrics.namespace, "hybrid-counter-client", options.metrics.sink ?? stdoutSink)
            : undefined;
        const report = options.onBestEffortFailure ?? (() => undefined);
        this.onFailure = (failure) => {
            this.metrics?.add(FAILURE_METRIC[failure.operation]);
            report(failure);
        };
        this.resources = new ResourceWriter(
            this.config,
            this.mode,
            this.dynamodb,
            this.attempts,
            resolved.deleteTokenAttribute,
            this.onFailure,
        );
        this.bestEffort = new BestEffortCounter(
            this.config,
            this.mode === "strict",
            this.dynamodb,
            this.attempts,
            this.onFailure,
            resolved.ledgerPeriodMs,
        );
    }

    /**
     * Creates the resource item `id` under counter `key` and counts it.
     *
     * Resolves `{ created: false }` when an item with this id exists (including one soft-deleted and
     * not yet removed by the consumer). A retried call never counts twice. In strict mode create()
     * reserves without a limit (use tryCreate() to enforce one), and also resolves `{ created: false }`
     * when the slot could not be reserved (nothing is written).
     *
     * Throws: InvalidArgumentError (before anything is written), including an item too large to leave
     * room for the counter's own attributes; DeadlineExceededError when the deadline passed before the put
     * could be sent (strict mode, after a slow reservation); otherwise only the error of the resource
     * write itself, unchanged (for example a throttling error that outlived every attempt). Counter
     * failures are absorbed.
     */
    async create(key: string, id: string, attributes?: Record<string, unknown>): Promise<CreateResult> {
        const resource = this.resourceItem(key, id, attributes);
        const deadline = new CallDeadline(this.deadlineMs, tokenTime(resource.token));
        return this.call(key, async (drifted) => {
            if (this.mode === "strict") {
                const reservation = await this.bestEffort.reserve(key, this.home(resource), undefined, deadline, resource.token);
                if (reservation.outcome !== "reserved") {
                    // Without a reservation the upper bound would break: nothing is written. A failed one may have committed.
                    drifted(reservation.outcome === "failed");
                    return { created: false };
                }
                drifted(reservation.repeated);
                return { created: await this.putReserved(resource, deadline, drifted) };
            }
            const put = await this.resources.put(resource, deadline);
            // A put in doubt that answered no life of its own may have committed one that no increment counts.
            drifted(put.outcome !== "mine" && put.doubt);
            if (put.outcome === "failed") {
                throw put.error;
            }
            if (put.outcome === "mine") {
                drifted(!(await this.bestEffort.once(key, this.home(resource), 1, "increment", deadline, resource.token)));
            }
            return { created: put.outcome === "mine" };
        });
    }

    /**
     * Creates the item only if the count is below `limit` (a limit of 0 refuses every creation).
     *
     * utilization: reads max(bestEffort, eventual) and creates when it is below the limit; concurrent
     * callers can briefly exceed the limit by as many as raced.
     * strict: reserves a slot with a conditional increment of best-effort, then creates; never exceeds.
     *
     * Never throws for counter trouble: a counter that cannot be read or reserved (or a deadline that
     * passed before the put could be sent) answers `{ created: false, reason: "unavailable" }`, shaped
     * like the API's normal "limit reached", and is reported to onBestEffortFailure.
     * Throws: InvalidArgumentError before anything is written; the resource write's own error, unchanged.
     */
    async tryCreate(key: string, id: string, limit: number, attributes?: Record<string, unknown>): Promise<TryCreateResult> {
        const resource = this.resourceItem(key, id, attributes);
        checkLimit(limit);
        // The call began when its token was made: a utilization heal trusts the token's time (heal.ts, A1), so
        // the count read before the put spends the same deadline.
        const deadline = new CallDeadline(this.deadlineMs, tokenTime(resource.token));
        return this.call(key, (drifted) =>
            this.mode === "strict"
                ? this.tryCreateStrict(resource, limit, deadline, drifted)
                : this.tryCreateUtilization(resource, limit, deadline, drifted),
        );
    }

    /**
     * Soft-deletes the item (`deleted = true`); the consumer counts the deletion and removes it.
     *
     * Both modes first read the item (1 RCU; strict mode then reads its marker, after the item: strict-ledger.ts),
     * so deleting a missing id never touches the counter, and only client-counted items move
     * best-effort.
     * utilization: claims the delete on the item, decrements best-effort, then soft-deletes under the
     * claim: concurrent deletes of one id decrement once (a claim is taken over only after the client
     * deadline, which can at most undercount). If the claim or the decrement fails after every
     * attempt, the item is left live (the claim given back) and that write's DynamoDB error is thrown,
     * because soft-deleting without the decrement would overcount.
     * strict: touches best-effort (no count change), soft-deletes, then releases the slot (a failure can
     * only hold the slot back). If the touch fails after every attempt, the item is left untouched and
     * its error is thrown.
     *
     * Resolves `{ deleted: false }` when the item does not exist, is already deleted, or a concurrent
     * delete of the same id holds it or won.
     * Throws: InvalidArgumentError before anything is written; DeadlineExceededError when the deadline
     * passed before the soft delete could be sent (the item stays live, best-effort may be one low);
     * otherwise only DynamoDB errors of the delete's own reads and writes, unchanged, after a
     * TransactionConflictException has been retried.
     */
    async delete(key: string, id: string): Promise<DeleteResult> {
        checkKey(key, this.shards);
        checkId(id, this.config.counterPrefix, this.config.selection, this.config.regions);
        const deadline = new CallDeadline(this.deadlineMs);
        return this.call(key, async (drifted) => {
            const live = await this.resources.liveItem(key, id, this.mode === "strict");
            if (live === undefined) {
                return { deleted: false };
            }
            if (live.foreign === true) {
                // Another region owns the life (runtime/regions/): this region cannot write the owner's counter items,
                // so the soft delete moves no unit. The owner's consumer sees it replicated, marks the key due, and the
                // owner's heal gives the unit back: best-effort overcounts meanwhile, never undercounts.
                const outcome = await this.resources.softDelete(
                    key,
                    id,
                    live.createToken,
                    undefined,
                    deadline,
                    this.config.regions?.current,
                );
                if (outcome === "mine") {
                    this.metrics?.add("ForeignDeletes");
                }
                return { deleted: outcome !== "taken" };
            }
            // An item another writer moved out of the selection: a heal since may have taken its unit, so what this
            // delete moves may leave best-effort off its items (the consumer marked the move; a heal may have run since).
            drifted(live.clientCounted && !live.selected);
            // The shard that holds the life's unit (runtime/shards/layout.ts): its token's, else its id's.
            const home = homeShard(id, live.createToken ?? undefined, this.shards);
            if (this.mode === "strict") {
                const epoch = await this.bestEffort.repeatable(key, home, 0, deadline);
                // A life that may have a second item (its put was repeated, or its creating call may still repeat it)
                // gives its slot back once, taken on its marker before the soft delete: another item of the life is
                // then deleted without a release, and the creating call does not repeat (strict-ledger.ts).
                const token = live.createToken;
                const prune = live.prune ?? [];
                let mayRelease = token === null || live.release === "direct";
                if (token !== null && live.release === "marker") {
                    mayRelease = await this.resources.takeRelease(key, id, token, prune, deadline);
                } else {
                    await this.resources.pruneMarks(key, id, prune, deadline);
                }
                const outcome = await this.resources.softDelete(key, id, live.createToken, undefined, deadline);
                // "gone": live a moment ago and removed now. Either this call's soft delete committed and the
                // consumer already removed the item before a retry could see it, or a concurrent delete did
                // both. Never release then: a release not sent only holds a slot back, a wrong one breaks the bound.
                // A unit a strict backfill added (hc_be) is given back once: by the delete that takes the flag
                // off the marker. The flag outlives the life it was set for (the marker is per id), so a later
                // life of the id, written by another writer, would otherwise release it a second time.
                // An item carrying a token whose marker holds a unit of this epoch flagged for this very life is one a
                // backfill adopted (made before the clients began: no reservation of the life backs it): its delete takes
                // that unit, as a token-less item's does. Released through the token instead, the flag would stay, and a
                // later life of the id (another writer's, token-less) would give the same unit back a second time. A flag
                // of an earlier life of the id stays for that life's unit.
                const adopted = live.createToken !== null && live.unitEpoch === epoch.epoch && live.unitLife === live.createToken;
                let held = false;
                if (outcome === "mine" && live.clientCounted) {
                    const owned =
                        mayRelease &&
                        (live.createToken !== null && !adopted
                            ? reservedInEpoch(live.createToken, epoch)
                            : await this.resources.takeBackfillUnit(key, id, epoch.epoch, deadline));
                    // A slot not given back is held until a heal: the key is due for one. The release moves the life's
                    // ledger entry when the unit is its reservation (a backfill's unit, the epoch's entry: runtime/ledger/), and
                    // lands only in the epoch the touch read: a heal since then may have counted the item from the
                    // table, and taken this unit already (runtime/heal/heal.ts, "A busy key").
                    const life = live.createToken !== null && !adopted ? live.createToken : undefined;
                    held = !(owned && (await this.bestEffort.once(key, home, -1, "release", deadline, life, epoch.epoch)));
                }
                held ||= outcome === "gone" && live.clientCounted;
                drifted(held);
                if (held) {
                    // The touch put the key on the heal index, but a heal of the busy key since may have taken it off
                    // (runtime/heal/heal.ts, "A busy key"): the held slot lists it again.
                    await this.bestEffort.markDue(key);
                }
                return { deleted: outcome !== "taken" };
            }
            if (!live.clientCounted) {
                const outcome = await this.resources.softDelete(key, id, live.createToken, undefined, deadline);
                return { deleted: outcome !== "taken" };
            }
            const claim = newToken();
            let outcome: WriteOutcome;
            try {
                const claimed = await this.resources.claim(
                    key,
                    id,
                    live.createToken,
                    claim,
                    this.deadlineMs + CLAIM_TAKEOVER_MARGIN_MS,
                    deadline,
                );
                if (claimed !== "mine") {
                    return { deleted: false };
                }
                drifted((await this.bestEffort.repeatable(key, home, -1, deadline, live.createToken ?? undefined)).repeated);
                outcome = await this.resources.softDelete(key, id, live.createToken, claim, deadline);
            } catch (error) {
                // The item may be left live with this call's claim (and best-effort one low): give the claim
                // back so that a retried delete proceeds at once. A decrement already sent only undercounts.
                drifted(true);
                await this.resources.unclaim(key, id, claim, deadline);
                throw error;
            }
            // "gone": this call's soft delete committed and the consumer removed the item before a retry
            // could see it. "taken": the claim was taken over (this call outlived its deadline); the
            // decrement already sent only undercounts.
            drifted(outcome === "taken");
            return { deleted: outcome !== "taken" };
        });
    }

    /**
     * Reads both counters: one strongly consistent Query per shard of the key (one when unsharded), sent at once,
     * 1 RCU each (runtime/shards/read.ts).
     * Throws: InvalidArgumentError; the read's DynamoDB error, unchanged (this is a read the caller adds).
     */
    async count(key: string): Promise<CounterValue> {
        checkKey(key, this.shards);
        if (this.config.regions !== undefined) {
            return readRegionsCounters(this.dynamodb, { ...this.config, regions: this.config.regions }, key);
        }
        const { bestEffort, eventual } = await readKeyCounters(this.dynamodb, this.config, key, [this.config.countAttribute]);
        return { bestEffort, eventual, value: Math.max(bestEffort, eventual) };
    }

    // --- helpers ---------------------------------------------------------------------------------

    private async tryCreateStrict(
        resource: ResourceItem,
        limit: number,
        deadline: CallDeadline,
        drifted: Drifted,
    ): Promise<TryCreateResult> {
        const reservation = await this.reserveUnder(resource, limit, deadline);
        if (reservation.outcome === "limit") {
            return { created: false, count: reservation.value, reason: "limit" };
        }
        if (reservation.outcome === "failed") {
            drifted(true);
            return this.unavailable();
        }
        drifted(reservation.repeated);
        // A reservation taken in another shard than the token's home: the life takes a token homed there.
        if (reservation.shard !== this.home(resource)) {
            resource = this.resources.rehome(resource, reservation.shard);
        }
        const put = await this.resources.put(resource, deadline);
        if (put.outcome === "mine") {
            return { created: true, count: reservation.value };
        }
        drifted(put.doubt || !(await this.bestEffort.once(resource.key, reservation.shard, -1, "release", deadline, resource.token)));
        if (put.outcome === "taken") {
            return { created: false, count: put.doubt ? reservation.value : reservation.value - 1, reason: "exists" };
        }
        if (put.error instanceof DeadlineExceededError) {
            this.onFailure({ key: resource.key, operation: "put", error: put.error });
            return this.unavailable();
        }
        throw put.error;
    }

    private async tryCreateUtilization(
        resource: ResourceItem,
        limit: number,
        deadline: CallDeadline,
        drifted: Drifted,
    ): Promise<TryCreateResult> {
        let current: CounterValue;
        try {
            current = await withRetries(() => this.count(resource.key), isRetryable, this.attempts);
        } catch (error) {
            this.onFailure({ key: resource.key, operation: "read", error });
            return this.unavailable();
        }
        if (current.value >= limit) {
            return { created: false, count: current.value, reason: "limit" };
        }
        const put = await this.resources.put(resource, deadline);
        drifted(put.outcome !== "mine" && put.doubt);
        if (put.outcome === "taken") {
            return { created: false, count: current.value, reason: "exists" };
        }
        if (put.outcome === "failed") {
            if (put.error instanceof DeadlineExceededError) {
                this.onFailure({ key: resource.key, operation: "put", error: put.error });
                return this.unavailable();
            }
            throw put.error;
        }
        drifted(!(await this.bestEffort.once(resource.key, this.home(resource), 1, "increment", deadline, resource.token)));
        return { created: true, count: current.value + 1 };
    }

    /** The shard a new life's unit goes to: its token's (runtime/shards/layout.ts). */
    private home(resource: ResourceItem): number {
        return lifeShard(resource.token, this.shards);
    }

    /**
     * Strict mode: reserves a slot under `limit`. Unsharded, today's one conditional write; sharded, within the
     * shards' stored quotas, the token's home first, else through a serializable read and a rearm
     * (runtime/shards/reservation.ts).
     */
    private async reserveUnder(resource: ResourceItem, callLimit: number, deadline: CallDeadline): Promise<ShardReservation> {
        const { key } = resource;
        // Regions: this region admits under its own quota of the key's limit, which the other regions' quotas sum with
        // to at most the limit, on its own counter items only (runtime/regions/index.ts).
        const limit = this.config.regions === undefined ? callLimit : baseQuota(callLimit, this.config.regions);
        if (this.shards === 1) {
            const reservation = await this.bestEffort.reserve(key, 0, limit, deadline, resource.token);
            return reservation.outcome === "reserved" ? { ...reservation, shard: 0 } : reservation;
        }
        const first = this.home(resource);
        return reserveAcrossShards({
            shards: this.shards,
            limit,
            first,
            reserveIn: (shard) => this.bestEffort.reserve(key, shard, limit, deadline, resource.token, true),
            snapshot: () => this.bestEffort.snapshot(key, this.shards, deadline),
            rearm: (counts, quotas) => this.bestEffort.rearm(key, first, limit, counts, quotas, deadline, resource.token),
        });
    }

    /**
     * Runs one call on `key`. The call says `drifted(true)` where its best-effort writes may not match the item
     * writes it committed (a held slot, an absorbed failure, a decrement without its soft delete, a write repeated
     * after an attempt that may have committed). In utilization mode the key is then put on the heal index once,
     * when the call ends, thrown or not; a call that keeps best-effort exact writes no entry. In strict mode every
     * best-effort write already carries the entry (runtime/shared/best-effort-marks.ts).
     */
    private async call<T>(key: string, body: (drifted: Drifted) => Promise<T>): Promise<T> {
        let due = false;
        try {
            return await body((drift) => {
                due ||= drift;
            });
        } finally {
            if (due && this.mode === "utilization") {
                await this.bestEffort.markDue(key);
            }
            this.metrics?.flush();
        }
    }

    private unavailable(): TryCreateResult {
        this.metrics?.add("Unavailable");
        return { created: false, count: null, reason: "unavailable" };
    }

    private resourceItem(key: string, id: string, attributes: Record<string, unknown> | undefined): ResourceItem {
        checkKey(key, this.shards);
        checkId(id, this.config.counterPrefix, this.config.selection, this.config.regions);
        let resource = this.resources.item(key, id, marshalAttributes(attributes, this.reserved));
        // Sharded: new lives take the shards in turn (a token drawn to home there), so this client's units and writes
        // spread evenly rather than at random over a hot key's partitions.
        if (this.shards > 1) {
            this.turn = (this.turn + 1) % this.shards;
            resource = this.resources.rehome(resource, this.turn);
        }
        checkItemSize(resource.item, this.headroom);
        return resource;
    }

    /**
     * Strict mode: puts the reserved item. The slot is given back only when the put certainly wrote
     * nothing: another item holds the id, or every attempt was refused with a 4xx (a ValidationException,
     * a missing table). A put in doubt (a 5xx or a timeout on some attempt, and no way to tell) keeps its
     * slot, which can only hold capacity back.
     */
    private async putReserved(resource: ResourceItem, deadline: CallDeadline, drifted: Drifted): Promise<boolean> {
        const put = await this.resources.put(resource, deadline);
        if (put.outcome === "mine") {
            return true;
        }
        drifted(put.doubt || !(await this.bestEffort.once(resource.key, this.home(resource), -1, "release", deadline, resource.token)));
        if (put.outcome === "failed") {
            throw put.error;
        }
        return false;
    }
}
