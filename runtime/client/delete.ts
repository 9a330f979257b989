/**
 * A delete, in each mode. Only a client life (an item carrying the client's token) moves best-effort; any other item
 * is soft-deleted alone, and its unit (a strict heal's, for an item another writer put or the table held before)
 * stays held until the next heal counts the table again.
 *
 * Utilization (best-effort <= live): claim -> -1 -> soft delete. The -1 precedes the soft delete of its life, and the
 * soft delete is conditional on this call's claim: concurrent deletes of one life meet the claim and send no -1. A
 * second -1 for a life needs the claim to change hands (taken over once older than the deadline plus a margin, or
 * given back by a delete that failed before its soft delete): an undercount, never an overcount. A -1 that fails
 * (it may or may not have landed) ends the call with its error before the soft delete: the item stays live.
 *
 * Strict (live <= best-effort): soft delete -> release, once, by the call whose soft delete committed. A release of a
 * life no young ledger entry holds is fenced (runtime/client/units.ts): conditional on the heal generation read before
 * the soft delete; refused, the slot is held until the next heal, which counts the table without the item.
 */
import { isItemTooLarge } from "../shared/aws-errors";
import { CallDeadline } from "../shared/retry";
import { newToken } from "../shared/tokens";
import { ownsImage } from "../regions/ownership";
import type { Call } from "./call";
import type { ItemState, WriteOutcome } from "./puts";

export interface DeleteResult {
    /** True when this call soft-deleted the item; false when it did not exist or was already deleted. */
    readonly deleted: boolean;
}

/** A delete's claim may be taken over this long after the client deadline (requests still in flight). */
export const CLAIM_TAKEOVER_MARGIN_MS = 5_000;

/** Whether best-effort holds a unit for this item that the client moves: a client life this region owns. */
function moves(call: Call, state: ItemState): boolean {
    return state.token !== null && call.periodOf(state.token) !== undefined && ownsImage(call.parts.config, state.item);
}

/** The region to name as the deleting one when another region owns the life (runtime/regions/). */
function foreignRegion(call: Call, state: ItemState): string | undefined {
    const regions = call.parts.config.regions;
    return regions !== undefined && !ownsImage(call.parts.config, state.item) ? regions.current : undefined;
}

/** Soft-deletes (or, for an item grown past 400 KB, removes) the life read, with `claim` when given. */
async function endLife(call: Call, id: string, state: ItemState, claim: string | undefined, deadline: CallDeadline): Promise<WriteOutcome> {
    const { puts } = call.parts;
    try {
        return await puts.softDelete(call.key, id, state.token, claim, deadline, foreignRegion(call, state));
    } catch (error) {
        if (!isItemTooLarge(error)) {
            throw error;
        }
        call.drifted(true);
        return puts.remove(call.key, id, state.token, claim, deadline);
    }
}

/**
 * The -1 of a utilization delete, before its soft delete. A -1 that failed (it may or may not have landed) throws its
 * error: the item stays live, so best-effort is at most one low, never one high.
 */
async function decrement(call: Call, id: string, state: ItemState, deadline: CallDeadline): Promise<void> {
    const ended = await call.parts.units.end(call.key, call.shardOf(id), call.periodOf(state.token), undefined, "decrement", deadline);
    if (ended.outcome === "failed") {
        call.drifted(true);
        throw ended.error;
    }
    call.drifted(ended.outcome !== "done");
}

export async function deleteUtilization(call: Call, id: string, state: ItemState): Promise<DeleteResult> {
    const { parts } = call;
    const deadline = new CallDeadline(parts.deadlineMs);
    if (!moves(call, state)) {
        call.drifted(foreignRegion(call, state) !== undefined);
        // "gone": removed between the read and the soft delete, by another party (or this call's write whose answer
        // was lost, then the tombstone's removal): not this call's delete to report.
        return { deleted: (await endLife(call, id, state, undefined, deadline)) === "mine" };
    }
    const claim = newToken();
    const claimed = await parts.puts
        .claim(call.key, id, state.token, claim, parts.deadlineMs + CLAIM_TAKEOVER_MARGIN_MS, deadline)
        .catch((error: unknown) => {
            if (isItemTooLarge(error)) {
                return "too large" as const;
            }
            throw error;
        });
    if (claimed === "too large") {
        // No claim fits: -1 then the removal; a concurrent delete may -1 too (an undercount, healed later).
        await decrement(call, id, state, deadline);
        const outcome = await parts.puts.remove(call.key, id, state.token, undefined, deadline);
        call.drifted(outcome !== "mine");
        return { deleted: outcome === "mine" };
    }
    if (claimed !== "mine") {
        return { deleted: false };
    }
    let outcome: WriteOutcome;
    try {
        await decrement(call, id, state, deadline);
        outcome = await endLife(call, id, state, claim, deadline);
    } catch (error) {
        // The item is left live with this call's claim (and best-effort perhaps one low): give the claim back.
        call.drifted(true);
        if (!(await parts.puts.unclaim(call.key, id, claim, deadline))) {
            parts.onFailure({ key: call.key, operation: "unclaim", error });
        }
        throw error;
    }
    // "taken": the claim was taken over (this call outlived its deadline); its -1 only undercounts.
    call.drifted(outcome !== "mine");
    return { deleted: outcome === "mine" };
}

export async function deleteStrict(call: Call, id: string, state: ItemState): Promise<DeleteResult> {
    const { parts } = call;
    const deadline = new CallDeadline(parts.deadlineMs);
    if (!moves(call, state)) {
        // Another writer's item, or a life another region owns: its unit (if a heal gave it one) waits for a heal.
        const outcome = await endLife(call, id, state, undefined, deadline);
        call.drifted(outcome === "mine");
        return { deleted: outcome === "mine" };
    }
    const shard = call.shardOf(id);
    const period = call.periodOf(state.token)!;
    // The heal generation, read before the soft delete: a release that meets a later heal holds its slot.
    const gen = (await parts.units.readState(call.key, shard)).gen;
    const outcome = await endLife(call, id, state, undefined, deadline);
    if (outcome === "mine") {
        const released = await parts.units.end(call.key, shard, period, gen, "release", deadline);
        call.drifted(released.outcome !== "done");
    } else {
        // "gone": live a moment ago and removed now (this call's soft delete whose answer was lost, then the removal,
        // or another delete): never release; a slot not given back is only held.
        call.drifted(outcome === "gone");
    }
    return { deleted: outcome === "mine" };
}
