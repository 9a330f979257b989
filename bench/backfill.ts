/**
 * Backfill throughput and cost, measured against the engine's own raw parallel Scan of the same table
 * in the same run (the yardstick: DynamoDB Local is the bottleneck, absolute figures mean little).
 *
 * Both read the table with the same segments; the raw Scan only reads, the backfill also reads the
 * markers and commits one transaction per chunk of up to 99 items. WCU are billed as DynamoDB bills
 * them (2 per transactional item write, see local/engine/capacity.ts), per item counted.
 */
import { ScanCommand, type AttributeValue, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { meterWrites } from "../local/engine/capacity";
import { startEngine } from "../local/engine/engine";
import { readCounterItems } from "../local/harness/markers";
import { SEEDED_SELECTION, createCountersTable, seedItems, writeItems } from "../local/harness/seed";
import { createCounterTable } from "../local/engine/table";
import { backfill } from "../runtime/backfill/backfill";
import { DEFAULT_LAYOUT } from "../runtime/shared/config";

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
    /** Backfill items/s divided by that write rate: backfill writes one marker per counted item. */
    readonly ratioToRawWrite: number;
    readonly counted: number;
    /** Billed write units per item counted (transactions and checkpoints). */
    readonly wcuPerItem: number;
    /** Read units per item scanned (Scan and marker reads), as the engine reported them. */
    readonly rcuPerItem: number;
    /** A second run over the same table: what it wrote. */
    readonly secondRunCounted: number;
    readonly exact: boolean;
}

async function rawParallelScan(dynamodb: DynamoDBClient, tableName: string, segments: number, pageSize: number): Promise<number> {
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
                        Limit: pageSize,
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

export async function benchBackfill(options: { items: number; keys: number; segments: number; seed: number }): Promise<BackfillBenchRow> {
    const engine = await startEngine();
    try {
        const setup = engine.dynamodb();
        const config = {
            ...DEFAULT_LAYOUT,
            selection: SEEDED_SELECTION,
            tableName: "bench-backfill-user",
            countersTableName: "bench-backfill-counters",
        };
        await createCounterTable(setup, config.tableName);
        await createCountersTable(setup, config.countersTableName);
        const seed = seedItems({ items: options.items, keys: options.keys, seed: options.seed });
        let started = Date.now();
        await writeItems(setup, config.tableName, seed.items);
        const rawWriteItemsPerSec = seed.items.length / ((Date.now() - started) / 1000);
        const pageSize = 500;

        // Warm up, then measure the raw Scan right before the backfill.
        await rawParallelScan(setup, config.tableName, options.segments, pageSize);
        started = Date.now();
        const scanned = await rawParallelScan(setup, config.tableName, options.segments, pageSize);
        const rawScanItemsPerSec = scanned / ((Date.now() - started) / 1000);

        const dynamodb = engine.dynamodb();
        const meter = meterWrites(dynamodb);
        started = Date.now();
        const report = await backfill({
            config,
            dynamodb,
            segments: options.segments,
            pageSize,
            readUnitsPerSecond: Infinity,
            writeUnitsPerSecond: Infinity,
        });
        const backfillItemsPerSec = report.total.scanned / ((Date.now() - started) / 1000);
        const second = await backfill({
            config,
            dynamodb: setup,
            runId: "second",
            readUnitsPerSecond: Infinity,
            writeUnitsPerSecond: Infinity,
        });

        let exact = true;
        for (const [key, live] of seed.expectedLive) {
            const c = await readCounterItems(setup, config.countersTableName, config, key);
            exact &&= c.eventual === live && c.countedMarkers === live;
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
            counted: report.total.counted,
            wcuPerItem: round(meter.billed / report.total.counted, 3),
            rcuPerItem: round(report.thisCall.readUnits / report.total.scanned, 4),
            secondRunCounted: second.total.counted,
            exact,
        };
    } finally {
        await engine.stop();
    }
}

export function describeBackfillRow(r: BackfillBenchRow): string[] {
    return [
        `backfill: ${r.items} seeded items over ${r.keys} keys (${r.counted} counted), ${r.segments} segments, no rate limit`,
        `  ${r.backfillItemsPerSec} items/s = ${r.ratioToRawScan} x raw parallel Scan (${r.rawScanItemsPerSec} items/s, same table, same run)`,
        `  = ${r.ratioToRawWrite} x the engine's raw BatchWriteItem load of the same items (${r.rawWriteItemsPerSec} items/s): backfill writes a marker per item`,
        `  ${r.wcuPerItem} WCU per item counted (billed: 2 per transactional item write, plus checkpoints), ${r.rcuPerItem} RCU per item scanned`,
        `  exact after the run: ${r.exact}; a second run counted ${r.secondRunCounted}`,
    ];
}
