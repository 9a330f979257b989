/**
 * The accounting of each released request, in the order the schedule released them, and the observations it triggers.
 *
 * Requests are released one at a time and the table is still between two releases, so an observation made after a
 * request's accounting sees the tables as that request left them. After every write a request served, the run reads
 * the stream (each new record then carries this instant: record-times.ts) and observes each key the write touched:
 * - eventual equals the deltas of the key's records up to its marks (model.ts);
 * - best-effort keeps the mode's bound, per key and per shard (model.ts `boundProblems`);
 * - strict, right after a tryCreate's reservation under a limit, on a key only the client's tryCreate calls wrote: the
 *   key's best-effort sum is at most the highest limit in force during the call;
 * - the ledger holds a handful of entries and the eventual item one mark per stream shard.
 */
import { GetItemCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { defaultLimitKey, limitKey } from "../../runtime/shared/keys";
import { markName } from "../../runtime/stream/marks";
import { homeShard } from "../../runtime/shards/layout";
import { boundProblems, delta, live, tokenOf, units } from "./model";
import type { Released } from "./scheduler";
import type { Run, TaskInfo } from "./state";
import { counterKeyOf, readKeyState, type Item, type KeyState } from "./system";

const WRITES = new Set(["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand"]);

interface Target {
    readonly table: string;
    readonly key: Record<string, AttributeValue> | undefined;
}

function targetOf(request: Released): Target {
    const input = request.input as { TableName?: string; Key?: Record<string, AttributeValue>; Item?: Record<string, AttributeValue> };
    return { table: input.TableName ?? "", key: input.Key ?? input.Item };
}

/** Whether a request met a fault: injected, or refused as expired. */
export function metFault(request: Released): boolean {
    return request.fault !== undefined;
}

/**
 * What a task's answer is checked against, noted as each request runs and before its task goes on (the accounting
 * comes later, once the schedule is still): its requests and the faults they met; for a call, whether a put of it
 * applied, whether its soft delete did.
 */
export function noteOutcome(run: Run, request: Released): void {
    const info = run.state.task(request.task.id);
    if (info !== undefined) {
        info.requests++;
        info.faults += metFault(request) ? 1 : 0;
    }
    const input = request.input as {
        TableName?: string;
        UpdateExpression?: string;
        ExpressionAttributeValues?: Record<string, AttributeValue>;
    };
    if (info?.kind !== "call" || !request.served || input.TableName !== run.state.system.config.tableName) {
        return;
    }
    if (request.command === "PutItemCommand") {
        info.putApplied = true;
    }
    if (
        request.command === "UpdateItemCommand" &&
        input.ExpressionAttributeValues?.[":true"]?.BOOL === true &&
        (input.UpdateExpression ?? "").includes("#deleted = :true")
    ) {
        info.softDeleted = true;
    }
    // An item another writer grew past what a soft delete can add: the delete removes it instead.
    if (request.command === "DeleteItemCommand") {
        info.softDeleted = true;
    }
}

/**
 * A heal's read of a key: its shards (R) or its items (T). A heal judges lives by its clock before its attempt's first
 * read, R in utilization and T in strict (runtime/heal/heal.ts): a life young then keeps its entry's units however late
 * the second read comes. A repeat of the first read (the SDK's) belongs to the same attempt; a first read after a
 * second begins the next.
 */
function noteHealRead(run: Run, request: Released): void {
    const { state } = run;
    const { config } = state.system;
    const values = (request.input as { ExpressionAttributeValues?: Record<string, AttributeValue> }).ExpressionAttributeValues;
    const items = targetOf(request).table === config.tableName && values?.[":sk"] === undefined;
    if (!items && !(values?.[":sk"]?.S ?? "").endsWith("best-effort")) {
        return;
    }
    const id = `${request.task.id}|${counterKeyOf(values?.[":pk"]?.S ?? "").key}`;
    const first = items === (config.mode === "strict");
    const attempt = state.healAttempts.get(id);
    if (first) {
        const time = attempt === undefined || attempt.second ? Date.now() : Math.min(attempt.time, Date.now());
        state.healAttempts.set(id, { time, second: false });
    } else if (attempt !== undefined) {
        attempt.second = true;
    }
    if (items) {
        state.healReads.set(id, { at: state.index, time: state.healAttempts.get(id)?.time ?? Date.now() });
    }
}

/** Accounts for one released request (see the top). `before`: the item another writer's write replaced. */
export async function account(run: Run, request: Released, before: Item | undefined): Promise<void> {
    const { state } = run;
    const { config } = state.system;
    state.index++;
    const info = state.task(request.task.id);
    state.faults += metFault(request) ? 1 : 0;
    state.stats.expired += request.fault === "expired" ? 1 : 0;
    const line = state.trace.add(request);
    state.onTrace?.(`${state.index} ${line}`);
    const { table, key: itemKey } = targetOf(request);
    if (request.command === "QueryCommand" && info?.kind === "settle") {
        noteHealRead(run, request);
    }
    if (!request.served || !WRITES.has(request.command) || itemKey === undefined) {
        return;
    }
    if (table === config.tableName && !(itemKey[config.sortKey]?.S ?? "").startsWith(config.counterPrefix)) {
        await accountResourceWrite(run, request, info, itemKey, before);
        return;
    }
    const partition = itemKey[config.partitionKey]?.S ?? "";
    const sortKey = itemKey[config.sortKey]?.S ?? "";
    if (accountLimitWrite(run, request, partition, sortKey)) {
        return;
    }
    const { key, shard } = counterKeyOf(partition);
    if (!state.keys.includes(key)) {
        return;
    }
    const update = (request.input as { UpdateExpression?: string }).UpdateExpression ?? "";
    if (info?.kind === "call" && info.event?.op === "create") {
        state.plainCreates.add(key);
    }
    // A tryCreate's reservation (+1) that landed: the admission check follows it.
    const admitted =
        info?.event?.op === "tryCreate" &&
        (request.input as { ExpressionAttributeValues?: Record<string, AttributeValue> }).ExpressionAttributeValues?.[":d"]?.N === "1";
    if (update.startsWith("ADD #c :corr")) {
        const correction = (request.input as { ExpressionAttributeValues?: Record<string, AttributeValue> }).ExpressionAttributeValues?.[
            ":corr"
        ]?.N;
        state.stats.healWrites += correction !== "0" ? 1 : 0;
        state.stats.healWritesLost += correction !== "0" && request.fault === "500-after" ? 1 : 0;
    }
    if (info?.kind === "settle" && request.command === "UpdateItemCommand" && update.startsWith("ADD #c :corr")) {
        const read = state.healReads.get(`${request.task.id}|${key}`);
        if (read !== undefined) {
            state.allowance.healed(key, shard, read.at, read.time);
            state.resurrections.healed(key, shard, read.at, read.time);
        }
    }
    await observe(run, key, `after ${request.task.label} ${request.command}`, admitted ? info : undefined);
}

async function accountResourceWrite(
    run: Run,
    request: Released,
    info: TaskInfo | undefined,
    itemKey: Record<string, AttributeValue>,
    before: Item | undefined,
): Promise<void> {
    const { state } = run;
    const { config } = state.system;
    const key = itemKey[config.partitionKey]?.S ?? "";
    const id = itemKey[config.sortKey]?.S ?? "";
    const input = request.input as { Item?: Item; UpdateExpression?: string; ExpressionAttributeValues?: Record<string, AttributeValue> };
    if (info?.kind === "call" && request.command === "PutItemCommand") {
        const token = tokenOf(input.Item, state.system)!;
        const touched = state.ownership.everPut(token) && !state.ownership.owned(token);
        state.ownership.clientPut(token);
        const after = touched ? await itemBefore(run, request) : undefined;
        if (live(after, state.system) && tokenOf(after, state.system) === token) {
            // A put attempt of a life another writer ended (its item deleted, a tombstone removed) landed late: the life
            // is back with no slot, and a client delete of it gives one back (docs/limits.md).
            state.resurrections.end(key, token, homeShard(id, state.system.shards), state.index);
            state.stats.resurrected++;
        }
    }
    if (info?.kind === "other") {
        state.keysWithOthers.add(key);
        const token = tokenOf(before, state.system);
        if (before !== undefined && state.ownership.everPut(token)) {
            // Live or a tombstone, the item holding the life is another writer's now: a put attempt of the life still
            // on the wire may land where a removed tombstone kept it out, and strict's bound is not for that life.
            state.ownership.othersWrote(token!);
        }
        if (before !== undefined && live(before, state.system) && state.ownership.everPut(token)) {
            // The life ended unless the item is still live with its token (another writer grew it, say).
            const after = await itemBefore(run, request);
            if (!(live(after, state.system) && tokenOf(after, state.system) === token)) {
                state.allowance.end(key, token!, homeShard(id, state.system.shards), state.index);
            }
        }
    }
    if (
        (info?.kind === "backfill" || info?.kind === "consumer" || info?.kind === "redrive") &&
        request.command === "UpdateItemCommand" &&
        (input.UpdateExpression ?? "").includes("#selFlag")
    ) {
        state.keysWithOthers.add(key);
        state.stats.backfillFlagged += info.kind === "backfill" ? 1 : 0;
    }
    await run.mapping.refresh();
    if (state.keys.includes(key)) {
        await observe(run, key, `after ${request.task.label} ${request.command} of ${id}`);
    }
}

/** A write of a stored limit (the key's or the default): the limits in force move, for every call running. */
function accountLimitWrite(run: Run, request: Released, partition: string, sortKey: string): boolean {
    const { state } = run;
    const { config } = state.system;
    const value = (request.input as { Item?: Item }).Item?.["hc_limit"]?.N;
    const limit = request.command === "DeleteItemCommand" || value === undefined ? undefined : Number(value);
    const fallback = defaultLimitKey(config);
    if (partition === fallback[config.partitionKey]?.S && sortKey === fallback[config.sortKey]?.S) {
        state.defaultLimit = limit;
    } else if (sortKey === limitKey(config, partition)[config.sortKey]?.S && state.keys.includes(partition)) {
        if (limit === undefined) {
            state.storedLimits.delete(partition);
        } else {
            state.storedLimits.set(partition, limit);
        }
    } else {
        return false;
    }
    for (const info of state.tasks.values()) {
        const event = info.event;
        if (info.inForce !== undefined && event !== undefined && "key" in event) {
            info.inForce.push(state.limitInForce(event.key));
        }
    }
    return true;
}

/** Observes `key` (see the top); `admitting`: the tryCreate task whose request came just before. */
export async function observe(run: Run, key: string, context: string, admitting?: TaskInfo): Promise<KeyState> {
    const { state } = run;
    const { system } = state;
    const keyState = await readKeyState(state.reader, system, key);
    state.stats.observations++;
    const owned = state.ownership.liveLives(keyState, system);
    const allowed = {
        over: (shard?: number) => state.allowance.of(key, shard),
        under: (shard?: number) => state.resurrections.of(key, shard),
    };
    for (const problem of boundProblems(keyState, system, owned, allowed)) {
        state.violation(`${context}: ${key} ${problem} [lives: ${JSON.stringify(state.ownership.liveIds(keyState, system))}]`);
    }
    if (!state.reconciled.has(key)) {
        const expected = await expectedEventual(run, key, keyState.eventual);
        const eventual = units(keyState.eventual, system);
        if (eventual !== expected) {
            state.violation(`${context}: ${key} eventual ${eventual} != ${expected}, the deltas of its records up to its marks`);
        }
    }
    const sum = keyState.shards.reduce((s, item) => s + units(item, system), 0);
    if (admitting !== undefined && system.config.mode === "strict") {
        admissionProblem(run, key, sum, admitting, context);
    }
    for (const [shard, item] of keyState.shards.entries()) {
        const entries = Object.keys(item ?? {}).filter((name) => name.startsWith("hc_y_")).length;
        if (entries > 4) {
            state.violation(`${context}: ${key} shard ${shard} holds ${entries} ledger entries (a handful at most)`);
        }
    }
    return keyState;
}

/**
 * Strict, right after a reservation under a limit landed: the key's best-effort sum is at most the highest limit in
 * force while the call ran. A key other writers, the backfill or a plain `create` (no limit) put units in is left out:
 * those units are not the limit's.
 */
function admissionProblem(run: Run, key: string, sum: number, task: TaskInfo, context: string): void {
    const { state } = run;
    if (state.keysWithOthers.has(key) || state.plainCreates.has(key)) {
        return;
    }
    const event = task.event as Extract<TaskInfo["event"], { op: "tryCreate" }>;
    const limits = event.limit !== undefined ? [event.limit] : (task.inForce ?? []);
    if (limits.length === 0 || limits.some((l) => l === undefined)) {
        return;
    }
    state.stats.admissions++;
    const allowed = Math.max(...(limits as number[]));
    if (sum > allowed) {
        state.violation(`${context}: ${key} best-effort ${sum} after a reservation, over the limit ${allowed}`);
    }
}

/** The deltas of `key`'s records up to each stream shard's mark (the highest seen: a stale mark is removed). */
async function expectedEventual(run: Run, key: string, eventual: Item | undefined): Promise<number> {
    const { state } = run;
    const seen = state.seenMarks.get(key) ?? new Map<string, string>();
    state.seenMarks.set(key, seen);
    for (const [name, value] of Object.entries(eventual ?? {})) {
        if (name.startsWith("hc_s_") && value.S !== undefined) {
            const padded = value.S.split("|")[0]!;
            if ((seen.get(name) ?? "") < padded) {
                seen.set(name, padded);
            }
        }
    }
    const newest = [...seen.values()].sort().at(-1);
    if (newest !== undefined && (run.mapping.newest() ?? "") < newest) {
        await run.mapping.refresh();
    }
    let sum = 0;
    for (const { record, shardId } of run.mapping.all) {
        if (record.dynamodb?.Keys?.[state.system.config.partitionKey]?.S !== key) {
            continue;
        }
        const mark = seen.get(markName(shardId));
        if (mark !== undefined && record.dynamodb.SequenceNumber!.padStart(40, "0") <= mark) {
            sum += delta(record, state.system);
        }
    }
    return sum;
}

/** The item `request` is about to write in the user's table (another writer's), read before it is released. */
export async function itemBefore(run: Run, request: { input: Record<string, unknown> }): Promise<Item | undefined> {
    const { state } = run;
    const input = request.input as { TableName?: string; Key?: Item; Item?: Item };
    const itemKey = input.Key ?? input.Item;
    if (input.TableName !== state.system.config.tableName || itemKey === undefined) {
        return undefined;
    }
    const { partitionKey, sortKey } = state.system.config;
    const response = await state.reader.send(
        new GetItemCommand({
            TableName: input.TableName,
            Key: { [partitionKey]: itemKey[partitionKey]!, [sortKey]: itemKey[sortKey]! },
            ConsistentRead: true,
        }),
    );
    return response.Item;
}
