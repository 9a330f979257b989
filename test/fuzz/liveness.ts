/**
 * The end of a history: the traffic stops, and within the documented time every key converges (the README's
 * Guarantees, "Once traffic stops"). The operator's steps the docs name are taken: a held put attempt lands or expires,
 * every backfill run started is resumed to its end (and one more runs whole), the fatal queue's messages are replayed. Then, with no fault:
 * 1. the stream drains (every batch delivered, the first DLQ empty) and nothing went to the fatal queue (no record here
 *    is poison, none expires);
 * 2. eventual equals the key's live selected items, each flagged;
 * 3. two ledger periods later, `keys + 1` settler runs with a budget of one key each (the audit's page covers every
 *    key), and then per key: best-effort equals what a heal sets, shard by shard (utilization: the live client lives;
 *    strict: the live items); no tombstone is left; no ledger entry, no heal-index mark, no unsent threshold event;
 *    the eventual item holds at most one mark per stream shard; no backfill checkpoint is left;
 * 4. threshold events: per key and threshold, the ups sent minus the downs sent is whether the key's band (as stored)
 *    is at or above it, and every event's count is on its side of the threshold;
 * 5. usage: each day the retention keeps holds the creates and deletes of the key's records of that day, and no day
 *    past the retention is kept;
 * 6. every record delivered once more (each already applied) changes nothing in the counters table but the stream's
 *    frontiers, fails nothing and sends nothing to the fatal queue.
 */
import { ScanCommand, QueryCommand, type AttributeValue } from "@aws-sdk/client-dynamodb";
import { reconcileKey } from "../../runtime/ops/reconcile";
import { settle } from "../../runtime/heal/settle";
import { level } from "../../runtime/limits/thresholds";
import { dayOf } from "../../runtime/limits/usage";
import { homeShard } from "../../runtime/shards/layout";
import { streamPartitionKey, usagePartitionKey } from "../../runtime/shared/keys";
import { counts, delta, idOf, live, selected, tokenOf, units } from "./model";
import { runBackfill, sendEvents } from "./parties";
import type { Run, TaskInfo } from "./state";
import { FUZZ_THRESHOLDS, FUZZ_USAGE_DAYS, readKeyState, type Item } from "./system";

type Drain = (work: () => Promise<unknown>, kind?: TaskInfo["kind"]) => Promise<void>;

export async function checkLiveness(run: Run, drain: Drain): Promise<void> {
    const { state } = run;
    state.faultRate = 0;
    state.sendFailRate = 0;
    state.burst = undefined;
    state.settlerPaused = false;
    await drain(() => state.scheduler.land());
    const info = (): TaskInfo => state.task(state.scheduler.current()!.id)!;
    // The operator's step: every backfill run the history started is resumed to its end, and one more runs whole.
    const runs = new Set(state.history.events.flatMap((e) => (e.op === "backfill" ? [e.runId] : [])));
    for (const runId of [...runs, "final"]) {
        await drain(() => runBackfill(run, runId, 25, info(), `the backfill run ${runId} after the events`), "backfill");
    }
    await deliverAll(run, drain);
    for (const key of state.keys) {
        const keyState = await readKeyState(state.reader, state.system, key);
        const liveItems = keyState.items.filter((item) => live(item, state.system));
        const eventual = units(keyState.eventual, state.system);
        if (eventual !== liveItems.length) {
            state.violation(`after the drain: ${key} eventual ${eventual} != ${liveItems.length} live items`);
        }
        const unflagged = liveItems.filter((item) => !counts(item, state.system)).length;
        if (unflagged > 0) {
            state.violation(`after the drain: ${key} has ${unflagged} live items without the counted flag`);
        }
    }
    state.scheduler.time.advance(2 * state.system.config.periodMs + 1_000);
    for (let i = 0; i <= state.keys.length; i++) {
        await drain(
            () =>
                settle({
                    config: state.system.config,
                    dynamodb: run.parties.settler,
                    keyBudget: 1,
                    sendEvents: (events) => sendEvents(run, events),
                }),
            "settle",
        );
    }
    const bands = new Map<string, number>();
    for (const key of state.keys) {
        bands.set(key, await checkConverged(run, key));
        await checkUsage(run, key);
    }
    checkThresholds(run, bands);
    await checkDeliveredAgain(run, drain);
    const checkpoints = await state.reader.send(
        new ScanCommand({ TableName: state.system.config.countersTableName, FilterExpression: "attribute_exists(hc_bf)" }),
    );
    if ((checkpoints.Items ?? []).length > 0) {
        state.violation(`at the end: ${checkpoints.Items!.length} backfill checkpoints left`);
    }
}

/**
 * Every record delivered once more, after the end's heals: each was applied, so the consumer writes nothing to a key
 * (no count, no usage, no heal listing, no event) and sends nothing to the fatal queue. Its shards' frontiers are not
 * judged (a frontier records how far a process read, not what it counted).
 */
async function checkDeliveredAgain(run: Run, drain: Drain): Promise<void> {
    const { state } = run;
    const config = state.system.config;
    const snapshot = async () => {
        const items: Item[] = [];
        let start: Record<string, AttributeValue> | undefined;
        do {
            const page = await state.reader.send(
                new ScanCommand({ TableName: config.countersTableName, ConsistentRead: true, ExclusiveStartKey: start }),
            );
            items.push(...(page.Items ?? []));
            start = page.LastEvaluatedKey;
        } while (start !== undefined);
        return new Map(
            items
                .filter((item: Item) => item[config.partitionKey]?.S !== streamPartitionKey(config))
                .map((item: Item) => [`${item[config.partitionKey]?.S}/${item[config.sortKey]?.S}`, JSON.stringify(sorted(item))]),
        );
    };
    const before = await snapshot();
    const fatal = state.fatal.length;
    let failures = 0;
    await drain(async () => {
        failures = await run.mapping.deliverAgain(run.handlers.consumers[0], 100);
    }, "consumer");
    const after = await snapshot();
    const changed = [...new Set([...before.keys(), ...after.keys()])].filter((k) => before.get(k) !== after.get(k));
    if (changed.length > 0 || failures > 0 || state.fatal.length > fatal) {
        const what = changed.map((k) => `${k} (${changedAttributes(before.get(k), after.get(k)).join(", ")})`);
        state.violation(
            `at the end: every record delivered again changed ${what.join("; ") || "nothing"}, failed ${failures} records, sent ${state.fatal.length - fatal} to the fatal queue`,
        );
    }
}

/** The attributes that differ between two snapshots of an item (a stream shard's mark named as such: its name varies by run). */
function changedAttributes(before: string | undefined, after: string | undefined): string[] {
    const [a, b] = [before, after].map((text) => (text === undefined ? {} : (JSON.parse(text) as Record<string, unknown>)));
    const names = [...new Set([...Object.keys(a!), ...Object.keys(b!)])].filter(
        (name) => JSON.stringify(a![name]) !== JSON.stringify(b![name]),
    );
    return [...new Set(names.map((name) => (name.startsWith("hc_s_") ? "a stream shard's mark" : name)))].sort();
}

function sorted(item: Item): Item {
    return Object.fromEntries(Object.entries(item).sort(([a], [b]) => a.localeCompare(b)));
}

/** Delivers every record and replays the fatal queue until the stream and the queues are empty. */
async function deliverAll(run: Run, drain: Drain): Promise<void> {
    const { state, mapping } = run;
    for (let round = 0; round < 50 && !(await mapping.drained()); round++) {
        await drain(() => mapping.consume({ op: "consume", max: 100, overlap: 0, crash: "none" }, run.handlers.consumers), "consumer");
        await drain(() => mapping.redrive(run.handlers.redrive), "redrive");
        mapping.replayExhausted();
    }
    if (!(await mapping.drained())) {
        state.violation(`the stream did not drain: ${mapping.describe()}`);
    }
    if (state.fatal.length > 0) {
        state.violation(
            `the fatal queue received ${state.fatal.length} messages (${state.fatal.map((m) => m.reason).join(", ")}), though no record was poison or expired`,
        );
        for (const key of state.keys) {
            state.reconciled.add(key);
            await drain(() => reconcileKey(key, { config: state.system.config, dynamodb: run.parties.pipeline }), "admin");
        }
        await drain(() => mapping.consume({ op: "consume", max: 100, overlap: 0, crash: "none" }, run.handlers.consumers), "consumer");
    }
}

/** Checks one key has converged; returns its threshold band as stored. */
async function checkConverged(run: Run, key: string): Promise<number> {
    const { state } = run;
    const { system } = state;
    const keyState = await readKeyState(state.reader, system, key);
    const target = new Array<number>(system.shards).fill(0);
    for (const item of keyState.items) {
        const clientLife = state.ownership.everPut(tokenOf(item, system));
        if (live(item, system) && (system.config.mode === "strict" || clientLife)) {
            target[homeShard(idOf(item, system), system.shards)]!++;
        }
    }
    keyState.shards.forEach((item, shard) => {
        if (units(item, system) !== target[shard]) {
            state.violation(`at the end: ${key} shard ${shard} best-effort ${units(item, system)} != ${target[shard]}, what a heal sets`);
        }
        const entries = Object.keys(item ?? {}).filter((name) => name.startsWith("hc_y_"));
        if (entries.length > 0) {
            state.violation(`at the end: ${key} shard ${shard} still holds ledger entries ${entries.join(", ")}`);
        }
    });
    const tombstones = keyState.items.filter((item) => selected(item, system) && !live(item, system)).length;
    if (tombstones > 0) {
        state.violation(`at the end: ${key} has ${tombstones} soft-deleted items left`);
    }
    const eventual = keyState.eventual ?? {};
    if (eventual["hc_due"] !== undefined || eventual["hc_heal"] !== undefined) {
        state.violation(`at the end: ${key} is still listed on the heal index`);
    }
    if ((eventual["hc_th"]?.M?.["p"]?.L ?? []).length > 0) {
        state.violation(`at the end: ${key} has ${eventual["hc_th"]!.M!["p"]!.L!.length} threshold events unsent`);
    }
    const marks = Object.keys(eventual).filter((name) => name.startsWith("hc_s_")).length;
    if (marks > run.mapping.shardCount()) {
        state.violation(`at the end: ${key} eventual holds ${marks} marks for ${run.mapping.shardCount()} stream shards`);
    }
    return Number(eventual["hc_th"]?.M?.["b"]?.N ?? 0);
}

/** Per key and threshold: the ups sent minus the downs sent is whether the stored band reaches it. */
function checkThresholds(run: Run, bands: ReadonlyMap<string, number>): void {
    const { state } = run;
    const unique = new Map(state.sent.map((e) => [e.id, e]));
    for (const event of unique.values()) {
        const reached = event.count >= level(event.threshold, event.limit);
        if (reached !== (event.direction === "up")) {
            state.violation(
                `threshold event ${event.id}: count ${event.count} under limit ${event.limit} is not ${event.direction} of ${event.threshold}`,
            );
        }
    }
    const byKey = new Map<string, Array<(typeof state.sent)[number]>>();
    for (const event of unique.values()) {
        byKey.set(event.key, [...(byKey.get(event.key) ?? []), event]);
    }
    bands.forEach((band, key) => {
        FUZZ_THRESHOLDS.forEach((threshold, i) => {
            const events = (byKey.get(key) ?? []).filter((e) => e.threshold === threshold);
            const net = events.filter((e) => e.direction === "up").length - events.filter((e) => e.direction === "down").length;
            if (net !== (band > i ? 1 : 0)) {
                state.violation(`at the end: ${key} threshold ${threshold}: ${net} more ups than downs sent, but its band is ${band}`);
            }
        });
    });
}

/** Each day the retention keeps holds its records' creates and deletes; no older day is kept. */
async function checkUsage(run: Run, key: string): Promise<void> {
    const { state } = run;
    const expected = new Map<string, { creates: number; deletes: number }>();
    let lastDay: string | undefined;
    for (const { record } of run.mapping.all) {
        if (record.dynamodb?.Keys?.[state.system.config.partitionKey]?.S !== key) {
            continue;
        }
        const moved = delta(record, state.system);
        if (moved === 0) {
            continue;
        }
        const day = dayOf((record.dynamodb.ApproximateCreationDateTime ?? 0) * 1000);
        const tally = expected.get(day) ?? { creates: 0, deletes: 0 };
        expected.set(day, { creates: tally.creates + Math.max(0, moved), deletes: tally.deletes + Math.max(0, -moved) });
        lastDay = lastDay === undefined || day > lastDay ? day : lastDay;
    }
    if (lastDay === undefined) {
        return;
    }
    const kept = new Date(Date.parse(`${lastDay}T00:00:00Z`) - (FUZZ_USAGE_DAYS - 1) * 86_400_000).toISOString().slice(0, 10);
    const stored = await run.client.usage(key, { from: "2000-01-01", to: "2100-01-01" });
    for (const [day, tally] of expected) {
        if (day < kept) {
            continue;
        }
        const found = stored.find((d) => d.day === day);
        if (found?.creates !== tally.creates || found?.deletes !== tally.deletes) {
            state.violation(
                `at the end: ${key} usage of ${day} is ${found ? `${found.creates} creates, ${found.deletes} deletes` : "missing"}, not ${tally.creates} and ${tally.deletes}`,
            );
        }
    }
    const old = await state.reader.send(
        new QueryCommand({
            TableName: state.system.config.countersTableName,
            KeyConditionExpression: "#pk = :pk",
            ExpressionAttributeNames: { "#pk": state.system.config.partitionKey },
            ExpressionAttributeValues: { ":pk": { S: usagePartitionKey(key) } },
        }),
    );
    const tooOld = (old.Items ?? [])
        .map((item: Item) => item["day"]?.S ?? "")
        .filter((day) => day < dayOf(Date.parse(`${kept}T00:00:00Z`) - 86_400_000));
    if (tooOld.length > 0) {
        state.violation(`at the end: ${key} keeps usage days ${tooOld.join(", ")}, past the ${FUZZ_USAGE_DAYS}-day retention`);
    }
}
