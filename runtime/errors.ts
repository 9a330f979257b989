/**
 * The errors hybrid-counter itself raises. Everything else a caller can see is the error of the
 * resource write their API already makes today, passed through unchanged (see client.ts).
 */

/** Base class of every error this package raises. */
export class HybridCounterError extends Error {
    constructor(message: string) {
        super(message);
        this.name = new.target.name;
    }
}

/**
 * A client call was given bad input. Raised before anything is written. `field` names the argument
 * (`key`, `id`, `limit`, `attributes.<name>`).
 */
export class InvalidArgumentError extends HybridCounterError {
    constructor(
        readonly field: string,
        problem: string,
    ) {
        super(`[${field}] ${problem}`);
    }
}

/**
 * A stream record the consumer can never count (missing or non-string key, wrong stream view type,
 * malformed flag). It is sent whole to the fatal queue and the shard moves on.
 */
export class PoisonRecordError extends HybridCounterError {
    constructor(
        readonly field: string,
        problem: string,
    ) {
        super(`[${field}] ${problem}`);
    }
}

/** A redrive message that does not describe a stream batch. */
export class MalformedRedriveMessageError extends HybridCounterError {
    constructor(
        readonly field: string,
        problem: string,
    ) {
        super(`[${field}] ${problem}`);
    }
}
