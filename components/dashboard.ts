/** The CloudWatch dashboard body of the counter pipeline, as a pure function of resolved names. */

export interface DashboardInputs {
    readonly region: string;
    readonly tableName: string;
    /** The table the counter items live in: the user's table again in the same-table placement. */
    readonly countersTableName: string;
    readonly consumerFunctionName: string;
    readonly redriveFunctionName: string;
    readonly firstDlqName: string;
    readonly fatalDlqName: string;
    readonly metricsNamespace: string;
    /** Widgets of optional parts (the settler), placed below the pipeline's rows. */
    readonly extraWidgets?: readonly object[];
}

type Metric = (string | { stat?: string; label?: string })[];

function widget(title: string, x: number, y: number, region: string, metrics: Metric[], stat = "Sum") {
    return {
        type: "metric",
        x,
        y,
        width: 8,
        height: 6,
        properties: { title, region, view: "timeSeries", stacked: false, period: 60, stat, metrics },
    };
}

/** The `service` dimension the handlers put on their EMF metrics (runtime/stream/consumer.ts, runtime/stream/redrive.ts). */
export const EMF_SERVICES = Object.freeze({ consumer: "hybrid-counter-consumer", redrive: "hybrid-counter-redrive" });

/**
 * Four rows: the stream path, the failure path and the tables, then the handlers' own metrics (EMF: runtime/shared/
 * telemetry.ts METRIC_NAMES), which both the consumer and the redrive emit, the redrive for the ranges it applies.
 */
export function dashboardBody(d: DashboardInputs): string {
    const fn = (name: string, metric: string, label: string): Metric => ["AWS/Lambda", metric, "FunctionName", name, { label }];
    const queue = (name: string, label: string): Metric => ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", name, { label }];
    const table = (metric: string, label: string): Metric => ["AWS/DynamoDB", metric, "TableName", d.tableName, { label }];
    const counters = (metric: string, label: string): Metric => ["AWS/DynamoDB", metric, "TableName", d.countersTableName, { label }];
    const countersTable =
        d.countersTableName === d.tableName
            ? [table("ConditionalCheckFailedRequests", "conditions refused")]
            : [
                  counters("ConsumedWriteCapacityUnits", "consumed WCU (counters)"),
                  counters("ConditionalCheckFailedRequests", "conditions refused (counters)"),
              ];
    const emf = (service: string, metric: string, label: string): Metric => [d.metricsNamespace, metric, "service", service, { label }];
    const both = (metric: string, what: string): Metric[] => [
        emf(EMF_SERVICES.consumer, metric, `${what} (consumer)`),
        emf(EMF_SERVICES.redrive, metric, `${what} (redrive)`),
    ];
    return JSON.stringify({
        widgets: [
            widget("Consumer lag (IteratorAge, ms)", 0, 0, d.region, [fn(d.consumerFunctionName, "IteratorAge", "max lag")], "Maximum"),
            widget("Consumer invocations", 8, 0, d.region, [
                fn(d.consumerFunctionName, "Invocations", "invocations"),
                fn(d.consumerFunctionName, "Errors", "errors"),
                fn(d.consumerFunctionName, "Throttles", "throttles"),
            ]),
            widget("Consumer duration (ms)", 16, 0, d.region, [fn(d.consumerFunctionName, "Duration", "p99")], "p99"),
            widget(
                "Dead-letter queues (visible messages)",
                0,
                6,
                d.region,
                [queue(d.firstDlqName, "first DLQ"), queue(d.fatalDlqName, "fatal DLQ")],
                "Maximum",
            ),
            widget("Redrive invocations", 8, 6, d.region, [
                fn(d.redriveFunctionName, "Invocations", "invocations"),
                fn(d.redriveFunctionName, "Errors", "errors"),
            ]),
            widget("Table writes", 16, 6, d.region, [
                table("ConsumedWriteCapacityUnits", "consumed WCU"),
                table("WriteThrottleEvents", "write throttles"),
                ...countersTable,
            ]),
            widget("Records counted", 0, 12, d.region, both("RecordsCounted", "counted")),
            widget("Duplicates skipped", 8, 12, d.region, both("DuplicatesSkipped", "already applied")),
            widget("Keys listed for a heal", 16, 12, d.region, both("KeysMarkedDue", "listed")),
            widget("Poison records and expired ranges (to the fatal DLQ)", 0, 18, d.region, [
                ...both("PoisonRecords", "poison"),
                ...both("RangesExpired", "ranges expired"),
            ]),
            widget("Ranges Lambda gave up on, applied", 8, 18, d.region, both("RangesRedriven", "applied")),
            widget("Batch item failures", 16, 18, d.region, both("BatchItemFailures", "batches to retry")),
            {
                type: "text",
                x: 0,
                y: 24,
                width: 24,
                height: 2,
                properties: {
                    markdown:
                        `Counter metrics emitted by the handlers are in namespace **${d.metricsNamespace}**. ` +
                        "A message in the fatal DLQ needs an operator: `npx hybrid-counter fatal list` explains each, " +
                        "`npx hybrid-counter status` shows the keys that are off.",
                },
            },
            ...(d.extraWidgets ?? []),
        ],
    });
}
