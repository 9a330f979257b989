/**
 * Runs one multi-region history under the deterministic scheduler and checks it against the contract per region
 * (docs/design/global-tables.md):
 * - each region's eventual counter applies exactly its own stream's records of the lives it owns (the stamp, or the
 *   home region for none), up to its marks;
 * - each region's best-effort keeps the mode's bound over the lives its own client stamped, in its own replica
 *   (utilization allows the lives another region's client, replication's last-writer-wins or another writer ended);
 * - strict: right after a reservation in any region, the sum over regions of each region's best-effort (read in that
 *   region's own replica) is at most the highest limit any replica held while the call ran or since replication last
 *   had nothing queued (a region's admission not yet replicated was made under one of those), plus the lives of plain
 *   creates: through a limit lowered or raised in one region and read elsewhere once replicated, and a region joining
 *   the members one deployment at a time;
 * - once the traffic stops, replication and every stream drain, and two periods later every region's settler has run:
 *   the replicas agree, each region's eventual equals the live lives it owns, its best-effort what a heal sets, and
 *   nothing is left listed or soft-deleted; each replica's TTL having deleted what expired there on the way; and
 *   (strict) each region, alone and with no fault, admits or refuses a tryCreate, never answers unavailable.
 */
import { GetItemCommand, QueryCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { settle } from "../../../runtime/heal/settle";
import { countingGeneration } from "../../../runtime/shared/config";
import { markName } from "../../../runtime/stream/marks";
import { bestEffortKey, eventualKey, limitKey, shardOfPartitionKey } from "../../../runtime/shared/keys";
import { homeShard } from "../../../runtime/shards/layout";
import { writeKeyLimit } from "../../../runtime/limits/limits";
import type { LocalEngine } from "../../../local/engine/engine";
import { seededRandom } from "../../../local/engine/faults";
import { Allowance } from "../model";
import { RecordTimes } from "../record-times";
import { drawFault, onSeededClock, startTracked, whenGateEmpty } from "../schedule";
import type { Released, Scheduler } from "../scheduler";
import { NO_TIMEOUTS, type Item } from "../system";
import { Trace } from "../trace";
import type { RegionsEvent, RegionsHistory } from "./history";
import { Replication, type TableKind } from "./replication";
import { active, createRegions, deploy, type RegionParties, type RegionsSystem } from "./system";
import type { RegionsMutantSpec } from "./mutants";

export interface RegionsRunResult {
    readonly violations: string[];
    readonly trace: string;
    readonly stats: {
        events: number;
        requests: number;
        faults: number;
        replicated: number;
        lost: number;
        ttlDeleted: number;
        admissions: number;
        settles: number;
    };
}

interface TaskInfo {
    readonly region: string;
    readonly event: RegionsEvent | undefined;
    faults: number;
    /** A strict tryCreate: the limits any replica held while it ran. */
    limits?: number[];
    /** Its reservation under a limit (or a cap) has just landed. */
    admitted?: boolean;
    /** The call has returned. */
    done?: boolean;
}

class RegionsRun {
    readonly violations: string[] = [];
    readonly tasks = new Map<number, TaskInfo>();
    readonly released: Released[] = [];
    readonly clientTokens = new Set<string>();
    readonly touched = new Set<string>();
    /** Keys a plain `create` reserved for (without a limit): strict's admission check leaves them out. */
    readonly plainCreates = new Set<string>();
    readonly allowances = new Map<string, Allowance>();
    readonly seenMarks = new Map<string, string>();
    readonly healReads = new Map<string, { at: number; time: number }>();
    /**
     * Per key, every limit a strict tryCreate saw in any replica since replication last had nothing queued: a region's
     * admission not yet replicated was made under one of them (docs/limits.md, a limit lowered in a multi-region counter).
     */
    readonly limitsUnreplicated = new Map<string, number[]>();
    readonly stats = { events: 0, requests: 0, faults: 0, replicated: 0, lost: 0, ttlDeleted: 0, admissions: 0, settles: 0 };
    faultRate: number;
    index = 0;
    onTrace: ((line: string) => void) | undefined;

    constructor(
        readonly history: RegionsHistory,
        readonly system: RegionsSystem,
        readonly scheduler: Scheduler,
        readonly reader: import("@aws-sdk/client-dynamodb").DynamoDBClient,
        readonly streams: import("@aws-sdk/client-dynamodb-streams").DynamoDBStreamsClient,
        readonly replication: Replication,
        readonly trace: Trace,
        readonly keys: readonly string[],
    ) {
        this.faultRate = history.faultRate;
        for (const region of history.regions) {
            this.allowances.set(region, new Allowance(600_000));
        }
    }

    region(name: string): RegionParties {
        return this.system.regions.get(name)!;
    }

    /** The region and table kind a table name belongs to. */
    tableOf(tableName: string): { region: RegionParties; kind: TableKind } | undefined {
        for (const region of this.system.regions.values()) {
            if (region.tableName === tableName) {
                return { region, kind: "user" };
            }
            if (region.countersTableName === tableName) {
                return { region, kind: "counters" };
            }
        }
        return undefined;
    }
}

export interface RegionsRunOptions {
    readonly trace?: (line: string) => void;
    /** A mutant of every region's clients (regions/mutants.ts). */
    readonly mutant?: RegionsMutantSpec["mutate"];
}

export async function runRegionsHistory(
    engine: LocalEngine,
    history: RegionsHistory,
    options: RegionsRunOptions = {},
): Promise<RegionsRunResult> {
    return onSeededClock(history, async (scheduler) => {
        const reader = engine.dynamodb({ requestHandler: NO_TIMEOUTS, direct: true });
        const streams = engine.streams({ requestHandler: NO_TIMEOUTS });
        new RecordTimes(() => scheduler.time.now()).install(streams);
        scheduler.track(streams);
        scheduler.track(reader);
        const system = await createRegions(engine, reader, streams, history, scheduler);
        const replication = new Replication(
            reader,
            history.regions,
            (region, kind) => (kind === "user" ? system.regions.get(region)!.tableName : system.regions.get(region)!.countersTableName),
            { partitionKey: "pk", sortKey: "sk" },
        );
        const trace = new Trace(
            [...system.regions.values()].flatMap((r) => [
                [r.countersTableName, `COUNTERS-${r.region}`] as const,
                [r.tableName, `TABLE-${r.region}`] as const,
                [countingGeneration(r.config), `GENERATION-${r.region}`] as const,
            ]),
        );
        const run = new RegionsRun(history, system, scheduler, reader, streams, replication, trace, Object.keys(history.limits).sort());
        run.onTrace = options.trace;
        const undo = options.mutant === undefined ? [] : [...system.regions.values()].map((region) => options.mutant!(region));
        for (const region of system.regions.values()) {
            for (const client of [region.api, region.pipeline, region.settler]) {
                scheduler.gate(client, (request) => {
                    noteOutcome(run, request);
                    run.released.push(request);
                });
            }
            await region.mapping.startAfterExisting();
        }
        // The limits stored before the history, replicated everywhere.
        for (const [key, limit] of Object.entries(history.limits)) {
            for (const region of system.regions.values()) {
                await writeKeyLimit(reader, region.config, key, limit);
            }
        }
        try {
            await runEvents(run, seededRandom((history.seed ^ 0x1b873593) >>> 0));
            await liveness(run);
        } finally {
            undo.forEach((u) => u());
            for (const region of system.regions.values()) {
                for (const client of [region.api, region.pipeline, region.settler]) {
                    client.destroy();
                }
            }
            reader.destroy();
            streams.destroy();
        }
        return {
            violations: run.violations,
            trace: trace.digest(),
            stats: {
                ...run.stats,
                events: history.events.length,
                replicated: replication.applied,
                lost: replication.lost,
                ttlDeleted: replication.ttlDeleted,
            },
        };
    });
}

function noteOutcome(run: RegionsRun, request: Released): void {
    const info = run.tasks.get(request.task.id);
    if (info !== undefined && request.fault !== undefined) {
        info.faults++;
    }
}

async function runEvents(run: RegionsRun, random: () => number): Promise<void> {
    const { scheduler, history } = run;
    const running = new Set<Promise<void>>();
    let next = 0;
    for (;;) {
        await scheduler.quiescent();
        await accountReleased(run);
        if (scheduler.fireTimer(false)) {
            continue;
        }
        const pending = scheduler.pending;
        if (next < history.events.length && running.size < history.concurrency && (pending.length === 0 || random() < 0.3)) {
            const index = next++;
            const event = history.events[index]!;
            const label = `#${index} ${JSON.stringify(event)}`;
            startTracked(
                scheduler,
                running,
                `#${index} ${event.op}`,
                () => runEvent(run, event, label, random),
                () => undefined,
                (error) => run.violations.push(`${label}: failed: ${String(error)}`),
            );
            continue;
        }
        if (pending.length === 0) {
            if (whenGateEmpty(scheduler, next >= history.events.length, running) === "done") {
                return;
            }
            continue;
        }
        const index = Math.floor(random() * pending.length);
        scheduler.release(index, drawFault(random, run.faultRate, pending[index]!.command));
    }
}

async function accountReleased(run: RegionsRun): Promise<void> {
    for (const request of run.released.splice(0)) {
        await account(run, request);
    }
}

/** Runs one event in its region (a region whose deployment does not run skips it). */
async function runEvent(run: RegionsRun, event: RegionsEvent, label: string, random: () => number): Promise<void> {
    const task = run.scheduler.current()!;
    const region = "region" in event ? run.region(event.region) : undefined;
    const info: TaskInfo = { region: region?.region ?? "", event, faults: 0 };
    run.tasks.set(task.id, info);
    if (region !== undefined && !active(region) && event.op !== "adopt") {
        return;
    }
    switch (event.op) {
        case "create":
        case "tryCreate":
        case "delete":
        case "count":
            return runCall(run, region!, event, info, label);
        case "consume":
            return region!.mapping.consume({ op: "consume", max: event.max, overlap: 0, crash: event.crash ? "before" : "none" }, [
                region!.consumer!,
                region!.consumer!,
            ]);
        case "redrive":
            return region!.mapping.redrive(region!.redrive!);
        case "settle":
            run.stats.settles++;
            await settle({ config: region!.config, dynamodb: region!.settler, keyBudget: 5, auditItems: 20 }).catch((error: unknown) => {
                if (info.faults === 0) {
                    run.violations.push(`${label}: threw ${String(error)} although none of its requests met a fault`);
                }
            });
            return;
        case "replicate":
            return run.replication.apply(event.writes, random, (target, kind, before, after) => replaced(run, target, kind, before, after));
        case "ttl":
            await run.replication.sweep(region!.region, Math.floor(Date.now() / 1000));
            return;
        case "advance":
            for (const other of run.tasks.values()) {
                other.faults++;
            }
            run.scheduler.time.advance(event.ms);
            return;
        case "setLimit":
            await region!.client!.setLimit(event.key, event.limit).catch(() => undefined);
            return;
        case "adopt": {
            // The documented procedure for adding a member: every existing region takes the new list first, and the
            // new region's deployment follows once their writes have replicated.
            const joining = !region!.members.includes(region!.region) || !event.members.every((r) => region!.members.includes(r));
            const others = [...run.system.regions.values()].filter((r) => r !== region && r.members.includes(r.region));
            if (
                !region!.members.includes(region!.region) &&
                (others.some((r) => r.members.length !== event.members.length) || run.replication.pending > 0)
            ) {
                if (others.every((r) => r.members.length === event.members.length)) {
                    await run.replication.applyAll((target, kind, before, after) => replaced(run, target, kind, before, after));
                } else {
                    return;
                }
            }
            if (joining) {
                deploy(run.system, region!, run.history, run.streams, event.members);
            }
            return;
        }
    }
}

async function runCall(
    run: RegionsRun,
    region: RegionParties,
    event: Extract<RegionsEvent, { op: "create" | "tryCreate" | "delete" | "count" }>,
    info: TaskInfo,
    label: string,
): Promise<void> {
    const client = region.client!;
    if (event.op === "tryCreate") {
        info.limits = await limitsInReplicas(run, event.key);
        run.limitsUnreplicated.set(event.key, [...(run.limitsUnreplicated.get(event.key) ?? []), ...info.limits]);
    }
    try {
        if (event.op === "create") {
            await client.create(event.key, event.id);
        } else if (event.op === "tryCreate") {
            await client.tryCreate(event.key, event.id);
        } else if (event.op === "delete") {
            await client.delete(event.key, event.id);
        } else {
            await client.count(event.key);
        }
    } catch (error) {
        const known =
            (error as { $metadata?: unknown }).$metadata !== undefined ||
            ["DeadlineExceededError", "TimeoutError"].includes((error as Error).name);
        if (!known || info.faults === 0) {
            run.violations.push(
                `${label}: threw ${(error as Error).name}: ${(error as Error).message} ${known ? "although none of its requests met a fault" : "(not in the contract)"}`,
            );
        }
    } finally {
        info.done = true;
    }
}

/** The stored limit of `key` in every replica (the highest is what a region may have read; none: no limit). */
async function limitsInReplicas(run: RegionsRun, key: string): Promise<number[]> {
    const limits: number[] = [];
    for (const region of run.system.regions.values()) {
        const item = (
            await run.reader.send(
                new GetItemCommand({ TableName: region.countersTableName, Key: limitKey(region.config, key), ConsistentRead: true }),
            )
        ).Item;
        limits.push(item?.["hc_limit"]?.N === undefined ? Infinity : Number(item["hc_limit"].N));
    }
    return limits;
}

/** A replicated write replaced an item in `target`'s replica: a life its client stamped may have ended there. */
async function replaced(
    run: RegionsRun,
    target: string,
    kind: TableKind,
    before: Item | undefined,
    after: Item | undefined,
): Promise<void> {
    if (kind !== "user" || before === undefined) {
        return;
    }
    // The life ends in the owner's replica when the write replacing it arrives there: a delete, a soft delete made in
    // another region, or another life that won last-writer-wins.
    const token = before["counter_token"]?.S;
    const ended = after === undefined || after["deleted"]?.BOOL === true || after["counter_token"]?.S !== token;
    if (token !== undefined && before["hc_region"]?.S === target && before["deleted"]?.BOOL !== true && ended) {
        run.allowances.get(target)!.end(before["pk"]!.S!, token, homeShard(before["sk"]!.S!, run.history.counterShards), run.index);
    }
    await run.region(target).mapping.refresh();
    const key = (after ?? before)["pk"]!.S!;
    if (run.keys.includes(key)) {
        await observe(run, run.region(target), key, `after a replicated write in ${target}`);
    }
}

async function account(run: RegionsRun, request: Released): Promise<void> {
    run.index++;
    run.stats.requests++;
    run.stats.faults += request.fault === undefined ? 0 : 1;
    const line = run.trace.add(request);
    run.onTrace?.(`${run.index} ${line}`);
    const info = run.tasks.get(request.task.id);
    const input = request.input as {
        TableName?: string;
        Key?: Item;
        Item?: Item;
        UpdateExpression?: string;
        ExpressionAttributeValues?: Record<string, AttributeValue>;
    };
    const where = run.tableOf(input.TableName ?? "");
    if (where === undefined) {
        return;
    }
    const itemKey = input.Key ?? input.Item;
    if (request.command === "QueryCommand" && where.kind === "user" && info?.event?.op === "settle") {
        run.healReads.set(`${request.task.id}|${input.ExpressionAttributeValues?.[":pk"]?.S}`, { at: run.index, time: Date.now() });
    }
    if (
        !request.served ||
        itemKey === undefined ||
        !["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand"].includes(request.command)
    ) {
        return;
    }
    const key = itemKey["pk"]!.S!;
    if (where.kind === "user" && request.command === "PutItemCommand" && info?.event !== undefined && info.event.op !== "settle") {
        const token = input.Item!["counter_token"]!.S!;
        run.clientTokens.add(token);
    }
    if (
        where.kind === "user" &&
        request.command === "UpdateItemCommand" &&
        input.ExpressionAttributeValues?.[":true"]?.BOOL === true &&
        info?.region !== undefined
    ) {
        // A soft delete: by another region's client, it ends a life the owner's best-effort still counts.
        const before = (await run.reader.send(new GetItemCommand({ TableName: input.TableName, Key: itemKey, ConsistentRead: true }))).Item;
        const owner = before?.["hc_region"]?.S;
        if (owner !== undefined && owner !== info.region && before?.["counter_token"]?.S !== undefined) {
            run.touched.add(before["counter_token"].S);
            run.allowances
                .get(owner)
                ?.end(key, before["counter_token"].S, homeShard(before["sk"]!.S!, run.history.counterShards), run.index);
        }
    }
    if (where.kind === "counters" && info?.event?.op === "create") {
        run.plainCreates.add(shardOfPartitionKey(key).key);
    }
    if (
        where.kind === "counters" &&
        info?.event?.op === "tryCreate" &&
        run.history.mode === "strict" &&
        input.ExpressionAttributeValues?.[":d"]?.N === "1"
    ) {
        info.admitted = true;
    }
    if (where.kind === "counters" && info?.event?.op === "settle" && (input.UpdateExpression ?? "").startsWith("ADD #c :corr")) {
        const { key: counterKey, shard } = shardOfPartitionKey(key);
        const read = run.healReads.get(`${request.task.id}|${counterKey}`);
        if (read !== undefined) {
            run.allowances.get(where.region.region)!.healed(counterKey, shard, read.at, read.time);
        }
    }
    await run.replication.wrote(where.region.region, where.kind, itemKey);
    if (where.kind === "user") {
        await where.region.mapping.refresh();
    }
    const counterKey = shardOfPartitionKey(key).key;
    if (run.keys.includes(counterKey)) {
        await observe(run, where.region, counterKey, `after ${request.task.label} ${request.command} in ${where.region.region}`, info);
    }
}

/** The lives of `key` in `region`'s replica, its best-effort shards and its eventual item. */
async function readRegion(
    run: RegionsRun,
    region: RegionParties,
    key: string,
): Promise<{ items: Item[]; shards: Array<Item | undefined>; eventual: Item | undefined }> {
    const items =
        (
            await run.reader.send(
                new QueryCommand({
                    TableName: region.tableName,
                    KeyConditionExpression: "pk = :pk",
                    ExpressionAttributeValues: { ":pk": { S: key } },
                    ConsistentRead: true,
                }),
            )
        ).Items ?? [];
    const get = async (k: Item) =>
        (await run.reader.send(new GetItemCommand({ TableName: region.countersTableName, Key: k, ConsistentRead: true }))).Item;
    const shards: Array<Item | undefined> = [];
    for (let shard = 0; shard < run.history.counterShards; shard++) {
        shards.push(await get(bestEffortKey(region.config, key, shard, region.region)));
    }
    return { items, shards, eventual: await get(eventualKey(region.config, key, region.region)) };
}

function ownerOf(run: RegionsRun, image: Item | undefined): string {
    return image?.["hc_region"]?.S ?? run.system.home;
}

function countsIn(run: RegionsRun, region: RegionParties, image: Item | undefined): boolean {
    return (
        image !== undefined &&
        image["counter_token"]?.S !== undefined &&
        image["deleted"]?.BOOL !== true &&
        image["hc_counted"]?.S === region.generation &&
        ownerOf(run, image) === region.region
    );
}

const units = (item: Item | undefined) => Number(item?.["count"]?.N ?? 0);

async function observe(run: RegionsRun, region: RegionParties, key: string, context: string, info?: TaskInfo): Promise<void> {
    const state = await readRegion(run, region, key);
    const mine = (item: Item) =>
        item["deleted"]?.BOOL !== true && item["hc_region"]?.S === region.region && run.clientTokens.has(item["counter_token"]?.S ?? "");
    const perShard = new Array<number>(run.history.counterShards).fill(0);
    for (const item of state.items.filter(mine)) {
        if (run.history.mode === "utilization" || !run.touched.has(item["counter_token"]!.S!)) {
            perShard[homeShard(item["sk"]!.S!, run.history.counterShards)]!++;
        }
    }
    const allowance = run.allowances.get(region.region)!;
    state.shards.forEach((item, shard) => {
        const be = units(item);
        if (run.history.mode === "utilization" && be > perShard[shard]! + allowance.of(key, shard)) {
            run.violations.push(
                `${context}: ${region.region} ${key} shard ${shard} best-effort ${be} > ${perShard[shard]} lives its client stamped + ${allowance.of(key, shard)} ended elsewhere`,
            );
        }
        if (run.history.mode === "strict" && be < perShard[shard]!) {
            run.violations.push(
                `${context}: ${region.region} ${key} shard ${shard} best-effort ${be} < ${perShard[shard]} live lives its client stamped`,
            );
        }
    });
    await checkEventual(run, region, key, state.eventual, context);
    if (info?.admitted === true) {
        info.admitted = false;
        await checkAdmission(run, key, info, context);
    }
}

async function checkEventual(
    run: RegionsRun,
    region: RegionParties,
    key: string,
    eventual: Item | undefined,
    context: string,
): Promise<void> {
    let expected = 0;
    for (const { record, shardId } of region.mapping.all) {
        if (record.dynamodb?.Keys?.["pk"]?.S !== key) {
            continue;
        }
        const mark = eventual?.[markName(shardId)]?.S?.split("|")[0];
        const seenId = `${region.region}|${key}|${shardId}`;
        const seen = [mark, run.seenMarks.get(seenId)]
            .filter((m): m is string => m !== undefined)
            .sort()
            .at(-1);
        if (seen !== undefined) {
            run.seenMarks.set(seenId, seen);
        }
        if (seen !== undefined && record.dynamodb.SequenceNumber!.padStart(40, "0") <= seen) {
            const images = record.dynamodb as { NewImage?: Item; OldImage?: Item };
            expected += (countsIn(run, region, images.NewImage) ? 1 : 0) - (countsIn(run, region, images.OldImage) ? 1 : 0);
        }
    }
    if (units(eventual) !== expected) {
        run.violations.push(
            `${context}: ${region.region} ${key} eventual ${units(eventual)} != ${expected}, the deltas of its records up to its marks`,
        );
    }
}

/**
 * Strict, right after a reservation under a limit: the sum over regions of each one's best-effort (its own replica)
 * stays within the highest limit any replica held while the call ran, or since replication last had nothing queued. A
 * key a plain `create` reserved for (without a limit) is left out: those units are not the limit's.
 */
async function checkAdmission(run: RegionsRun, key: string, info: TaskInfo, context: string): Promise<void> {
    if (run.plainCreates.has(key)) {
        return;
    }
    let sum = 0;
    const parts: string[] = [];
    for (const region of run.system.regions.values()) {
        const state = await readRegion(run, region, key);
        sum += state.shards.reduce((s, item) => s + units(item), 0);
        parts.push(
            `${region.region} ${state.shards.map((item) => `${units(item)}/${item?.["hc_cap"]?.N ?? "-"}/${item?.["hc_rcap"]?.N ?? "-"}`).join(",")}`,
        );
    }
    const now = await limitsInReplicas(run, key);
    if (run.replication.pending === 0) {
        // Every write so far has replicated: what is left are the limits in force, and those calls still running read.
        const running = [...run.tasks.values()].filter((t) => t.event?.op === "tryCreate" && t.event.key === key && t.done !== true);
        run.limitsUnreplicated.set(key, [...now, ...running.flatMap((t) => t.limits ?? [])]);
    }
    const limits = [...(info.limits ?? []), ...now, ...(run.limitsUnreplicated.get(key) ?? [])];
    if (limits.length === 0 || limits.includes(Infinity)) {
        return;
    }
    run.stats.admissions++;
    const allowed = Math.max(...limits);
    if (sum > allowed) {
        run.violations.push(
            `${context}: ${key} best-effort summed over the regions is ${sum} after a reservation, over the limit ${allowed} [count/cap/region cap per shard: ${parts.join("; ")}]`,
        );
    }
}

/** The traffic stops: replication and every stream drain, two periods pass, every region settles; then every region converges. */
async function liveness(run: RegionsRun): Promise<void> {
    run.faultRate = 0;
    const drain = async (work: () => Promise<unknown>) => {
        const done = run.scheduler.spawn("drain", async () => {
            run.tasks.set(run.scheduler.current()!.id, { region: "", event: undefined, faults: 0 });
            await work();
        });
        for (;;) {
            await run.scheduler.quiescent();
            await accountReleased(run);
            if (run.scheduler.fireTimer(false) || (run.scheduler.pending.length === 0 && run.scheduler.fireTimer(true))) {
                continue;
            }
            if (run.scheduler.pending.length === 0) {
                break;
            }
            run.scheduler.release(0, undefined);
        }
        await done;
    };
    const onReplace = (target: string, kind: TableKind, before: Item | undefined, after: Item | undefined) =>
        replaced(run, target, kind, before, after);
    const settleAll = async () => {
        for (let round = 0; round < 20; round++) {
            await drain(() => run.replication.applyAll(onReplace));
            let undelivered = false;
            for (const region of [...run.system.regions.values()].filter(active)) {
                await drain(() =>
                    region.mapping.consume({ op: "consume", max: 100, overlap: 0, crash: "none" }, [region.consumer!, region.consumer!]),
                );
                await drain(() => region.mapping.redrive(region.redrive!));
                undelivered ||= !(await region.mapping.drained());
            }
            if (!undelivered && run.replication.pending === 0) {
                return;
            }
        }
        run.violations.push("replication and the streams did not drain");
    };
    await settleAll();
    run.scheduler.time.advance(2 * 600_000 + 1_000);
    // A heal's removal of a tombstone is a write the other regions' consumers see (a record, replicated): two rounds of
    // every region's settler, with replication and the streams drained after each.
    for (let round = 0; round < 2; round++) {
        for (const region of [...run.system.regions.values()].filter(active)) {
            for (let i = 0; i <= run.keys.length; i++) {
                await drain(() => settle({ config: region.config, dynamodb: region.settler, keyBudget: 1 }));
            }
        }
        await settleAll();
    }
    await checkConverged(run);
    // Strict: each region, alone and with no fault, admits a create under the key's limit or refuses it: a region whose
    // caps can never be armed again (answering unavailable for ever) fails here.
    if (run.history.mode === "strict") {
        for (const key of Object.keys(run.history.limits)) {
            for (const region of [...run.system.regions.values()].filter(active)) {
                let answer: { created: boolean; reason?: string } | undefined;
                await drain(async () => (answer = await region.client!.tryCreate(key, `probe-${region.region}`)));
                if (answer?.reason === "unavailable") {
                    run.violations.push(`at the end: ${region.region} answers a tryCreate of ${key}, alone and with no fault, unavailable`);
                }
            }
        }
    }
}

async function checkConverged(run: RegionsRun): Promise<void> {
    const home = run.region(run.system.home);
    for (const key of run.keys) {
        const homeItems = (await readRegion(run, home, key)).items;
        for (const region of run.system.regions.values()) {
            const state = await readRegion(run, region, key);
            if (JSON.stringify(state.items) !== JSON.stringify(homeItems)) {
                run.violations.push(`at the end: ${region.region}'s replica of ${key} differs from ${home.region}'s`);
            }
            if (!active(region)) {
                continue;
            }
            const owned = state.items.filter(
                (item) => item["deleted"]?.BOOL !== true && item["counter_token"]?.S !== undefined && ownerOf(run, item) === region.region,
            );
            if (units(state.eventual) !== owned.length) {
                run.violations.push(
                    `at the end: ${region.region} ${key} eventual ${units(state.eventual)} != ${owned.length} live lives it owns`,
                );
            }
            const target = new Array<number>(run.history.counterShards).fill(0);
            for (const item of owned.filter((i) => run.history.mode === "strict" || run.clientTokens.has(i["counter_token"]!.S!))) {
                target[homeShard(item["sk"]!.S!, run.history.counterShards)]!++;
            }
            state.shards.forEach((item, shard) => {
                if (units(item) !== target[shard]) {
                    run.violations.push(
                        `at the end: ${region.region} ${key} shard ${shard} best-effort ${units(item)} != ${target[shard]}, what a heal sets`,
                    );
                }
            });
            const tombstones = state.items.filter((item) => item["deleted"]?.BOOL === true && ownerOf(run, item) === region.region);
            if (tombstones.length > 0) {
                run.violations.push(
                    `at the end: ${region.region} ${key} has ${tombstones.length} soft-deleted lives it owns left: ${JSON.stringify(tombstones)}`,
                );
            }
            if (state.eventual?.["hc_due"] !== undefined) {
                run.violations.push(`at the end: ${region.region} ${key} is still listed on the heal index`);
            }
        }
    }
    if (run.system.fatal.length > 0) {
        run.violations.push(`the fatal queue received ${run.system.fatal.length} messages`);
    }
}
