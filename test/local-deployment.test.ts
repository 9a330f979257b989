/**
 * The harnesses' one configuration: the component's outputs under Pulumi mocks, its tables created on
 * DynamoDB Local as declared, and a refusal of any harness whose client and consumer disagree.
 */
import { DescribeTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { deployHotTenant } from "../bench/hot-tenant";
import { DEFAULT_LAYOUT, ENV, HEAL_INDEX_NAME, handlerConfigFromEnv, type CounterTableConfig } from "../runtime/shared/config";
import { SETTLER_ENV } from "../runtime/heal/settler-config";
import { assertHarnessAgrees, assertSameSystem, deployLocally, HarnessMismatchError } from "../local/deployment/deployment";
import { LOCAL_FATAL_QUEUE, startPipeline } from "../local/deployment/pipeline";
import { snapshotKey } from "../local/harness/observe";
import { HybridCounterClient } from "../runtime/client/client";
import { deployTwin, SETTLER_COMPRESSION, twinFunctions } from "../local/twin/twin";
import { useEngine } from "./support/engine";

async function indexesOf(dynamodb: DynamoDBClient, tableName: string): Promise<string[] | undefined> {
    const table = await dynamodb.send(new DescribeTableCommand({ TableName: tableName }));
    return table.Table?.GlobalSecondaryIndexes?.map((i) => i.IndexName!);
}

/** Asserts that `act` throws HarnessMismatchError with exactly `message`. */
function assertRefused(act: () => unknown, message: string): void {
    assert.throws(act, (error: unknown) => error instanceof HarnessMismatchError && error.message === message);
}

describe("a harness's deployment on DynamoDB Local", function () {
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
        assert.throws(
            () => assertSameSystem({ ...consumer, counterShards: 4 }, consumer),
            (error: unknown) => error instanceof HarnessMismatchError && error.fields.join(",") === "counterShards",
        );
        assert.doesNotThrow(() => assertSameSystem(consumer, { ...consumer }));
        assert.doesNotThrow(() => assertSameSystem({ ...consumer, counterShards: 1 }, consumer));
    });

    it("the twin: its tables as declared, its client and every bundle it loads from the same outputs, the flat selection included", async () => {
        // Prepare: a selection other than the default, which resolveLayout(clientConfig) used to drop.
        const admin = engine().dynamodb();

        // Act
        const twin = await deployTwin(admin, { countedItems: "sortKeyPrefix", countedSortKeyPrefix: "order#" });
        const { clientOptions, environments } = twinFunctions(twin, { dynamodb: admin, mode: "strict" }, "http://127.0.0.1:1/fatal");

        // Assess: the client, the consumer, the redrive and the (compressed) settler count the same items in the same tables.
        const { clientLayout, system } = twin.deployment;
        assert.deepEqual(clientLayout.selection, { kind: "sortKeyPrefix", prefix: "order#" });
        assert.notEqual(clientLayout.countersTableName, clientLayout.tableName);
        assert.equal(clientOptions.countersTableName, clientLayout.countersTableName);
        assert.equal(clientOptions.mode, "strict");
        assert.deepEqual(Object.keys(environments).sort(), ["consumer", "redrive", "settler"]);
        for (const environment of Object.values(environments)) {
            const handler = handlerConfigFromEnv(environment);
            assert.deepEqual(
                [handler.tableName, handler.countersTableName, handler.selection, handler.fatalQueueUrl],
                [clientLayout.tableName, clientLayout.countersTableName, clientLayout.selection, "http://127.0.0.1:1/fatal"],
            );
        }
        assert.equal(twin.settlerSpec?.quietWindowMs, 600_000 / SETTLER_COMPRESSION);
        assert.equal(environments.settler?.[SETTLER_ENV.quietWindowMs], String(600_000 / SETTLER_COMPRESSION));
        assert.deepEqual(await indexesOf(admin, clientLayout.countersTableName), [HEAL_INDEX_NAME]);
        assert.equal(system.countersTableName, clientLayout.countersTableName);

        // Act / Assess: a consumer on another counters table, a settler on another prefix, are refused, naming the field.
        assertRefused(
            () => assertHarnessAgrees(clientOptions, { consumer: { ...environments.consumer, [ENV.countersTableName]: "elsewhere" } }),
            "the client and the consumer disagree on [countersTableName]",
        );
        assertRefused(
            () => assertHarnessAgrees(clientOptions, { settler: { ...environments.settler!, [ENV.countedSortKeyPrefix]: "invoice#" } }),
            "the client and the settler disagree on [selection]",
        );
        assertRefused(
            () =>
                twinFunctions(
                    {
                        ...twin,
                        deployment: { ...twin.deployment, clientConfig: { ...twin.deployment.clientConfig, countedItems: "client" } },
                    },
                    { dynamodb: admin },
                    "fatal",
                ),
            "the client and the consumer disagree on [selection]",
        );
        admin.destroy();
    });

    it("the hot-tenant scenario: each placement deployed as the component's counterPlacement, its client and consumer checked alike", async () => {
        // Prepare
        const admin = engine().dynamodb();

        // Act
        const beside = await deployHotTenant(admin, "tenant-partition", { dynamodb: admin, mode: "utilization" });
        const apart = await deployHotTenant(admin, "own-table", { dynamodb: admin, mode: "strict" });

        // Assess: beside the tenant's items, one table with the heal index; apart, a counters table of their own.
        const b = beside.deployment.clientLayout;
        assert.equal(b.countersTableName, b.tableName);
        assert.equal(beside.clientOptions.countersTableName, b.tableName);
        assert.equal(beside.consumerConfig.countersTableName ?? beside.consumerConfig.tableName, b.tableName);
        assert.deepEqual(await indexesOf(admin, b.tableName), [HEAL_INDEX_NAME]);
        const a = apart.deployment.clientLayout;
        assert.notEqual(a.countersTableName, a.tableName);
        assert.deepEqual(
            [apart.clientOptions.tableName, apart.clientOptions.countersTableName, apart.clientOptions.mode],
            [a.tableName, a.countersTableName, "strict"],
        );
        assert.deepEqual([apart.consumerConfig.tableName, apart.consumerConfig.countersTableName], [a.tableName, a.countersTableName]);
        assert.deepEqual(await indexesOf(admin, a.countersTableName), [HEAL_INDEX_NAME]);
        assert.equal(await indexesOf(admin, a.tableName), undefined);

        // Act / Assess: the scenario's old client (counters beside the items) against the deployed consumer is refused.
        assertRefused(
            () =>
                assertHarnessAgrees(
                    { ...apart.clientOptions, countersTableName: a.tableName },
                    { consumer: apart.deployment.system.consumer.environment },
                ),
            "the client and the consumer disagree on [countersTableName]",
        );
        admin.destroy();
    });

    it("the benches' stream pipeline: the consumer and the mapping the component deploys, changed only where an option says", async () => {
        // Prepare
        const admin = engine().dynamodb();
        const deployment = await deployLocally(admin, "harness-pipeline");
        const clients = { dynamodb: engine().dynamodb(), streams: engine().streams() };
        const read: string[] = [];
        const responses: unknown[] = [];

        // Act
        const deployed = startPipeline(deployment, clients, {
            functionName: "bench",
            onRead: (record) => read.push(record.eventName ?? ""),
            onInvoked: (_event, response) => responses.push(response),
        });
        const swept = startPipeline(deployment, clients, {
            functionName: "sweep",
            metricsNamespace: "Sweep",
            batching: { batchSize: 7, maximumBatchingWindowInSeconds: 2 },
        });

        // Assess: the deployed consumer's configuration and mapping, the local fatal queue's name in place of its URL.
        assert.deepEqual(deployed.config, { ...deployment.handlerConfig, fatalQueueUrl: LOCAL_FATAL_QUEUE });
        assert.deepEqual(deployed.settings, deployment.system.streamMapping);
        assert.deepEqual(swept.config, { ...deployment.handlerConfig, fatalQueueUrl: LOCAL_FATAL_QUEUE, metricsNamespace: "Sweep" });
        assert.deepEqual(swept.settings, { ...deployment.system.streamMapping, batchSize: 7, maximumBatchingWindowInSeconds: 2 });

        // Act: a create through the client built from clientConfig, then the deployed pipeline drained.
        const client = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: admin });
        await client.create("tenant-1", "r1");
        await deployed.emulator.drain({ idlePolls: 2, pollIntervalMs: 25 });

        // Assess: the record read, one invocation that reported no failure, and the key counted exactly.
        const layout = deployment.clientLayout;
        const s = await snapshotKey(admin, layout.tableName, layout, "tenant-1", layout.countersTableName);
        assert.deepEqual(read, ["INSERT"]);
        assert.deepEqual(responses, [{ batchItemFailures: [] }]);
        assert.deepEqual([s.eventual, s.live], [1, 1]);
        assert.equal(deployed.queues.sent.size, 0);
        for (const c of [admin, clients.dynamodb, clients.streams]) {
            c.destroy();
        }
    });
});
