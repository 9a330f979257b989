/**
 * A create, in each mode.
 *
 * Utilization (best-effort <= live): the put, then +1 (sent once), only after the put answered "mine": every +1 stands
 * for a life written first. A failure only drops a +1.
 *
 * Strict (live <= best-effort <= limit): the reservation (+1 under the limit) before the put, so every life holds a slot
 * before it exists. The slot is given back only when the put certainly wrote nothing (another life holds the id, or
 * every attempt was refused with a 4xx); a put in doubt keeps it (a held slot, healed later). A put never makes a
 * second life of one call (runtime/client/puts.ts), so one reservation never backs two lives.
 */
import { DeadlineExceededError } from "../shared/errors";
import { CallDeadline } from "../shared/retry";
import { tokenTime } from "../shared/tokens";
import { shardCount } from "../shards/layout";
import { capTag, clearCaps, planCaps, readCaps, writeCaps, type RegionGuard } from "../shards/caps";
import { readKeyCounters } from "./read";
import { readLimits, resolveLimit } from "../limits/limits";
import { isRetryable } from "../shared/aws-errors";
import { withRetries } from "../shared/retry";
import { regionAdmission, shardTag } from "../regions/caps";
import type { Call } from "./call";
import type { ResourceItem } from "./puts";
import type { Admission, Reservation } from "./units";

export interface TryCreateResult {
    readonly created: boolean;
    /**
     * The count the decision was made on, plus one when this call created the item: in strict mode the best-effort
     * upper bound (of the shard that took the slot; with regions, this region's). Null only when `reason` is
     * "unavailable".
     */
    readonly count: number | null;
    /** Why nothing was created: the limit is reached, the id exists, or the counter could not be read or reserved. */
    readonly reason?: "limit" | "exists" | "unavailable";
}

/** The limit a call runs under: its own, else the key's stored one, else the default, else none. */
export async function limitFor(call: Call, given: number | undefined): Promise<number | undefined> {
    if (given !== undefined) {
        return given;
    }
    return resolveLimit(await readLimits(call.parts.dynamodb, call.parts.config, call.key)).limit;
}

function unavailable(call: Call): TryCreateResult {
    call.parts.unavailable();
    return { created: false, count: null, reason: "unavailable" };
}

/** Utilization: read, compare, put, +1. */
export async function createUtilization(call: Call, resource: ResourceItem, limit: number | undefined | "none"): Promise<TryCreateResult> {
    const { parts } = call;
    let value = 0;
    if (limit !== "none") {
        try {
            const [read, stored] = await withRetries(
                () =>
                    Promise.all([
                        readKeyCounters(parts.dynamodb, parts.config, call.key),
                        limit === undefined ? readLimits(parts.dynamodb, parts.config, call.key) : undefined,
                    ]),
                isRetryable,
                3,
            );
            value =
                read.regions === undefined
                    ? Math.max(read.bestEffort, read.eventual)
                    : read.regions.reduce((s, r) => s + Math.max(r.bestEffort, r.eventual), 0);
            const effective = limit ?? resolveLimit(stored!).limit;
            if (effective !== undefined && value >= effective) {
                return { created: false, count: value, reason: "limit" };
            }
        } catch (error) {
            parts.onFailure({ key: call.key, operation: "read", error });
            return unavailable(call);
        }
    }
    const deadline = createDeadline(call, resource);
    const put = await parts.puts.put(resource, deadline);
    if (put.outcome === "taken") {
        call.drifted(put.doubt);
        return { created: false, count: value, reason: "exists" };
    }
    if (put.outcome === "failed") {
        call.drifted(put.doubt);
        if (put.error instanceof DeadlineExceededError) {
            parts.onFailure({ key: call.key, operation: "put", error: put.error });
            return unavailable(call);
        }
        throw put.error;
    }
    const period = call.periodOf(resource.token)!;
    call.drifted(!(await parts.units.increment(call.key, call.shardOf(resource.id), period, deadline)));
    return { created: true, count: value + 1 };
}

/**
 * A create's deadline runs from its token's time, not from its first write: a heal takes a life's period from its
 * token, and takes a life as young only while every write of its create may still land (runtime/ledger/ledger.ts). A
 * create whose reads outlast the deadline sends no write.
 */
function createDeadline(call: Call, resource: ResourceItem): CallDeadline {
    return new CallDeadline(call.parts.deadlineMs, tokenTime(resource.token));
}

/** Strict: reserve under the limit (none: unlimited), put, give the slot back only when the put wrote nothing. */
export async function createStrict(call: Call, resource: ResourceItem, limit: number | undefined): Promise<TryCreateResult> {
    const { parts } = call;
    const deadline = createDeadline(call, resource);
    const shard = call.shardOf(resource.id);
    const period = call.periodOf(resource.token)!;
    const reservation = await reserveUnder(call, shard, period, limit, deadline);
    if (reservation.outcome === "refused") {
        return { created: false, count: reservation.count, reason: "limit" };
    }
    if (reservation.outcome === "failed") {
        call.drifted(true);
        return unavailable(call);
    }
    call.drifted(reservation.repeated);
    const put = await parts.puts.put(resource, deadline);
    if (put.outcome === "mine") {
        return { created: true, count: reservation.count };
    }
    // A put in doubt keeps its slot (held); one that certainly wrote nothing gives it back.
    call.drifted(put.doubt || !(await parts.units.releaseUnmade(call.key, shard, period, deadline)));
    if (put.outcome === "taken") {
        return { created: false, count: put.doubt ? reservation.count : reservation.count - 1, reason: "exists" };
    }
    if (put.error instanceof DeadlineExceededError) {
        parts.onFailure({ key: call.key, operation: "put", error: put.error });
        return unavailable(call);
    }
    throw put.error;
}

/** Strict: one reservation, under the limit, a shard's cap, or a region's. */
async function reserveUnder(
    call: Call,
    shard: number,
    period: number,
    limit: number | undefined,
    deadline: CallDeadline,
): Promise<Reservation> {
    const { parts } = call;
    if (limit === 0) {
        const read = await readKeyCounters(parts.dynamodb, parts.config, call.key).catch(() => undefined);
        return read === undefined ? { outcome: "failed" } : { outcome: "refused", count: read.bestEffort };
    }
    if (limit === undefined) {
        return reserveUncapped(call, shard, period, deadline);
    }
    if (parts.config.regions !== undefined) {
        return reserveInRegion(call, shard, period, limit, deadline);
    }
    if (shardCount(parts.config) === 1) {
        return parts.units.reserve(call.key, shard, period, { limit }, deadline);
    }
    return reserveInShards(call, shard, period, capTag(limit), limit, deadline);
}

/** Under no limit: where no caps are armed; caps found armed are taken away from every shard first (runtime/shards/caps.ts). */
async function reserveUncapped(call: Call, shard: number, period: number, deadline: CallDeadline): Promise<Reservation> {
    const { parts } = call;
    for (let round = 0; deadline.open() && round < parts.attempts; round++) {
        const reservation = await parts.units.reserve(call.key, shard, period, { unlimited: true }, deadline);
        if (reservation.outcome !== "refused") {
            return reservation;
        }
        await clearCaps(parts.dynamodb, parts.config, call.key, shardCount(parts.config)).catch(() => undefined);
    }
    return { outcome: "failed" };
}

/**
 * A sharded key (or any key of a multi-region counter): within the shard's cap, moving room or re-arming the caps when
 * it has none. `guard`: the region cap the caps are cut from (runtime/regions/caps.ts).
 */
async function reserveInShards(
    call: Call,
    shard: number,
    period: number,
    tag: string,
    limit: number,
    deadline: CallDeadline,
    guard?: RegionGuard,
): Promise<Reservation> {
    const { parts } = call;
    const admission: Admission = { capTag: tag };
    for (let round = 0; deadline.open() && round < 2 * parts.attempts; round++) {
        const reservation = await parts.units.reserve(call.key, shard, period, admission, deadline);
        if (reservation.outcome !== "refused") {
            return reservation;
        }
        const caps = await readCaps(parts.dynamodb, parts.config, call.key, shardCount(parts.config)).catch(() => undefined);
        if (caps === undefined) {
            continue;
        }
        const plan = planCaps(caps, limit, tag, shard);
        if (plan.kind === "limit") {
            return { outcome: "refused", count: plan.count };
        }
        if (plan.kind === "write") {
            await writeCaps(parts.dynamodb, parts.config, call.key, tag, plan.writes, guard).catch(() => undefined);
        }
    }
    return { outcome: "failed" };
}

/** A region of a multi-region counter: within the cap its region holds (runtime/regions/caps.ts). */
async function reserveInRegion(call: Call, shard: number, period: number, limit: number, deadline: CallDeadline): Promise<Reservation> {
    const { parts } = call;
    for (let round = 0; deadline.open() && round < 2 * parts.attempts; round++) {
        const admission = await regionAdmission(parts.dynamodb, parts.config, call.key, limit);
        if (admission.kind === "refuse") {
            return { outcome: "refused", count: admission.count };
        }
        if (admission.kind === "wait") {
            continue;
        }
        return reserveInShards(call, shard, period, shardTag(admission.regionTag, admission.cap), admission.cap, deadline, {
            tag: admission.regionTag,
            cap: admission.cap,
        });
    }
    return { outcome: "failed" };
}
