/**
 * The API calls in flight, for the harnesses that run the client beside other parties.
 *
 * - The twin's settler runs beside the calls, on its schedule, nothing held back: the twin compresses its client's
 *   deadline with the settler's window, so the heal's assumptions hold as they do in AWS (local/twin/settler.ts).
 *   `inFlight` tells how many calls a settler run started beside.
 * - An observer that reads a key in two requests or more (its counters table, then its items: local/harness/observe.ts)
 *   does not read one instant. It learns which calls of the key were in flight at some instant of its reads
 *   (`window`): the slack its bound checks allow, and no more (see `window` for why).
 */
import type { HybridCounterClient } from "../../runtime/client/client";

type ApiCalls = Pick<HybridCounterClient, "create" | "delete" | "tryCreate">;

/** Calls of one key in flight at some instant of an observation's reads. */
export interface CallsDuring {
    /** create and tryCreate calls. */
    readonly creates: number;
    readonly deletes: number;
}

/** No call: what an observation made of one read (one instant) allows. */
export const NO_CALLS: CallsDuring = { creates: 0, deletes: 0 };

type Kind = keyof CallsDuring;

export class CallsInFlight {
    private count = 0;
    /** Per key and kind: calls in flight now, and calls ever started. */
    private readonly calls = new Map<string, Record<Kind, { inFlight: number; started: number }>>();

    /** The client's calls, counted. Assigned onto the client itself, they count the calls of whoever holds it. */
    wrap(client: ApiCalls): ApiCalls {
        const track = <A extends [string, ...unknown[]], R>(kind: Kind, call: (...args: A) => Promise<R>) =>
            (async (...args: A): Promise<R> => {
                this.count++;
                const at = this.of(args[0])[kind];
                at.inFlight++;
                at.started++;
                try {
                    return await call(...args);
                } finally {
                    at.inFlight--;
                    this.count--;
                }
            }) as (...args: A) => Promise<R>;
        return {
            create: track("creates", client.create.bind(client)),
            delete: track("deletes", client.delete.bind(client)),
            tryCreate: track("creates", client.tryCreate.bind(client)),
        };
    }

    /** Calls in flight now. */
    get inFlight(): number {
        return this.count;
    }

    /**
     * Opens a window on `key`'s calls, to be closed when an observation's last read has answered: closing it gives the
     * calls of each kind that were in flight at some instant of the window (those in flight when it opened, and those
     * started since).
     *
     * An observation that reads best-effort first (t1) and the items after (t2) may see the bound crossed by that many,
     * and by no more, without the bound having been crossed at any instant:
     * - utilization (best-effort <= live): a delete decrements best-effort, then soft-deletes (runtime/client/client.ts),
     *   so at every instant best-effort <= live - (lives decremented and not yet soft-deleted). Between t1 and t2 live
     *   falls only by soft deletes; one of a life decremented before t1 was already off best-effort at t1, and one of a
     *   life decremented after t1 needs its call in flight when that decrement answered, an instant of the window (the
     *   soft delete is sent after the answer and lands before t2). So best-effort(t1) <= live(t2) + deletes.
     * - strict (live <= best-effort): a create reserves, then puts, so at every instant best-effort >= live + (slots
     *   reserved and not yet put). Between t1 and t2 live rises only by puts; one whose slot was reserved before t1 was
     *   already in best-effort at t1, and one whose slot was reserved after needs its call in flight then. So
     *   live(t2) <= best-effort(t1) + creates.
     */
    window(key: string): () => CallsDuring {
        const opened = this.of(key);
        const at = { creates: { ...opened.creates }, deletes: { ...opened.deletes } };
        return () => {
            const now = this.of(key);
            return {
                creates: at.creates.inFlight + (now.creates.started - at.creates.started),
                deletes: at.deletes.inFlight + (now.deletes.started - at.deletes.started),
            };
        };
    }

    private of(key: string): Record<Kind, { inFlight: number; started: number }> {
        let at = this.calls.get(key);
        if (at === undefined) {
            at = { creates: { inFlight: 0, started: 0 }, deletes: { inFlight: 0, started: 0 } };
            this.calls.set(key, at);
        }
        return at;
    }
}
