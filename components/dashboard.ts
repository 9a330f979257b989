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

/** Three rows: the stream path, the failure path, the table. */
export function dashboardBody(d: DashboardInputs): string {
    const fn = (name: string, metric: string, label: string): Metric => ["AWS/Lambda", metric, "FunctionName", name, { label }];
    const queue = (name: string, label: string): Metric => ["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", name, { label }];
    const table = (metric: string, label: string): Metric => ["AWS/DynamoDB", metric, "TableName", d.tableName, { label }];
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
            {
                type: "text",
                x: 0,
                y: 12,
                width: 24,
                height: 2,
                properties: {
                    markdown:
                        `Counter metrics emitted by the handlers are in namespace **${d.metricsNamespace}**. ` +
                        "A message in the fatal DLQ needs an operator.",
                },
            },
            ...(d.extraWidgets ?? []),
        ],
    });
}
