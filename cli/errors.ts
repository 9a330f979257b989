/** The two failures a command reports on purpose, apart from the context that maps them to exit codes. */

/** A bad flag, config or argument: exit 2. */
export class UsageError extends Error {
    override name = "UsageError";
}

/** The operation ran and failed (or found something wrong it was asked to refuse): exit 1. */
export class OperationError extends Error {
    override name = "OperationError";
}
