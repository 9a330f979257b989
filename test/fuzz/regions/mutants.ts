/**
 * Broken regional parties the multi-region checker must reject (test/fuzz-regions.test.ts): each reverses one thing
 * counting per region rests on (docs/design/global-tables.md).
 */
import type { AttributeValue, DynamoDBClient } from "@aws-sdk/client-dynamodb";
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

/**
 * Region `region`'s client takes every life it deletes for its own: the item it reads before a delete shows its own
 * stamp, so a delete of a life another region owns gives back a unit of `region`'s best-effort (which holds none for
 * that life) instead of leaving the owner's unit to the owner's heal.
 */
export function foreignLivesReadAsOwn(region: string): RegionsMutation {
    return {
        api: (at: string, dynamodb: DynamoDBClient) => {
            if (at !== region) {
                return;
            }
            dynamodb.middlewareStack.add(
                (next, context) => async (args) => {
                    const result = await next(args);
                    const output = result.output as { Item?: Record<string, AttributeValue> };
                    if (context.commandName === "GetItemCommand" && output.Item?.[DEFAULT_REGION_ATTRIBUTE] !== undefined) {
                        output.Item[DEFAULT_REGION_ATTRIBUTE] = { S: region };
                    }
                    return result;
                },
                { step: "initialize", name: "foreignLivesReadAsOwn" },
            );
        },
    };
}
