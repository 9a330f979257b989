/**
 * Healing: brings the best-effort counter of one key back to the truth, outside the request path.
 *
 * Invariant kept (the mode's bound, at every instant, whatever the interleaving):
 *
 *     strict:       live(k) <= bestEffort(k)   (a heal writes live(k), which is <= limit whenever the
 *                                               key's items were only created through tryCreate)
 *     utilization:  bestEffort(k) <= live(k)
 *
 * where live(k) counts the live items best-effort accounts for (client-counted: carrying the client's
 * token, or flagged `hc_be` by their marker).
 *
 * and once a key has been quiet for a window and healed, bestEffort(k) == live(k) exactly.
 *
 * A heal of key k:
 *   1. reads the best-effort item (consistent): count c, version v (`hc_version`), last client write w
 *      (`hc_written_at`);
 *   2. reads the clock: now. If now - w < Q (the quiet window), skip;
 *   3. reads the truth (consistent Query of the user partition; in strict mode, when a live item lacks the
 *      client's token, also the key's markers for `hc_be`):
 *      - strict: every live client-counted item of k;
 *      - utilization: every live client-counted item of k whose creation (the time inside its UUIDv7
 *        token) is at least Q before now;
 *   4. writes `SET count = :truth REMOVE hc_heal, hc_due_at CONDITION hc_version = :v AND hc_written_at <= now - Q
 *      AND hc_marks = :m` (the heal-index marks read in step 1: a mark landing after the read outlives the heal).
 *
 * Assumptions (each one is in the row "Heal assumes" of the README's Guarantees table):
 *   A1 Client deadline D (client option `deadlineMs`, default 10 s): no write of one API call is sent
 *      later than D after the call's first write (or, for a utilization create, after its token was made);
 *      a write not sent in time is abandoned.
 *   A2 Request lifetime L: a request that was sent reaches DynamoDB and takes effect within L, or never.
 *      AWS rejects a SigV4-signed request that reaches it more than five minutes after the time stamp it
 *      was signed with ("Protect against potential replay attacks: in most cases, a request must reach AWS
 *      within five minutes of the time stamp in the request", AWS IAM User Guide, "AWS Signature Version 4
 *      for API requests", docs.aws.amazon.com/IAM/latest/UserGuide/reference_aws-signing.html). The SDK
 *      signs every attempt when it sends it, so L = 5 min plus DynamoDB's own processing time (seconds).
 *   A3 Clock skew S: the clocks of the API hosts and of the healer differ by at most S (NTP-synchronised
 *      hosts stay within a second; the default budget is a minute).
 *   A4 Q > D + L + S. The component's default Q is 600 s > 10 s + 300 s (+ processing) + 60 s.
 *   A5 Every client write of the best-effort item bumps `hc_version` and sets `hc_written_at` (its own
 *      clock); the client orders its writes as the counting model says (every call writes
 *      best-effort BEFORE its resource write, except a utilization create: put, then increment). Any other
 *      writer of the best-effort count (strict backfill) bumps `hc_version` too.
 *
 * Why a heal that wins is right. Let t1 be the instant of step 1, t2 >= t1 the instant of step 3's read.
 *   (a) The version proves that no client best-effort write landed between t1 and the heal's write: each
 *       such write bumps `hc_version` (A5), and the write's condition would fail.
 *   (b) The quiet window proves that no resource write of a call whose best-effort write is inside c is
 *       still in flight at t2. Such a call wrote best-effort at w' <= w (client clock), so sent its later
 *       writes by w' + D (A1), and they took effect by w' + D + L in real time, i.e. by w + D + L + S on
 *       the healer's clock (A2, A3) < w + Q <= now <= t2 (A4; `now` is read before step 3). So the
 *       partition read at t2 shows every resource write of every call counted in c.
 *   (c) Calls not counted in c: their best-effort write comes after t1, so it either lands before the heal's
 *       write (the condition fails: nothing changes) or after it (it applies on top of the truth, as it
 *       would have on top of an exact counter). Their resource writes are one of:
 *       - strict create (reserve first): its put can land between t2 and the write only if its reserve
 *         landed after t1 -> condition fails. Same for a strict delete (touch first) and a utilization delete
 *         (decrement first).
 *       - utilization create (put, then increment): the put is not a best-effort write, so it may land
 *         at any time. Utilization's truth counts an item only if its token (made when the call began) is
 *         at least Q older than now. Such a call sent its increment by token + D and it took effect (or
 *         never will) by token + D + L + S < now (A1-A4): either before t1 (it is in c) or after t1 (the
 *         version changed: the heal fails). A younger item is left out; its increment, when it lands,
 *         adds it. So utilization's truth never counts an item whose increment is still to come, and
 *         in strict mode (where every call writes best-effort first) nothing is left out.
 *   (d) The stream consumer, reconcile and the settler change markers and hard-delete soft-deleted items, which
 *       are not live: they change no term of the truth. The one live item they remove is a late put attempt of a
 *       removed life (runtime/stream/markers.ts), which the truth may count while it is in the table (the settler
 *       settles a key first, which purges one its marker shows removed at the settle's first read: settle.ts,
 *       "Order"): the consumer marks the key when it removes one (runtime/stream/heal-due.ts), and a mark between
 *       step 1 and the write makes the condition fail (`hc_marks`); one removed after the write leaves best-effort
 *       one above the live items until the heal that mark asks for (docs/limits.md). Backfill in strict mode adds to
 *       best-effort and sets `hc_be` in one transaction and bumps the version (A5): seen by step 3, or the condition
 *       fails.
 *   Hence at the heal's write, truth equals the count the key would hold had no best-effort write ever been
 *   lost, repeated or abandoned, restricted (utilization) to items whose increment is settled. In strict mode
 *   truth counts every live item, so live <= bestEffort; in utilization mode it counts a subset of the live
 *   items, so bestEffort <= live. Calls that start after the write keep the bound as they would on an exact
 *   counter.
 *
 * Why a heal that loses changes nothing: its only write is conditional; if a client wrote best-effort in
 * between, the condition fails and the item is untouched (the client's write stands, and the key's heal-index
 * entry stays, so the key is healed on a later run). Two heals racing each other both pass only if no client wrote in
 * between, and then each truth is a valid value by the argument above (they can differ only by utilization
 * items crossing the age threshold, either value a lower bound). A heal is never on the request path: it
 * adds no latency and no error to an API call; the client's best-effort writes are unconditional ADDs (or
 * conditional on the limit only), so a heal can never make one of them fail.
 *
 * A sharded key (`counterShards` N > 1, runtime/shards/layout.ts) is healed shard by shard. Step 1 reads every
 * shard's best-effort item (each at its own t1_s, all before the clock), steps 2-3 are the key's, and step 4 is one
 * conditional write per shard s, of truth(s) = the live client-counted items whose home `homeShard(id, token, N)` is
 * s, on s's own version, write time and marks, with s's own epoch. A strict heal that lowers any shard opens the next
 * epoch of every shard it writes: a delete touches and releases in the shard of its item's token, and when another
 * writer rewrote that token the unit sits in the shard of the first one, so the heal that took it from there must
 * refuse a release whose touch read an earlier epoch of any shard (checker seed 200164: an archived item's unit taken by
 * a quiet heal of shard 1, then released again in shard 7).
 * Why each write is right on its own: the argument above holds for shard s read as "the key", because
 *   - every client write of a life homed at s writes shard s: its reservation or increment, its release or
 *     decrement, a strict delete's touch (which reads the epoch of the shard its release goes to); and a strict
 *     backfill's unit for an item goes to the item's home, bumping that shard's version and flagging the epoch of
 *     that shard. So (a) s's version proves that no best-effort write of a life homed at s landed on s between
 *     t1_s and the write; (b) s's write time bounds the calls counted in c_s; (c) a call not counted in c_s that
 *     writes an item homed at s writes s first (or, utilization create, had its increment of s settled before
 *     now), so it makes s's write fail or applies on top of it;
 *   - writes of lives homed elsewhere move other shards' items only, and truth(s) does not count their items;
 *   - the shards' truths are computed from ONE read of the key's items, and land together or not at all: every
 *     shard to heal is written in one transaction (one shard: one conditional write), and a key with a shard in its
 *     quiet window (or unversioned) is not healed. Per shard the write is right for the items homed there at the
 *     read, but an item's home can move between shards (another writer changes its token: its unit stays where its
 *     first life put it). Healed one by one, the shard losing the item could be lowered while the shard gaining it
 *     waits for its window or loses its race: the sum would fall below the live items (strict) or, the other way
 *     round, stay above them (utilization). Written together, the sum of the truths is the key's truth at the read,
 *     exactly the unsharded argument. For the same reason a shard with no item at all is healed (created, on the
 *     condition that it still has none) when items are homed there while another shard of the key has an item, and
 *     one with no item and none homed there is held in the transaction to still having no count (a client write to it
 *     since the read, such as a delete's decrement of an item whose token another writer moved there, fails the heal).
 * Two points where a shard differs from an unsharded key:
 *   - marks land where their writer puts them: a strict client's on the shard item it writes, a utilization
 *     drift mark (the client's markDue, the consumer's) on shard 0. Each write is conditional on its own shard's
 *     marks only; a late put the consumer removes after the partition read may leave its home shard one above its
 *     live items (the limit (d) describes), and the mark on shard 0, written after the removal, lands after shard
 *     0's step-1 read: shard 0's write fails, its entry stays, and the next heal of the key re-derives every shard.
 *   - a shard item no client ever wrote (no version and no write time): only marks created it (a utilization
 *     drift mark on shard 0 of a key whose units all live in other shards), or a heal of such an item wrote its
 *     count. With N > 1 every writer of a shard item's count bumps its version (A5; a shard's partition keys belong
 *     to the counters table of its own a sharded key needs, so no user's writer writes them), so the condition
 *     `attribute_not_exists(hc_version)` proves that no client best-effort write of s ever landed, before t1_s or
 *     since: no call is counted in c_s ((b) holds vacuously), and (c) holds as above. Such a shard is healed on that
 *     condition instead of being skipped as unversioned (which would leave its heal-index entry listed for good).
 *     An unsharded key keeps the skip for an item that holds a count but no version (an earlier version's client
 *     wrote it); an item that holds no count either holds only marks (a utilization call whose increment failed
 *     marked the key), and no writer of any version ever wrote its count: it is healed on the condition that the
 *     version, the write time and the count are all still absent.
 * With N = 1 the heal is exactly the unsharded one: one GetItem, the partition, the markers when needed, one write.
 *
 * A busy key: the heal above waits for the key to be quiet, and a key written more often than every Q never is. The
 * clients therefore keep a ledger of recent lives on each best-effort item (runtime/ledger/ledger.ts): every write that
 * moves the count for a life carrying a client token moves that life's period entry `hc_n_<start>_<length>` by the same
 * amount in the same UpdateItem, and bumps `hc_lv` with `hc_version`. When every writer of the key kept the ledger
 * (`hc_lv` = `hc_version` on every shard item), the heal does not wait. Steps 1 and 3 read as above (the entries with
 * the count); step 2 picks a boundary B <= t0 - Q (t0: the clock read before step 1; B a period edge of the
 * component's clients) that no entry straddles (`foldBoundary`), not before the `hc_folded` of any shard (a heal with a
 * later clock folded there: this one skips until its clock passes it). A life is *old* when
 * its token is older than B (or has no time: a token-less item's unit is never in an entry), *recent* otherwise; an
 * entry ending at or before B holds only old lives, an entry after it only recent ones. Step 4 writes, per shard,
 *
 *     strict:       T = (old live client-counted items) + max(units of the kept entries, live items of recent lives)
 *     utilization:  T = (old live client items carrying no delete claim younger than Q) + (units of the kept entries)
 *
 * `SET count = T, hc_folded = B REMOVE <the entries ending at or before B>`, conditional on `hc_version = v AND hc_lv =
 * v AND hc_marks = m AND hc_folded` as read (no writtenAt condition); strict mode also opens a new heal epoch, whose
 * time is B less the clock skew (strict-ledger.ts `reservedInEpoch`: a later delete then releases exactly the lives
 * whose units the kept entries hold, token after B). A quiet key keeps the heal above, which folds every entry and sets
 * `hc_folded` to its cutoff (no unit in the count is of a life younger than the last client write, `quietLedger`).
 * Why the bound holds after the write (the same t1 <= t2 as above):
 *   (e) No best-effort write landed between t1 and the write (the version), so every write that lands after the write
 *       applies on top of T, and every write counted in c that moved a recent life moved its entry too (`hc_lv` = v: no
 *       writer that skips the entries wrote since the last re-base).
 *   (f) Old lives: a life's creating call sends its writes within D of its token (A1: a create's deadline counts from
 *       its token), they take effect within L (A2), and the clocks differ by S (A3): token + D + L + S < B + Q <= t0,
 *       where t0 <= t1 is a clock read before step 1 (B is at most the window before it), so no create write of an old
 *       life lands after t1: its item is in the partition read, or never will be. What
 *       may still be in flight for an old life is a delete:
 *       - strict: touch, soft delete, release. The release is conditional on the epoch the touch read, and this write
 *         opens a new one: a release of a call that touched before t1 is refused (a held slot; the key is listed again
 *         by the refusing call), whether the heal counted the item (soft delete after t2) or not (before t2); a call
 *         that touches after t1 makes the write fail (the version). So T's old term is never lowered again by a
 *         release the heal did not see, and only lowered by a soft delete (live falls with it) afterwards.
 *       - utilization: claim, decrement, soft delete. The claim is on the item before the decrement is sent; a claimed
 *         item whose claim is younger than Q may be between its decrement (in c) and its soft delete, so it is left out
 *         (at most one below: the safe side); a claim older than Q belongs to a call that has ended (A1-A3), so a live
 *         item under it is live for good and counted. A decrement that lands after the write, of an item the heal
 *         counted, had its claim land after t2: it comes before that item's soft delete, as on an exact counter.
 *   (g) Recent lives: their units stay as the entries hold them, and every write of theirs still to come moves the count
 *       and the entry together, in the order the counting model keeps on any counter (strict: reserve before put,
 *       release after soft delete or after a put that certainly wrote nothing; utilization: increment after put,
 *       decrement after claim). So on the recent lives alone the count keeps the mode's bound as an un-healed counter
 *       would. Strict counts at least the live items of recent lives: an item another writer gave a recent-looking
 *       client token (a copy, a rewritten token) has no unit in an entry; counting it raises T, never lowers it.
 *   (h) Other parties as (d): the consumer's and reconcile's writes touch no live client item a heal counts (a late put
 *       they remove moves `hc_marks`); a strict backfill bumps `hc_version` and `hc_lv` and adds units for items with no
 *       client token (old lives by definition).
 *   (i) A key written without pause makes a heal's conditional write lose its race to some client write more often than
 *       not. The heal then reads best-effort again (t1' > t2) and writes on the items read at t2, conditional on the
 *       version read at t1', when nothing that makes the items stale landed since t1: every write that moves the count
 *       for a life counted from the table (an old life's release or decrement, a backfill's units, a release of a
 *       token-less item's unit) moves the entry of a period that starts before B (runtime/ledger/: OLD_LEDGER_ENTRY for
 *       the release of a unit without a client token, BACKFILL_LEDGER_ENTRY for a backfill's). Such a period ends at or
 *       before B, or holds B: B is an edge of the component's clients' periods, but a writer with a period of its own
 *       (or an earlier fold at an unaligned cutoff) can hold it, and a period that held no entry at t1 (a fold removed
 *       it) did not move B. Each of those writes after t1 moves its entry
 *       one way: no create write of an old life lands after t1 (f), so an old period's entry is only lowered (releases,
 *       decrements), OLD_LEDGER_ENTRY too, and BACKFILL_LEDGER_ENTRY is only raised; no two of them cancel out. So the
 *       entries ending at or before B, equal at t1 and t1', and no entry holding B at t1', prove none landed (seed
 *       180036: an old life's release wrote -1 into a period holding B, which a plan at t1' would have taken for a
 *       recent life's, writing one below a reservation whose put was still coming); a recent life's writes move
 *       its kept entry, which the new plan reads (strict counts max(units at t1', items at t2): a recent item deleted
 *       since t2 can only keep a unit, the safe side); in utilization mode a mark since t1 (a late put the consumer
 *       removed may be among the items) and in both modes a new fold or a writer that skipped the ledger make it start
 *       over. An old item soft-deleted since t2 is counted (strict: one held slot, its release refused by the epoch;
 *       utilization: its claim came after t2, so its decrement lands after the write, on a count that counted it).
 *       A write planned again keeps the key on the heal index (a mark since the first read, such as a strict delete's
 *       that held its slot, must outlive it). Up to LEDGER_HEAL_REPLANS times.
 *   (j) A strict delete that holds its slot (no release, or one refused) lists the key when it ends: a heal of the busy
 *       key between its touch and its end may have taken the touch's mark off the index.
 *   (k) A sharded strict key: (g)'s max(units, recent items) is the key's, not each shard's (truth.ts `recentShares`).
 *       A life's unit stays in the shard its reservation went to, and its item is homed by its token: a life whose
 *       token another writer rewrote has its unit in one shard and its item in another, and a max per shard would count
 *       it in both (the sum one above the live items, and above the limit for a key at it: checker seed 25 of 60 events,
 *       8 shards, sum 6 over a limit of 5). Each shard keeps the units of its kept entries, and the recent items the
 *       key's units do not cover are counted in the shards whose items outnumber their units, so the shards' truths sum
 *       to the unsharded truth, and every argument above is about that sum. A shard may then hold fewer units than the
 *       items homed there (or a negative count: a release in the new home); the key's sum is what the quotas and a
 *       slow-path reservation bound (runtime/shards/reservation.ts), and each shard's next heal in a quiet period
 *       counts its items from the table.
 *   Limits of the argument, stated in docs/limits.md: a life whose token another writer rewrote to a recent-looking
 *   one, or that a backfill adopted with a token younger than Q, counts at least as many units as live recent items
 *   (strict's max) but not per life; their exact count comes when their period is old. A strict busy heal's new epoch
 *   makes a delete in flight across it hold its slot until the next heal.
 *   What it costs: nothing on the API's path (the entry rides on the write the call sends; a client write leaving more
 *   than LEDGER_ENTRIES_MARK entries on an unlisted item marks it once, best-effort.ts), and a held slot or drift of a
 *   life is gone at the first heal after its period ends more than Q ago, however busy the key.
 */
import {
    ConditionalCheckFailedException,
    GetItemCommand,
    TransactionCanceledException,
    TransactWriteItemsCommand,
    UpdateItemCommand,
    type Update,
    type AttributeValue,
    type ConsumedCapacity,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import {
    COUNTER_ATTRIBUTES as A,
    bestEffortSortKey,
    countersTable,
    healShard,
    markerSortKey,
    type CounterTableConfig,
} from "../shared/config";
import { isRetryable } from "../shared/aws-errors";
import { queryPartition } from "./partition";
import { withRetries } from "../shared/retry";
import { isLive, type SelectingLayout } from "../shared/selection";
import { hasBackfillUnit, LEDGER_CLOCK_SKEW_MS } from "../shared/strict-ledger";
import { tokenTime } from "../shared/tokens";
import { InvalidArgumentError } from "../shared/errors";
import { homeShard, shardCount, shardedKeyProblem, shardOfPartitionKey, shardPartitionKeys } from "../shards/layout";
import { disarmNames, disarmUpdate } from "../shards/quotas";
import { foldBoundary, ledgerEntries, ledgerPeriodMs, splitEntries, type LedgerEntry } from "../ledger/ledger";
import { ledgerTruth, recentShares } from "../ledger/truth";

export type HealMode = "strict" | "utilization";

/** Why a key was not healed. */
export type HealSkipReason =
    /** No best-effort item: nothing to heal. */
    | "no-best-effort"
    /** The item carries no version or write time (written by a writer that does not bump them): nothing can be proven. */
    | "unversioned"
    /** A client wrote it less than the quiet window ago: a write of the same call may still be in flight. */
    | "quiet-window";

export type HealPlan =
    | {
          readonly action: "heal";
          /** The value best-effort gets. */
          readonly truth: number;
          /** The value it holds now. */
          readonly current: number;
          /**
           * The version read: the write's condition. Absent only for a shard item of a sharded key that no client ever
           * wrote (see the header): the condition is then that it still has no version.
           */
          readonly version?: number;
          /** The heal-index marks read (undefined: none yet): the write's condition too. */
          readonly marks?: number;
          /** now - quiet window: the write's condition on `hc_written_at`. */
          readonly cutoff: number;
          /**
           * Utilization: the creation time of the youngest live client item left out of `truth` for its youth. The write
           * then keeps the key on the heal index, due at that time, instead of removing it (healCount). A ledger heal:
           * the end of the latest entry it kept (the key is listed again once that entry can be folded).
           */
          readonly heldBack?: number;
          /** What the write does to the ledger of recent lives (runtime/ledger/). */
          readonly ledger: LedgerWrite;
      }
    | {
          readonly action: "skip";
          readonly reason: HealSkipReason;
          readonly current?: number;
          /** quiet-window: the last client write the heal read. */
          readonly writtenAt?: number;
      };

/**
 * A heal write's part in the ledger of recent lives (runtime/ledger/ledger.ts).
 *   - quiet: the quiet heal. It counts every life from the table, so it folds every entry it read; on a key some writer
 *     of an earlier version wrote (`hc_lv` differs from `hc_version`), it re-bases the ledger (`hc_lv` = the version).
 *   - busy: the ledger heal at `boundary`: old lives from the table, recent ones as the kept entries hold them; every
 *     entry ending at or before the boundary is folded. Conditional on `hc_lv` = `hc_version` and on `hc_folded` as
 *     read; in strict mode it opens a new heal epoch at the boundary.
 */
export type LedgerWrite =
    | { readonly kind: "quiet"; readonly fold: readonly string[]; readonly folded: number; readonly rebase: boolean }
    | {
          readonly kind: "busy";
          readonly fold: readonly string[];
          readonly boundary: number;
          /** The `hc_folded` read (undefined: none): the write's condition. */
          readonly foldedRead?: number;
      };

/** What the best-effort item says about the last client write. */
export interface BestEffortState {
    readonly count: number;
    readonly version: number | undefined;
    readonly writtenAt: number | undefined;
    /** `hc_marks`: the heal-index marks so far (runtime/shared/best-effort-marks.ts). */
    readonly marks: number | undefined;
    /** `hc_lv`: bumped with the version by every writer that keeps the ledger (runtime/ledger/ledger.ts). */
    readonly ledgerVersion: number | undefined;
    /** `hc_folded`: the boundary of the last ledger fold. */
    readonly folded: number | undefined;
    /** The ledger entries. */
    readonly entries: readonly LedgerEntry[];
}

export function bestEffortState(item: Record<string, AttributeValue>, countAttribute: string): BestEffortState {
    const number = (value: AttributeValue | undefined) => (value?.N === undefined ? undefined : Number(value.N));
    return {
        count: number(item[countAttribute]) ?? 0,
        version: number(item[A.version]),
        writtenAt: number(item[A.writtenAt]),
        marks: number(item[A.marks]),
        ledgerVersion: number(item[A.ledgerVersion]),
        folded: number(item[A.folded]),
        entries: ledgerEntries(item),
    };
}

/** Whether every write of the item since its last re-base kept the ledger (an item no client wrote counts as one). */
export function keepsLedger(state: BestEffortState): boolean {
    return state.version === state.ledgerVersion;
}

/**
 * The first half of the plan, decidable from the best-effort item alone (before any partition is read).
 * Undefined when the key may be healed. `unwritten`: an item with neither version nor write time may be healed
 * (a shard item of a sharded key: no client ever wrote it, see the header) instead of being skipped as unversioned.
 */
export function preCheck(
    bestEffortItem: Record<string, AttributeValue> | undefined,
    now: number,
    quietWindowMs: number,
    countAttribute: string,
    unwritten = false,
): Extract<HealPlan, { action: "skip" }> | undefined {
    if (bestEffortItem === undefined) {
        return { action: "skip", reason: "no-best-effort" };
    }
    const state = bestEffortState(bestEffortItem, countAttribute);
    if (unwritten && state.version === undefined && state.writtenAt === undefined) {
        return undefined;
    }
    if (state.version === undefined || state.writtenAt === undefined) {
        return { action: "skip", reason: "unversioned", current: state.count };
    }
    if (now - state.writtenAt < quietWindowMs) {
        return { action: "skip", reason: "quiet-window", current: state.count, writtenAt: state.writtenAt };
    }
    return undefined;
}

/**
 * The items best-effort accounts for that a heal may count (`truth`): live items carrying the client's token or
 * flagged `hc_be` by their marker; in utilization mode only those whose token is at least the window old. And the
 * creation time of the youngest live client item left out for its youth (`youngest`; its increment may still be in
 * flight), if any. A heal that leaves one out keeps the key on the heal index, due then: the mark that listed the
 * key may be that very item's (its increment lost), and removing it would leave the undercount to the audit.
 */
export function healCount(
    items: ReadonlyArray<Record<string, AttributeValue>>,
    markers: ReadonlyArray<Record<string, AttributeValue>>,
    now: number,
    mode: HealMode,
    quietWindowMs: number,
    layout: SelectingLayout,
): { truth: number; youngest?: number } {
    const flagged = new Set<string>();
    for (const marker of markers) {
        const sk = marker[layout.sortKey]?.S;
        if (sk !== undefined && hasBackfillUnit(marker)) {
            flagged.add(sk);
        }
    }
    let truth = 0;
    let youngest: number | undefined;
    for (const item of items) {
        if (!isLive(item, layout)) {
            continue;
        }
        const id = item[layout.sortKey]!.S!;
        const token = item[layout.tokenAttribute]?.S;
        if (token === undefined && !flagged.has(markerSortKey(layout, id))) {
            continue; // written by another writer, not counted by best-effort
        }
        if (mode === "utilization") {
            const created = tokenTime(token);
            // Unknown or recent creation: its increment may still be in flight. Leaving it out only undercounts.
            if (created === undefined) {
                continue;
            }
            if (now - created < quietWindowMs) {
                youngest = Math.max(youngest ?? created, created);
                continue;
            }
        }
        truth++;
    }
    return youngest === undefined ? { truth } : { truth, youngest };
}

/**
 * Pure: decides whether and to what one best-effort item (a key's, or one shard's of a sharded key) is healed.
 * `items` are the items whose unit that item holds (a shard's: those homed there); `unwritten` as in preCheck.
 */
export function planHeal(
    bestEffortItem: Record<string, AttributeValue> | undefined,
    items: ReadonlyArray<Record<string, AttributeValue>>,
    markers: ReadonlyArray<Record<string, AttributeValue>>,
    now: number,
    mode: HealMode,
    quietWindowMs: number,
    layout: SelectingLayout,
    unwritten = false,
): HealPlan {
    const skip = preCheck(bestEffortItem, now, quietWindowMs, layout.countAttribute, unwritten);
    if (skip !== undefined) {
        return skip;
    }
    const state = bestEffortState(bestEffortItem!, layout.countAttribute);
    const { truth, youngest } = healCount(items, markers, now, mode, quietWindowMs, layout);
    return {
        action: "heal",
        truth,
        ...(youngest === undefined ? {} : { heldBack: youngest }),
        current: state.count,
        ...(state.version === undefined ? {} : { version: state.version }),
        ...(state.marks !== undefined ? { marks: state.marks } : {}),
        cutoff: now - quietWindowMs,
        ledger: quietLedger(state, now - quietWindowMs),
    };
}

/**
 * A quiet heal's ledger part (see LedgerWrite). No client wrote the key since `cutoff` (now less the window), and a
 * client writes a life's units only after its token is made, so every unit the count holds is of a life older than the
 * cutoff, which the quiet heal counts from the table (strict: every live item; utilization: every item older than the
 * window, a younger one having no unit yet): every entry folds, at the cutoff.
 */
function quietLedger(state: BestEffortState | undefined, cutoff: number): LedgerWrite {
    return {
        kind: "quiet",
        fold: (state?.entries ?? []).map((entry) => entry.name),
        folded: Math.max(cutoff, state?.folded ?? cutoff),
        rebase: state !== undefined && state.version !== undefined && !keepsLedger(state),
    };
}

/**
 * Pure: plans the ledger heal of one best-effort item (a key's, or one shard's) at `boundary` (see the header, "A busy
 * key"). `item` undefined: a shard no client ever wrote, healed for the items homed there.
 */
export function planLedgerHeal(
    item: Record<string, AttributeValue> | undefined,
    items: ReadonlyArray<Record<string, AttributeValue>>,
    markers: ReadonlyArray<Record<string, AttributeValue>>,
    now: number,
    boundary: number,
    mode: HealMode,
    quietWindowMs: number,
    layout: SelectingLayout,
    keepListed = false,
    recentShare?: number,
): Extract<HealPlan, { action: "heal" }> {
    const state = item === undefined ? undefined : bestEffortState(item, layout.countAttribute);
    const { folded, kept } = splitEntries(state?.entries ?? [], boundary);
    const { truth, youngest } = ledgerTruth({
        items,
        markers,
        kept,
        boundary,
        now,
        horizonMs: quietWindowMs,
        mode,
        layout,
        ...(recentShare === undefined ? {} : { recentShare }),
    });
    // Listed again while it leaves lives to the entries or to a later heal (a lost increment has no entry: the mark its
    // call wrote must not be spent on this heal): due when the first of them can be folded, but not sooner than half a
    // window from now, so that a key written without pause is healed about twice a window, not at every period.
    const later = [...kept.map((entry) => entry.end), ...(youngest === undefined ? [] : [youngest])];
    // A write planned again after a lost race keeps the key listed whatever it leaves: a mark that landed since the
    // first read (a strict delete holding its slot) must outlive it.
    const keptEnd =
        later.length === 0 && !keepListed
            ? undefined
            : Math.max(later.length === 0 ? -Infinity : Math.min(...later), now - quietWindowMs / 2);
    return {
        action: "heal",
        truth,
        current: state?.count ?? 0,
        ...(state?.version === undefined ? {} : { version: state.version }),
        ...(state?.marks === undefined ? {} : { marks: state.marks }),
        cutoff: now - quietWindowMs,
        ...(keptEnd === undefined ? {} : { heldBack: keptEnd }),
        ledger: {
            kind: "busy",
            fold: folded.map((entry) => entry.name),
            boundary,
            ...(state?.folded === undefined ? {} : { foldedRead: state.folded }),
        },
    };
}

// ------------------------------------------------------------------------------------------ adapter

export interface HealOptions {
    /** The table layout; `countersTableName` names where best-effort and the markers live, `counterShards` their shards. */
    readonly config: CounterTableConfig & SelectingLayout;
    readonly dynamodb: DynamoDBClient;
    /** The mode every client of the key uses. */
    readonly mode: HealMode;
    /** Must exceed the client deadline + request lifetime + clock skew (see the top of this module). */
    readonly quietWindowMs: number;
    /** The healer's clock. @default Date.now */
    readonly now?: () => number;
    /** Attempts per read or write, on top of the SDK's (all of them are safe to repeat). @default 3 */
    readonly attempts?: number;
}

/** What a heal did to one best-effort item (a key's, or one shard's). */
export interface ShardHealResult {
    readonly shard: number;
    /** healed: the count was written (possibly unchanged) and the item left the heal index. raced: a client wrote it in between; nothing changed. */
    readonly outcome: "healed" | "raced" | "skipped";
    readonly reason?: HealSkipReason;
    /** The value before. Undefined when there is no best-effort item. */
    readonly before?: number;
    /** The value written (healed only). */
    readonly after?: number;
    /** Skipped for the quiet window: the last client write it read. */
    readonly writtenAt?: number;
    /** Capacity the write consumed. */
    readonly writeUnits: number;
}

export interface HealResult {
    readonly key: string;
    /**
     * healed: the count was written (possibly unchanged) and the key left the heal index. raced: a client wrote in
     * between; nothing changed. A sharded key: raced when a shard's write raced, else healed when one was written.
     */
    readonly outcome: "healed" | "raced" | "skipped";
    /** Skipped: why (a sharded key: quiet-window if a shard was busy, else unversioned if one was, else no-best-effort). */
    readonly reason?: HealSkipReason;
    /** The value before (a sharded key: the sum over its shards). Undefined when there is no best-effort item. */
    readonly before?: number;
    /** The value written (healed only; a sharded key: the sum over its shards, written or not). */
    readonly after?: number;
    /** Skipped for the quiet window: the last client write it read (a sharded key: the latest of its shards'). */
    readonly writtenAt?: number;
    /** Capacity the heal consumed. */
    readonly readUnits: number;
    readonly writeUnits: number;
    /** A sharded key only: what the heal did to each shard, shard 0 first. */
    readonly shards?: readonly ShardHealResult[];
}

/** One shard's part of a heal read. */
export interface ShardHealRead {
    readonly shard: number;
    /** The shard's counters-table partition key. */
    readonly partitionKey: string;
    readonly plan: HealPlan;
}

/** A heal read in two steps, so that a test can stage a race between the read and the write. */
export interface HealRead {
    readonly key: string;
    /** Shard 0's plan: the key's only one when it is not sharded. */
    readonly plan: HealPlan;
    /** Every shard's plan, shard 0 first (one when the key is not sharded). */
    readonly shards: readonly ShardHealRead[];
    /**
     * A ledger heal (a busy key) only: after its write lost a race, reads every shard's best-effort again and plans the
     * write anew on the same items (see the header, "A busy key", (i)); undefined when a write of an old life, a mark
     * (utilization) or another fold landed since the first read: the heal must start over.
     */
    readonly replan?: () => Promise<HealRead | undefined>;
    readUnits: number;
}

/**
 * Steps 1-3: reads every shard's best-effort item, the clock, then (if a shard's window allows) the partition and the
 * markers its token-less items need. Throws InvalidArgumentError for a key a sharded counter cannot hold.
 */
export async function readForHeal(key: string, options: HealOptions): Promise<HealRead> {
    const { config, dynamodb } = options;
    const shards = shardCount(config);
    const problem = shardedKeyProblem(key, shards);
    if (problem !== undefined) {
        throw new InvalidArgumentError("key", problem);
    }
    const attempts = options.attempts ?? 3;
    const clock = options.now ?? Date.now;
    const counters = countersTable(config);
    let readUnits = 0;
    const partitionKeys = shardPartitionKeys(key, shards);
    const readBestEffort = (partitionKey: string) =>
        withRetries(
            () =>
                dynamodb.send(
                    new GetItemCommand({
                        TableName: counters,
                        Key: keyOf(config, partitionKey, bestEffortSortKey(config)),
                        ConsistentRead: true,
                        ReturnConsumedCapacity: "TOTAL",
                    }),
                ),
            isRetryable,
            attempts,
        );
    // A ledger heal's boundary is at least the window before a clock read before step 1: no create write of an old life
    // lands after t1 (the header, (i)).
    const readStart = clock();
    const responses = await Promise.all(partitionKeys.map(readBestEffort));
    readUnits += responses.reduce((sum, response) => sum + units(response.ConsumedCapacity), 0);
    // The clock is read after every shard's best-effort and BEFORE the partition: the safety argument needs now <= t2.
    const now = clock();
    const sharded = shards > 1;
    // Whether an item may be healed as one no client wrote: any shard of a sharded key, or an unsharded key's item with
    // no count at all, which holds only marks: no best-effort write of any version ever landed on it (every writer of a
    // count, earlier versions too, writes the count), so it is healed on a shard's proof (its write requires the count
    // still absent).
    const unwritten = (item: Record<string, AttributeValue> | undefined) =>
        sharded || (item !== undefined && item[config.countAttribute] === undefined);
    const skips = responses.map((response) =>
        preCheck(response.Item, now, options.quietWindowMs, config.countAttribute, unwritten(response.Item)),
    );
    const result = (plans: readonly HealPlan[]): HealRead => {
        const read = partitionKeys.map((partitionKey, shard) => ({ shard, partitionKey, plan: plans[shard]! }));
        return { key, plan: read[0]!.plan, shards: read, readUnits };
    };
    // A sharded key with at least one shard item: a shard with no item is healed like the others when items are homed
    // there (their home moved there after their unit was written elsewhere: another writer changed the token).
    const anyShardItem = responses.some((response) => response.Item !== undefined);
    const absent = (shard: number) => sharded && anyShardItem && responses[shard]!.Item === undefined;
    // The latest edge of a period of the component's clients (ledger.ts `ledgerPeriodMs`) at or before it: no entry they
    // write straddles a period edge, so a write of a life younger than the boundary never lands in an entry holding it,
    // which would make a heal that lost its race start over (`unchangedForReplan`) rather than plan again.
    const period = ledgerPeriodMs(options.quietWindowMs / 1000);
    const boundary = ledgerBoundary(
        responses.map((response) => response.Item),
        skips,
        Math.floor((Math.min(readStart, now) - options.quietWindowMs) / period) * period,
        options,
    );
    if (boundary === undefined && skips.every((skip, shard) => skip !== undefined && !absent(shard))) {
        return result(skips as HealPlan[]);
    }
    const healed = (shard: number) => boundary !== undefined || skips[shard] === undefined || absent(shard);
    const partition = (tableName: string, partitionKey: string, under?: { sortKey: string; prefix: string }) =>
        queryPartition(
            options.dynamodb,
            { tableName, partitionKey: config.partitionKey, key: partitionKey, ...(under ? { under } : {}) },
            {
                send: (request) => withRetries(request, isRetryable, attempts),
                onPage: (page) => {
                    readUnits += units(page.ConsumedCapacity);
                },
            },
        );
    const items = await partition(config.tableName, key);
    const home = (item: Record<string, AttributeValue>): number =>
        homeShard(item[config.sortKey]?.S ?? "", item[config.tokenAttribute]?.S, shards);
    // Markers matter only for their backfill flags, which count only in strict mode and only for items without the
    // client's token: otherwise the heal reads best-effort and the partition, nothing more. A token-less item's unit
    // and marker share a shard (its id's), so only the shards healed now that hold such an item are read.
    const flagShards =
        options.mode === "strict"
            ? [
                  ...new Set(
                      items
                          .filter((item) => isLive(item, config) && item[config.tokenAttribute]?.S === undefined)
                          .map(home)
                          .filter(healed),
                  ),
              ].sort((a, b) => a - b)
            : [];
    const markers = (
        await Promise.all(
            flagShards.map((shard) =>
                partition(counters, partitionKeys[shard]!, { sortKey: config.sortKey, prefix: markerSortKey(config, "") }),
            ),
        )
    ).flat();
    const byShard: Array<Array<Record<string, AttributeValue>>> = partitionKeys.map(() => []);
    for (const item of items) {
        byShard[sharded ? home(item) : 0]!.push(item);
    }
    if (boundary !== undefined) {
        const plansFor = (items: ReadonlyArray<Record<string, AttributeValue> | undefined>, again = false): HealPlan[] => {
            // Strict over shards: the recent lives are counted per key, then shared out (truth.ts `recentShares`).
            const shares =
                sharded && options.mode === "strict"
                    ? recentShares(
                          items.map((item, shard) =>
                              ledgerTruth({
                                  items: byShard[shard]!,
                                  markers,
                                  kept: splitEntries(
                                      item === undefined ? [] : bestEffortState(item, config.countAttribute).entries,
                                      boundary,
                                  ).kept,
                                  boundary,
                                  now,
                                  horizonMs: options.quietWindowMs,
                                  mode: options.mode,
                                  layout: config,
                              }),
                          ),
                      )
                    : undefined;
            return items.map((item, shard) => {
                if (item === undefined && !absent(shard)) {
                    return skips[shard]!;
                }
                const plan = planLedgerHeal(
                    item,
                    byShard[shard]!,
                    markers,
                    now,
                    boundary,
                    options.mode,
                    options.quietWindowMs,
                    config,
                    again,
                    shares?.[shard],
                );
                return item === undefined && plan.truth === 0 ? skips[shard]! : plan;
            });
        };
        const first = responses.map((response) => response.Item);
        const replan = async (): Promise<HealRead | undefined> => {
            const again = await Promise.all(partitionKeys.map((partitionKey) => readBestEffort(partitionKey)));
            readUnits += again.reduce((sum, response) => sum + units(response.ConsumedCapacity), 0);
            const items = again.map((response) => response.Item);
            if (!unchangedForReplan(first, items, boundary, options)) {
                return undefined;
            }
            return { ...result(plansFor(items, true)), replan };
        };
        return { ...result(plansFor(first)), replan };
    }
    return result(
        responses.map((response, shard) => {
            if (absent(shard)) {
                const { truth, youngest } = healCount(byShard[shard]!, markers, now, options.mode, options.quietWindowMs, config);
                return truth === 0
                    ? skips[shard]!
                    : {
                          action: "heal",
                          truth,
                          current: 0,
                          cutoff: now - options.quietWindowMs,
                          ...(youngest === undefined ? {} : { heldBack: youngest }),
                          ledger: quietLedger(undefined, now - options.quietWindowMs),
                      };
            }
            return (
                skips[shard] ??
                planHeal(
                    response.Item,
                    byShard[shard]!,
                    markers,
                    now,
                    options.mode,
                    options.quietWindowMs,
                    config,
                    unwritten(response.Item),
                )
            );
        }),
    );
}

/**
 * Whether a ledger heal may plan its write anew on the items it read first, from best-effort read again (`replan`):
 * every shard item is still there (or still absent), every writer still kept the ledger, no heal folded since, no
 * entry of an old life moved and none holds the boundary (every write of a life the heal counts from the table moves
 * an entry of a period starting before the boundary: runtime/ledger/), and,
 * in utilization mode, no mark landed (the consumer's removal of a late put the heal counted marks the key).
 */
function unchangedForReplan(
    first: ReadonlyArray<Record<string, AttributeValue> | undefined>,
    again: ReadonlyArray<Record<string, AttributeValue> | undefined>,
    boundary: number,
    options: HealOptions,
): boolean {
    const oldEntries = (item: Record<string, AttributeValue> | undefined) =>
        JSON.stringify(
            ledgerEntries(item)
                .filter((entry) => entry.end <= boundary)
                .map((entry) => [entry.name, entry.units]),
        );
    return first.every((before, shard) => {
        const after = again[shard];
        if ((before === undefined) !== (after === undefined)) {
            return false;
        }
        if (before === undefined || after === undefined) {
            return true;
        }
        const [b, a] = [bestEffortState(before, options.config.countAttribute), bestEffortState(after, options.config.countAttribute)];
        return (
            keepsLedger(a) &&
            a.version !== undefined &&
            a.folded === b.folded &&
            oldEntries(before) === oldEntries(after) &&
            // An old life's write to a period that holds the boundary (a writer whose period is not the component's,
            // with no entry there at the first read) would otherwise read as a recent life's.
            ledgerEntries(after).every((entry) => !(entry.start < boundary && boundary < entry.end)) &&
            (options.mode === "strict" || a.marks === b.marks)
        );
    });
}

/** How many times a ledger heal that lost its race to a client write plans its write anew before it gives up. */
export const LEDGER_HEAL_REPLANS = 5;

/**
 * The boundary of a ledger heal of the key (see the header, "A busy key"), or undefined when the key is healed the quiet
 * way or not at all: a shard is unversioned or has no item at all, some writer of a shard did not keep the ledger, a
 * strict key is quiet (every life is then counted from the table), or a heal with a later clock folded past the
 * boundary this one would use (its entries are gone: this heal waits for its clock to pass that fold).
 */
function ledgerBoundary(
    items: ReadonlyArray<Record<string, AttributeValue> | undefined>,
    skips: ReadonlyArray<Extract<HealPlan, { action: "skip" }> | undefined>,
    limit: number,
    options: HealOptions,
): number | undefined {
    if (items.every((item) => item === undefined) || skips.some((skip) => skip?.reason === "unversioned")) {
        return undefined;
    }
    const states = items.flatMap((item) => (item === undefined ? [] : [bestEffortState(item, options.config.countAttribute)]));
    if (!states.every(keepsLedger)) {
        return undefined;
    }
    if (!skips.some((skip) => skip?.reason === "quiet-window")) {
        return undefined; // a quiet key: every unit in it belongs to a life older than the window (see quietLedger)
    }
    const boundary = foldBoundary(
        states.flatMap((state) => state.entries),
        limit,
    );
    return states.some((state) => state.folded !== undefined && state.folded > boundary) ? undefined : boundary;
}

/**
 * Step 4: the conditional write of every shard to heal. Changes nothing of a shard a client wrote best-effort of since
 * the read; a sharded key's shards are healed together or not at all (the header's "items may change home").
 */
export async function writeHeal(read: HealRead, options: HealOptions): Promise<HealResult> {
    const results = read.shards.length === 1 ? [await writeShard(read.shards[0]!, options)] : await writeShards(read, options);
    const writeUnits = results.reduce((sum, r) => sum + r.writeUnits, 0);
    if (read.shards.length === 1) {
        const { shard: _shard, writeUnits: _units, ...only } = results[0]!;
        return { key: read.key, ...only, readUnits: read.readUnits, writeUnits };
    }
    const outcome = results.some((r) => r.outcome === "raced")
        ? "raced"
        : results.some((r) => r.outcome === "healed")
          ? "healed"
          : "skipped";
    const counted = results.filter((r) => r.before !== undefined);
    const busy = results.filter((r) => r.reason === "quiet-window" && r.writtenAt !== undefined);
    const reason =
        outcome !== "skipped"
            ? undefined
            : results.some((r) => r.reason === "quiet-window")
              ? "quiet-window"
              : results.some((r) => r.reason === "unversioned")
                ? "unversioned"
                : "no-best-effort";
    return {
        key: read.key,
        outcome,
        ...(reason === undefined ? {} : { reason }),
        ...(counted.length === 0 ? {} : { before: counted.reduce((sum, r) => sum + r.before!, 0) }),
        ...(outcome === "healed" ? { after: results.reduce((sum, r) => sum + (r.after ?? r.before ?? 0), 0) } : {}),
        ...(reason === "quiet-window" && busy.length > 0 ? { writtenAt: Math.max(...busy.map((r) => r.writtenAt!)) } : {}),
        readUnits: read.readUnits,
        writeUnits,
        shards: results,
    };
}

/** A shard's result when nothing is written to it. */
function skippedShard(read: ShardHealRead, why?: { reason: HealSkipReason; writtenAt?: number }): ShardHealResult {
    const { plan, shard } = read;
    const reason = why?.reason ?? (plan.action === "skip" ? plan.reason : "quiet-window");
    const writtenAt = why?.writtenAt ?? (plan.action === "skip" ? plan.writtenAt : undefined);
    return {
        shard,
        outcome: "skipped",
        reason,
        before: plan.current,
        ...(writtenAt === undefined ? {} : { writtenAt }),
        writeUnits: 0,
    };
}

/**
 * A sharded key: every shard to heal is written in one transaction, so the shards' truths land together. Healed one by
 * one, a shard lowered for an item whose home moved to another (another writer changed its token) while that other
 * shard's raise lost its race or waited for its window would leave the sum on the wrong side of the live items. So a
 * key with a shard still in its quiet window (or unversioned) is not healed at all, and a transaction that meets a
 * client write (a condition failure, or a conflict with a client's write in flight) changes nothing. A client write
 * that meets the transaction is refused with TransactionConflict (nothing written), and the client repeats it within
 * its deadline, a write it sends once included: why that repeat is safe is stated in runtime/client/best-effort.ts.
 * The shards it does not write (no item at the read, none homed there) are in the transaction too, on the condition
 * that they still hold no count: a client's write to one since the read (a delete of an item whose token another writer
 * rewrote moves the shard of its new token, which held nothing) would otherwise land beside a write that left that item
 * out, and the sum would count its end twice.
 */
async function writeShards(read: HealRead, options: HealOptions): Promise<ShardHealResult[]> {
    const busy = read.shards.find((s) => s.plan.action === "skip" && (s.plan.reason === "quiet-window" || s.plan.reason === "unversioned"));
    if (busy !== undefined && busy.plan.action === "skip") {
        // The whole key waits; every shard reports the busy one's reason, so the settler defers the key's entries.
        const why = { reason: busy.plan.reason, ...(busy.plan.writtenAt === undefined ? {} : { writtenAt: busy.plan.writtenAt }) };
        return read.shards.map((s) => skippedShard(s, why));
    }
    const writes = read.shards.filter((s) => s.plan.action === "heal");
    // A shard raised (an item's home moved to it) may pass its stored quota, which the heal cannot know (the limit is the
    // client's): the transaction disarms every shard of the key (runtime/shards/reservation.ts), so the next tryCreate
    // checks the key's exact sum.
    const disarm = options.mode === "strict" && writes.some((s) => s.plan.action === "heal" && s.plan.truth > s.plan.current);
    // A shard lowered opens the epoch of every shard the transaction writes (healUpdate, `keyLowered`).
    const keyLowered = options.mode === "strict" && writes.some((s) => s.plan.action === "heal" && s.plan.truth < s.plan.current);
    // After the busy check, a shard not written had no item at the read.
    const unwritten = read.shards.filter((s) => s.plan.action !== "heal");
    if (writes.length === 0 || (read.shards.length === 1 && !disarm)) {
        return Promise.all(read.shards.map((s) => (s.plan.action === "heal" ? writeShard(s, options) : skippedShard(s))));
    }
    const { config, dynamodb } = options;
    const stillEmpty = {
        ConditionExpression: "attribute_not_exists(#count)",
        ExpressionAttributeNames: { "#count": config.countAttribute },
    };
    try {
        const response = await withRetries(
            () =>
                dynamodb.send(
                    new TransactWriteItemsCommand({
                        TransactItems: [
                            ...writes.map((s) => ({ Update: healUpdate(s, options, disarm, keyLowered) })),
                            ...unwritten.map((s) => {
                                const update = disarmUpdate(config, s.partitionKey);
                                return disarm
                                    ? {
                                          Update: {
                                              ...update,
                                              ConditionExpression: stillEmpty.ConditionExpression,
                                              ExpressionAttributeNames: {
                                                  ...update.ExpressionAttributeNames,
                                                  ...stillEmpty.ExpressionAttributeNames,
                                              },
                                          },
                                      }
                                    : { ConditionCheck: { TableName: update.TableName, Key: update.Key, ...stillEmpty } };
                            }),
                        ],
                        ReturnConsumedCapacity: "TOTAL",
                    }),
                ),
            (error) => isRetryable(error) && !(error instanceof TransactionCanceledException),
            options.attempts ?? 3,
        );
        const perAction = units(response.ConsumedCapacity) / (writes.length + unwritten.length);
        return read.shards.map((s) =>
            s.plan.action === "heal"
                ? { shard: s.shard, outcome: "healed", before: s.plan.current, after: s.plan.truth, writeUnits: perAction }
                : skippedShard(s),
        );
    } catch (error) {
        if (error instanceof TransactionCanceledException) {
            // A condition failed (a client wrote a shard since the read) or a client write was in flight: nothing changed.
            return read.shards.map((s) =>
                s.plan.action === "heal" ? { shard: s.shard, outcome: "raced", before: s.plan.current, writeUnits: 2 } : skippedShard(s),
            );
        }
        throw error;
    }
}

/** The conditional update that heals one shard's item (or a key's only one); `disarm`: it also removes its stored quota. */
function healUpdate(read: ShardHealRead, options: HealOptions, disarm = false, keyLowered = false): Update {
    const plan = read.plan as Extract<HealPlan, { action: "heal" }>;
    const { config } = options;
    const { ledger } = plan;
    const busy = ledger.kind === "busy";
    // A heal that lowers the count absorbed units: it opens a new epoch, so that no backfill flag set before it can give
    // its unit back a second time (runtime/shared/strict-ledger.ts). A strict busy heal opens one whatever it writes: a
    // delete in flight that touched the key before its read releases only in the epoch it read, and this heal may have
    // counted its item from the table already (see the header, "A busy key"); the epoch opens at the boundary, so that a
    // later delete of a life the kept entries hold releases as before.
    // A client delete releases a life's unit only when the life was made after the epoch opened by more than the clock
    // skew (strict-ledger.ts `reservedInEpoch`): for a busy heal, exactly the lives its kept entries hold (a token at
    // or after the boundary), whose units it did not recount. So the epoch's time is the boundary less the skew.
    // A sharded key's epochs open together when any shard is lowered (`keyLowered`): a delete releases in the shard of its
    // item's token, which is not the shard that held the unit when another writer rewrote the token, so a heal that took
    // the unit from one shard must refuse a release its touch read before in any shard (checker seed 200164).
    const opensEpoch = plan.truth < plan.current || (busy && options.mode === "strict") || keyLowered;
    const epochAt = busy && options.mode === "strict" ? ledger.boundary - LEDGER_CLOCK_SKEW_MS : plan.cutoff + options.quietWindowMs;
    const sets = ["#count = :truth", "#folded = :folded"];
    const removes = ledger.fold.map((_, i) => `#fold${i}`);
    if (opensEpoch) {
        sets.push("#epoch = if_not_exists(#epoch, :zero) + :one", "#epochAt = :epochAt");
    }
    if (ledger.kind === "quiet" && ledger.rebase) {
        sets.push("#lv = :version");
    }
    // The key leaves the heal index (both its keys go): the next mark adds it again (runtime/shared/best-effort-marks.ts).
    // Unless the heal left lives to a later one (utilization's young items, healCount; a ledger heal's kept entries): the
    // key then stays listed, due when those can be counted, so that a mark their drift wrote is not spent on this heal.
    if (plan.heldBack === undefined) {
        removes.push("#heal", "#due");
    } else {
        sets.push("#heal = :healShard", "#due = :heldBack");
    }
    if (disarm) {
        removes.push("#quotaLimit", "#quota");
    }
    // No client write since the read (the version; a busy heal: and every one of them kept the ledger, and no heal folded
    // since), no mark either (a mark that lands after the read must outlive this heal); a quiet heal: the quiet window.
    // An item no client wrote (a sharded key's shard, see the header) must still be one.
    const condition = [
        plan.version === undefined
            ? `attribute_not_exists(#version) AND attribute_not_exists(#writtenAt)${shardCount(config) > 1 ? "" : " AND attribute_not_exists(#count)"}`
            : busy
              ? "#version = :version AND #lv = :version"
              : "#version = :version AND #writtenAt <= :cutoff",
        plan.marks === undefined ? "attribute_not_exists(#marks)" : "#marks = :marks",
        ...(busy && plan.version !== undefined
            ? [ledger.foldedRead === undefined ? "attribute_not_exists(#folded)" : "#folded = :foldedRead"]
            : []),
    ].join(" AND ");
    const folded = ledger.kind === "busy" ? ledger.boundary : ledger.folded;
    const update = `SET ${sets.join(", ")}${removes.length === 0 ? "" : ` REMOVE ${removes.join(", ")}`}`;
    const names: Record<string, string> = {
        "#count": config.countAttribute,
        "#version": A.version,
        "#writtenAt": A.writtenAt,
        "#marks": A.marks,
        "#folded": A.folded,
        "#lv": A.ledgerVersion,
        "#heal": A.healShard,
        "#due": A.dueAt,
        ...Object.fromEntries(ledger.fold.map((name, i) => [`#fold${i}`, name])),
        ...(opensEpoch ? { "#epoch": A.epoch, "#epochAt": A.epochAt } : {}),
        ...(disarm ? disarmNames() : {}),
    };
    // DynamoDB refuses a name the expressions do not use.
    const used = new Set(`${update} ${condition}`.match(/#[A-Za-z0-9_]+/g));
    return {
        TableName: countersTable(config),
        Key: keyOf(config, read.partitionKey, bestEffortSortKey(config)),
        UpdateExpression: update,
        ConditionExpression: condition,
        ExpressionAttributeNames: Object.fromEntries(Object.entries(names).filter(([name]) => used.has(name))),
        ExpressionAttributeValues: {
            ":truth": { N: String(plan.truth) },
            ":folded": { N: String(folded) },
            ...(plan.version === undefined ? {} : { ":version": { N: String(plan.version) } }),
            ...(plan.version === undefined || busy ? {} : { ":cutoff": { N: String(plan.cutoff) } }),
            ...(busy && ledger.foldedRead !== undefined && plan.version !== undefined
                ? { ":foldedRead": { N: String(ledger.foldedRead) } }
                : {}),
            ...(plan.marks === undefined ? {} : { ":marks": { N: String(plan.marks) } }),
            ...(opensEpoch ? { ":zero": { N: "0" }, ":one": { N: "1" }, ":epochAt": { N: String(epochAt) } } : {}),
            ...(plan.heldBack === undefined
                ? {}
                : {
                      ":healShard": { S: healShard(shardOfPartitionKey(read.partitionKey, shardCount(config)).key, config) },
                      ":heldBack": { N: String(plan.heldBack) },
                  }),
        },
    };
}

/** One shard's conditional write (nothing when its plan skips it). */
async function writeShard(read: ShardHealRead, options: HealOptions): Promise<ShardHealResult> {
    const { plan, shard } = read;
    if (plan.action === "skip") {
        return skippedShard(read);
    }
    try {
        const response = await withRetries(
            () => options.dynamodb.send(new UpdateItemCommand({ ...healUpdate(read, options), ReturnConsumedCapacity: "TOTAL" })),
            isRetryable,
            options.attempts ?? 3,
        );
        return { shard, outcome: "healed", before: plan.current, after: plan.truth, writeUnits: units(response.ConsumedCapacity) };
    } catch (error) {
        if (error instanceof ConditionalCheckFailedException) {
            // A failed conditional write still consumes one write unit.
            return { shard, outcome: "raced", before: plan.current, writeUnits: 1 };
        }
        throw error;
    }
}

/**
 * Heals the best-effort counter of one key, every shard of it (the operator's `hybrid-counter heal --key K`).
 * Throws InvalidArgumentError for a key a sharded counter cannot hold, and DynamoDB errors that outlived every retry;
 * a heal that fails changes nothing.
 */
export async function healKey(key: string, options: HealOptions): Promise<HealResult> {
    let read = await readForHeal(key, options);
    let result = await writeHeal(read, options);
    let writeUnits = result.writeUnits;
    // A busy key's heal that lost its race to a client write plans again on the items it read (the header, (i)).
    for (let replans = 0; result.outcome === "raced" && read.replan !== undefined && replans < LEDGER_HEAL_REPLANS; replans++) {
        const next = await read.replan();
        if (next === undefined) {
            break;
        }
        read = next;
        result = await writeHeal(read, options);
        writeUnits += result.writeUnits;
    }
    return { ...result, readUnits: read.readUnits, writeUnits };
}

function keyOf(config: CounterTableConfig, partitionKey: string, sk: string): Record<string, AttributeValue> {
    return { [config.partitionKey]: { S: partitionKey }, [config.sortKey]: { S: sk } };
}

/** Capacity units of one response (0 when the engine reports none). */
export function units(consumed: ConsumedCapacity | ConsumedCapacity[] | undefined): number {
    const list = consumed === undefined ? [] : Array.isArray(consumed) ? consumed : [consumed];
    return list.reduce((sum, c) => sum + (c.CapacityUnits ?? 0), 0);
}
