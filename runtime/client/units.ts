/**
 * The client's writes to best-effort: one UpdateItem each, never in a transaction, moving the count and the young
 * ledger's entry together (runtime/ledger/ledger.ts).
 *
 * - A create's write (a reservation, an increment, the release of a put that certainly wrote nothing) uses its
 *   period's entry. A strict reservation is conditional on the limit (`count < limit`), or on the shard's cap for a
 *   sharded key or a region (runtime/shards/caps.ts).
 * - A delete's write (a decrement, a release) uses its life's entry if it exists, and the count alone otherwise. A
 *   strict release of a life no young entry holds is *fenced*: conditional on the heal generation it read before the
 *   delete's soft delete (`hc_g`), and counted in `hc_rel`. A heal that wrote since may have taken the unit from the
 *   table already, so the release then holds its slot rather than take it twice; a heal whose reads it lands between
 *   finds `hc_rel` moved and reads again (runtime/heal/heal.ts).
 *
 * Repeats: a write whose repeat could move the count the unsafe way (a utilization increment, a strict release) is
 * sent once and repeated only after a refusal that wrote nothing (throttling, a transaction or replicated-write
 * conflict). A strict reservation and a utilization decrement are repeated after any retryable error (a repeat only
 * holds a slot or undercounts), and say so. Every write asks for the item back (free), so the client learns the
 * ledger's stale entries and removes them with its next write to the item.
 */
import {
    ConditionalCheckFailedException,
    GetItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { bestEffortKey, eventualKey, numberOf } from "../shared/keys";
import { entriesOf, entryName, periodOf, stalePeriods } from "../ledger/ledger";
import { isRetryable, isUnwritten } from "../shared/aws-errors";
import { DeadlineExceededError } from "../shared/errors";
import { backoff, mayHaveCommitted, sendOnce, withRetries, type CallDeadline } from "../shared/retry";
import { healMark } from "../heal/index-marks";

/** A best-effort write the client absorbed: the call goes on, the key may need a heal. */
export interface BestEffortFailure {
    readonly key: string;
    readonly operation: "increment" | "decrement" | "reserve" | "release" | "read" | "unclaim" | "put" | "due";
    readonly error: unknown;
}

/** The admission condition of a strict reservation. */
export type Admission = { readonly limit: number } | { readonly capTag: string } | { readonly unlimited: true };

export type Reservation =
    | { readonly outcome: "reserved"; readonly count: number; readonly repeated: boolean }
    | { readonly outcome: "refused"; readonly count: number; readonly item?: Record<string, AttributeValue> }
    | { readonly outcome: "failed" };

/** How a delete's write ended: "done", "refused" (a heal since: the slot is held), "failed" (with the error). */
export type EndOutcome = { readonly outcome: "done" | "refused" } | { readonly outcome: "failed"; readonly error: unknown };

const DONE: EndOutcome = { outcome: "done" };
const REFUSED: EndOutcome = { outcome: "refused" };

/** What a strict delete reads of best-effort before its soft delete. */
export interface UnitState {
    readonly gen: number;
}

const STALE_CACHE_SIZE = 1024;

/**
 * How many periods before this clock's current one a life's +1 may still be landing: a create's writes land within
 * its deadline and a request's lifetime, less than a period, so by any clock within the skew budget its period is at
 * most one old while they may; one more period of margin.
 */
const LANDING_PERIODS = 2;

interface Update {
    readonly update: string;
    readonly condition?: string;
    readonly names: Record<string, string>;
    readonly values: Record<string, AttributeValue>;
}

export class BestEffortWriter {
    /** Stale ledger entries seen on each best-effort item, removed with the next write to it. */
    private readonly stale = new Map<string, number[]>();

    constructor(
        private readonly config: CounterConfig,
        private readonly dynamodb: DynamoDBClient,
        private readonly attempts: number,
        private readonly onFailure: (failure: BestEffortFailure) => void,
    ) {}

    /** Strict: reserves a slot for a life of `period` in `shard` under `admission`. */
    async reserve(key: string, shard: number, period: number, admission: Admission, deadline: CallDeadline): Promise<Reservation> {
        const write = this.withLedger(key, shard, period, 1, admissionCondition(admission, this.config.countAttribute));
        let doubt = false;
        for (let attempt = 1; ; attempt++) {
            const sent = await this.send(key, shard, write);
            if (sent.kind === "ok") {
                return { outcome: "reserved", count: numberOf(sent.item, this.config.countAttribute), repeated: doubt };
            }
            if (sent.kind === "condition") {
                // A refusal after an attempt that may have committed: whether that slot was taken cannot be told.
                return doubt
                    ? { outcome: "failed" }
                    : { outcome: "refused", count: numberOf(sent.item, this.config.countAttribute), item: sent.item };
            }
            doubt ||= mayHaveCommitted(sent.error);
            if (!isRetryable(sent.error) || attempt >= this.attempts || !(await backoff(attempt, deadline))) {
                this.onFailure({ key, operation: "reserve", error: sent.error });
                return { outcome: "failed" };
            }
        }
    }

    /** Utilization: the +1 of a life the put made ("mine"), sent once. */
    async increment(key: string, shard: number, period: number, deadline: CallDeadline): Promise<boolean> {
        return this.once(key, this.withLedger(key, shard, period, 1), shard, "increment", deadline);
    }

    /** Strict: gives back the slot of a put that certainly wrote nothing, sent once. */
    async releaseUnmade(key: string, shard: number, period: number, deadline: CallDeadline): Promise<boolean> {
        return (await this.end(key, shard, period, undefined, "release", deadline)).outcome === "done";
    }

    /**
     * A delete's -1 for a life of `period` (undefined: a life without a token). Which entry it moves
     * (runtime/ledger/ledger.ts says why each is safe):
     * - A life whose +1 may still be landing (its period is at most LANDING_PERIODS old by this clock), without a
     *   generation (a utilization decrement, a strict release of a put that wrote nothing): its period's entry,
     *   created if absent. The -1 can land before the +1 (a create still repeating its increment), and the two must
     *   meet in one entry, or a heal would keep the +1 as a young unit and drop the -1 with the base.
     * - Otherwise its entry while it exists, else the count alone: the condition decides, not the clock. So a -1 of
     *   an old life creates no entry, and the entries stay the few periods around the key's writes.
     * - A strict release of a delete (`gen`) is fenced (conditional on the heal generation it read before the soft
     *   delete, and counted in `hc_rel`), unless it goes to the entry of this clock's current period, which every heal
     *   sees young (runtime/heal/heal.ts says why).
     */
    async end(
        key: string,
        shard: number,
        period: number | undefined,
        gen: number | undefined,
        operation: "decrement" | "release",
        deadline: CallDeadline,
    ): Promise<EndOutcome> {
        const now = periodOf(Date.now(), this.config.periodMs);
        const unconditional = (): Promise<EndOutcome> =>
            this.sendEnd(key, shard, this.withLedger(key, shard, period!, -1), operation, deadline);
        if (gen === undefined && period !== undefined && period >= now - LANDING_PERIODS) {
            return unconditional();
        }
        const fenced = gen !== undefined && !(period !== undefined && period >= now);
        let toEntry = period !== undefined && period >= now - 1;
        for (let tries = 0; tries < 3; tries++) {
            const write = toEntry ? this.toEntry(key, shard, period!, fenced ? gen : undefined) : this.toBase(key, shard, period, gen);
            const sent = await this.sendWithRepeats(key, shard, write, operation === "decrement", deadline);
            if (sent.kind === "ok") {
                return DONE;
            }
            if (sent.kind === "error") {
                this.onFailure({ key, operation, error: sent.error });
                return { outcome: "failed", error: sent.error };
            }
            const entryExists = period !== undefined && sent.item?.[entryName(period)] !== undefined;
            if (gen !== undefined && toEntry === entryExists) {
                // The entry is as the write expected, so the generation refused it: a heal came in between.
                return REFUSED;
            }
            toEntry = entryExists;
        }
        // The entry came and went under every attempt: a -1 without a generation goes to its entry, created if absent.
        return gen === undefined && period !== undefined ? unconditional() : REFUSED;
    }

    private async sendEnd(
        key: string,
        shard: number,
        write: Update,
        operation: "decrement" | "release",
        deadline: CallDeadline,
    ): Promise<EndOutcome> {
        const sent = await this.sendWithRepeats(key, shard, write, operation === "decrement", deadline);
        if (sent.kind === "error") {
            this.onFailure({ key, operation, error: sent.error });
            return { outcome: "failed", error: sent.error };
        }
        return DONE;
    }

    /** Strict: the heal generation, read before a soft delete (a consistent read of the item). */
    async readState(key: string, shard: number): Promise<UnitState> {
        const response = await withRetries(
            () =>
                this.dynamodb.send(
                    new GetItemCommand({
                        TableName: this.config.countersTableName,
                        Key: bestEffortKey(this.config, key, shard),
                        ConsistentRead: true,
                        ProjectionExpression: "#g",
                        ExpressionAttributeNames: { "#g": GEN },
                    }),
                ),
            isRetryable,
            this.attempts,
        );
        return { gen: numberOf(response.Item, GEN) };
    }

    /** Lists the key on the heal index (its eventual item carries the mark: runtime/heal/index-marks.ts). */
    async markDue(key: string): Promise<void> {
        const mark = healMark(this.config, key, Date.now());
        try {
            await this.dynamodb.send(
                new UpdateItemCommand({
                    TableName: this.config.countersTableName,
                    Key: eventualKey(this.config, key),
                    UpdateExpression: `SET ${mark.update}`,
                    ExpressionAttributeNames: mark.names,
                    ExpressionAttributeValues: mark.values,
                }),
            );
        } catch (error) {
            this.onFailure({ key, operation: "due", error });
        }
    }

    private withLedger(key: string, shard: number, period: number, delta: number, condition?: Update): Update {
        const names: Record<string, string> = { "#c": this.config.countAttribute, "#e": entryName(period), ...(condition?.names ?? {}) };
        const values: Record<string, AttributeValue> = { ":d": { N: String(delta) }, ...(condition?.values ?? {}) };
        return { update: `ADD #c :d, #e :d${this.removals(key, shard, names, [period])}`, condition: condition?.condition, names, values };
    }

    private toEntry(key: string, shard: number, period: number, gen: number | undefined): Update {
        const names: Record<string, string> = { "#c": this.config.countAttribute, "#e": entryName(period) };
        const values: Record<string, AttributeValue> = { ":d": { N: "-1" } };
        const conditions = ["attribute_exists(#e)", ...generationCondition(gen, names, values)];
        return {
            update: `ADD #c :d, #e :d${fencedCount(gen, names, values)}${this.removals(key, shard, names, [period])}`,
            condition: conditions.join(" AND "),
            names,
            values,
        };
    }

    private toBase(key: string, shard: number, period: number | undefined, gen: number | undefined): Update {
        const names: Record<string, string> = { "#c": this.config.countAttribute };
        const values: Record<string, AttributeValue> = { ":d": { N: "-1" } };
        const conditions: string[] = [];
        if (period !== undefined) {
            names["#e"] = entryName(period);
            conditions.push("attribute_not_exists(#e)");
        }
        conditions.push(...generationCondition(gen, names, values));
        const keep = period === undefined ? [] : [period];
        return {
            update: `ADD #c :d${fencedCount(gen, names, values)}${this.removals(key, shard, names, keep)}`,
            condition: conditions.length > 0 ? conditions.join(" AND ") : undefined,
            names,
            values,
        };
    }

    /** " REMOVE ..." for the stale entries last seen on the item (none it is about to use). */
    private removals(key: string, shard: number, names: Record<string, string>, keep: number[]): string {
        const now = periodOf(Date.now(), this.config.periodMs);
        const stale = (this.stale.get(cacheKey(key, shard)) ?? []).filter((p) => p < now - 1 && !keep.includes(p)).slice(0, 8);
        stale.forEach((p, i) => (names[`#s${i}`] = entryName(p)));
        return stale.length === 0 ? "" : ` REMOVE ${stale.map((_, i) => `#s${i}`).join(", ")}`;
    }

    private async once(
        key: string,
        write: Update,
        shard: number,
        operation: BestEffortFailure["operation"],
        deadline: CallDeadline,
    ): Promise<boolean> {
        const sent = await this.sendWithRepeats(key, shard, write, false, deadline);
        if (sent.kind === "error") {
            this.onFailure({ key, operation, error: sent.error });
        }
        return sent.kind === "ok";
    }

    /** Sends `write`, repeating after refusals that wrote nothing (`any`: after any retryable error). */
    private async sendWithRepeats(key: string, shard: number, write: Update, any: boolean, deadline: CallDeadline): Promise<Sent> {
        for (let attempt = 1; ; attempt++) {
            if (!deadline.open()) {
                return { kind: "error", error: new DeadlineExceededError("best-effort write", deadline.ms) };
            }
            const sent = await this.send(key, shard, write);
            if (sent.kind !== "error") {
                return sent;
            }
            const repeatable = any ? isRetryable(sent.error) : isUnwritten(sent.error);
            if (!repeatable || attempt >= this.attempts || !(await backoff(attempt, deadline))) {
                return sent;
            }
        }
    }

    private async send(key: string, shard: number, write: Update): Promise<Sent> {
        try {
            const response = await sendOnce(
                this.dynamodb,
                new UpdateItemCommand({
                    TableName: this.config.countersTableName,
                    Key: bestEffortKey(this.config, key, shard),
                    UpdateExpression: write.update,
                    ...(write.condition === undefined ? {} : { ConditionExpression: write.condition }),
                    ExpressionAttributeNames: write.names,
                    ExpressionAttributeValues: write.values,
                    ReturnValues: "ALL_NEW",
                    ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                }),
            );
            this.remember(key, shard, response.Attributes);
            return { kind: "ok", item: response.Attributes ?? {} };
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                this.remember(key, shard, error.Item);
                return { kind: "condition", item: error.Item };
            }
            return { kind: "error", error };
        }
    }

    private remember(key: string, shard: number, item: Record<string, AttributeValue> | undefined): void {
        const stale = stalePeriods(entriesOf(item), periodOf(Date.now(), this.config.periodMs));
        const id = cacheKey(key, shard);
        this.stale.delete(id);
        if (stale.length > 0) {
            this.stale.set(id, stale);
            if (this.stale.size > STALE_CACHE_SIZE) {
                this.stale.delete(this.stale.keys().next().value!);
            }
        }
    }
}

/** The condition that the heal generation is still `gen` (none without one). */
function generationCondition(gen: number | undefined, names: Record<string, string>, values: Record<string, AttributeValue>): string[] {
    if (gen === undefined) {
        return [];
    }
    names["#g"] = GEN;
    values[":g"] = { N: String(gen) };
    return [gen === 0 ? "(attribute_not_exists(#g) OR #g = :g)" : "#g = :g"];
}

/** A fenced release (one with a generation) also counts itself in RELEASES: ", #rel :one" (nothing without one). */
function fencedCount(gen: number | undefined, names: Record<string, string>, values: Record<string, AttributeValue>): string {
    if (gen === undefined) {
        return "";
    }
    names["#rel"] = RELEASES;
    values[":one"] = { N: "1" };
    return ", #rel :one";
}

type Sent =
    | { kind: "ok"; item: Record<string, AttributeValue> }
    | { kind: "condition"; item?: Record<string, AttributeValue> }
    | { kind: "error"; error: unknown };

/** The heal generation on a best-effort item: +1 by every heal's write (runtime/heal/heal.ts). */
export const GEN = "hc_g";

/** The fenced releases a best-effort item took: +1 by each; a heal writes only if none landed since its read. */
export const RELEASES = "hc_rel";

/** The strict cap attributes of a sharded key's or a region's best-effort item (runtime/shards/caps.ts). */
export const CAP = "hc_cap";
export const CAP_TAG = "hc_capl";

function admissionCondition(admission: Admission, countAttribute: string): Update | undefined {
    if ("unlimited" in admission) {
        // No limit in force: anywhere no caps are armed (runtime/shards/caps.ts `clearCaps` takes them away first).
        return { update: "", condition: "attribute_not_exists(#tag)", names: { "#tag": CAP_TAG }, values: {} };
    }
    if ("limit" in admission) {
        return {
            update: "",
            condition: "attribute_not_exists(#c) OR #c < :limit",
            names: { "#c": countAttribute },
            values: { ":limit": { N: String(admission.limit) } },
        };
    }
    return {
        update: "",
        condition: "#tag = :tag AND ((attribute_not_exists(#c) AND #cap > :zero) OR #c < #cap)",
        names: { "#c": countAttribute, "#tag": CAP_TAG, "#cap": CAP },
        values: { ":tag": { S: admission.capTag }, ":zero": { N: "0" } },
    };
}

function cacheKey(key: string, shard: number): string {
    return `${shard}\u0000${key}`;
}
