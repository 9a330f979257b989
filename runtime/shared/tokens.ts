/**
 * The client's write tokens: UUIDv7 (RFC 9562, section 5.7). The first 48 bits are the Unix time in
 * milliseconds at which the token was made, so the creation time of an item (its token) and the time
 * of a delete's claim (the delete token) can be read back from the item itself. The remaining 74 bits
 * are random, so two tokens never collide in practice.
 */
import { tokenBytes } from "./pauses";

const UUID_V7 = /^([0-9a-f]{8})-([0-9a-f]{4})-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;

/** A new UUIDv7 token stamped with `now` (epoch ms). */
export function newToken(now: number = Date.now()): string {
    const bytes = Buffer.from(tokenBytes(16));
    const ms = BigInt(Math.max(0, Math.floor(now)));
    for (let i = 0; i < 6; i++) {
        bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
    }
    bytes[6] = (bytes[6]! & 0x0f) | 0x70; // version 7
    bytes[8] = (bytes[8]! & 0x3f) | 0x80; // variant 10
    const hex = bytes.toString("hex");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The epoch ms a UUIDv7 token was made at; undefined for anything else (a token of another format). */
export function tokenTime(token: string | undefined): number | undefined {
    if (token === undefined) {
        return undefined;
    }
    const match = UUID_V7.exec(token);
    if (match === null) {
        return undefined;
    }
    return parseInt(match[1]! + match[2]!, 16);
}

/** A UUIDv7 for `now`: the same tokens the client writes (healing's tests stamp items with it). */
export function uuidv7(now: number = Date.now()): string {
    return newToken(now);
}
