/**
 * Broken regional parties the multi-region checker must reject (test/fuzz-regions.test.ts): each reverses one thing
 * counting per region rests on (docs/design/global-tables.md).
 */
import type { DynamoDBRecord } from "aws-lambda";
import { DEFAULT_REGION_ATTRIBUTE } from "../../../runtime/regions/config";
import type { RegionsMutation } from "./run";

/**
 * Region `region`'s consumer counts records it does not own: every image it is delivered reads as stamped by it, as a
 * consumer that skipped the ownership check (and a mapping without the owner filter) would count them.
 */
export function consumerCountsForeignRecords(region: string): RegionsMutation {
    const restamp = (image: Record<string, unknown> | undefined) =>
        image === undefined ? undefined : { ...image, [DEFAULT_REGION_ATTRIBUTE]: { S: region } };
    return {
        records: (at, records) =>
            at !== region
                ? records
                : records.map((record): DynamoDBRecord => ({
                      ...record,
                      dynamodb: {
                          ...record.dynamodb,
                          ...(record.dynamodb?.NewImage === undefined ? {} : { NewImage: restamp(record.dynamodb.NewImage) as never }),
                          ...(record.dynamodb?.OldImage === undefined ? {} : { OldImage: restamp(record.dynamodb.OldImage) as never }),
                      },
                  })),
    };
}

/**
 * Region `region` admits under the key's whole limit instead of its base quota: its client is called with the limit
 * times the member count, whose base quota there is at least the limit.
 */
export function admitsUnderWholeLimit(region: string, members: number): RegionsMutation {
    return { limit: (at, limit) => (at === region ? limit * members : limit) };
}
