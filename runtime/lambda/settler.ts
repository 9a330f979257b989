/**
 * Lambda entry point: the settler, invoked by an EventBridge schedule. One bounded run (runtime/heal/settle.ts); its
 * report is one JSON log line plus one EMF metrics line.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { SNSClient } from "@aws-sdk/client-sns";
import { settle, type SettleReport } from "../heal/settle";
import { settlerConfigFromEnv } from "../heal/settler-config";
import { snsEventSink } from "../limits/publish";
import { jsonLogger, stdoutSink } from "../shared/telemetry";

/** The SDK clients the handler uses, exported so a host can add middleware (tracing, local endpoints). */
export const clients = { dynamodb: new DynamoDBClient({}), sns: new SNSClient({}) };

const config = settlerConfigFromEnv(process.env);
const logger = jsonLogger("hybrid-counter-settler");

/** The settler's metrics, by name, from a run's report. */
export function settlerMetrics(report: SettleReport): Record<string, number> {
    return {
        KeysHealed: report.healed,
        KeysCorrected: report.corrected,
        HealDrift: report.drift,
        HealsRaced: report.raced,
        TombstonesRemoved: report.removed,
        KeysAudited: report.audited,
        KeysAuditHealed: report.auditHealed,
        HealFailures: report.failedKeys.length,
    };
}

export const handler = async (): Promise<SettleReport> => {
    const report = await settle({
        config,
        dynamodb: clients.dynamodb,
        keyBudget: config.keyBudget,
        auditItems: config.auditItems,
        ...(config.thresholdTopicArn === undefined ? {} : { sendEvents: snsEventSink(clients.sns, config.thresholdTopicArn, logger) }),
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
