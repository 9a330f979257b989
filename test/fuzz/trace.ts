/**
 * A history's trace: every released request in the order the schedule released it, each as one line (its task, its
 * command, the fault it met, what it asked for and how it ended), and a SHA-256 digest of the lines. Two runs of one
 * history that give the same digest released the same requests, with the same inputs and the same answers, in the
 * same order: the digest is what `npm run fuzz -- --json` prints per history and what a replay is compared against.
 *
 * What a run cannot repeat is left out: the names of its tables (they carry the process id and a counter) and the
 * counted flag's generation (a hash of one), the stream shards' ids and the marks named after them (written as the
 * order of their first appearance), the stream records' sequence numbers, whole or inside a value (DynamoDB Local numbers every table's records from one sequence: a sequence number is
 * written as the order of its first appearance in the trace instead, which depends on the released requests alone,
 * not on when a stream reader saw the record), the transactions' idempotency tokens (random UUIDs, which change nothing DynamoDB
 * does when they do not collide), the answers' `$metadata` (request ids) and the answers to Describe* requests (they
 * carry the engine's clock and ARNs; the trace says only that they were answered).
 */
import { createHash } from "node:crypto";
import type { Released } from "./scheduler";

export class Trace {
    private readonly hash = createHash("sha256");
    private count = 0;

    /** Each sequence number the trace has written (its value: with or without leading zeros), with the order of its first appearance. */
    private readonly sequences = new Map<string, number>();

    /**
     * @param names the run's table names, each with the stand-in the trace writes (longest first, so that a name
     * that extends another is replaced whole).
     */
    constructor(private readonly names: ReadonlyArray<readonly [string, string]>) {}

    /** Adds one released request, once it has run; returns its line. */
    add(request: Released): string {
        const error = request.outcome?.error;
        const ending =
            error === undefined
                ? `ok ${request.command.startsWith("Describe") ? "" : this.canonical(request.outcome?.output)}`
                : error instanceof Error
                  ? `${error.name}${reasons(error)}`
                  : String(error);
        let line = `${request.task.label}\t${request.command}\t${request.fault ?? "-"}\t${this.canonical(request.input)}\t${ending}`;
        for (const [name, standIn] of this.names) {
            line = line.split(name).join(standIn);
        }
        line = line
            .replace(/shardId-\d+-[0-9a-f]+/g, (id) => `shard ${ordinal(this.shards, id)}`)
            .replace(/hc_s_[0-9a-z]+/g, (mark) => `hc_s_${ordinal(this.marks, mark)}`)
            .replace(/\d{20,}/g, (digits) => `sequence ${this.sequenceOrdinal(digits)}`);
        this.hash.update(`${line}\n`);
        this.count++;
        return line;
    }

    /** Each stream shard id, and each mark name (a hash of one), by first appearance. */
    private readonly shards = new Map<string, number>();
    private readonly marks = new Map<string, number>();

    private sequenceOrdinal(digits: string): number {
        return ordinal(this.sequences, BigInt(digits).toString());
    }

    private canonical(value: unknown): string {
        return canonical(value, (digits) => this.sequenceOrdinal(digits));
    }

    /** Requests added. */
    get requests(): number {
        return this.count;
    }

    /** The hex SHA-256 of every line added, in order. */
    digest(): string {
        return this.hash.copy().digest("hex");
    }
}

/** The order of `value`'s first appearance in `seen`. */
function ordinal(seen: Map<string, number>, value: string): number {
    const known = seen.get(value);
    if (known !== undefined) {
        return known;
    }
    seen.set(value, seen.size);
    return seen.size - 1;
}

/** What a stream record's sequence number looks like (DynamoDB Local's: 21 digits; the markers' copy: 40). */
const SEQUENCE = /^\d{20,}$/;

/** A transaction's cancellation reasons, when DynamoDB gave them. */
function reasons(error: Error): string {
    const cancellation = (error as { CancellationReasons?: Array<{ Code?: string }> }).CancellationReasons;
    return cancellation ? ` [${cancellation.map((r) => r.Code ?? "").join(",")}]` : "";
}

/** JSON with sorted keys, without what a run cannot repeat (see the top). */
function canonical(value: unknown, ordinal: (digits: string) => number): string {
    return (
        JSON.stringify(value, (key, v: unknown) => {
            if (key === "ClientRequestToken" || key === "$metadata") {
                return undefined;
            }
            if (typeof v === "string" && SEQUENCE.test(v)) {
                return `sequence ${ordinal(v)}`;
            }
            if (v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array)) {
                return Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
            }
            return v;
        }) ?? "undefined"
    );
}
