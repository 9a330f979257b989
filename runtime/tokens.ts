/**
 * Client tokens are UUIDv7 (RFC 9562): the first 48 bits are the Unix time in milliseconds at which the
 * token was made. The token of a resource item therefore tells when the call that wrote it began, which
 * healing needs in utilization mode (an item younger than the quiet window may still have its increment
 * in flight).
 */
import { randomBytes } from "node:crypto";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The creation time (epoch ms) of a UUIDv7 token; undefined for anything else (v4 tokens, garbage). */
export function tokenTime(token: string | undefined): number | undefined {
    if (token === undefined || !UUID.test(token) || token[14] !== "7") {
        return undefined;
    }
    return parseInt(token.slice(0, 8) + token.slice(9, 13), 16);
}

/** A UUIDv7 token made at `now` (epoch ms). */
export function uuidv7(now: number = Date.now()): string {
    const bytes = randomBytes(16);
    const ms = BigInt(Math.max(0, Math.floor(now)));
    for (let i = 0; i < 6; i++) {
        bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
    }
    bytes[6] = (bytes[6]! & 0x0f) | 0x70;
    bytes[8] = (bytes[8]! & 0x3f) | 0x80;
    const hex = bytes.toString("hex");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
