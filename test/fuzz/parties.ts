/**
 * What each event of a history does, as the party it names, and what the contract says of its answer:
 * - a call's answer is one the contract allows: `created: true` exactly when a put of this call applied, `deleted:
 *   true` exactly when its soft delete applied; it throws only InvalidArgumentError for bad input (and then sends
 *   nothing), or, after a fault met one of its requests, DeadlineExceededError or DynamoDB's own error;
 * - a settler run, a backfill call, a limit's write throw only after a fault met one of their requests (a backfill
 *   only BackfillError); the consumer and the redrive never throw: they report failures to Lambda and SQS.
 */
import { DynamoDBServiceException } from "@aws-sdk/client-dynamodb";
import { backfill, BackfillError } from "../../runtime/backfill/backfill";
import { settle } from "../../runtime/heal/settle";
import { DeadlineExceededError, InvalidArgumentError } from "../../runtime/shared/errors";
import { KEY_MAX_BYTES } from "../../runtime/shared/keys";
import { ID_PREFIX, type FuzzEvent } from "./history";
import { otherWrite, type OtherEvent } from "./others";
import type { Run, TaskInfo } from "./state";

type CallEvent = Extract<FuzzEvent, { op: "create" | "tryCreate" | "delete" | "count" }>;

/** A short description of an error, for a violation. */
export function describe(error: unknown): string {
    return error instanceof Error ? `${error.name}: ${error.message.slice(0, 200)}` : String(error);
}

/** Runs `event` as the current task (`label` names it in violations). */
export async function runEvent(run: Run, event: FuzzEvent, label: string): Promise<void> {
    const { state } = run;
    const task = state.scheduler.current()!;
    const info: TaskInfo = { kind: kindOf(event), event, requests: 0, faults: 0, putApplied: false, softDeleted: false };
    state.tasks.set(task.id, info);
    switch (event.op) {
        case "consume":
            return run.mapping.consume(event, run.handlers.consumers);
        case "redrive":
            return run.mapping.redrive(run.handlers.redrive);
        case "settle":
            return runSettle(run, event, info, label);
        case "backfill":
            await runBackfill(run, event.runId, event.pageSize, info, label);
            return;
        case "invalid":
            return runInvalid(run, event, info, label);
        case "land":
            void state.scheduler.land();
            return;
        case "advance":
            // Every call in flight outlives its deadline (a paused process): a fault for each of them.
            for (const other of state.tasks.values()) {
                other.faults += other.kind === "call" || other.kind === "admin" ? 1 : 0;
            }
            state.scheduler.time.advance(event.ms);
            return;
        case "pause":
        case "resume":
            state.settlerPaused = event.op === "pause";
            return;
        case "burst":
            state.burst = { left: event.requests, kind: event.kind };
            return;
        case "setLimit":
        case "setDefault":
            return runAdmin(run, event, info, label);
        case "otherPut":
        case "otherDelete":
        case "otherFlip":
        case "otherRetoken":
        case "otherGrow":
        case "ttlDelete":
            state.stats.otherWritesFailed += (await otherWrite(run.parties.other, state.system, event as OtherEvent, ++state.rewrites))
                ? 0
                : 1;
            return;
        default:
            return runCall(run, event, info, label);
    }
}

function kindOf(event: FuzzEvent): TaskInfo["kind"] {
    switch (event.op) {
        case "consume":
            return "consumer";
        case "redrive":
            return "redrive";
        case "settle":
            return "settle";
        case "backfill":
            return "backfill";
        case "setLimit":
        case "setDefault":
            return "admin";
        case "otherPut":
        case "otherDelete":
        case "otherFlip":
        case "otherRetoken":
        case "otherGrow":
        case "ttlDelete":
            return "other";
        default:
            return "call";
    }
}

/**
 * Whether an error is one a call may throw after a fault: the deadline, DynamoDB's own error, or the SDK's for an
 * attempt that got no answer (a socket timeout).
 */
function contractError(error: unknown): boolean {
    return (
        error instanceof DeadlineExceededError ||
        error instanceof DynamoDBServiceException ||
        (error as { $metadata?: unknown })?.$metadata !== undefined ||
        (error as Error)?.name === "TimeoutError"
    );
}

async function runCall(run: Run, event: CallEvent, info: TaskInfo, label: string): Promise<void> {
    const { state, client } = run;
    if (event.op === "tryCreate" && event.limit === undefined) {
        info.inForce = [state.limitInForce(event.key)];
    }
    if ((event.op === "create" || event.op === "tryCreate") && event.late) {
        state.lateTasks.add(state.scheduler.current()!.id);
    }
    let answer: unknown;
    try {
        switch (event.op) {
            case "create":
                answer = await client.create(event.key, event.id);
                break;
            case "tryCreate":
                answer = await client.tryCreate(event.key, event.id, event.limit);
                break;
            case "delete":
                answer = await client.delete(event.key, event.id);
                break;
            case "count":
                answer = await client.count(event.key);
                break;
        }
    } catch (error) {
        if (!contractError(error)) {
            state.violation(`${label}: threw ${describe(error)}, which is not in the contract`);
        } else if (info.faults === 0) {
            state.violation(`${label}: threw ${describe(error)} although none of its requests met a fault`);
        }
        return;
    }
    // `true` only when this call's write applied; `false` when it did not, or when its answer was lost (a fault) and
    // another writer replaced the item before the call could see its own write.
    const check = (field: "created" | "deleted", said: boolean, applied: boolean) => {
        if (said !== applied && (said || info.faults === 0)) {
            state.violation(`${label}: answered ${field}: ${said}, but ${applied ? "its write applied" : "no write of this call applied"}`);
        }
    };
    if (event.op === "create" || event.op === "tryCreate") {
        check("created", (answer as { created: boolean }).created, info.putApplied);
    }
    if (event.op === "delete") {
        check("deleted", (answer as { deleted: boolean }).deleted, info.softDeleted);
    }
}

async function runInvalid(run: Run, event: Extract<FuzzEvent, { op: "invalid" }>, info: TaskInfo, label: string): Promise<void> {
    const { client } = run;
    const key = event.field === "key" ? "k".repeat(KEY_MAX_BYTES + 1) : event.key;
    const id = event.field === "id" ? `${run.state.system.config.counterPrefix}x` : `${ID_PREFIX}0`;
    const limit = event.field === "limit" ? -1 : 1;
    const attributes = event.field === "attributes" ? { [run.state.system.config.tokenAttribute]: "x" } : undefined;
    try {
        if (event.call === "create") {
            await client.create(key, id, attributes);
        } else if (event.call === "tryCreate") {
            await client.tryCreate(key, id, limit, attributes);
        } else if (event.call === "delete") {
            await client.delete(key, id);
        } else {
            await client.count(key);
        }
        if (applies(event)) {
            run.state.violation(`${label}: a bad ${event.field} was accepted`);
        }
    } catch (error) {
        if (!applies(event)) {
            if (info.faults === 0) {
                run.state.violation(`${label}: threw ${describe(error)} although none of its requests met a fault`);
            }
        } else if (!(error instanceof InvalidArgumentError) || !error.field.startsWith(event.field)) {
            run.state.violation(`${label}: expected InvalidArgumentError naming [${event.field}], got ${describe(error)}`);
        }
    }
    if (applies(event) && info.requests !== 0) {
        run.state.violation(`${label}: bad input sent ${info.requests} requests`);
    }
}

/** Whether the call takes the field the event makes bad (count takes only a key; delete a key and an id). */
function applies(event: Extract<FuzzEvent, { op: "invalid" }>): boolean {
    switch (event.call) {
        case "count":
            return event.field === "key";
        case "delete":
            return event.field === "key" || event.field === "id";
        case "create":
            return event.field !== "limit";
        case "tryCreate":
            return true;
    }
}

async function runSettle(run: Run, event: Extract<FuzzEvent, { op: "settle" }>, info: TaskInfo, label: string): Promise<void> {
    const { state } = run;
    if (state.settlerPaused) {
        return;
    }
    state.stats.settles++;
    try {
        const report = await settle({
            config: state.system.config,
            dynamodb: run.parties.settler,
            keyBudget: event.keyBudget,
            auditItems: 3,
            sendEvents: (events) => sendEvents(run, events),
        });
        state.stats.healed += report.healed;
    } catch (error) {
        if (info.faults === 0) {
            state.violation(`${label}: threw ${describe(error)} although none of its requests met a fault`);
        }
    }
}

/** The threshold topic: records every event it is sent; fails a share of sends while the traffic runs. */
export async function sendEvents(run: Run, events: readonly import("../../runtime/limits/thresholds").ThresholdEvent[]): Promise<boolean> {
    const { state } = run;
    if (state.sendRandom() < state.sendFailRate) {
        return false;
    }
    state.sent.push(...events);
    return true;
}

/** One backfill() call of run `runId`; resolves its report's status. */
export async function runBackfill(run: Run, runId: string, pageSize: number, info: TaskInfo, label: string): Promise<string | undefined> {
    const { state } = run;
    state.stats.backfills++;
    try {
        const report = await backfill({
            config: state.system.config,
            dynamodb: run.parties.backfill,
            runId,
            segments: runId === "b" ? 3 : 1,
            pageSize,
            readUnitsPerSecond: Infinity,
            writeUnitsPerSecond: Infinity,
            clock: { now: () => Date.now(), sleep: run.sleep },
        });
        return report.status;
    } catch (error) {
        if (!(error instanceof BackfillError)) {
            state.violation(`${label}: threw ${describe(error)}, which is not in the contract`);
        } else if (info.faults === 0) {
            state.violation(`${label}: threw ${describe(error)} although none of its requests met a fault`);
        }
        return undefined;
    }
}

async function runAdmin(
    run: Run,
    event: Extract<FuzzEvent, { op: "setLimit" | "setDefault" }>,
    info: TaskInfo,
    label: string,
): Promise<void> {
    try {
        if (event.op === "setLimit") {
            await run.client.setLimit(event.key, event.limit);
        } else {
            await run.client.setDefaultLimit(event.limit);
        }
    } catch (error) {
        if (info.faults === 0) {
            run.state.violation(`${label}: threw ${describe(error)} although none of its requests met a fault`);
        }
    }
}
