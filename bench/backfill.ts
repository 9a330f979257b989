/**
 * The backfill's throughput and cost (part of `npm run bench`), against the engine's own raw parallel Scan and raw
 * BatchWriteItem load of the same table in the same run (the yardsticks: DynamoDB Local is the bottleneck, absolute
 * figures mean little).
 *
 * The component is deployed counting the items whose sort key starts with "order#" (the seeded table's resources,
 * local/harness/seed.ts, with every kind of odd item a real table holds); the items are written before the backfill
 * runs, with no counted flag. The backfill (runtime/backfill/backfill.ts, on the deployed configuration) flags each
 * live item the selection counts; each flag's stream record counts the item once, so after the backfill the pipeline
 * drains and every key's eventual must equal its live resources. A second run of the backfill must flag nothing.
 *
 * DynamoDB Local's table has its stream from the start, so the seed's own writes are in it too (a table adopted on
 * AWS has no records of what was written before its stream was enabled): the consumer sees them after the backfill,
 * finds the items flagged already, and writes nothing for them but refused conditional writes. That is why the
 * consumer's cost is not reported here.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { meterWrites } from "../local/engine/capacity";
import { snapshotKey } from "../local/harness/observe";
import { seedItems, writeItems } from "../local/harness/seed";
import { backfill } from "../runtime/backfill/backfill";
import { startBenchSystem, withServers } from "./system";

export interface BackfillBenchRow {
    readonly items: number;
    readonly keys: number;
    readonly segments: number;
    readonly rawScanItemsPerSec: number;
    readonly backfillItemsPerSec: number;
    /** Backfill items/s divided by raw Scan items/s. */
    readonly ratioToRawScan: number;
    /** Items/s of the BatchWriteItem load that seeded the table (25 per request, 4 at a time): the engine's write rate. */
    readonly rawWriteItemsPerSec: number;
    /** Backfill items/s divided by that write rate: the backfill writes a flag on every item it counts. */
    readonly ratioToRawWrite: number;
    /** Items the backfill flagged. */
    readonly flagged: number;
    /** Billed write units per item flagged (the flags, the heal marks, the checkpoints). */
    readonly wcuPerItem: number;
    /** Read units per item scanned, as the backfill reported them. */
    readonly rcuPerItem: number;
    /** A second run over the same table: what it flagged. */
    readonly secondRunFlagged: number;
    /** After the pipeline drained: every key's eventual equals its live resources. */
    readonly exact: boolean;
}

/** Resources are the items whose sort key starts with this (local/harness/seed.ts's SEEDED_SELECTION). */
const RESOURCE_PREFIX = "order#";
const PAGE_SIZE = 500;

async function rawParallelScan(dynamodb: DynamoDBClient, tableName: string, segments: number): Promise<number> {
    let items = 0;
    await Promise.all(
        Array.from({ length: segments }, async (_, segment) => {
            let start: Record<string, AttributeValue> | undefined;
            do {
                const page = await dynamodb.send(
                    new ScanCommand({
                        TableName: tableName,
                        Segment: segment,
                        TotalSegments: segments,
                        Limit: PAGE_SIZE,
                        ExclusiveStartKey: start,
                    }),
                );
                items += page.Items?.length ?? 0;
                start = page.LastEvaluatedKey;
            } while (start);
        }),
    );
    return items;
}

export async function benchBackfill(options: {
    items: number;
    keys: number;
    segments: number;
    seed: number;
    parity: boolean;
}): Promise<BackfillBenchRow> {
    return withServers({ parity: options.parity }, async (servers) => {
        const system = await startBenchSystem(servers, "bench-backfill", {
            args: { countedItems: "sortKeyPrefix", countedSortKeyPrefix: RESOURCE_PREFIX },
        });
        const dynamodb = servers.engine.dynamodb();
        try {
            const config = system.deployment.clientLayout;
            const seed = seedItems({
                items: options.items,
                keys: options.keys,
                seed: options.seed,
                resourcePrefix: RESOURCE_PREFIX,
                layout: config,
            });
            let started = Date.now();
            await writeItems(system.admin, config.tableName, seed.items);
            const rawWriteItemsPerSec = seed.items.length / ((Date.now() - started) / 1000);
            // Warm up, then measure the raw Scan right before the backfill.
            await rawParallelScan(system.admin, config.tableName, options.segments);
            started = Date.now();
            const scanned = await rawParallelScan(system.admin, config.tableName, options.segments);
            const rawScanItemsPerSec = scanned / ((Date.now() - started) / 1000);

            const meter = meterWrites(dynamodb);
            const unlimited = { readUnitsPerSecond: Infinity, writeUnitsPerSecond: Infinity };
            started = Date.now();
            const report = await backfill({ config, dynamodb, segments: options.segments, pageSize: PAGE_SIZE, ...unlimited });
            const backfillItemsPerSec = report.total.scanned / ((Date.now() - started) / 1000);
            const second = await backfill({ config, dynamodb: system.admin, runId: "second", ...unlimited });
            await system.pipeline.drain();
            let exact = true;
            for (const [key, live] of seed.expectedLive) {
                const s = await snapshotKey(system.admin, config, key);
                exact &&= s.eventual === live && s.live === live;
            }
            const round = (n: number, digits = 2) => Number(n.toFixed(digits));
            return {
                items: options.items,
                keys: options.keys,
                segments: options.segments,
                rawScanItemsPerSec: Math.round(rawScanItemsPerSec),
                backfillItemsPerSec: Math.round(backfillItemsPerSec),
                ratioToRawScan: round(backfillItemsPerSec / rawScanItemsPerSec),
                rawWriteItemsPerSec: Math.round(rawWriteItemsPerSec),
                ratioToRawWrite: round(backfillItemsPerSec / rawWriteItemsPerSec),
                flagged: report.total.counted,
                wcuPerItem: round(meter.billed / Math.max(1, report.total.counted), 3),
                rcuPerItem: round(report.thisCall.readUnits / Math.max(1, report.total.scanned), 4),
                secondRunFlagged: second.total.counted,
                exact,
            };
        } finally {
            dynamodb.destroy();
            system.close();
        }
    });
}

export function describeBackfillRow(r: BackfillBenchRow): string[] {
    return [
        `backfill: ${r.items} seeded items over ${r.keys} keys (${r.flagged} flagged), ${r.segments} segments, no rate limit`,
        `  ${r.backfillItemsPerSec} items/s = ${r.ratioToRawScan} x raw parallel Scan (${r.rawScanItemsPerSec} items/s, same table, same run)`,
        `  = ${r.ratioToRawWrite} x the engine's raw BatchWriteItem load of the same items (${r.rawWriteItemsPerSec} items/s): the backfill flags every item it counts`,
        `  ${r.wcuPerItem} WCU per item flagged (flags of items of every size, heal marks, checkpoints), ${r.rcuPerItem} RCU per item scanned`,
        `  exact once the flags' records drained: ${r.exact}; a second run flagged ${r.secondRunFlagged}`,
    ];
}
