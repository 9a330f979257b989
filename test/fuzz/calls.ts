/**
 * One API call's own accounting in the checker: what its requests did (recorded as each one finishes)
 * and whether its answer and its moves of best-effort are ones the contract allows.
 *
 * - `created: true` means the call wrote the item; `created: false` and `deleted: false` mean it wrote
 *   nothing, but for a put attempt held past a timeout that landed after the call's read decided. Another writer can end a life the call wrote before the call sees it (a repeated put then
 *   finds the id free, or an answer "exists" finds the other writer's item): each life so ended may
 *   stand for one more write. So may a life another client call's delete ended, for a create in doubt (a fault met it)
 *   that answers "exists": whether its put committed cannot be told (docs/limits.md; in strict mode the call keeps its
 *   slot and the delete gave it back through the marker; in utilization mode the call added no unit and the delete took
 *   one off: an undercount until a heal).
 * - A call moves best-effort by the client-counted lives it writes (carrying its token, or in strict
 *   mode an item whose backfill unit it took off the marker): never more in utilization (an overcount), never less in
 *   strict mode (a slot short), and only by a fault, an absorbed failure it reported or an error it threw
 *   away from them. A life another writer ended while the call ran may be left out: its unit stays in
 *   utilization, and in strict mode it holds no slot. So may, in utilization, a life another writer ended before the
 *   call (moved out of the selection) that the call's soft delete did not end: the call took the unit it left. A strict
 *   delete of a life reserved before a heal that lowered the key (an earlier epoch than the one its touch read) holds
 *   its slot by design: that heal absorbed
 *   or re-derived the unit, and only a later heal gives it back (runtime/shared/strict-ledger.ts); so does a
 *   strict delete of a late put attempt of a life a delete already ended (that delete gave the slot back), and a
 *   strict delete that lost a young life's release right to a concurrent delete of it (strict-ledger.ts).
 * - Its only errors are DynamoDB's own for its requests (or the SDK's TimeoutError of a held attempt), after a fault,
 *   and DeadlineExceededError from a delete (or a strict create) whose deadline had passed.
 */
import { DynamoDBServiceException } from "@aws-sdk/client-dynamodb";
import { DeadlineExceededError } from "../../runtime/shared/errors";
import { reservedInEpoch } from "../../runtime/shared/strict-ledger";
import type { EpochSeen, RequestEffect } from "./adapter";
import type { FuzzEvent, Mode } from "./history";
import type { Released } from "./scheduler";

/** Per API call: what its requests did, and what it answered. */
export interface CallLedger {
    readonly event: FuzzEvent;
    bestEffort: number;
    /** Live items its writes added (puts) and took away (soft deletes), whoever's. */
    live: number;
    /** Of those, the client-counted ones best-effort accounts for (carrying a token, or whose backfill unit the call took). */
    counted: number;
    /** The client tokens of the lives it wrote or wrote on. */
    tokens: string[];
    /** Of those, the tokens of the lives its soft deletes ended. */
    softDeleted: string[];
    /** EndedLives.count when it started. */
    endedBefore: number;
    faults: number;
    reported: number;
    /** Its put attempts that were held past a timeout and landed (run.ts), which it could not see when it answered. */
    lateLanded: number;
    /** The heal epoch its last best-effort write answered with. */
    epoch?: EpochSeen;
    /** Lives it soft-deleted that were reserved before that epoch opened: their slots are held by design. */
    heldByEpoch: number;
    /**
     * Late put attempts it soft-deleted (run.ts): the same life as one a delete already ended, so in strict mode
     * the slot was given back then and this delete sends no release (runtime/shared/strict-ledger.ts).
     */
    lateDeleted: number;
    /**
     * The call wrote on a late put attempt (run.ts): a utilization delete of it decrements a second time for one life,
     * an undercount docs/limits.md states (the consumer removing the item marks its key for a heal).
     */
    lateTarget?: boolean;
    /** Strict deletes that found a life's release right taken by another delete of it (read or write): slot held. */
    releaseRightLost: number;
    /** Utilization tryCreate: what it read (every shard's counters, summed), and the truth then. */
    read?: { value: number; live: number; putsBefore: number };
    /** Utilization tryCreate: each shard's lowest read of the two counters (run.ts). */
    shardReads?: Map<number, { bestEffort: number; eventual: number }>;
    /** Utilization tryCreate: the most live items seen at one of its counter reads, and the puts applied before the first. */
    firstRead?: { live: number; putsBefore: number };
    /** Utilization tryCreate: the allowance, checked when its put applied. */
}

export function newLedger(event: FuzzEvent, endedBefore: number): CallLedger {
    return {
        event,
        bestEffort: 0,
        live: 0,
        counted: 0,
        tokens: [],
        softDeleted: [],
        endedBefore,
        faults: 0,
        reported: 0,
        heldByEpoch: 0,
        lateLanded: 0,
        lateDeleted: 0,
        releaseRightLost: 0,
    };
}

/**
 * Whether the engine itself refused `request` for throughput (the parity layer meters each partition as DynamoDB
 * does: a 400 KB item's write takes 400 of a partition's 1,000 write units a second). Such a refusal is a fault the
 * request met, as an injected throttle is: DynamoDB's own error, which the SDK and the parties retry.
 */
export function engineThrottled(request: Released): boolean {
    const error = request.outcome?.error as { name?: string; CancellationReasons?: ReadonlyArray<{ Code?: string }> } | undefined;
    return (
        error?.name === "ThrottlingException" ||
        error?.name === "ProvisionedThroughputExceededException" ||
        (error?.CancellationReasons ?? []).some((reason) => reason?.Code === "ThrottlingError")
    );
}

/** Whether `request` met a fault: one the schedule injected, or a throttle of the engine's (`engineThrottled`). */
export function metFault(request: Released): boolean {
    return request.fault !== undefined || engineThrottled(request);
}

/** Records what one of the call's requests did, as it finishes (before the call goes on). */
export function recordRequest(ledger: CallLedger, request: Released, effect: RequestEffect): void {
    if (metFault(request)) {
        ledger.faults++;
    }
    if (effect.kind === "best-effort" && effect.applied) {
        ledger.bestEffort += effect.delta;
        ledger.epoch = effect.epoch ?? ledger.epoch;
    } else if (effect.kind === "put") {
        if (effect.token !== undefined) {
            ledger.tokens.push(effect.token);
        }
        if (effect.applied) {
            ledger.live++;
            ledger.counted++;
        }
    } else if (effect.kind === "soft-delete") {
        if (effect.createToken !== undefined) {
            ledger.tokens.push(effect.createToken);
        }
        if (effect.applied) {
            ledger.live--;
            if (effect.createToken !== undefined) {
                ledger.softDeleted.push(effect.createToken);
                ledger.counted--;
                if (ledger.epoch !== undefined && !reservedInEpoch(effect.createToken, ledger.epoch)) {
                    ledger.heldByEpoch++;
                }
            }
        }
    } else if (effect.kind === "release-right" && !effect.applied && !metFault(request)) {
        // Another delete of the same life took its release right first: this one holds the slot by design.
        ledger.releaseRightLost++;
    } else if (effect.kind === "backfill-unit-taken" && effect.applied) {
        // An item without the client's token is client-counted for the delete that took its backfill unit.
        ledger.counted--;
    } else if (effect.kind === "life-write" && effect.createToken !== undefined) {
        ledger.tokens.push(effect.createToken);
    }
}

export interface CallEnding {
    readonly answer: unknown;
    readonly thrown: unknown;
    readonly mode: Mode;
    /** From the call's start to its end, on the system's clock (clock.ts), and the client's deadline. */
    readonly elapsedMs: number;
    readonly deadlineMs: number;
    /** Lives carrying one of the call's tokens that other writers ended while it ran. */
    readonly endedMine: number;
    /**
     * Lives carrying one of the call's tokens that other writers had ended before it began (moved out of an attribute
     * selection) and that its own soft deletes did not end: in utilization mode such a life's unit stays in best-effort
     * (the key's allowance `ended`), and a delete of its item decrements it, marking the key (runtime/client/client.ts),
     * whether or not its soft delete then lands (another writer may replace the item first). Absent: none.
     */
    readonly endedBeforeMine?: number;
    /**
     * Lives carrying one of the call's tokens that another client call's delete soft-deleted while it ran. A create
     * (either mode) whose put committed and lost its answer, whose life such a delete ended (and the consumer removed,
     * or a new life replaced) before it looked, finds an item or a release that is not its own: it cannot tell whether
     * its put committed, and answers "exists" (docs/limits.md, "a lost put response racing a delete of the same id").
     * Absent: none.
     */
    readonly deletedMine?: number;
}

/** What the call's answer and moves break of the contract (see the top of this module); empty when nothing. */
export function callProblems(
    ledger: CallLedger,
    { answer, thrown, mode, endedMine, elapsedMs, deadlineMs, deletedMine = 0, endedBeforeMine = 0 }: CallEnding,
): string[] {
    const problems: string[] = [];
    const explained = ledger.faults > 0 || ledger.reported > 0 || thrown !== undefined || ledger.lateTarget === true;
    // The contract's error when a delete's writes (or a strict create's, after a slow reservation) outlast the deadline,
    // which this machine's load can cause: a call the scheduler holds lasts as long as the machine takes over the other
    // tasks. Allowed once the deadline has passed, never before (its clock starts at the call's first write or token,
    // after the call's start).
    const deadlineAllowed = ledger.event.op === "delete" || (ledger.event.op === "create" && mode === "strict");
    if (thrown instanceof DeadlineExceededError && deadlineAllowed) {
        if (elapsedMs < deadlineMs) {
            problems.push(`threw ${describe(thrown)} ${elapsedMs} ms after it started, before its deadline of ${deadlineMs} ms`);
        }
    } else if (thrown !== undefined) {
        // A timed-out attempt (a held put, run.ts) ends a call with the SDK's TimeoutError, as the API's own write would.
        const sdkTimeout = thrown instanceof Error && thrown.name === "TimeoutError";
        if (!(thrown instanceof DynamoDBServiceException) && !sdkTimeout) {
            problems.push(`threw ${describe(thrown)}, which is not in the contract`);
        } else if (ledger.faults === 0) {
            problems.push(`threw ${describe(thrown)} although none of its requests met a fault`);
        }
    }
    const created = (answer as { created?: boolean } | undefined)?.created;
    const deleted = (answer as { deleted?: boolean } | undefined)?.deleted;
    const ends = `(${endedMine} ended by other writers)`;
    if (created === true && (ledger.live < 1 || ledger.live > 1 + endedMine)) {
        problems.push(`answered created but its writes changed live items by ${ledger.live} ${ends}`);
    }
    // A held attempt may land after the read that decided "exists" (in doubt): that item is the attempt's, not the answer's.
    // A create in doubt (a fault met it) whose life a client delete ended may answer "exists" (`deletedMine`), in either
    // mode (docs/limits.md, "a lost put response racing a delete of the same id").
    const unseen = created === false && ledger.faults > 0 ? deletedMine : 0;
    if ((created === false || deleted === false) && (ledger.live < 0 || ledger.live > endedMine + ledger.lateLanded + unseen)) {
        problems.push(`answered ${JSON.stringify(answer)} but its writes changed live items by ${ledger.live} ${ends}`);
    }
    // `high` counts every client-counted life the call wrote, `low` leaves out those other writers ended (in utilization
    // mode, also before the call: their units stayed in best-effort for the call to take).
    const high = ledger.counted - ledger.bestEffort;
    const low = high - endedMine - (mode === "utilization" ? endedBeforeMine : 0);
    const moved = `moved best-effort ${ledger.bestEffort} for ${ledger.counted} client-counted live items`;
    if (mode === "utilization" && high < 0) {
        problems.push(`${moved}: an overcount`);
    }
    if (mode === "strict" && low > 0) {
        problems.push(`${moved}: below the live count`);
    }
    // Slots held by design (strict): the delete soft-deleted a life of an earlier epoch, or a late attempt of a life
    // whose slot was given back already, and sent no release.
    // A late item's delete also finds its life's release right taken: one held slot, however it is seen.
    const held = mode === "strict" ? ledger.heldByEpoch + Math.max(ledger.lateDeleted, ledger.releaseRightLost) : 0;
    if ((low > 0 || high + held < 0) && !explained) {
        problems.push(`${moved} ${ends} with no fault, no reported failure and no error`);
    }
    return problems;
}

export function describe(error: unknown): string {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
