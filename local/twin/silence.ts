/**
 * Lambda logs go to CloudWatch; run in the twin's process they would drown its report. `silencer()` wraps a handler so
 * that stdout is muted while it runs; handlers run at the same time (the consumer, the redrive, the settler), so stdout
 * is restored only when the last of them returns.
 */
export function silencer(): <T extends unknown[], R>(fn: (...a: T) => Promise<R>) => (...a: T) => Promise<R> {
    let silenced = 0;
    const write = process.stdout.write;
    return (fn) =>
        async (...a) => {
            if (silenced++ === 0) {
                process.stdout.write = (() => true) as typeof process.stdout.write;
            }
            try {
                return await fn(...a);
            } finally {
                if (--silenced === 0) {
                    process.stdout.write = write;
                }
            }
        };
}
