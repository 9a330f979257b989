/**
 * The harnesses' one configuration: the component's outputs under Pulumi mocks, its tables created on
 * DynamoDB Local as declared, and a refusal of any harness whose client and consumer disagree.
 */
import { DescribeTableCommand } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { DEFAULT_LAYOUT, HEAL_INDEX_NAME, type CounterTableConfig } from "../runtime/shared/config";
import { assertSameSystem, deployLocally, HarnessMismatchError } from "../local/deployment/deployment";
import { useEngine } from "./support/engine";

describe("a harness's deployment on DynamoDB Local", function () {
    this.timeout(60_000);
    const engine = useEngine();

    it("builds the client and the consumer from the component's outputs, with the tables it declares (default placement)", async () => {
        // Act
        const deployment = await deployLocally(engine().dynamodb(), "harness-a");

        // Assess: one counters table, named alike by the client and the consumer; its heal index; the user's stream.
        const { clientLayout, handlerConfig, system } = deployment;
        assert.notEqual(clientLayout.countersTableName, clientLayout.tableName);
        assert.deepEqual(
            [clientLayout.tableName, clientLayout.countersTableName],
            [handlerConfig.tableName, handlerConfig.countersTableName],
        );
        assert.equal(system.countersTableName, clientLayout.countersTableName);
        const counters = await engine()
            .dynamodb()
            .send(new DescribeTableCommand({ TableName: clientLayout.countersTableName }));
        assert.deepEqual(
            counters.Table?.GlobalSecondaryIndexes?.map((i) => i.IndexName),
            [HEAL_INDEX_NAME],
        );
        assert.equal(counters.Table?.StreamSpecification?.StreamEnabled ?? false, false);
        const user = await engine()
            .dynamodb()
            .send(new DescribeTableCommand({ TableName: clientLayout.tableName }));
        assert.equal(user.Table?.LatestStreamArn, deployment.streamArn);
        assert.equal(user.Table?.GlobalSecondaryIndexes, undefined);
    });

    it("puts the heal index on the user's table in the same-table placement, and the selection reaches both sides", async () => {
        // Act
        const deployment = await deployLocally(engine().dynamodb(), "harness-b", {
            counterPlacement: "same-table",
            countedItems: "sortKeyPrefix",
            countedSortKeyPrefix: "order#",
        });

        // Assess
        const { clientLayout, handlerConfig } = deployment;
        assert.equal(clientLayout.countersTableName, clientLayout.tableName);
        assert.equal(handlerConfig.countersTableName ?? handlerConfig.tableName, clientLayout.tableName);
        assert.deepEqual(clientLayout.selection, { kind: "sortKeyPrefix", prefix: "order#" });
        assert.deepEqual(handlerConfig.selection, clientLayout.selection);
        const user = await engine()
            .dynamodb()
            .send(new DescribeTableCommand({ TableName: clientLayout.tableName }));
        assert.deepEqual(
            user.Table?.GlobalSecondaryIndexes?.map((i) => i.IndexName),
            [HEAL_INDEX_NAME],
        );
    });

    it("refuses a harness whose client and consumer disagree, naming each field", () => {
        // Prepare: the bench's old setup, a client without countersTableName (the same-table default) beside a
        // consumer of the counters table; and a consumer with another selection and count attribute.
        const consumer: CounterTableConfig = { ...DEFAULT_LAYOUT, tableName: "items", countersTableName: "items-counters" };
        const client: CounterTableConfig = { ...DEFAULT_LAYOUT, tableName: "items" };

        // Act / Assess
        assert.throws(
            () => assertSameSystem(client, consumer),
            (error: unknown) =>
                error instanceof HarnessMismatchError && error.message === "the client and the consumer disagree on [countersTableName]",
        );
        assert.throws(
            () =>
                assertSameSystem({ ...consumer }, { ...consumer, countAttribute: "n", selection: { kind: "sortKeyPrefix", prefix: "x" } }),
            (error: unknown) => error instanceof HarnessMismatchError && error.fields.join(",") === "countAttribute,selection",
        );
        assert.doesNotThrow(() => assertSameSystem(consumer, { ...consumer }));
    });
});
