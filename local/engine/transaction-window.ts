/**
 * DynamoDB's transaction conflicts, which DynamoDB Local never raises: the items a write holds while the engine
 * applies it, and what another request that names one of them meets.
 *
 * DynamoDB ("Transaction conflict handling in DynamoDB", Amazon DynamoDB Developer Guide, transaction-apis.html;
 * the TransactWriteItems and TransactGetItems API references):
 * - a PutItem, UpdateItem or DeleteItem of an item that an ongoing TransactWriteItems includes is rejected with
 *   TransactionConflictException (HTTP 400): nothing is written;
 * - a TransactWriteItems one of whose items another ongoing TransactWriteItems includes is cancelled: a
 *   TransactionCanceledException whose CancellationReasons name TransactionConflict for that action and None for
 *   the others (nothing is written);
 * - a TransactGetItems one of whose items an ongoing TransactWriteItems, BatchWriteItem, PutItem, UpdateItem or
 *   DeleteItem is writing is cancelled the same way;
 * - a plain write never waits for, nor cancels, a TransactGetItems, and reads other than TransactGetItems meet no
 *   conflict;
 * - a TransactWriteItems whose ClientRequestToken the service has already answered (for 10 minutes) is answered from
 *   that record, whatever is in flight (success without changes, or IdempotentParameterMismatchException for other
 *   actions), so it meets no conflict; one whose token is still being applied gets TransactionInProgressException.
 *
 * Invariant kept: a write holds its items from the moment the layer admits it (every limit checked, about to be
 * forwarded) until the engine's answer reaches the layer, and a request refused for a conflict never reaches the
 * engine. A transaction's window is therefore exactly the time the engine applies it, as seen through the layer;
 * `holdTransactions` lets a test keep one open for as long as it likes, so that a conflict is staged, not timed.
 *
 * What it does not model: a transaction meeting a plain write in flight (the service orders them; the guide lists
 * no conflict for it), and a BatchWriteItem meeting a transaction (its items are held for TransactGetItems only).
 */

/** An item as the layer names it: `table/<partition key value>/<sort key value>`. */
export type ItemId = string;

/** A TransactWriteItems the layer is about to forward: what a hold sees and keeps open. */
export interface PendingTransaction {
    /** The items of its actions, in order. */
    readonly items: readonly { readonly table: string; readonly key: Record<string, unknown> }[];
}

/** A transaction a test keeps open (`holdTransactions`). */
export interface TransactionHold {
    /** Resolves when a matching transaction holds its items and waits, with that transaction. */
    readonly held: Promise<PendingTransaction>;
    /** Resolves when a request is first refused for meeting the held transaction (its error already decided). */
    readonly met: Promise<void>;
    /** Lets the held transaction go on to the engine (and any matching one after it through unheld). */
    release(): void;
}

/** What a request that names held items meets: per item, whether a conflicting write holds it. */
export type Conflicts = readonly boolean[];

export class TransactionWindow {
    /** Items held by an ongoing TransactWriteItems (at most one: a second one naming an item is cancelled). */
    private readonly transactions = new Set<ItemId>();
    /** Items being written by a plain write or a BatchWriteItem in flight, with how many hold each. */
    private readonly writes = new Map<ItemId, number>();
    private readonly holds: Hold[] = [];
    /** The held transactions now waiting, with their items. */
    private readonly paused = new Map<Hold, ReadonlySet<ItemId>>();
    /** ClientRequestTokens sent to the engine: "pending" until its answer, then the time of the answer. */
    private readonly tokens = new Map<string, "pending" | number>();

    /** Where a transaction's ClientRequestToken stands: never sent, being applied, or answered within 10 minutes. */
    tokenState(token: string, now: number): "new" | "pending" | "answered" {
        const state = this.tokens.get(token);
        if (state === undefined) {
            return "new";
        }
        if (state === "pending") {
            return "pending";
        }
        if (now - state > TOKEN_LIFETIME_MS) {
            this.tokens.delete(token);
            return "new";
        }
        return "answered";
    }

    /** A token sent to the engine; the returned function records its answer. */
    tokenSent(token: string, now: () => number): () => void {
        // Tokens past their lifetime are forgotten, as the service forgets them: the record stays bounded.
        const at = now();
        for (const [known, answered] of this.tokens) {
            if (answered !== "pending" && at - answered > TOKEN_LIFETIME_MS) {
                this.tokens.delete(known);
            }
        }
        this.tokens.set(token, "pending");
        return once(() => this.tokens.set(token, now()));
    }

    /**
     * A TransactWriteItems admitted by every other check: either its conflicts (some action names an item another
     * ongoing transaction holds: it must be cancelled, nothing held), or the release of the items it now holds.
     */
    openTransaction(items: readonly ItemId[]): { conflicts: Conflicts } | { release: () => void } {
        const conflicts = items.map((item) => this.transactions.has(item));
        if (conflicts.some(Boolean)) {
            this.noteMet(items);
            return { conflicts };
        }
        for (const item of items) {
            this.transactions.add(item);
        }
        return { release: once(() => items.forEach((item) => this.transactions.delete(item))) };
    }

    /**
     * A plain write (PutItem, UpdateItem, DeleteItem) or a BatchWriteItem's items: undefined when a transaction holds
     * one of them (a plain write is then refused), otherwise the release of the items it now writes.
     */
    openWrite(items: readonly ItemId[]): (() => void) | undefined {
        if (items.some((item) => this.transactions.has(item))) {
            this.noteMet(items);
            return undefined;
        }
        return this.holdWrite(items);
    }

    /** Items a write is applying to, whatever holds them (a BatchWriteItem: see the header); returns their release. */
    holdWrite(items: readonly ItemId[]): () => void {
        for (const item of items) {
            this.writes.set(item, (this.writes.get(item) ?? 0) + 1);
        }
        return once(() => {
            for (const item of items) {
                const left = (this.writes.get(item) ?? 1) - 1;
                if (left === 0) {
                    this.writes.delete(item);
                } else {
                    this.writes.set(item, left);
                }
            }
        });
    }

    /** A TransactGetItems: per item, whether a write of any kind is applying to it now. */
    readConflicts(items: readonly ItemId[]): Conflicts {
        const conflicts = items.map((item) => this.transactions.has(item) || this.writes.has(item));
        if (conflicts.some(Boolean)) {
            this.noteMet(items);
        }
        return conflicts;
    }

    /** Tells the holds whose transaction holds one of `items` that a request met it. */
    private noteMet(items: readonly ItemId[]): void {
        for (const [hold, held] of this.paused) {
            if (items.some((item) => held.has(item))) {
                hold.met();
            }
        }
    }

    /**
     * Keeps the next transaction `match` accepts open, holding its items, until `release()`: requests sent meanwhile
     * meet it as they would meet a transaction the engine is applying.
     */
    hold(match: (transaction: PendingTransaction) => boolean): TransactionHold {
        let reached!: (t: PendingTransaction) => void;
        let open!: () => void;
        let met!: () => void;
        const held = new Promise<PendingTransaction>((resolve) => (reached = resolve));
        const gate = new Promise<void>((resolve) => (open = resolve));
        const metPromise = new Promise<void>((resolve) => (met = resolve));
        const entry: Hold = { match, reached, gate, met };
        this.holds.push(entry);
        return {
            held,
            met: metPromise,
            release: () => {
                const at = this.holds.indexOf(entry);
                if (at >= 0) {
                    this.holds.splice(at, 1);
                }
                open();
            },
        };
    }

    /** Waits while a hold keeps `transaction` open (called once it holds its items, before it reaches the engine). */
    async pause(transaction: PendingTransaction, items: readonly ItemId[]): Promise<void> {
        const entry = this.holds.find((h) => h.match(transaction));
        if (entry === undefined) {
            return;
        }
        // One transaction per hold: later ones go through while this one waits.
        this.holds.splice(this.holds.indexOf(entry), 1);
        this.paused.set(entry, new Set(items));
        entry.reached(transaction);
        await entry.gate;
        this.paused.delete(entry);
    }
}

interface Hold {
    readonly match: (t: PendingTransaction) => boolean;
    readonly reached: (t: PendingTransaction) => void;
    readonly gate: Promise<void>;
    readonly met: () => void;
}

function once(fn: () => void): () => void {
    let done = false;
    return () => {
        if (!done) {
            done = true;
            fn();
        }
    };
}

/** How long DynamoDB answers a ClientRequestToken from its record after the request completed (TransactWriteItems reference). */
const TOKEN_LIFETIME_MS = 10 * 60_000;

/** DynamoDB's message for a retried token whose transaction is still being applied (TransactionInProgressException). */
export const IN_PROGRESS_MESSAGE = "The transaction with the given request token is already in progress.";

/** DynamoDB's message for a request that meets an ongoing transaction. */
export const CONFLICT_MESSAGE = "Transaction is ongoing for the item";

/** The CancellationReasons of a transaction cancelled for `conflicts`: TransactionConflict where one was met, None elsewhere. */
export function conflictReasons(conflicts: Conflicts): Array<{ Code: string; Message?: string }> {
    return conflicts.map((conflict) => (conflict ? { Code: "TransactionConflict", Message: CONFLICT_MESSAGE } : { Code: "None" }));
}
