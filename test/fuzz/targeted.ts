/**
 * Targeted histories: the shape a rare interleaving needs, written out, with the interleaving itself left to the
 * seed's scheduler (run.ts). A random history seldom holds such a shape; test/fuzz.test.ts runs a mutant on one where
 * no random seed rejects it.
 */
import type { FuzzEvent, History } from "./history";

/**
 * Strict deletes of old lives under heals of their key. Forty lives are made and the clock moves an hour, so they are
 * old; then twenty rounds of: the table's TTL deletes one (the consumer lists the key), a client delete of another, a
 * settler run. The heal of the listed key often reads the table between a delete's soft delete and its release.
 */
export function oldLifeDeletesUnderHeals(seed: number): History {
    const ids = Array.from({ length: 40 }, (_, n) => `i${n}`);
    const consume: FuzzEvent = { op: "consume", max: 12, overlap: 0, crash: "none" };
    const events: FuzzEvent[] = [
        ...ids.map((id): FuzzEvent => ({ op: "tryCreate", key: "k0", id })),
        consume,
        { op: "advance", ms: 3_600_000 },
    ];
    for (let round = 0; round < ids.length / 2; round++) {
        events.push(
            { op: "ttlDelete", key: "k0", id: ids[2 * round]! },
            consume,
            { op: "delete", key: "k0", id: ids[2 * round + 1]! },
            { op: "settle", keyBudget: 50 },
        );
    }
    return strictHistory(seed, { faultRate: 0.05, concurrency: 3, horizon: "long", events });
}

/**
 * A put attempt of an earlier life still on the wire when another writer rewrites the token of a later life's
 * tombstone: a create whose first attempt is held (it puts again and succeeds), its life deleted, the id created
 * again over the tombstone and deleted again, the tombstone's token rewritten, the stream consumed, then the held
 * attempt lands. One call at a time.
 */
export function lateAttemptUnderRetokenedTombstone(seed: number): History {
    const consume: FuzzEvent = { op: "consume", max: 12, overlap: 0, crash: "none" };
    return strictHistory(seed, {
        faultRate: 0,
        concurrency: 1,
        horizon: "short",
        events: [
            { op: "tryCreate", key: "k0", id: "i0", late: true },
            { op: "delete", key: "k0", id: "i0" },
            { op: "tryCreate", key: "k0", id: "i0" },
            { op: "delete", key: "k0", id: "i0" },
            { op: "otherRetoken", key: "k0", id: "i0" },
            consume,
            { op: "land" },
            consume,
        ],
    });
}

/** A strict history of one key with one shard, on the client's selection and a counters table of its own. */
function strictHistory(
    seed: number,
    fields: Pick<History, "faultRate" | "concurrency" | "events"> & { readonly horizon: History["profile"]["horizon"] },
): History {
    const { horizon, ...rest } = fields;
    return {
        seed,
        mode: "strict",
        selection: "client",
        placement: "separate",
        counterShards: 1,
        profile: { horizon, settings: false, bursts: false, healing: false },
        limits: {},
        preexisting: [],
        ...rest,
    };
}
