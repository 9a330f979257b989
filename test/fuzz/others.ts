/**
 * Other writers and the backfill in the checker, and the bound each mode keeps when they run.
 *
 * Another writer is a service that writes the user's table with plain PutItem and DeleteItem, no client
 * token and no deleted flag. Under a sort-key-prefix selection its items count like the client's (the
 * consumer, reconciliation and backfill apply one selection), but best-effort covers only the client's
 * own writes: the client moves it on its own creates and deletes, and nothing else ever does (the
 * consumer never touches it; a strict-mode backfill adds the items it counts).
 *
 * So the bound at every observation is restated over the client's items (`clientLive`: live items that
 * carry the client's token):
 *
 * - utilization: `bestEffort <= clientLive + ended`, where `ended` counts the client's live lives that
 *   another writer overwrote or hard-deleted. Best-effort keeps the unit of such a life (no client
 *   delete will ever find it to decrement) until the settler heals the key: an other writer's delete of
 *   a client-written item is the one case where best-effort can exceed the live items. Without it
 *   (`ended` = 0, as in every client-selection history) this is the README's `bestEffort <= live`.
 *   `ended` also counts a life whose delete had already decremented and not yet soft-deleted it, so it
 *   can be loose by the deletes that raced another writer; it is never tighter than the truth.
 * - strict: `clientLive <= bestEffort` and `clientLive <= limit` (the client never admits one of its
 *   own items past the limit; other writers' items are not the client's to refuse), and `bestEffort <=
 *   limit + backfilled`, where `backfilled` is what strict-mode backfill transactions added to the key's
 *   best-effort: a reservation passes only below the limit, and backfill's ADD is not conditional on it.
 *   (A transaction served twice, its resend with the same client token answered from DynamoDB's
 *   idempotency window, is counted twice here: that can only loosen this last check, never tighten it.)
 *
 * In attribute histories another writer also moves items in and out of the selection. A client item it moves
 * out ends a life (as a delete does); one it moves back in is, by docs/limits.md, counted by eventual alone until a
 * heal, which may then count it (it carries the token). So strict mode's three checks allow `movedIn`, the
 * client items moved back in so far: it can only loosen them, and is 0 in every other history. A TTL delete
 * (client histories) is a hard delete nobody calls: another writer's, as far as the contract goes.
 *
 * A late put attempt of a removed life (run.ts) is no one's live item, so it is left out of `clientLive`. A heal that
 * reads the key while one is in the table and no one can yet tell it from a live item (its removal's record waits in
 * the first DLQ; any one under an attribute selection) counts it (docs/limits.md), so the upper bounds (utilization's,
 * and strict's `bestEffort <= limit + ...`) allow `healedLate`, the late puts a settler run found so (0 in every
 * history where the consumer read them first). One whose token another writer rewrites before the consumer removes it
 * is a life of the new token that no slot backs, and a client delete of it gives one back (docs/limits.md): strict
 * mode's sums allow one item for it, in `movedIn`, for good.
 *
 * Sharded counters (runtime/shards/layout.ts): the bound a mode keeps on one best-effort item it keeps per shard,
 * over the client's live items homed there (their token's shard), so each shard is checked as a key of its own:
 * utilization `bestEffort_s <= clientLive_s + ended_s`, strict `clientLive_s <= bestEffort_s + movedIn_s`, the
 * allowances counted by the shard of the life they are about (its token's). The limit is the key's (its quotas
 * sum to it), so `clientLive <= limit` and `bestEffort <= limit + backfilled` are checked on the sums.
 */
import {
    DeleteItemCommand,
    GetItemCommand,
    PutItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { isLive } from "../../runtime/shared/selection";
import { fullSize } from "./big-items";
import { clientShard, shardsOf, type FuzzSystem, type Truth } from "./adapter";
import { ACTIVE, STATUS_ATTRIBUTE, type FuzzEvent, type Mode } from "./history";
import type { GatedRequest } from "./scheduler";

/** How many times another writer sends its write before it gives up (each send has the SDK's own retries). */
export const OTHER_WRITER_ATTEMPTS = 10;

/**
 * Runs another writer's PutItem or DeleteItem until it is served or its attempts run out. Resolves
 * whether it was served by its last answer: a write that met a 500 after commit and then gave up did
 * take effect, which is why the checker reads the truth from the table, never from this answer.
 */
export async function otherWrite(
    dynamodb: DynamoDBClient,
    system: FuzzSystem,
    event: Extract<FuzzEvent, { op: "otherPut" | "otherDelete" | "otherFlip" | "ttlDelete" }>,
): Promise<boolean> {
    const { tableName, partitionKey, sortKey, selection } = system.config;
    const key = { [partitionKey]: { S: event.key }, [sortKey]: { S: event.id } };
    // Under an attribute selection another writer's items are put selected.
    const status: Record<string, AttributeValue> = selection.kind === "attribute" ? { [STATUS_ATTRIBUTE]: { S: ACTIVE } } : {};
    for (let attempt = 1; attempt <= OTHER_WRITER_ATTEMPTS; attempt++) {
        try {
            if (event.op === "otherPut") {
                const item = { ...key, ...status, source: { S: "other-writer" } };
                await dynamodb.send(new PutItemCommand({ TableName: tableName, Item: event.big ? fullSize(item) : item }));
            } else if (event.op === "otherFlip") {
                // Only an item that exists is moved (an update would otherwise create one).
                await dynamodb.send(
                    new UpdateItemCommand({
                        TableName: tableName,
                        Key: key,
                        UpdateExpression: "SET #status = :status",
                        ConditionExpression: "attribute_exists(#sk)",
                        ExpressionAttributeNames: { "#status": STATUS_ATTRIBUTE, "#sk": sortKey },
                        ExpressionAttributeValues: { ":status": { S: event.status } },
                    }),
                );
            } else {
                await dynamodb.send(new DeleteItemCommand({ TableName: tableName, Key: key }));
            }
            return true;
        } catch (error) {
            if ((error as Error).name === "ConditionalCheckFailedException") {
                return true;
            }
            // Another service retries its own write: the next attempt.
        }
    }
    return false;
}

/** Lives of client items that other writers ended: what utilization's bound allows best-effort above the client's live items. */
export class EndedLives {
    private readonly perKey = new Map<string, number>();
    /** Per key, per shard of the ended lives' home. */
    private readonly perShard = new Map<string, number[]>();
    /** Per client token: the ordinals (see `count`) at which another writer ended a life carrying it. */
    private readonly perToken = new Map<string, number[]>();
    private ordinal = 0;

    /**
     * Reads the item another writer's request is about to write (the table is still between two
     * releases, so what it reads is what the request replaces). Undefined for any other request.
     */
    static async before(reader: DynamoDBClient, system: FuzzSystem, request: GatedRequest): Promise<Record<string, AttributeValue> | null> {
        const input = request.input as { TableName?: string; Item?: Record<string, AttributeValue>; Key?: Record<string, AttributeValue> };
        const { partitionKey, sortKey, tableName } = system.config;
        const source = input.Key ?? input.Item;
        const key = source?.[partitionKey];
        const sk = source?.[sortKey];
        if (input.TableName !== tableName || key === undefined || sk === undefined) {
            return null;
        }
        const read = await reader.send(
            new GetItemCommand({ TableName: tableName, Key: { [partitionKey]: key, [sortKey]: sk }, ConsistentRead: true }),
        );
        return read.Item ?? null;
    }

    /** Records that another writer's served request replaced `before` (null: no item). */
    replaced(system: FuzzSystem, key: string, before: Record<string, AttributeValue> | null): void {
        const token = before?.[system.config.tokenAttribute]?.S;
        if (before === null || token === undefined || !isLive(before, system.config)) {
            return;
        }
        this.perKey.set(key, (this.perKey.get(key) ?? 0) + 1);
        const shards = this.perShard.get(key) ?? new Array<number>(shardsOf(system)).fill(0);
        shards[clientShard(system, before)!]!++;
        this.perShard.set(key, shards);
        const ordinals = this.perToken.get(token) ?? [];
        ordinals.push(++this.ordinal);
        this.perToken.set(token, ordinals);
    }

    /** Client lives of `key` other writers ended. */
    of(key: string): number {
        return this.perKey.get(key) ?? 0;
    }

    /** Client lives of `key` homed in `shard` that other writers ended. */
    ofShard(key: string, shard: number): number {
        return this.perShard.get(key)?.[shard] ?? 0;
    }

    /** The ordinal of the last ending recorded: a call notes it when it starts. */
    get count(): number {
        return this.ordinal;
    }

    /** Lives carrying one of `tokens` that other writers ended after ordinal `since`. */
    endedSince(tokens: Iterable<string>, since: number): number {
        let n = 0;
        for (const token of new Set(tokens)) {
            n += (this.perToken.get(token) ?? []).filter((o) => o > since).length;
        }
        return n;
    }

    /** How many of `tokens` carry a life another writer ended at or before `ordinal` (each token once). */
    endedBy(tokens: Iterable<string>, ordinal: number): number {
        return [...new Set(tokens)].filter((token) => (this.perToken.get(token) ?? []).some((o) => o <= ordinal)).length;
    }
}

/** What the bound at one observation may lean on besides the truth. */
export interface BoundAllowance {
    /** Client lives of the key other writers ended (utilization). */
    readonly ended: number;
    /** Units strict-mode backfill transactions added to the key's best-effort. */
    readonly backfilled: number;
    /**
     * Client items another writer moved back into the selection (strict; see the top of this module), and late
     * puts the consumer does not promise to catch (run.ts): items no slot backs, until a heal.
     */
    readonly movedIn: number;
    /** Late puts a settler run's heal may have counted (run.ts, `lateAHealMayCount`): above the live items. */
    readonly healedLate: number;
}

/** The mode's bound at one observation (see the top of this module); undefined when it holds. */
export function boundProblem(mode: Mode, truth: Truth, limit: number, allowance: BoundAllowance): string | undefined {
    if (mode === "utilization") {
        return truth.bestEffort > truth.clientLive + allowance.ended + allowance.healedLate
            ? `best-effort ${truth.bestEffort} > live ${truth.clientLive} client-written items + ${allowance.ended} ended by other writers` +
                  healedLateText(allowance.healedLate)
            : undefined;
    }
    const moved = allowance.movedIn;
    if (
        truth.clientLive > truth.bestEffort + moved ||
        truth.clientLive > limit + moved ||
        truth.bestEffort > limit + allowance.backfilled + moved + allowance.healedLate
    ) {
        return (
            `strict bound broken: ${truth.clientLive} client-written live items (${truth.live} live), best-effort ` +
            `${truth.bestEffort}, limit ${limit} (+ ${allowance.backfilled} added by backfill, + ${moved} moved back in)` +
            healedLateText(allowance.healedLate)
        );
    }
    return undefined;
}

/** One shard's part of an observation: its best-effort, the client's live items homed there, and the allowances. */
export interface ShardObservation {
    readonly shard: number;
    readonly bestEffort: number;
    readonly clientLive: number;
    /** Client lives homed there that other writers ended (utilization). */
    readonly ended: number;
    /** Client items homed there moved back into the selection, and late puts not promised (strict). */
    readonly movedIn: number;
    /** Late puts homed there a settler run's heal may have counted (utilization). */
    readonly healedLate: number;
}

/** The mode's bound on one shard of a key (see the top of this module); undefined when it holds. */
export function shardBoundProblem(mode: Mode, s: ShardObservation): string | undefined {
    if (mode === "utilization") {
        return s.bestEffort > s.clientLive + s.ended + s.healedLate
            ? `shard ${s.shard} best-effort ${s.bestEffort} > live ${s.clientLive} client-written items homed there + ${s.ended} ended by other writers` +
                  healedLateText(s.healedLate)
            : undefined;
    }
    return s.clientLive > s.bestEffort + s.movedIn
        ? `shard ${s.shard} strict bound broken: ${s.clientLive} client-written live items homed there > best-effort ${s.bestEffort} (+ ${s.movedIn} moved back in)`
        : undefined;
}

/** The late-put allowance in a bound's message, when there is one. */
function healedLateText(healedLate: number): string {
    return healedLate === 0 ? "" : ` + ${healedLate} late puts a heal may have counted`;
}
