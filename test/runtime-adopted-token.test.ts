/**
 * An item from before the counter that carries a client token made before the strict clients began (backfill's
 * `clientsSince`, runtime/backfill/plan.ts): the strict backfill gives it a unit and flags its marker. Its delete gives
 * that unit back once, by taking the flag: released through the token instead, the flag stays on the marker, and a
 * later life of the id (another writer's, token-less) counts as client-counted and gives the same unit back again.
 * On DynamoDB Local, no consumer running (the soft-deleted item and the marker stay as the client left them).
 */
import { GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { backfill } from "../runtime/backfill/backfill";
import { COUNTER_ATTRIBUTES, markerSortKey } from "../runtime/shared/config";
import { newToken } from "../runtime/shared/tokens";
import { counterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

describe("an adopted item carrying a client token from before the clients (DynamoDB Local)", function () {
    const engine = useEngine();

    it("its delete takes the backfill's unit once; a later token-less life of the id gives nothing back", async () => {
        // Prepare: one item whose token was made an hour before the clients began, adopted by a strict backfill
        const fixture = await counterFixture(engine(), { placement: "separate", mode: "strict" });
        const clientsSince = Date.now();
        await fixture.reader.send(
            new PutItemCommand({
                TableName: fixture.tableName,
                Item: { pk: { S: "k" }, sk: { S: "old" }, counter_token: { S: newToken(clientsSince - 3_600_000) } },
            }),
        );
        const report = await backfill({
            config: fixture.config,
            dynamodb: fixture.reader,
            mode: "strict",
            runId: "adopt",
            clientsSince,
            readUnitsPerSecond: Infinity,
            writeUnitsPerSecond: Infinity,
        });
        assert.equal(report.total.counted, 1);
        assert.equal((await fixture.client.count("k")).bestEffort, 1);

        // Act: the client deletes it; another writer puts a new life of the id without a token; the client deletes that
        assert.deepEqual(await fixture.client.delete("k", "old"), { deleted: true });
        const marker = await fixture.reader.send(
            new GetItemCommand({
                TableName: fixture.config.countersTableName,
                Key: { pk: { S: "k" }, sk: { S: markerSortKey(fixture.config, "old") } },
                ConsistentRead: true,
            }),
        );
        const afterFirst = (await fixture.client.count("k")).bestEffort;
        await fixture.reader.send(new PutItemCommand({ TableName: fixture.tableName, Item: { pk: { S: "k" }, sk: { S: "old" } } }));
        const secondDelete = await fixture.client.delete("k", "old");
        const afterSecond = (await fixture.client.count("k")).bestEffort;

        // Assess: the unit went back once, with its flag; the other writer's life had no unit to give
        assert.equal(marker.Item?.[COUNTER_ATTRIBUTES.beCounted], undefined, "the delete took the backfill's flag");
        assert.equal(afterFirst, 0);
        assert.deepEqual(secondDelete, { deleted: true });
        assert.equal(afterSecond, 0, "a token-less life of the id gave the adopted item's unit back a second time");
        fixture.close();
    });
});
