/**
 * Races healing against live traffic on DynamoDB Local: model clients create and delete (with stalls that
 * make calls abandon their second write), a remover hard-deletes soft-deleted items as the consumer would,
 * the settler runs in a loop, and an observer checks the mode's bound on every key, one consistent Query
 * per observation (counters and items share the table). Used by the adversarial tests and the benchmark.
 */
import { shardCount } from "../../runtime/shards/layout";
import { DeleteItemCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { countersTable, type CounterTableConfig } from "../../runtime/shared/config";
import { queryPartition } from "../../runtime/heal/partition";
import { isSoftDeleted } from "../../runtime/shared/selection";
import { settle, type SettleReport } from "../../runtime/heal/settle";
import { injectFaults, seededRandom, type FaultStats } from "../engine/faults";
import { ModelClient, type ModelMode } from "./model-client";
import { ledgerPeriodMs } from "../../runtime/ledger/ledger";
import { snapshotKey } from "./observe";

export interface HealRaceOptions {
    readonly config: CounterTableConfig;
    /** Makes a new client of the engine (each party gets its own, with its own faults). */
    readonly client: () => DynamoDBClient;
    readonly mode: ModelMode;
    readonly ops: number;
    readonly keys: readonly string[];
    /**
     * Traffic moves over the keys: every `rotateMs` it moves to the next `activeKeys` keys, so keys go
     * quiet for a while and get healed while the others take traffic. Absent: every key all the time.
     */
    readonly rotateMs?: number;
    readonly activeKeys?: number;
    /** Ids per key: a small pool makes concurrent deletes of one id and re-creations common. */
    readonly idsPerKey: number;
    readonly concurrency: number;
    readonly limit?: number;
    readonly deleteRatio: number;
    /** Fault rate on every party's requests (all kinds). */
    readonly faultRate: number;
    /** Probability that a call stalls past its deadline between its two writes (and abandons the second). */
    readonly stallRate: number;
    readonly deadlineMs: number;
    readonly quietWindowMs: number;
    /** Run the settler during the traffic. */
    readonly settler: boolean;
    /** Check the bound while traffic runs. @default true */
    readonly observe?: boolean;
    readonly seed: number;
}

export interface KeyState {
    readonly bestEffort: number;
    readonly live: number;
}

export interface HealRaceResult {
    readonly ops: number;
    readonly trafficMs: number;
    readonly observations: number;
    readonly violations: string[];
    readonly abandoned: number;
    /** The longest a single write call took, SDK retries included: the request lifetime the run showed. */
    readonly maxWriteMs: number;
    readonly settlerRuns: SettleReport[];
    readonly faults: Record<string, number>;
    /** Each key's state right after the traffic stopped. */
    readonly afterTraffic: Map<string, KeyState>;
}

export function boundProblem(mode: ModelMode, state: KeyState, limit: number | undefined): string | undefined {
    if (mode === "strict") {
        if (state.bestEffort < state.live) {
            return `best-effort ${state.bestEffort} < live ${state.live}`;
        }
        if (limit !== undefined && state.bestEffort > limit) {
            return `best-effort ${state.bestEffort} > limit ${limit}`;
        }
        return undefined;
    }
    return state.bestEffort > state.live ? `best-effort ${state.bestEffort} > live ${state.live}` : undefined;
}

/** One consistent Query of the key's partition: best-effort and the live items, together. */
export async function keyState(dynamodb: DynamoDBClient, config: CounterTableConfig, key: string): Promise<KeyState> {
    const { bestEffort, live } = await snapshotKey(dynamodb, config.tableName, config, key, countersTable(config), shardCount(config));
    return { bestEffort, live };
}

/** Hard-deletes a key's soft-deleted items, as the stream consumer does once it has counted the deletion. */
export async function removeSoftDeleted(dynamodb: DynamoDBClient, config: CounterTableConfig, key: string): Promise<number> {
    const items = await queryPartition(dynamodb, { tableName: config.tableName, partitionKey: config.partitionKey, key });
    let removed = 0;
    for (const item of items.filter((i) => isSoftDeleted(i, config))) {
        try {
            await dynamodb.send(
                new DeleteItemCommand({
                    TableName: config.tableName,
                    Key: { [config.partitionKey]: item[config.partitionKey]!, [config.sortKey]: item[config.sortKey]! },
                    ConditionExpression: "#deleted = :true",
                    ExpressionAttributeNames: { "#deleted": config.deletedAttribute },
                    ExpressionAttributeValues: { ":true": { BOOL: true } },
                }),
            );
            removed++;
        } catch {
            // Contention, an injected fault, or already removed: the next pass retries.
        }
    }
    return removed;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runHealRace(options: HealRaceOptions): Promise<HealRaceResult> {
    const { config, mode, keys } = options;
    const random = seededRandom(options.seed);
    const faultStats: FaultStats[] = [];
    const faulty = (seed: number) => {
        const client = options.client();
        if (options.faultRate > 0) {
            faultStats.push(injectFaults(client, { rate: options.faultRate, random: seededRandom(seed) }));
        }
        return client;
    };
    const apiDb = faulty(options.seed + 1);
    const client = new ModelClient({
        config,
        dynamodb: apiDb,
        mode,
        deadlineMs: options.deadlineMs,
        // The period the component's clients derive from the (compressed) window.
        ledgerPeriodMs: ledgerPeriodMs(options.quietWindowMs / 1000),
        // A stalled call sleeps past its deadline between its two writes, then abandons the second.
        pause: async () => {
            if (random() < options.stallRate) {
                await sleep(options.deadlineMs + 5);
            }
        },
    });
    const removerDb = faulty(options.seed + 2);
    const settlerDb = faulty(options.seed + 3);
    const observerDb = options.client();

    let done = false;
    const violations: string[] = [];
    let observations = 0;
    const settlerRuns: SettleReport[] = [];
    let abandoned = 0;

    const trafficStart = Date.now();
    const pickKey = () => {
        if (options.rotateMs === undefined) {
            return keys[Math.floor(random() * keys.length)]!;
        }
        const active = options.activeKeys ?? 1;
        const phase = Math.floor((Date.now() - trafficStart) / options.rotateMs);
        return keys[(phase * active + Math.floor(random() * active)) % keys.length]!;
    };
    const traffic = async () => {
        let next = 0;
        const worker = async () => {
            while (next < options.ops) {
                next++;
                const key = pickKey();
                const id = `id${Math.floor(random() * options.idsPerKey)}`;
                const result = random() < options.deleteRatio ? await client.delete(key, id) : await client.create(key, id, options.limit);
                abandoned += result.abandoned;
            }
        };
        const started = Date.now();
        await Promise.all(Array.from({ length: options.concurrency }, worker));
        return Date.now() - started;
    };
    const remover = async () => {
        while (!done) {
            for (const key of keys) {
                await removeSoftDeleted(removerDb, config, key).catch(() => 0);
            }
            await sleep(100);
        }
    };
    const settler = async () => {
        while (!done && options.settler) {
            try {
                settlerRuns.push(
                    await settle({
                        config,
                        dynamodb: settlerDb,
                        mode,
                        quietWindowMs: options.quietWindowMs,
                        fatal: { park: async () => true },
                        auditSegments: 0,
                    }),
                );
            } catch {
                // An injected fault outlived the retries on the index query: the next run goes on.
            }
            await sleep(100);
        }
    };
    const observer = async () => {
        for (let i = 0; !done && options.observe !== false; i++) {
            const key = keys[i % keys.length]!;
            const state = await keyState(observerDb, config, key);
            observations++;
            const problem = boundProblem(mode, state, options.limit);
            if (problem !== undefined) {
                violations.push(`${key}: ${problem}`);
            }
        }
    };
    const running = Promise.all([remover(), settler(), observer()]);
    const trafficMs = await traffic();
    done = true;
    await running;
    const afterTraffic = new Map<string, KeyState>();
    for (const key of keys) {
        afterTraffic.set(key, await keyState(observerDb, config, key));
    }
    const faults: Record<string, number> = {};
    for (const stats of faultStats) {
        for (const [kind, n] of Object.entries(stats.injected)) {
            faults[kind] = (faults[kind] ?? 0) + n;
        }
    }
    return {
        ops: options.ops,
        trafficMs,
        observations,
        violations,
        abandoned,
        maxWriteMs: client.longestWriteMs,
        settlerRuns,
        faults,
        afterTraffic,
    };
}

/** After traffic: removes soft-deleted items, waits out the quiet window, and settles until nothing is due. */
export async function drainAndSettle(
    options: Pick<HealRaceOptions, "config" | "client" | "mode" | "keys" | "quietWindowMs">,
): Promise<SettleReport[]> {
    const dynamodb = options.client();
    for (const key of options.keys) {
        await removeSoftDeleted(dynamodb, options.config, key);
    }
    await sleep(options.quietWindowMs + 10);
    const runs: SettleReport[] = [];
    for (let i = 0; i < 10; i++) {
        const report = await settle({
            config: options.config,
            dynamodb,
            mode: options.mode,
            quietWindowMs: options.quietWindowMs,
            fatal: { park: async () => true },
            auditSegments: 0,
            settleKey: async (key) => ({ key, found: 0, counted: 0, alreadySettled: 0, incomplete: false }),
        });
        runs.push(report);
        if (report.keysFromIndex === 0) {
            break;
        }
    }
    return runs;
}
