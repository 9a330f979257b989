/** The CloudWatch dashboard body of the counter pipeline, as a pure function of resolved names. */

export interface DashboardInputs {
    readonly region: string;
    readonly tableName: string;
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
 * Four rows: the stream path, the failure path, the table, and the handlers' own counting metrics (EMF).
 * A widget for heals joins the last row once the handlers emit a heal metric.
 */
export function dashboardBody(d: DashboardInputs): string {
    const fn = (name: string, metric: string, label: string): Metric => ["AWS/Lambda", metric, "FunctionName", name, { label }];
    const queue = (name: string, label: string): Metric => ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", name, { label }];
    const table = (metric: string, label: string): Metric => ["AWS/DynamoDB", metric, "TableName", d.tableName, { label }];
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
            widget("Table writes and conflicts", 16, 6, d.region, [
                table("ConsumedWriteCapacityUnits", "consumed WCU"),
                table("TransactionConflict", "transaction conflicts"),
                table("WriteThrottleEvents", "write throttles"),
            ]),
            widget("Records counted", 0, 12, d.region, both("RecordsCounted", "counted")),
            widget("Duplicates skipped", 8, 12, d.region, both("DuplicatesSkipped", "already counted")),
            widget("Transaction retries", 16, 12, d.region, both("TransactionRetries", "retries")),
            widget("Poison records (to the fatal DLQ)", 0, 18, d.region, [
                ...both("PoisonRecords", "poison"),
                emf(EMF_SERVICES.redrive, "BatchesExpired", "batches expired (redrive)"),
            ]),
            widget("Batches redriven", 8, 18, d.region, [emf(EMF_SERVICES.redrive, "BatchesRedriven", "redriven")]),
            // Heals: a widget on the heal metric goes at x 16, y 18 once healing emits one.
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
