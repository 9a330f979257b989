/**
 * The marker bound at the end of a history (runtime/shared/strict-ledger.ts, "Marker bound"): whatever an id's reuse
 * (paths.ts runs one id through many quick lives), every marker the counting left holds only the fixed set of
 * attributes the bound names, and is at most MARKER_MAX_BYTES. The histories' items carry no token but the client's
 * (another writer's items carry none; a token rewrite writes a client-format token: retoken.ts), so the bound's
 * allowance for another writer's token value is 0 here. An attribute outside the set is one added per life or per
 * write, which no bound holds: the check names it at once, before the marker's size shows it.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { queryPartition } from "../../runtime/heal/partition";
import { itemSize } from "../../runtime/client/validation";
import { COUNTER_ATTRIBUTES, countersTable, markerId } from "../../runtime/shared/config";
import { MARKER_MAX_BYTES } from "../../runtime/shared/strict-ledger";
import { shardPartitionKeys } from "../../runtime/shards/layout";
import { shardsOf, type FuzzSystem } from "./adapter";

/** What the counting may put on a marker (strict-ledger.ts: "Its attributes are a fixed set"), besides the keys. */
const MARKER_ATTRIBUTES: readonly string[] = [
    COUNTER_ATTRIBUTES.state,
    COUNTER_ATTRIBUTES.seq,
    COUNTER_ATTRIBUTES.lifeSeq,
    COUNTER_ATTRIBUTES.life,
    COUNTER_ATTRIBUTES.expiresAt,
    COUNTER_ATTRIBUTES.beCounted,
    COUNTER_ATTRIBUTES.beLife,
    COUNTER_ATTRIBUTES.released,
    COUNTER_ATTRIBUTES.pending,
];

/** Every marker of `key` (every shard) outside the bound, described; empty when all hold. */
export async function markerBoundProblems(reader: DynamoDBClient, system: FuzzSystem, key: string): Promise<string[]> {
    const { config } = system;
    const allowed = new Set([config.partitionKey, config.sortKey, ...MARKER_ATTRIBUTES]);
    const problems: string[] = [];
    for (const partition of shardPartitionKeys(key, shardsOf(system))) {
        for (const item of await queryPartition(reader, {
            tableName: countersTable(config),
            partitionKey: config.partitionKey,
            key: partition,
        })) {
            const id = markerId(config, item[config.sortKey]?.S ?? "");
            if (id === undefined) {
                continue;
            }
            const extra = Object.keys(item).filter((name) => !allowed.has(name));
            const size = itemSize(item);
            if (extra.length > 0 || size > MARKER_MAX_BYTES) {
                problems.push(
                    `the marker of ${key}/${id} is ${size} bytes (bound ${MARKER_MAX_BYTES}) with ${extra.length} attributes outside its fixed set` +
                        (extra.length > 0 ? ` (${extra.slice(0, 3).join(", ")}${extra.length > 3 ? ", ..." : ""})` : ""),
                );
            }
        }
    }
    return problems;
}
