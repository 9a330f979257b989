/**
 * Lambda entry point: the settler, invoked by an EventBridge schedule. One bounded run of healing and
 * settling (see ../settle.ts); the run's report is one JSON log line plus one EMF metrics line.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SQSClient } from "@aws-sdk/client-sqs";
import { sqsFatalQueue } from "../stream/fatal";
import { settle, type SettleReport } from "../heal/settle";
import { settlerConfigFromEnv } from "../heal/settler-config";
import { jsonLogger, stdoutSink } from "../shared/telemetry";

/** The SDK clients the handler uses, exported so a host can add middleware (tracing, local endpoints). */
export const clients = { dynamodb: new DynamoDBClient({}), sqs: new SQSClient({}) };

const config = settlerConfigFromEnv(process.env);
const logger = jsonLogger("hybrid-counter-settler");

/** The settler's metrics, by name, from a run's report. */
export function settlerMetrics(report: SettleReport): Record<string, number> {
    return {
        KeysHealed: report.healed,
        KeysCorrected: report.corrected,
        HealDrift: report.drift,
        HealsRaced: report.raced,
        ItemsSettled: report.settleCounted,
        SettleFailures: report.failedKeys.length,
        SettlerReadUnits: report.readUnits,
        SettlerWriteUnits: report.writeUnits,
    };
}

export const handler = async (): Promise<SettleReport> => {
    const report = await settle({
        config,
        dynamodb: clients.dynamodb,
        mode: config.mode,
        quietWindowMs: config.quietWindowMs,
        keyBudget: config.keyBudget,
        fatal: sqsFatalQueue(clients.sqs, config.fatalQueueUrl, logger),
    });
    logger.log(report.failedKeys.length > 0 ? "warn" : "info", "settler run", { ...report });
    const metrics = settlerMetrics(report);
    stdoutSink(
        JSON.stringify({
            _aws: {
                Timestamp: Date.now(),
                CloudWatchMetrics: [
                    {
                        Namespace: config.metricsNamespace,
                        Dimensions: [["service"]],
                        Metrics: Object.keys(metrics).map((Name) => ({ Name, Unit: "Count" })),
                    },
                ],
            },
            service: "hybrid-counter-settler",
            ...metrics,
        }),
    );
    return report;
};
