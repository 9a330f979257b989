/**
 * The paths a sharded strict key's one bound rests on, added to the checker's histories (history.ts) from draws of their
 * own, so that every draw a seed made before them stays what it was:
 *
 * - a tenant moving plans: from some event on, a key's tryCreate calls run under another limit, lowered or raised (the
 *   call's `limit`; the key's limit in `limits` is the first plan's). The model (limits.ts) checks each admission
 *   against the limit of the call that made it;
 * - a key adopted at its limit: items from before the counter (prefix and attribute histories, strict) as many as the
 *   key's limit or one more, and a backfill after a first tryCreate (which arms a sharded key's quotas): the key
 *   starts at or above its limit, and once adopted must admit nothing while its best-effort is at the limit;
 * - another writer rewriting a client item's token (`otherRetoken`): the item's home shard moves by `shift`, and the
 *   deletes, heals and backfills of the history meet it;
 * - one id reused many times in quick succession: a run of create-delete cycles of one id (young lives: the virtual
 *   clock moves by requests' latencies only, so every life is far younger than a release through the marker needs),
 *   after which every marker of the history must still be within strict-ledger.ts's bound (marker-bound.ts);
 * - one id reused thousands of times (`THOUSANDS`): a history of its own kind, drawn for a few seeds, whose other
 *   traffic is its first events only and whose requests take 1 to 4 virtual ms, so that its thousands of lives fit in
 *   a young life's window (resource-writes.ts `mayStillBeRepeated`: 120 s) and their requests, each checked as any
 *   other's (faults at the history's rate, calls at its concurrency), cost seconds. The marker bound is checked at the
 *   end, as for any history, and every write the counting sends must fit (big-items.ts): a marker that grew per life
 *   would reach DynamoDB's item limit;
 * - items near 400 KB (big-items.ts): some creates pass the largest attributes the client accepts, and a create with
 *   one byte more must be refused before anything is written.
 */
import { seededRandom } from "../../local/engine/faults";
import { ID_PREFIX, type FuzzEvent, type History } from "./history";

/** The limits a plan change draws from (the generator's first plans are drawn from the same). */
const PLAN_LIMITS = [0, 1, 2, 3, 5, 8] as const;

/** Adds the paths above to a generated history, each behind a draw of a source seeded from the history's seed. */
export function addPaths(history: History, ids: readonly string[]): History {
    const random = seededRandom((history.seed ^ 0x4cf5ad43) >>> 0);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    const keys = Object.keys(history.limits).sort();
    const limits = { ...history.limits };
    let events = [...history.events];
    const preexisting = [...(history.preexisting ?? [])];

    // Plan changes: one key, at one event of the history's first half, lowered or raised; sometimes changed back later.
    if (random() < 0.6 && events.length > 0) {
        const key = pick(keys);
        const from = Math.floor((random() * events.length) / 2);
        const plans = [pick(PLAN_LIMITS.filter((limit) => limit !== limits[key])), limits[key]!];
        const back = random() < 0.5 ? from + Math.floor(random() * (events.length - from)) : events.length;
        events = events.map((event, i) =>
            event.op === "tryCreate" && event.key === key && i >= from ? { ...event, limit: i < back ? plans[0]! : plans[1]! } : event,
        );
    }

    // Adoption at the limit: items from before the counter fill one key to its limit (or one past it), and a backfill
    // comes after a first tryCreate of it.
    const others = history.selection === "prefix" || history.selection === "attribute";
    if (others && history.mode === "strict" && random() < 0.5 && events.length > 2) {
        const key = pick(keys);
        const limit = Math.max(1, Math.min(limits[key]!, ids.length - 1));
        limits[key] = limit;
        const count = Math.min(ids.length, limit + (random() < 0.5 ? 0 : 1));
        for (const id of ids.slice(0, count)) {
            if (!preexisting.some((item) => item.key === key && item.id === id)) {
                preexisting.push({ key, id });
            }
        }
        const at = 1 + Math.floor(random() * Math.min(10, events.length - 1));
        events.splice(at, 0, { op: "backfill", runId: "a", pageSize: 2 + Math.floor(random() * 4) });
        events.splice(at - 1, 0, { op: "tryCreate", key, id: pick(ids) });
    }

    // Token rewrites by another writer: about one event in thirty becomes one. The shift is drawn whatever the shard
    // count (retoken.ts maps it onto the shards), so that a seed's shard count changes none of these draws.
    if (random() < 0.5) {
        for (let i = 0; i < events.length; i++) {
            if (random() < 0.035 && events[i]!.op !== "settle") {
                events[i] = { op: "otherRetoken", key: pick(keys), id: pick(ids), shift: 1 + Math.floor(random() * 7) };
            }
        }
    }

    // One id reused: a run of create-delete cycles, inserted at one place.
    if (random() < 0.35) {
        const key = keys.reduce((best, key) => (limits[key]! > limits[best]! ? key : best), keys[0]!);
        const id = pick(ids);
        const cycles = 8 + Math.floor(random() * 25);
        const create: FuzzEvent["op"] = history.mode === "strict" || random() < 0.5 ? "tryCreate" : "create";
        const run: FuzzEvent[] = [];
        for (let cycle = 0; cycle < cycles; cycle++) {
            run.push(create === "tryCreate" ? { op: "tryCreate", key, id } : { op: "create", key, id }, { op: "delete", key, id });
            if (random() < 0.15) {
                run.push({ op: "consume", max: 25, overlap: 0, crash: "none" });
            }
        }
        events.splice(Math.floor(random() * (events.length + 1)), 0, ...run);
    }
    const sized = addBigItems({ ...history, limits, events, preexisting });
    return addThousands(sized);
}

/** The cycles of a history reusing one id thousands of times (`addThousands`), and the most its requests take. */
export const THOUSANDS = { fewest: 1_000, most: 2_500, latencyMs: 4, otherEvents: 40 } as const;

/**
 * Items near 400 KB: in about a third of the histories, a quarter of the creates are big and one create with one byte
 * more is inserted, and about a third of other writers' puts are as large as DynamoDB accepts (big-items.ts). Drawn from
 * a source of their own.
 */
function addBigItems(history: History): History {
    const random = seededRandom((history.seed ^ 0x1d8e4e27) >>> 0);
    if (random() >= 0.35 || history.events.length === 0) {
        return history;
    }
    const keys = Object.keys(history.limits).sort();
    const events: FuzzEvent[] = history.events.map((event) =>
        (event.op === "create" || event.op === "tryCreate") && random() < 0.25 ? { ...event, big: true } : event,
    );
    const call = history.mode === "strict" || random() < 0.5 ? "tryCreate" : "create";
    const at = Math.floor(random() * (events.length + 1));
    events.splice(at, 0, { op: "invalid", call, key: keys[Math.floor(random() * keys.length)]!, field: "attributes", tooBig: true });
    // Another writer's items at DynamoDB's limit, which the client then deletes (client.ts `endLife`): from a source of
    // their own, so that the draws above stay what they were.
    const full = seededRandom((history.seed ^ 0x3c6ef372) >>> 0);
    return { ...history, events: events.map((event) => (event.op === "otherPut" && full() < 0.3 ? { ...event, big: true } : event)) };
}

/**
 * One id reused thousands of times (see the top): about one history in fifty becomes one, keeping its first
 * `THOUSANDS.otherEvents` events around the run. Drawn from a source of their own.
 */
function addThousands(history: History): History {
    const random = seededRandom((history.seed ^ 0x5f356495) >>> 0);
    if (random() >= 0.02) {
        return history;
    }
    return reuseThousands(history, THOUSANDS.fewest + Math.floor(random() * (THOUSANDS.most - THOUSANDS.fewest + 1)), random);
}

/** The key a history reusing one id thousands of times runs its cycles on (`reuseThousands`). */
export const REUSED_KEY = "r0";

/**
 * `history` with its first `THOUSANDS.otherEvents` events, and `cycles` create-delete-consume cycles of one id
 * inserted among them, its requests taking at most `THOUSANDS.latencyMs`. The cycles run on a key of their own whose
 * limit is `cycles`: in strict mode a slot a delete holds (after a fault, each one checked against the call's faults)
 * stays held until a heal, and a smaller limit would end the run's lives after the first few held slots.
 */
export function reuseThousands(history: History, cycles: number, random: () => number): History {
    const key = REUSED_KEY;
    const id = `${ID_PREFIX}${Math.floor(random() * 3)}`;
    const others = history.events.slice(0, THOUSANDS.otherEvents);
    const create = history.mode === "strict" || random() < 0.5 ? "tryCreate" : "create";
    const run: FuzzEvent[] = [];
    // A delete leaves the item soft-deleted, and a create of its id waits for the consumer to remove it: a consumer
    // invocation follows each delete, as the stream's would within a second, so that each cycle is one more life.
    for (let cycle = 0; cycle < cycles; cycle++) {
        run.push(
            { op: create, key, id },
            { op: "delete", key, id },
            { op: "consume", max: 10, overlap: random() < 0.05 ? 2 : 0, crash: random() < 0.03 ? "after" : "none" },
        );
    }
    const at = Math.floor(random() * (others.length + 1));
    return {
        ...history,
        limits: { ...history.limits, [key]: cycles },
        latencyMs: THOUSANDS.latencyMs,
        events: [...others.slice(0, at), ...run, ...others.slice(at)],
    };
}

/** Which of the paths above a history takes (for the suite's coverage checks and the seeds its mutant tests use). */
export interface PathsTaken {
    /** A tryCreate under a limit below (lowered) or above (raised) its key's first plan. */
    readonly lowered: boolean;
    readonly raised: boolean;
    /** A key whose items from before the counter are at least its limit, in a strict history with a backfill. */
    readonly adoptedAtLimit: boolean;
    readonly retoken: boolean;
    /** The most create-delete cycles of one id in a row. */
    readonly reuseCycles: number;
}

export function pathsTaken(history: History): PathsTaken {
    const calls = history.events.flatMap((event) => (event.op === "tryCreate" && event.limit !== undefined ? [event] : []));
    const adopted = Object.entries(history.limits).some(
        ([key, limit]) => (history.preexisting ?? []).filter((item) => item.key === key).length >= limit,
    );
    let reuseCycles = 0;
    let run = 0;
    let last = "";
    for (let i = 0; i + 1 < history.events.length; i++) {
        const [a, b] = [history.events[i]!, history.events[i + 1]!];
        const cycle = (a.op === "tryCreate" || a.op === "create") && b.op === "delete" && a.key === b.key && a.id === b.id;
        if (cycle) {
            run = `${a.key}/${a.id}` === last ? run + 1 : 1;
            last = `${a.key}/${a.id}`;
            reuseCycles = Math.max(reuseCycles, run);
            i++;
        } else if (a.op !== "consume") {
            run = 0;
            last = "";
        }
    }
    return {
        lowered: calls.some((call) => call.limit! < history.limits[call.key]!),
        raised: calls.some((call) => call.limit! > history.limits[call.key]!),
        adoptedAtLimit: history.mode === "strict" && adopted && history.events.some((event) => event.op === "backfill"),
        retoken: history.events.some((event) => event.op === "otherRetoken"),
        reuseCycles,
    };
}
