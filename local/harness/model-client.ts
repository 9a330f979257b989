/**
 * A client that makes exactly the writes of the counting model's API calls, in the model's order, one
 * step at a time: every best-effort write bumps `hc_version` and `hc_lv`, sets `hc_written_at` (and in strict mode
 * puts the key on the heal index) and moves the ledger entry of the life it is for (runtime/ledger/ledger.ts); tokens
 * are UUIDv7; a strict delete's release lands only in the heal epoch its touch read; a call abandons a write it could
 * not send within its deadline, and in utilization mode a call that abandoned one (or failed where a write may have
 * committed) puts its key on the heal index when it ends, as the client does (runtime/shared/best-effort-marks.ts).
 * Tests and the benchmark use it to hold a call between two of its writes (`pause`) and to race healing against
 * traffic.
 *
 *   strict create:       reserve -> put -> (release if "exists")
 *   strict delete:       touch -> soft delete -> release
 *   utilization delete:  claim -> decrement -> soft delete (only while the claim is the call's)
 *   utilization create:  put -> increment
 */
import {
    ConditionalCheckFailedException,
    GetItemCommand,
    PutItemCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import type { FinalizeRequestMiddleware } from "@smithy/types";
import {
    bestEffortMarkNames,
    bestEffortMarkValues,
    bestEffortUpdate,
    dueMarkInput,
    inEpochCondition,
} from "../../runtime/shared/best-effort-marks";
import { bestEffortSortKey, countersTable, type CounterTableConfig } from "../../runtime/shared/config";
import { isRetryable } from "../../runtime/shared/aws-errors";
import { mayHaveCommitted, withRetries } from "../../runtime/shared/retry";
import { COUNTER_ATTRIBUTES } from "../../runtime/shared/config";
import { uuidv7 } from "../../runtime/shared/tokens";
import { DEFAULT_LEDGER_PERIOD_MS, ledgerAttribute } from "../../runtime/ledger/ledger";

export type ModelMode = "strict" | "utilization";

/** Where a call can be held: after the named write. */
export type Step = "reserve" | "put" | "touch" | "soft-delete" | "decrement";

export interface ModelClientOptions {
    readonly config: CounterTableConfig;
    readonly dynamodb: DynamoDBClient;
    readonly mode: ModelMode;
    /** No write is sent later than this after the call began. @default 10000 */
    readonly deadlineMs?: number;
    readonly now?: () => number;
    /** Called after each write; the call waits for the promise (a test holds the call here). */
    readonly pause?: (step: Step, key: string, id: string) => Promise<void> | void;
    /** @default 4 */
    readonly attempts?: number;
    /** The period of the ledger entries it writes (runtime/ledger/ledger.ts). @default DEFAULT_LEDGER_PERIOD_MS */
    readonly ledgerPeriodMs?: number;
    /**
     * False: a client of an earlier version, which bumps `hc_version` alone and writes no ledger entry (a heal then
     * waits for the key to be quiet). @default true
     */
    readonly keepsLedger?: boolean;
}

export interface CallResult {
    readonly created?: boolean;
    readonly deleted?: boolean;
    readonly reason?: "limit" | "exists" | "missing" | "unavailable";
    /** Writes the call gave up because its deadline had passed, or that failed and were absorbed. */
    readonly abandoned: number;
}

/** A write of a call past its deadline: not sent. */
class DeadlineExceeded extends Error {
    constructor() {
        super("the call's deadline has passed: write abandoned");
        this.name = "DeadlineExceeded";
    }
}

/** The best-effort write of a client of an earlier version: no `hc_lv`, no ledger entry (best-effort-marks.ts). */
function earlierVersionUpdate(due: boolean): string {
    return `ADD #count :delta, #version :one${due ? ", #marks :one" : ""} SET #writtenAt = :now${due ? ", #heal = :shard, #due = if_not_exists(#due, :now)" : ""}`;
}

class SingleAttemptError extends Error {
    constructor(readonly original: unknown) {
        super("single attempt failed");
        this.name = "SingleAttemptError";
    }
}

export class ModelClient {
    readonly mode: ModelMode;
    /** The longest any one attempt of a write took, from its send to its answer: the request lifetime this client showed. */
    longestWriteMs = 0;
    private readonly deadlineMs: number;
    private readonly now: () => number;
    private readonly attempts: number;
    /** Keys of calls that ended off their items without abandoning a write (marked when the call ends). */
    private readonly drifted = new Set<string>();

    constructor(private readonly options: ModelClientOptions) {
        this.mode = options.mode;
        this.deadlineMs = options.deadlineMs ?? 10_000;
        this.now = options.now ?? Date.now;
        this.attempts = options.attempts ?? 4;
    }

    /** Creates `id` under `key`, below `limit` when given. */
    async create(key: string, id: string, limit?: number): Promise<CallResult> {
        return this.marking(key, await this.createCall(key, id, limit));
    }

    /** Soft-deletes `id` under `key`. */
    async delete(key: string, id: string): Promise<CallResult> {
        return this.marking(key, await this.deleteCall(key, id));
    }

    /** A call that may have left best-effort off its items puts the key on the heal index (not bound by its deadline). */
    private async marking(key: string, result: CallResult): Promise<CallResult> {
        const drifted = this.drifted.delete(key);
        if (this.mode === "utilization" && (drifted || result.abandoned > 0 || result.reason === "unavailable")) {
            const { config, dynamodb } = this.options;
            await withRetries(
                () => dynamodb.send(new UpdateItemCommand(dueMarkInput(config, key, this.now()))),
                isRetryable,
                this.attempts,
            ).catch(() => undefined);
        }
        return result;
    }

    private async createCall(key: string, id: string, limit?: number): Promise<CallResult> {
        const start = this.now();
        const deadlineAt = start + this.deadlineMs;
        const token = uuidv7(start);
        if (this.mode === "strict") {
            const reserved = await this.reserve(key, limit, deadlineAt, token);
            if (reserved !== "reserved") {
                return { created: false, reason: reserved, abandoned: 0 };
            }
            await this.hold("reserve", key, id);
            if (this.late(deadlineAt)) {
                return { created: false, reason: "unavailable", abandoned: 1 }; // the slot is held back
            }
            let put: "mine" | "taken";
            try {
                put = await this.put(key, id, token, deadlineAt);
            } catch {
                return { created: false, reason: "unavailable", abandoned: 1 }; // may have committed: keep the slot
            }
            if (put === "taken") {
                await this.hold("put", key, id);
                const released = !this.late(deadlineAt) && (await this.once(key, -1, deadlineAt, token));
                return { created: false, reason: "exists", abandoned: released ? 0 : 1 };
            }
            return { created: true, abandoned: 0 };
        }
        let put: "mine" | "taken";
        try {
            put = await this.put(key, id, token, deadlineAt);
        } catch {
            return { created: false, reason: "unavailable", abandoned: 1 }; // may have committed: not counted
        }
        if (put === "taken") {
            return { created: false, reason: "exists", abandoned: 0 };
        }
        await this.hold("put", key, id);
        const incremented = !this.late(deadlineAt) && (await this.once(key, 1, deadlineAt, token));
        return { created: true, abandoned: incremented ? 0 : 1 };
    }

    private async deleteCall(key: string, id: string): Promise<CallResult> {
        const { config, dynamodb } = this.options;
        const read = await withRetries(
            () => dynamodb.send(new GetItemCommand({ TableName: config.tableName, Key: this.itemKey(key, id), ConsistentRead: true })),
            isRetryable,
            this.attempts,
        );
        const item = read.Item;
        if (item === undefined || item[config.deletedAttribute]?.BOOL === true) {
            return { deleted: false, reason: "missing", abandoned: 0 };
        }
        const life = item[config.tokenAttribute]?.S;
        const deadlineAt = this.now() + this.deadlineMs;
        const first = this.mode === "strict" ? "touch" : "decrement";
        // Utilization: the delete claims the life first (its soft delete is conditional on the claim), so that a heal
        // reading the item sees that a decrement of it may be in flight (runtime/ledger/truth.ts).
        const claim = this.mode === "utilization" ? uuidv7(this.now()) : undefined;
        if (claim !== undefined) {
            try {
                if (!(await this.claim(key, id, life, claim, deadlineAt))) {
                    return { deleted: false, reason: "missing", abandoned: 0 };
                }
            } catch {
                return { deleted: false, reason: "unavailable", abandoned: 0 };
            }
        }
        let epoch = 0;
        // The first write of a delete is safe to repeat in both modes (a touch changes no count; an extra
        // decrement only undercounts).
        // A decrement repeated after an attempt that may have committed may have landed twice: the call ends off its items.
        let inDoubt = false;
        try {
            await withRetries(
                async () => {
                    if (inDoubt && this.mode === "utilization") {
                        this.drifted.add(key);
                    }
                    try {
                        const written = await this.bestEffortWrite(key, this.mode === "strict" ? 0 : -1, deadlineAt, false, { life });
                        epoch = Number(written[COUNTER_ATTRIBUTES.epoch]?.N ?? "0");
                    } catch (error) {
                        inDoubt ||= mayHaveCommitted(error);
                        throw error;
                    }
                },
                isRetryable,
                this.attempts,
            );
        } catch {
            return { deleted: false, reason: "unavailable", abandoned: 0 };
        }
        await this.hold(first, key, id);
        if (this.late(deadlineAt)) {
            return { deleted: false, reason: "unavailable", abandoned: 1 };
        }
        let outcome: "mine" | "taken" | "gone";
        try {
            outcome = await this.softDelete(key, id, life, deadlineAt, claim);
        } catch {
            return { deleted: false, reason: "unavailable", abandoned: 1 };
        }
        if (this.mode === "strict" && outcome === "mine") {
            await this.hold("soft-delete", key, id);
            const released = !this.late(deadlineAt) && (await this.once(key, -1, deadlineAt, life, epoch));
            return { deleted: true, abandoned: released ? 0 : 1 };
        }
        if (this.mode === "utilization" && outcome !== "mine") {
            // Decremented, and another delete's soft delete won: best-effort is one low.
            this.drifted.add(key);
        }
        return { deleted: outcome === "mine", abandoned: 0 };
    }

    private late(deadlineAt: number): boolean {
        return this.now() > deadlineAt;
    }

    private async hold(step: Step, key: string, id: string): Promise<void> {
        await this.options.pause?.(step, key, id);
    }

    private async reserve(
        key: string,
        limit: number | undefined,
        deadlineAt: number,
        life: string,
    ): Promise<"reserved" | "limit" | "unavailable"> {
        try {
            // Retrying a reserve is safe in strict mode: a repeat only holds a slot back.
            await withRetries(
                () => this.bestEffortWrite(key, 1, deadlineAt, false, { life, ...(limit === undefined ? {} : { limit }) }),
                isRetryable,
                this.attempts,
            );
            return "reserved";
        } catch (error) {
            return error instanceof ConditionalCheckFailedException ? "limit" : "unavailable";
        }
    }

    /**
     * A best-effort write sent once (its repetition could break the bound); false when it failed (absorbed). `epoch`: only
     * in that heal epoch (a strict delete's release).
     */
    private async once(key: string, delta: number, deadlineAt: number, life: string | undefined, epoch?: number): Promise<boolean> {
        try {
            await this.bestEffortWrite(key, delta, deadlineAt, true, { life, ...(epoch === undefined ? {} : { epoch }) });
            return true;
        } catch {
            if (epoch !== undefined) {
                // A delete's slot not given back: a heal of the busy key since its touch may have taken the key off the
                // index (runtime/client/client.ts lists it again the same way).
                const { config, dynamodb } = this.options;
                await dynamodb.send(new UpdateItemCommand(dueMarkInput(config, key, this.now()))).catch(() => undefined);
            }
            return false;
        }
    }

    /** One best-effort write; returns the item as it left it. */
    private async bestEffortWrite(
        key: string,
        delta: number,
        deadlineAt: number,
        single: boolean,
        options: { readonly life?: string | undefined; readonly limit?: number; readonly epoch?: number } = {},
    ): Promise<Record<string, AttributeValue>> {
        const { config } = this.options;
        const { limit, epoch } = options;
        const keepsLedger = this.options.keepsLedger ?? true;
        const ledger =
            delta === 0 || !keepsLedger
                ? undefined
                : ledgerAttribute(options.life, this.options.ledgerPeriodMs ?? DEFAULT_LEDGER_PERIOD_MS);
        const due = this.mode === "strict";
        const condition =
            epoch !== undefined
                ? inEpochCondition(epoch)
                : limit === undefined
                  ? undefined
                  : "attribute_not_exists(#count) OR #count < :limit";
        const command = new UpdateItemCommand({
            TableName: countersTable(config),
            Key: { [config.partitionKey]: { S: key }, [config.sortKey]: { S: bestEffortSortKey(config) } },
            UpdateExpression: keepsLedger ? bestEffortUpdate(":delta", due, ledger !== undefined) : earlierVersionUpdate(due),
            ConditionExpression: condition,
            ExpressionAttributeNames: {
                "#count": config.countAttribute,
                ...Object.fromEntries(Object.entries(bestEffortMarkNames(due, ledger)).filter(([name]) => keepsLedger || name !== "#lv")),
                ...(epoch === undefined ? {} : { "#epoch": COUNTER_ATTRIBUTES.epoch }),
            },
            ExpressionAttributeValues: {
                ":delta": { N: String(delta) },
                ...bestEffortMarkValues(key, this.now(), this.mode === "strict"),
                ...(limit === undefined ? {} : { ":limit": { N: String(limit) } }),
                ...(epoch === undefined ? {} : { ":epoch": { N: String(epoch) } }),
            },
            ReturnValues: "ALL_NEW",
        });
        this.guard(command, deadlineAt, single, this.mode === "utilization" && delta < 0 ? key : undefined);
        return (await this.options.dynamodb.send(command)).Attributes ?? {};
    }

    /**
     * Utilization: stores `claim` as the live item's delete token, only while no other delete has claimed it. False when
     * the item is gone, deleted, of another life, or claimed (the model's deletes never take a claim over).
     */
    private async claim(key: string, id: string, life: string | undefined, claim: string, deadlineAt: number): Promise<boolean> {
        const written = await this.itemWrite(key, id, life, deadlineAt, {
            update: "SET #deleteToken = :token",
            condition: "(attribute_not_exists(#deleteToken) OR #deleteToken = :token)",
            token: claim,
        });
        return written === "written";
    }

    /**
     * One conditional update of the live item of the life `life` (repeated while retryable): "written", or the item a
     * failed condition found (undefined when there is none).
     */
    private async itemWrite(
        key: string,
        id: string,
        life: string | undefined,
        deadlineAt: number,
        write: { readonly update: string; readonly condition?: string; readonly token: string },
    ): Promise<"written" | { readonly item: Record<string, AttributeValue> | undefined }> {
        const { config, dynamodb } = this.options;
        return withRetries(
            async () => {
                try {
                    const command = new UpdateItemCommand({
                        TableName: config.tableName,
                        Key: this.itemKey(key, id),
                        UpdateExpression: write.update,
                        ConditionExpression:
                            "attribute_exists(#pk) AND (attribute_not_exists(#deleted) OR #deleted = :false) AND " +
                            (write.condition === undefined ? "" : `${write.condition} AND `) +
                            (life === undefined ? "attribute_not_exists(#life)" : "#life = :life"),
                        ExpressionAttributeNames: {
                            "#pk": config.partitionKey,
                            "#deleted": config.deletedAttribute,
                            "#deleteToken": `${config.tokenAttribute}_delete`,
                            "#life": config.tokenAttribute,
                        },
                        ExpressionAttributeValues: {
                            ...(write.update.includes(":true") ? { ":true": { BOOL: true } } : {}),
                            ":false": { BOOL: false },
                            ":token": { S: write.token },
                            ...(life === undefined ? {} : { ":life": { S: life } }),
                        },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    });
                    this.guard(command, deadlineAt, false);
                    await dynamodb.send(command);
                    return "written";
                } catch (error) {
                    if (error instanceof ConditionalCheckFailedException) {
                        return { item: error.Item };
                    }
                    throw error;
                }
            },
            isRetryable,
            this.attempts,
        );
    }

    /**
     * Every attempt of the command (first or SDK retry) that would be sent after the call's deadline is not
     * sent (DeadlineExceeded, never retried); each attempt's lifetime is recorded. `single`: no SDK retry.
     */
    private guard(
        command: { middlewareStack: UpdateItemCommand["middlewareStack"] | PutItemCommand["middlewareStack"] },
        deadlineAt: number,
        single: boolean,
        /** Utilization decrement: an attempt after one that may have committed leaves the call off its items. */
        driftKey?: string,
    ): void {
        let inDoubt = false;
        const perAttempt: FinalizeRequestMiddleware<object, object> = (next) => async (args) => {
            if (this.now() > deadlineAt) {
                throw new DeadlineExceeded();
            }
            if (inDoubt && driftKey !== undefined) {
                this.drifted.add(driftKey);
            }
            const started = Date.now();
            try {
                return await next(args);
            } catch (error) {
                inDoubt ||= mayHaveCommitted(error);
                throw single ? new SingleAttemptError(error) : error;
            } finally {
                this.longestWriteMs = Math.max(this.longestWriteMs, Date.now() - started);
            }
        };
        (command.middlewareStack as unknown as { addRelativeTo: (mw: unknown, o: object) => void }).addRelativeTo(perAttempt, {
            relation: "after",
            toMiddleware: "retryMiddleware",
            name: "modelAttempt",
        });
    }

    private async put(key: string, id: string, token: string, deadlineAt: number): Promise<"mine" | "taken"> {
        const { config, dynamodb } = this.options;
        return withRetries(
            async () => {
                try {
                    const command = new PutItemCommand({
                        TableName: config.tableName,
                        Item: { ...this.itemKey(key, id), [config.tokenAttribute]: { S: token } },
                        ConditionExpression: "attribute_not_exists(#pk)",
                        ExpressionAttributeNames: { "#pk": config.partitionKey },
                        ReturnValuesOnConditionCheckFailure: "ALL_OLD",
                    });
                    this.guard(command, deadlineAt, false);
                    await dynamodb.send(command);
                    return "mine";
                } catch (error) {
                    if (error instanceof ConditionalCheckFailedException) {
                        return error.Item?.[config.tokenAttribute]?.S === token ? "mine" : "taken";
                    }
                    throw error;
                }
            },
            isRetryable,
            this.attempts,
        );
    }

    private async softDelete(
        key: string,
        id: string,
        life: string | undefined,
        deadlineAt: number,
        claim?: string,
    ): Promise<"mine" | "taken" | "gone"> {
        const { config } = this.options;
        const token = claim ?? uuidv7(this.now());
        const written = await this.itemWrite(key, id, life, deadlineAt, {
            update: "SET #deleted = :true, #deleteToken = :token",
            ...(claim === undefined ? {} : { condition: "#deleteToken = :token" }),
            token,
        });
        if (written === "written") {
            return "mine";
        }
        const { item } = written;
        if (item?.[`${config.tokenAttribute}_delete`]?.S === token) {
            return "mine";
        }
        return item === undefined || item[config.tokenAttribute]?.S !== life ? "gone" : "taken";
    }

    private itemKey(key: string, id: string): Record<string, AttributeValue> {
        return { [this.options.config.partitionKey]: { S: key }, [this.options.config.sortKey]: { S: id } };
    }
}
