/**
 * The backfill as a Lambda function: each invocation runs until its time budget is nearly spent, then
 * invokes the function again asynchronously with the same run id, so the run continues from its
 * checkpoints and Lambda's 15-minute limit never stops it. A "start" event (what a deployment sends,
 * synchronously) only starts the first asynchronous invocation and returns at once.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { Context } from "aws-lambda";
import { backfill, type BackfillReport } from "./backfill";
import type { BackfillSettings } from "./env";
import type { CounterConfig } from "../shared/config";
import { jsonLogger, type LineSink } from "../shared/telemetry";

export interface BackfillEvent {
    /** start: begin the run asynchronously. run: do a share of the work. skip: nothing (backfill disabled). */
    readonly action?: "start" | "run" | "skip";
    readonly runId?: string;
    /** How many invocations of this run came before, plus one. */
    readonly generation?: number;
}

export type BackfillHandlerResult =
    | { readonly action: "started" | "skipped"; readonly runId: string }
    | { readonly action: "ran"; readonly generation: number; readonly continued: boolean; readonly report: BackfillReport };

export interface BackfillHandlerDeps {
    readonly config: CounterConfig;
    readonly settings: BackfillSettings;
    readonly dynamodb: DynamoDBClient;
    /** Invokes this function again, asynchronously, with `event`. */
    readonly reinvoke: (functionArn: string, event: BackfillEvent) => Promise<void>;
    readonly sink?: LineSink;
    /** Time kept back from the invocation's budget for the last page to finish. @default min(60 s, a fifth of the budget) */
    readonly marginMs?: number;
    /** Invocations after which a run that never finishes is given up (logged as an error). @default 1000 */
    readonly maxGenerations?: number;
}

const DEFAULT_RUN_ID = "default";

export function createBackfillHandler(deps: BackfillHandlerDeps) {
    const logger = jsonLogger("hybrid-counter-backfill", deps.sink);
    return async (event: BackfillEvent, context: Context): Promise<BackfillHandlerResult> => {
        const runId = event?.runId ?? DEFAULT_RUN_ID;
        const action = event?.action ?? "run";
        if (action === "skip") {
            return { action: "skipped", runId };
        }
        if (action === "start") {
            await deps.reinvoke(context.invokedFunctionArn, { action: "run", runId, generation: 1 });
            logger.log("info", "backfill started", { runId });
            return { action: "started", runId };
        }
        const generation = event.generation ?? 1;
        const budget = context.getRemainingTimeInMillis();
        const margin = deps.marginMs ?? Math.min(60_000, budget / 5);
        const report = await backfill({
            config: deps.config,
            dynamodb: deps.dynamodb,
            runId,
            ...deps.settings,
            stopAt: Date.now() + budget - margin,
            progressIntervalMs: 30_000,
            onProgress: (progress) => logger.log("info", "backfill progress", { ...progress }),
        });
        logger.log("info", "backfill invocation ended", { generation, ...report });
        let continued = false;
        if (report.status === "deadline") {
            if (generation >= (deps.maxGenerations ?? 1_000)) {
                logger.log("error", "backfill gave up: too many invocations", { runId, generation });
            } else {
                await deps.reinvoke(context.invokedFunctionArn, { action: "run", runId, generation: generation + 1 });
                continued = true;
            }
        }
        return { action: "ran", generation, continued, report };
    };
}
