/**
 * The client (`hybrid-counter/runtime/client`): what an API calls to create, delete and count, and the best-effort
 * counter it keeps. Its own entry point, so an API's bundle leaves the handlers out.
 *
 * Invariant (create.ts and delete.ts say why it holds): in utilization mode best-effort <= the live client lives; in
 * strict mode live client lives <= best-effort <= limit. Every write of a call is sent within the call's deadline,
 * never in a transaction, and a caller sees only the contract's errors.
 */
export * from "./client";
