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
 * Configuration (client options or a Lambda's environment) is missing or invalid. Raised by the
 * client's constructor and the handlers' setup, before anything is read or written; `problems` names
 * every bad field (`[tableName] must be ...`).
 */
export class ConfigurationError extends HybridCounterError {
    constructor(readonly problems: readonly string[]) {
        super(`invalid hybrid-counter configuration: ${problems.join("; ")}`);
    }
}

/**
 * A client call ran out of its deadline (option `deadlineMs`) before it could send a write it needs.
 * Every write the call did send is on its mode's safe side: a strict slot may be held back, a
 * utilization count may be one low. The call's own resource write was not sent when this is raised.
 */
export class DeadlineExceededError extends HybridCounterError {
    constructor(
        readonly operation: string,
        readonly deadlineMs: number,
    ) {
        super(`the call's deadline of ${deadlineMs} ms passed before its ${operation} could be sent`);
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
