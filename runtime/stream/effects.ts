/**
 * What one stream record asks of the consumer. Pure.
 *
 * - `delta`: counted(new image) - counted(old image) (runtime/shared/selection.ts): what the record moves eventual by.
 * - `flag`: the new image is live but not flagged (another writer's item, one from before the counter): the consumer
 *   flags it, and the flag's own record counts it once.
 * - `tombstone`: the record made a tombstone appear (a soft delete; in a multi-region counter also a replicated soft
 *   delete that won last-writer-wins over the tombstone's removal). The consumer removes the item now when no put attempt of that life can
 *   land any more (its token, or its delete token when another writer rewrote the token, older than a deadline, a
 *   request's lifetime and twice the clock skew; or it has neither client time);
 *   a younger tombstone stays, keeping a late attempt from landing, and the key is listed for the settler, whose heal
 *   removes it once it is old enough (runtime/heal/heal.ts).
 * - `dueAt`: when the key wants a heal (runtime/heal/index-marks.ts): now, when best-effort may be off the items by a
 *   change the client did not make (a live item that stopped being live other than by the client's own soft delete:
 *   another writer's delete or rewrite, TTL, a move out of the selection; a token another writer rewrote; a soft
 *   delete made in another region); or, for a tombstone left for the settler, when it may go.
 */
import type { CounterTableLayout } from "../shared/config";
import { isCounted, isLive, isSelected, isSoftDeleted, wantsFlag, type ItemImage, type SelectionScope } from "../shared/selection";
import { stringOf } from "../shared/keys";
import { tokenTime } from "../shared/tokens";
import { FOREIGN_DELETE_ATTRIBUTE } from "../regions/ownership";
import { MAX_CLIENT_DEADLINE_MS, tombstoneSettledAfterMs } from "../heal/heal-window";
import type { ParsedRecord } from "./records";
import type { Tombstone } from "../shared/item-writes";

/** After this long no put attempt of a life can land: its tombstone may go. */
export const TOMBSTONE_SETTLED_MS = tombstoneSettledAfterMs(MAX_CLIENT_DEADLINE_MS);

export interface RecordEffects {
    readonly delta: -1 | 0 | 1;
    readonly flag: boolean;
    /** A tombstone to remove now. */
    readonly remove?: Tombstone;
    readonly dueAt?: number;
}

/**
 * When a tombstone may go: once no put attempt it keeps out can land. Every such attempt is of a life of the item made
 * no later than the tombstone's own life, and that life no later than its delete: so the tombstone is dated by its
 * token, or (a token another writer rewrote) by its delete token. Undefined for a tombstone with neither client time:
 * no client wrote it, so it keeps out nothing.
 */
export function tombstoneSettlesAt(token: string | null, deleteToken: string | null): number | undefined {
    const made = tokenTime(token ?? undefined) ?? tokenTime(deleteToken ?? undefined);
    return made === undefined ? undefined : made + TOMBSTONE_SETTLED_MS;
}

/** Whether a tombstone may still keep out a put attempt at `now`. */
export function tombstoneMayStillBlock(token: string | null, deleteToken: string | null, now: number): boolean {
    const settles = tombstoneSettlesAt(token, deleteToken);
    return settles !== undefined && now < settles;
}

/** The effects of one record, at `now` (the consumer's clock). */
export function effectsOf(record: ParsedRecord, scope: SelectionScope, deleteTokenAttribute: string, now: number): RecordEffects {
    const { oldImage, newImage } = record;
    const delta = ((isCounted(newImage, scope) ? 1 : 0) - (isCounted(oldImage, scope) ? 1 : 0)) as -1 | 0 | 1;
    // A tombstone this record made appear: a soft delete, or (a replicated write that won last-writer-wins over the
    // removal of one, or over another region's soft delete of the same life) a tombstone where there was none, another
    // life, or another delete's tombstone. The last one's removal, conditional on its own delete token, finds this one.
    const tokenOf = (image: ItemImage | undefined) => stringOf(image, scope.tokenAttribute) ?? null;
    const deleteTokenOf = (image: ItemImage | undefined) => stringOf(image, deleteTokenAttribute) ?? null;
    const softDeleted =
        newImage !== undefined &&
        isSelected(newImage, scope) &&
        isSoftDeleted(newImage, scope) &&
        (oldImage === undefined ||
            !isSoftDeleted(oldImage, scope) ||
            tokenOf(oldImage) !== tokenOf(newImage) ||
            deleteTokenOf(oldImage) !== deleteTokenOf(newImage));
    let remove: Tombstone | undefined;
    let dueAt = endedByOthers(oldImage, newImage, scope, deleteTokenAttribute) ? now : undefined;
    if (softDeleted) {
        const token = tokenOf(newImage);
        const deleteToken = deleteTokenOf(newImage);
        if (tombstoneMayStillBlock(token, deleteToken, now)) {
            dueAt ??= tombstoneSettlesAt(token, deleteToken);
        } else {
            remove = { id: record.id, token, deleteToken };
        }
    }
    return {
        delta,
        flag: wantsFlag(newImage, scope),
        ...(remove === undefined ? {} : { remove }),
        ...(dueAt === undefined ? {} : { dueAt }),
    };
}

/** A live item that stopped being live (or changed its token) other than by the client's own soft delete. */
function endedByOthers(
    oldImage: ItemImage | undefined,
    newImage: ItemImage | undefined,
    scope: SelectionScope,
    deleteTokenAttribute: string,
): boolean {
    if (!isLive(oldImage, scope)) {
        return false;
    }
    const token = (image: ItemImage | undefined) => stringOf(image, scope.tokenAttribute);
    if (isLive(newImage, scope)) {
        return token(newImage) !== token(oldImage);
    }
    return !clientSoftDelete(newImage, scope, deleteTokenAttribute);
}

/** A soft delete as the client writes it in the owning region: the flag, a delete token, no other region named. */
function clientSoftDelete(
    image: ItemImage | undefined,
    scope: Pick<CounterTableLayout, "deletedAttribute">,
    deleteTokenAttribute: string,
): boolean {
    return (
        image !== undefined &&
        isSoftDeleted(image, scope) &&
        stringOf(image, deleteTokenAttribute) !== undefined &&
        image[FOREIGN_DELETE_ATTRIBUTE] === undefined
    );
}
