/**
 * The twin's adoption step (`--seed-items N`): items an existing program wrote before the counter was
 * attached, then the backfill that counts them, run before the workload starts.
 */
import type { AttributeValue, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { backfill, type BackfillReport } from "../../runtime/backfill/backfill";
import type { CounterConfig } from "../../runtime/shared/config";
import { seedKey, writeItems } from "../harness/seed";

/**
 * `count` items over `keys` keys, each matching the layout's selection, as an earlier writer left them: no counted
 * flag. Under the client selection they carry a token another program wrote (no client made it). The backfill flags
 * them, the flags' records count them, and it lists their keys for a heal that gives them their best-effort units.
 */
export function preexistingItems(config: CounterConfig, count: number, keys: number): Array<Record<string, AttributeValue>> {
    const selection = config.selection;
    return Array.from({ length: count }, (_, i) => {
        const id = selection.kind === "sortKeyPrefix" ? `${selection.prefix}seed-${i}` : `seed-${i}`;
        const item: Record<string, AttributeValue> = {
            [config.partitionKey]: { S: seedKey(i % keys) },
            [config.sortKey]: { S: id },
            note: { S: "written before the counter was attached" },
        };
        if (selection.kind === "client") {
            item[config.tokenAttribute] = { S: `seed-${i}` };
        } else if (selection.kind === "attribute") {
            item[selection.name] = { S: selection.value };
        }
        return item;
    });
}

/** Seeds the table, then backfills it; `log` receives the progress lines. */
export async function seedAndBackfill(
    dynamodb: DynamoDBClient,
    config: CounterConfig,
    options: { items: number; keys: number },
    log: (line: string) => void,
): Promise<BackfillReport> {
    await writeItems(dynamodb, config.tableName, preexistingItems(config, options.items, options.keys));
    log(`seeded ${options.items} items over ${options.keys} keys before attaching; backfilling them`);
    const report = await backfill({
        config,
        dynamodb,
        runId: "twin",
        readUnitsPerSecond: Infinity,
        writeUnitsPerSecond: Infinity,
        onProgress: (p) => log(`  backfill: ${p.scanned} scanned, ${p.counted} flagged, ${p.segmentsDone} of ${p.segments} segments done`),
    });
    log(
        `backfill ${report.status}: ${report.total.counted} flagged, ${report.total.alreadyCounted} already flagged, ${report.thisCall.keysListed} keys listed for a heal, in ${report.thisCall.elapsedMs} ms`,
    );
    return report;
}
