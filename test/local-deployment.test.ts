/**
 * The harnesses' one configuration: the component's outputs under Pulumi mocks, its tables created on DynamoDB Local
 * as declared, a refusal of any harness whose client and functions disagree, and the functions, the mapping, the
 * queues and the threshold topic built from the deployment on the local servers.
 */
import { DescribeTableCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { DEFAULT_LAYOUT, ENV, handlerConfigFromEnv, type CounterConfig } from "../runtime/shared/config";
import { HEAL_INDEX_NAME } from "../runtime/heal/index-marks";
import { settlerConfigFromEnv } from "../runtime/heal/settler-config";
import { assertHarnessAgrees, assertSameSystem, deployLocally, HarnessMismatchError } from "../local/deployment/deployment";
import { startPipeline } from "../local/deployment/pipeline";
import { startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { snapshotKey } from "../local/harness/observe";
import { HybridCounterClient } from "../runtime/client/client";
import { deployTwin } from "../local/twin/twin";
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
    let sqs: LocalSqs;
    before(async () => {
        sqs = await startLocalSqs();
    });
    after(async () => {
        await sqs.stop();
    });

    it("builds the client and the consumer from the component's outputs, with the tables it declares (default placement)", async () => {
        // Act
        const admin = engine().dynamodb();
        const deployment = await deployLocally(admin, "harness-a");

        // Assess: one counters table, named alike by the client and the consumer; its heal index; the user's stream.
        const { clientLayout, handlerConfig, system } = deployment;
        assert.notEqual(clientLayout.countersTableName, clientLayout.tableName);
        assert.deepEqual(
            [clientLayout.tableName, clientLayout.countersTableName, clientLayout.mode, clientLayout.periodMs],
            [handlerConfig.tableName, handlerConfig.countersTableName, "utilization", 600_000],
        );
        assert.deepEqual([handlerConfig.mode, handlerConfig.periodMs], ["utilization", 600_000]);
        assert.equal(system.countersTableName, clientLayout.countersTableName);
        assert.deepEqual(await indexesOf(admin, clientLayout.countersTableName), [HEAL_INDEX_NAME]);
        const counters = await admin.send(new DescribeTableCommand({ TableName: clientLayout.countersTableName }));
        assert.equal(counters.Table?.StreamSpecification?.StreamEnabled ?? false, false);
        const user = await admin.send(new DescribeTableCommand({ TableName: clientLayout.tableName }));
        assert.equal(user.Table?.LatestStreamArn, deployment.streamArn);
        assert.equal(user.Table?.GlobalSecondaryIndexes, undefined);
        admin.destroy();
    });

    it("puts the heal index on the user's table in the same-table placement; the selection and the mode reach every side", async () => {
        // Act
        const admin = engine().dynamodb();
        const deployment = await deployLocally(admin, "harness-b", {
            counterPlacement: "same-table",
            countedItems: "sortKeyPrefix",
            countedSortKeyPrefix: "order#",
            counterMode: "strict",
        });

        // Assess
        const { clientLayout, handlerConfig, system } = deployment;
        assert.equal(clientLayout.countersTableName, clientLayout.tableName);
        assert.equal(handlerConfig.countersTableName, clientLayout.tableName);
        assert.deepEqual(clientLayout.selection, { kind: "sortKeyPrefix", prefix: "order#" });
        assert.deepEqual(handlerConfig.selection, clientLayout.selection);
        assert.deepEqual(
            [clientLayout.mode, handlerConfig.mode, settlerConfigFromEnv(system.settler!.function.environment).mode],
            ["strict", "strict", "strict"],
        );
        assert.deepEqual(await indexesOf(admin, clientLayout.tableName), [HEAL_INDEX_NAME]);
        admin.destroy();
    });

    it("refuses a harness whose client and function disagree, naming each field", () => {
        // Prepare
        const consumer: CounterConfig = {
            ...DEFAULT_LAYOUT,
            tableName: "items",
            countersTableName: "items-counters",
            mode: "utilization",
            periodMs: 600_000,
        };

        // Act / Assess
        assertRefused(
            () => assertSameSystem({ ...consumer, countersTableName: "items" }, consumer),
            "the client and the consumer disagree on [countersTableName]",
        );
        assert.throws(
            () =>
                assertSameSystem({ ...consumer }, { ...consumer, countAttribute: "n", selection: { kind: "sortKeyPrefix", prefix: "x" } }),
            (error: unknown) => error instanceof HarnessMismatchError && error.fields.join(",") === "countAttribute,selection",
        );
        assert.throws(
            () => assertSameSystem({ ...consumer, mode: "strict", periodMs: 900_000, counterShards: 4 }, consumer, "settler"),
            (error: unknown) =>
                error instanceof HarnessMismatchError &&
                error.message === "the client and the settler disagree on [mode], [periodMs], [counterShards]",
        );
        assert.doesNotThrow(() => assertSameSystem(consumer, { ...consumer }));
        assert.doesNotThrow(() => assertSameSystem({ ...consumer, counterShards: 1 }, consumer));
    });

    it("the twin's deployment: its threshold topic and settler, and every function checked against the client built from clientConfig", async () => {
        // Prepare
        const admin = engine().dynamodb();

        // Act
        const deployment = await deployTwin(admin, { countedItems: "sortKeyPrefix", countedSortKeyPrefix: "order#" });

        // Assess
        const { system, clientConfig } = deployment;
        assert.match(system.thresholdTopicArn ?? "", /^arn:aws:sns:us-east-1:123456789012:/);
        for (const environment of [system.consumer.environment, system.redrive.environment, system.settler!.function.environment]) {
            assert.equal(environment[ENV.thresholdTopicArn], system.thresholdTopicArn);
        }
        const clientOptions = { ...clientConfig, dynamodb: admin };
        assert.deepEqual(deployment.clientLayout.selection, { kind: "sortKeyPrefix", prefix: "order#" });
        assertRefused(
            () =>
                assertHarnessAgrees(clientOptions, { consumer: { ...system.consumer.environment, [ENV.countersTableName]: "elsewhere" } }),
            "the client and the consumer disagree on [countersTableName]",
        );
        assertRefused(
            () =>
                assertHarnessAgrees(clientOptions, {
                    settler: { ...system.settler!.function.environment, [ENV.countedSortKeyPrefix]: "invoice#" },
                }),
            "the client and the settler disagree on [selection]",
        );
        assertRefused(
            () => assertHarnessAgrees(clientOptions, { redrive: { ...system.redrive.environment, [ENV.healQuietWindowSeconds]: "900" } }),
            "the client and the redrive disagree on [periodMs]",
        );
        assertRefused(
            () => assertHarnessAgrees({ ...clientOptions, countedItems: "client" }, { consumer: system.consumer.environment }),
            "the client and the consumer disagree on [selection]",
        );
        admin.destroy();
    });

    it("the pipeline's functions read their local environments (queue URL, topic ARN), and the mapping runs the component's settings", async () => {
        // Prepare
        const admin = engine().dynamodb();
        const deployment = await deployLocally(admin, "harness-settings", { createThresholdTopic: true });
        const clients = { dynamodb: engine().dynamodb(), streams: engine().streams() };
        const options = { sqs, streams: clients.streams, functions: { kind: "source" as const, dynamodb: clients.dynamodb } };

        // Act
        const deployed = await startPipeline(deployment, { ...options, prefix: "settings-a" });
        const swept = await startPipeline(deployment, {
            ...options,
            prefix: "settings-b",
            metricsNamespace: "Sweep",
            batching: { batchSize: 7, maximumBatchingWindowInSeconds: 2 },
        });

        // Assess: the deployed configuration, local queue URL and topic ARN in place of the deployed ones.
        assert.deepEqual(deployed.config, {
            ...deployment.handlerConfig,
            fatalQueueUrl: deployed.queues.fatal.url,
            thresholdTopicArn: deployed.thresholds!.topicArn,
        });
        assert.deepEqual(handlerConfigFromEnv(deployed.environments.redrive), deployed.config);
        assert.equal(settlerConfigFromEnv(deployed.environments.settler!).thresholdTopicArn, deployed.thresholds!.topicArn);
        assert.deepEqual(deployed.settings, deployment.system.streamMapping);
        assert.equal(deployed.settings.tumblingWindowInSeconds, 900);
        assert.deepEqual(swept.config, {
            ...deployed.config,
            fatalQueueUrl: swept.queues.fatal.url,
            thresholdTopicArn: swept.thresholds!.topicArn,
            metricsNamespace: "Sweep",
        });
        assert.deepEqual(swept.settings, { ...deployment.system.streamMapping, batchSize: 7, maximumBatchingWindowInSeconds: 2 });
        assert.notEqual(swept.thresholds!.topicArn, deployed.thresholds!.topicArn);
        deployed.close();
        swept.close();
        for (const c of [admin, clients.dynamodb, clients.streams]) {
            c.destroy();
        }
    });

    it("the pipeline counts a create, announces its crossings through the topic's subscriber, keeps its usage, and the settler finds nothing to heal", async () => {
        // Prepare
        const admin = engine().dynamodb();
        const deployment = await deployLocally(admin, "harness-pipeline", { createThresholdTopic: true });
        const clients = { dynamodb: engine().dynamodb(), streams: engine().streams() };
        const read: string[] = [];
        const pipeline = await startPipeline(deployment, {
            sqs,
            streams: clients.streams,
            functions: { kind: "source", dynamodb: clients.dynamodb },
            prefix: "pipeline",
            onRead: (record) => read.push(record.dynamodb!.SequenceNumber!),
        });
        const client = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: admin });

        // Act: a limit of 1 stored, a create through the client built from clientConfig, the pipeline drained, a settler run.
        await client.setLimit("tenant-1", 1);
        const before = new Date().toISOString().slice(0, 10);
        await client.create("tenant-1", "r1");
        const after = new Date().toISOString().slice(0, 10);
        await pipeline.drain();
        await pipeline.thresholds!.receive();
        const settled = await pipeline.settler!();

        // Assess: the record read and counted exactly; both thresholds crossed by that record, and announced once each.
        const s = await snapshotKey(admin, deployment.clientLayout, "tenant-1");
        assert.equal(read.length, 1);
        assert.deepEqual([s.eventual, s.live, s.counted, s.bestEffort], [1, 1, 1, 1]);
        assert.deepEqual(
            pipeline.thresholds!.received.map((e) => [e.id, e.count, e.limit]),
            [
                [`tenant-1:${read[0]}:0.8:up`, 1, 1],
                [`tenant-1:${read[0]}:1:up`, 1, 1],
            ],
        );
        const usage = await client.usage("tenant-1", { from: before, to: after });
        assert.deepEqual(usage, [{ day: usage[0]?.day, creates: 1, deletes: 0, peak: 1, limit: 1 }]);
        assert.ok(usage[0]!.day === before || usage[0]!.day === after);
        // The settler's audit reads the key's eventual item, finds best-effort on it, and heals nothing.
        assert.deepEqual(settled, {
            due: 0,
            healed: 0,
            corrected: 0,
            drift: 0,
            raced: 0,
            removed: 0,
            audited: 1,
            auditHealed: 0,
            failedKeys: [],
        });
        assert.deepEqual([await pipeline.depth(pipeline.queues.first), await pipeline.depth(pipeline.queues.fatal)], [0, 0]);
        pipeline.close();
        for (const c of [admin, clients.dynamodb, clients.streams]) {
            c.destroy();
        }
    });
});
