/**
 * Sends threshold events to the SNS topic the component creates (runtime/limits/thresholds.ts says what they are).
 * Each event is one message, JSON, with its id as the message's deduplication key for a FIFO topic and as a message
 * attribute for any subscriber that deduplicates by it. Batches of ten (SNS's PublishBatch limit).
 */
import { PublishBatchCommand, type SNSClient } from "@aws-sdk/client-sns";
import type { ThresholdEvent } from "./thresholds";
import type { Logger } from "../shared/telemetry";

const BATCH = 10;

/** A sink that publishes to `topicArn`; resolves false (never throws) when an event could not be sent. */
export function snsEventSink(sns: SNSClient, topicArn: string, logger: Logger): (events: readonly ThresholdEvent[]) => Promise<boolean> {
    return async (events) => {
        try {
            for (let i = 0; i < events.length; i += BATCH) {
                const chunk = events.slice(i, i + BATCH);
                const response = await sns.send(
                    new PublishBatchCommand({
                        TopicArn: topicArn,
                        PublishBatchRequestEntries: chunk.map((event, j) => ({
                            Id: String(j),
                            Message: JSON.stringify(event),
                            MessageAttributes: {
                                id: { DataType: "String", StringValue: event.id },
                                direction: { DataType: "String", StringValue: event.direction },
                            },
                        })),
                    }),
                );
                if ((response.Failed ?? []).length > 0) {
                    logger.log("warn", "threshold events not sent", { failed: response.Failed });
                    return false;
                }
            }
            return true;
        } catch (error) {
            logger.log("warn", "threshold events not sent", {
                error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
            });
            return false;
        }
    };
}
