/**
 * Seeds a table the way an existing program leaves it before the counter is attached: resource items
 * over many keys, with every kind of odd item a real table holds (no flag, non-boolean flags, other
 * entities under the same key, soft-deleted items, items over 100 KB). Used by the tests, the twin and
 * the benchmark. `expectedLive` is the ground truth the backfill must reach.
 */
import { BatchWriteItemCommand, type AttributeValue, type DynamoDBClient, type WriteRequest } from "@aws-sdk/client-dynamodb";
import { DEFAULT_LAYOUT, type CounterTableLayout } from "../../runtime/shared/config";
import type { ItemSelection } from "../../runtime/shared/selection";
import { seededRandom } from "../engine/faults";

/** The selection the seeded items are made for: resources are the items whose sort key starts with "order#". */
export const SEEDED_SELECTION: ItemSelection = Object.freeze({ kind: "sortKeyPrefix", prefix: "order#" });

export interface SeedOptions {
    /** Items in all, resources and others (at least `keys`). */
    readonly items: number;
    readonly keys: number;
    readonly seed: number;
    /** Sort-key prefix of the resources (the other entities use "profile#"). @default "order#" */
    readonly resourcePrefix?: string;
    /** Items over 100 KB (resources). @default 4 */
    readonly largeItems?: number;
    readonly layout?: Pick<CounterTableLayout, "partitionKey" | "sortKey" | "deletedAttribute" | "tokenAttribute">;
}

export interface Seed {
    readonly items: Array<Record<string, AttributeValue>>;
    /** Live resources per key under SEEDED_SELECTION. */
    readonly expectedLive: Map<string, number>;
    readonly kinds: Record<"plain" | "noFlag" | "falseFlag" | "nonBooleanFlag" | "softDeleted" | "foreign" | "large", number>;
}

export function seedKey(i: number): string {
    return `tenant-${String(i).padStart(3, "0")}`;
}

/** The seeded items and their ground truth (pure). */
export function seedItems(options: SeedOptions): Seed {
    const layout = options.layout ?? DEFAULT_LAYOUT;
    const random = seededRandom(options.seed);
    const items: Array<Record<string, AttributeValue>> = [];
    const expectedLive = new Map<string, number>();
    const kinds: Seed["kinds"] = { plain: 0, noFlag: 0, falseFlag: 0, nonBooleanFlag: 0, softDeleted: 0, foreign: 0, large: 0 };
    const large = options.largeItems ?? 4;
    const order = options.resourcePrefix ?? "order#";
    for (let i = 0; i < options.items; i++) {
        const key = seedKey(i % options.keys);
        const base = { [layout.partitionKey]: { S: key } };
        const roll = random();
        let item: Record<string, AttributeValue>;
        let live = false;
        if (i < large) {
            // Over DynamoDB's 100 KB mark (the limit is 400 KB): backfill must not read it whole.
            item = { ...base, [layout.sortKey]: { S: `${order}large-${i}` }, payload: { S: "x".repeat(110 * 1024) } };
            kinds.large++;
            live = true;
        } else if (roll < 0.1) {
            item = { ...base, [layout.sortKey]: { S: `profile#${i}` }, name: { S: `customer ${i}` } };
            kinds.foreign++;
        } else if (roll < 0.15) {
            item = { ...base, [layout.sortKey]: { S: `${order}${i}` }, [layout.deletedAttribute]: { BOOL: true } };
            kinds.softDeleted++;
        } else if (roll < 0.25) {
            item = { ...base, [layout.sortKey]: { S: `${order}${i}` }, [layout.deletedAttribute]: { S: "no" } };
            kinds.nonBooleanFlag++;
            live = true;
        } else if (roll < 0.35) {
            item = {
                ...base,
                [layout.sortKey]: { S: `${order}${i}` },
                [layout.deletedAttribute]: { BOOL: false },
                total: { N: String(i) },
            };
            kinds.falseFlag++;
            live = true;
        } else if (roll < 0.5) {
            // A flag the package's first versions wrote on creation (nothing reads it now), as a string.
            item = { ...base, [layout.sortKey]: { S: `${order}${i}` }, counter_processed: { S: "yes" } };
            kinds.nonBooleanFlag++;
            live = true;
        } else if (roll < 0.6) {
            item = { ...base, [layout.sortKey]: { S: `${order}${i}` } };
            kinds.noFlag++;
            live = true;
        } else {
            item = { ...base, [layout.sortKey]: { S: `${order}${i}` }, total: { N: String(i) }, status: { S: "open" } };
            kinds.plain++;
            live = true;
        }
        items.push(item);
        expectedLive.set(key, (expectedLive.get(key) ?? 0) + (live ? 1 : 0));
    }
    return { items, expectedLive, kinds };
}

/** Writes items with BatchWriteItem (25 per request, unprocessed items sent again), `concurrency` requests at a time. */
export async function writeItems(
    dynamodb: DynamoDBClient,
    tableName: string,
    items: ReadonlyArray<Record<string, AttributeValue>>,
    concurrency = 4,
): Promise<void> {
    const batches: WriteRequest[][] = [];
    for (let i = 0; i < items.length; i += 25) {
        batches.push(items.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })));
    }
    let next = 0;
    await Promise.all(
        Array.from({ length: concurrency }, async () => {
            for (let b = next++; b < batches.length; b = next++) {
                let requests = batches[b]!;
                for (let attempt = 0; requests.length > 0; attempt++) {
                    const response = await dynamodb.send(new BatchWriteItemCommand({ RequestItems: { [tableName]: requests } }));
                    requests = response.UnprocessedItems?.[tableName] ?? [];
                    if (requests.length > 0) {
                        await new Promise((r) => setTimeout(r, Math.min(1_000, 20 * 2 ** attempt)));
                    }
                }
            }
        }),
    );
}

/** The counters table as the component creates it: one definition, in table.ts. */
export { createCountersTable } from "../engine/table";
