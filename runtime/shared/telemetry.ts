/**
 * Structured JSON logs and CloudWatch Embedded Metric Format (EMF) lines, written to stdout.
 * Lambda ships stdout to CloudWatch Logs, which extracts EMF metrics without any API call.
 * Written directly rather than through a library: the whole of it is these few lines.
 */

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface Logger {
    log(level: LogLevel, message: string, fields?: Record<string, unknown>): void;
}

/** Where lines go; tests and the local twin capture them. */
export type LineSink = (line: string) => void;

export const stdoutSink: LineSink = (line) => process.stdout.write(`${line}\n`);

export function jsonLogger(service: string, sink: LineSink = stdoutSink): Logger {
    return {
        log(level, message, fields = {}) {
            sink(JSON.stringify({ level, service, message, timestamp: new Date().toISOString(), ...fields }));
        },
    };
}

/** The counters a handler reports once per invocation. */
export const METRIC_NAMES = [
    "RecordsCounted",
    "DuplicatesSkipped",
    "PoisonRecords",
    "BatchItemFailures",
    "RangesRedriven",
    "RangesExpired",
    "KeysMarkedDue",
] as const;

export type MetricName = (typeof METRIC_NAMES)[number];

/** EMF counters; `N` names the metrics (the handlers' METRIC_NAMES by default). */
export class Metrics<N extends string = MetricName> {
    private readonly values = new Map<N, number>();

    constructor(
        private readonly namespace: string,
        private readonly service: string,
        private readonly sink: LineSink = stdoutSink,
    ) {}

    add(name: N, value = 1): void {
        this.values.set(name, (this.values.get(name) ?? 0) + value);
    }

    get(name: N): number {
        return this.values.get(name) ?? 0;
    }

    /** Writes one EMF line with every metric added since the last flush, then resets. */
    flush(): void {
        if (this.values.size === 0) {
            return;
        }
        const names = [...this.values.keys()];
        this.sink(
            JSON.stringify({
                _aws: {
                    Timestamp: Date.now(),
                    CloudWatchMetrics: [
                        {
                            Namespace: this.namespace,
                            Dimensions: [["service"]],
                            Metrics: names.map((Name) => ({ Name, Unit: "Count" })),
                        },
                    ],
                },
                service: this.service,
                ...Object.fromEntries(this.values),
            }),
        );
        this.values.clear();
    }
}
