/**
 * Items near DynamoDB's 400 KB item limit in the checker's histories (history.ts: a create or tryCreate `big`, an
 * `invalid` create `tooBig`), and the bound they are held to (runtime/client/validation.ts, `checkItemSize`):
 *
 * - a big call passes the largest attributes the client accepts for its item: the item as the client builds it (the
 *   caller's attributes, the selection's attribute, the keys and its token) leaves exactly `headroom` bytes under the
 *   limit, the room the counting's own later writes to it need (the soft delete's flag and token). It must be created
 *   like any other item: an InvalidArgumentError is not in the contract for it (run.ts reports any error of a call);
 * - a `tooBig` call passes one byte more: it must throw InvalidArgumentError naming "attributes" and send nothing;
 * - every write the counting sends (the API's, the pipeline's, the settler's and backfill's: every party but the other
 *   writers, whose writes are theirs to size) fits: DynamoDB never refuses one as written (ValidationException, or a
 *   transaction cancelled for ValidationError). A soft delete that does not fit an item, or a consumer's write refused
 *   on a grown marker, is named at the request, before the drain finds the item the consumer could not remove. The one
 *   refusal allowed is of a delete's claim or soft delete on an item another writer wrote since the client created it
 *   (another writer may grow an item to 400 KB): the delete then removes the item, as another writer's delete would;
 * - so a client delete of an item another writer grew (a flip that adds the selection's attribute, a full-size put)
 *   must still end its life, with no error: what it moved on best-effort is checked as for any delete (calls.ts).
 *
 * Why the bound on the item holds when the checker finds none of these: the item is at most MAX_ITEM_BYTES - headroom
 * when created, another writer's rewrite of its token keeps its size (a client-format token: retoken.ts), and the
 * counting's only write to it adds the soft delete's flag and token, which `headroom` is. The consumer's removal is a
 * DeleteItem, which never grows an item.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { isItemTooLarge, isRefusal } from "../../runtime/shared/aws-errors";
import { itemSize, MAX_ITEM_BYTES, resolveClientOptions } from "../../runtime/client/validation";
import { DEFAULT_LAYOUT, type CounterTableLayout } from "../../runtime/shared/config";
import { newToken } from "../../runtime/shared/tokens";
import type { FuzzSystem } from "./adapter";
import type { Released } from "./scheduler";

type SystemConfig = FuzzSystem["config"];

/** The attribute a big item's payload is written under (a name the client does not reserve). */
export const PAYLOAD_ATTRIBUTE = "payload";

/** The bytes the client leaves free on every item it creates (validation.ts `headroom`) for `layout`. */
export function headroomOf(layout: Partial<CounterTableLayout> = DEFAULT_LAYOUT): number {
    return resolveClientOptions({
        ...layout,
        tableName: "headroom",
        countersTableName: "headroom-counters",
        dynamodb: { send: () => undefined },
        mode: "strict",
    }).headroom;
}

/**
 * The attributes that make the client's item for `key`/`id` `extra` bytes past the largest it accepts: 0 for the
 * largest accepted, 1 for the smallest refused.
 */
export function bigAttributes(config: SystemConfig, key: string, id: string, extra = 0): Record<string, string> {
    const { partitionKey, sortKey, tokenAttribute, selection } = config;
    const item = (payload: number): Record<string, AttributeValue> => ({
        [PAYLOAD_ATTRIBUTE]: { S: "p".repeat(payload) },
        ...(selection.kind === "attribute" ? { [selection.name]: { S: selection.value } } : {}),
        [partitionKey]: { S: key },
        [sortKey]: { S: id },
        [tokenAttribute]: { S: newToken() },
    });
    return { [PAYLOAD_ATTRIBUTE]: "p".repeat(MAX_ITEM_BYTES - headroomOf(config) - itemSize(item(0)) + extra) };
}

/**
 * The problem with a released request of the counting that DynamoDB refused as written, if it was. `grown`: whether the
 * item the request writes is one another writer wrote since the client last created it (`GrownItems`): such an item
 * may be past the room the client left on it, and its delete's claim or soft delete may be refused as too large: the
 * delete then removes the item (runtime/client/client.ts, `endLife`), and the call's ledger checks what it moved.
 */
export function refusedWrite(request: Released, grown: boolean): string | undefined {
    const error = request.outcome?.error;
    if (request.fault !== undefined || !isRefusal(error)) {
        return undefined;
    }
    if (grown && request.command === "UpdateItemCommand" && isItemTooLarge(error)) {
        return undefined;
    }
    return `DynamoDB refused a write of the counting as written: ${(error as Error).name}: ${(error as Error).message}`;
}

/** `item` with a payload that makes it as large as DynamoDB accepts: another writer's item, sized by no client. */
export function fullSize(item: Record<string, AttributeValue>): Record<string, AttributeValue> {
    return { ...item, [PAYLOAD_ATTRIBUTE]: { S: "p".repeat(MAX_ITEM_BYTES - itemSize({ ...item, [PAYLOAD_ATTRIBUTE]: { S: "" } })) } };
}

/**
 * The items of the user's table another writer wrote since the client last created them (a put, a flip of the
 * selection's attribute, a token rewrite): the ones that may be larger than any item the client creates. A client's put
 * of a new life takes an id off the list.
 */
export class GrownItems {
    private readonly items = new Set<string>();

    written(key: string, id: string, byClient: boolean): void {
        if (byClient) {
            this.items.delete(`${key}\u0000${id}`);
        } else {
            this.items.add(`${key}\u0000${id}`);
        }
    }

    has(key: string | undefined, id: string | undefined): boolean {
        return key !== undefined && id !== undefined && this.items.has(`${key}\u0000${id}`);
    }
}
