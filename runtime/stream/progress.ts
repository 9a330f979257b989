/**
 * A stream shard's progress: the ranges of records delivered and not yet known applied.
 *
 * Invariant: every record of stream shard S that some batch delivered and that is not yet applied lies in one of S's
 * open ranges (attributes `hc_o_<from>` = to, on S's progress item). So when a batch begins at `first` and a range
 * opens below it, Lambda gave up on the records between (a batch that exhausted its retries went to the first DLQ):
 * the consumer re-reads them from the stream and applies them before its own batch, and no key's mark ever moves past
 * a record of that key that is not applied (runtime/stream/marks.ts).
 * - A batch opens its range before it applies anything (one write), so a batch that crashes on every attempt leaves
 *   its range open. Lambda delivers a shard's batches one after another (parallelizationFactor 1, which the component
 *   and the policy pack enforce), so the only records below a batch that are not applied are in open ranges.
 * - A batch that finishes closes what it applied (its range, or up to the first record it reports failed). The close
 *   rides on the next batch's open when the same instance handles it; a close that is never written only makes the
 *   next batch re-read a range it finds applied.
 * - The redrive applies a range from the first DLQ and closes it the same way; applying twice is harmless (the marks).
 */
import { UpdateItemCommand, ConditionalCheckFailedException, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { CounterConfig } from "../shared/config";
import { streamShardKey } from "../shared/keys";
import { EXPIRES_ATTRIBUTE } from "../limits/usage";
import { compareSequences, nextSequence, paddedSequence } from "./records";

/**
 * The prefix of an open range's attribute: `hc_o_<padded from>`, its value `<padded to>|<padded anchor>|<at|after>`:
 * the range starts at record `anchor`, or right after it (both real records, so the stream can be read from there).
 */
export const OPEN_PREFIX = "hc_o_";

/** A range of sequence numbers (decimal strings, `from` and `to` included) and the real record it is read from. */
export interface Range {
    readonly from: string;
    readonly to: string;
    /** Read from this record (`at`), or from the one after it (`after`): `from` is `anchor` or `anchor + 1`. */
    readonly anchor: string;
    readonly after: boolean;
}

/** A range starting at record `from`. */
export function rangeAt(from: string, to: string): Range {
    return { from, to, anchor: from, after: false };
}

/** A range starting right after record `anchor`. */
export function rangeAfter(anchor: string, to: string): Range {
    return { from: nextSequence(anchor), to, anchor, after: true };
}

/** How long a progress item outlives its last write: twice the stream's 24 hours. */
const PROGRESS_TTL_SECONDS = 48 * 3600;

/** The open ranges an item holds. */
export function openRanges(item: Record<string, AttributeValue> | undefined): Range[] {
    return Object.entries(item ?? {})
        .filter(([name]) => name.startsWith(OPEN_PREFIX))
        .map(([name, value]) => {
            const [to = "0", anchor, kind] = (value.S ?? "").split("|");
            const from = trim(name.slice(OPEN_PREFIX.length));
            return { from, to: trim(to), anchor: anchor === undefined ? from : trim(anchor), after: kind === "after" };
        })
        .sort((a, b) => compareSequences(a.from, b.from));
}

function trim(padded: string): string {
    return padded.replace(/^0+(?=\d)/, "");
}

/** The parts of the open ranges below `first`: records Lambda delivered, gave up on, and no batch applied. */
export function skippedBelow(open: readonly Range[], first: string): Range[] {
    const end = (BigInt(first) - 1n).toString();
    return open.filter((r) => compareSequences(r.from, first) < 0).map((r) => ({ ...r, to: compareSequences(r.to, end) < 0 ? r.to : end }));
}

/**
 * `ranges` less the records from `done.from` to `done.to`, where `rest` is where what follows them is read from: right
 * after `done.to` when that is a real record, or at the record reported failed.
 */
export function subtract(ranges: readonly Range[], done: { readonly from: string; readonly to: string; readonly rest: Range["anchor"]; readonly restAfter: boolean }): Range[] {
    const out: Range[] = [];
    for (const r of ranges) {
        if (compareSequences(r.to, done.from) < 0 || compareSequences(r.from, done.to) > 0) {
            out.push(r);
            continue;
        }
        if (compareSequences(r.from, done.from) < 0) {
            out.push({ ...r, to: (BigInt(done.from) - 1n).toString() });
        }
        if (compareSequences(r.to, done.to) > 0) {
            out.push(done.restAfter ? rangeAfter(done.rest, r.to) : rangeAt(done.rest, r.to));
        }
    }
    return out;
}

/** What a finished batch (or applied range) closes: `range`, or up to the record it reports failed. */
export interface Done {
    readonly from: string;
    readonly to: string;
    readonly rest: string;
    readonly restAfter: boolean;
}

/** The close of `range` applied entirely, or up to `failedFrom` (excluded). */
export function doneOf(range: Range, failedFrom?: string): Done {
    return failedFrom === undefined
        ? { from: range.from, to: range.to, rest: range.to, restAfter: true }
        : { from: range.from, to: (BigInt(failedFrom) - 1n).toString(), rest: failedFrom, restAfter: false };
}

/** The write that turns the open ranges `before` into `after`, in the shard's progress item. */
function changes(before: readonly Range[], after: readonly Range[]): { sets: Array<[string, string]>; removes: string[] } {
    const name = (r: Range) => `${OPEN_PREFIX}${paddedSequence(r.from)}`;
    const value = (r: Range) => `${paddedSequence(r.to)}|${paddedSequence(r.anchor)}|${r.after ? "after" : "at"}`;
    const kept = new Map(after.map((r) => [name(r), value(r)]));
    const had = new Map(before.map((r) => [name(r), value(r)]));
    return {
        sets: [...kept].filter(([n, v]) => had.get(n) !== v),
        removes: [...had.keys()].filter((n) => !kept.has(n)),
    };
}

/** One shard's progress, as this process last knew it, with the close it has not written yet. */
export class ShardProgress {
    /** The ranges as last written or read, and the ranges a finished batch closed since (unwritten). */
    private known: Range[] = [];
    private closing: Done[] = [];

    constructor(
        private readonly config: CounterConfig,
        private readonly dynamodb: DynamoDBClient,
        readonly shardId: string,
    ) {}

    /**
     * Opens `range` (with any close still unwritten) and returns the ranges open below it: skipped records to apply
     * first. One write, which returns the item.
     */
    async open(range: Range): Promise<Range[]> {
        let open = this.known;
        for (const done of this.closing) {
            open = subtract(open, done);
        }
        const merged = mergeInto(open, range);
        const item = await this.write(this.known, merged);
        this.known = openRanges(item);
        this.closing = [];
        return skippedBelow(this.known, range.from);
    }

    /** Records that `done` is applied; written with the next open, or by `flush`. */
    close(done: Done): void {
        this.closing.push(done);
    }

    /** Writes the closes not yet written (the redrive, which opens nothing). */
    async flush(): Promise<void> {
        if (this.closing.length === 0) {
            return;
        }
        let open = this.known;
        for (const done of this.closing) {
            open = subtract(open, done);
        }
        this.known = openRanges(await this.write(this.known, open));
        this.closing = [];
    }

    /** Reads the shard's open ranges (the redrive and a new process start from the item). */
    async read(): Promise<Range[]> {
        this.known = openRanges(await this.write([], []));
        return this.known;
    }

    /**
     * Writes the change from `before` to `after`, unconditionally on what others wrote meanwhile: a range is only ever
     * closed by a process that applied it, and one opened twice is harmless.
     */
    private async write(before: readonly Range[], after: readonly Range[]): Promise<Record<string, AttributeValue> | undefined> {
        const { sets, removes } = changes(before, after);
        const names: Record<string, string> = { "#exp": EXPIRES_ATTRIBUTE };
        const values: Record<string, AttributeValue> = { ":exp": { N: String(Math.floor(Date.now() / 1000) + PROGRESS_TTL_SECONDS) } };
        const setParts = ["#exp = :exp"];
        sets.forEach(([n, v], i) => {
            names[`#s${i}`] = n;
            values[`:s${i}`] = { S: v };
            setParts.push(`#s${i} = :s${i}`);
        });
        removes.forEach((n, i) => (names[`#r${i}`] = n));
        const update = `SET ${setParts.join(", ")}${removes.length > 0 ? ` REMOVE ${removes.map((_, i) => `#r${i}`).join(", ")}` : ""}`;
        try {
            const response = await this.dynamodb.send(
                new UpdateItemCommand({
                    TableName: this.config.countersTableName,
                    Key: streamShardKey(this.config, this.shardId),
                    UpdateExpression: update,
                    ExpressionAttributeNames: names,
                    ExpressionAttributeValues: values,
                    ReturnValues: "ALL_NEW",
                }),
            );
            return response.Attributes;
        } catch (error) {
            if (error instanceof ConditionalCheckFailedException) {
                return error.Item;
            }
            throw error;
        }
    }
}

/** `open` with `range` added (merged with the ranges it overlaps). */
export function mergeInto(open: readonly Range[], range: Range): Range[] {
    let merged = range;
    const rest: Range[] = [];
    for (const r of open) {
        if (compareSequences(r.to, merged.from) < 0 || compareSequences(r.from, merged.to) > 0) {
            rest.push(r);
        } else {
            const start = compareSequences(r.from, merged.from) < 0 ? r : merged;
            merged = { from: start.from, anchor: start.anchor, after: start.after, to: compareSequences(r.to, merged.to) > 0 ? r.to : merged.to };
        }
    }
    return [...rest, merged].sort((a, b) => compareSequences(a.from, b.from));
}
