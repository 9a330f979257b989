/**
 * `counterShards` on the component, under Pulumi mocks: the count reaches every function's environment and the
 * API's (`apiEnvironment`, `clientConfig`), and changes nothing else; one shard is today's component exactly.
 */
import * as assert from "node:assert/strict";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { HybridCounterComponent, type HybridCounterComponentArgs } from "../index";
import { HybridCounterClient } from "../runtime/client/client";
import { resolveClientOptions } from "../runtime/client/options";
import { ENV, clientConfigFromEnv, layoutWithDefaults } from "../runtime/shared/config";
import { findResource, outputValue, runProgramWithResult, type RecordedResource } from "../local/deployment/pulumi-mocks";

const FATAL_DLQ_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-fatal-dlq";

/** What every function and the API share: the tables, the layout, the mode and the ledger period. */
const CLIENT_ENVIRONMENT = {
    HYBRID_COUNTER_TABLE_NAME: "orders-table",
    HYBRID_COUNTER_COUNTERS_TABLE_NAME: "orders-counters",
    HYBRID_COUNTER_PARTITION_KEY: "pk",
    HYBRID_COUNTER_SORT_KEY: "sk",
    HYBRID_COUNTER_DELETED_ATTRIBUTE: "deleted",
    HYBRID_COUNTER_TOKEN_ATTRIBUTE: "counter_token",
    HYBRID_COUNTER_PREFIX: "#counter#",
    HYBRID_COUNTER_COUNT_ATTRIBUTE: "count",
    HYBRID_COUNTER_COUNTED_ITEMS: "client",
    HYBRID_COUNTER_MODE: "utilization",
    HYBRID_COUNTER_HEAL_QUIET_WINDOW_SECONDS: "600",
};
const HANDLER_ENVIRONMENT = {
    ...CLIENT_ENVIRONMENT,
    HYBRID_COUNTER_FATAL_QUEUE_URL: FATAL_DLQ_URL,
    HYBRID_COUNTER_METRICS_NAMESPACE: "HybridCounter",
    HYBRID_COUNTER_THRESHOLDS: "0.8,1",
    HYBRID_COUNTER_USAGE_RETENTION_DAYS: "90",
};
const SETTLER_ENVIRONMENT = {
    ...CLIENT_ENVIRONMENT,
    HYBRID_COUNTER_METRICS_NAMESPACE: "HybridCounter",
    HYBRID_COUNTER_SETTLER_KEY_BUDGET: "200",
    HYBRID_COUNTER_SETTLER_AUDIT_ITEMS: "100",
};
const BACKFILL_ENVIRONMENT = {
    ...CLIENT_ENVIRONMENT,
    HYBRID_COUNTER_BACKFILL_SEGMENTS: "4",
};
const CLIENT_CONFIG = {
    tableName: "orders-table",
    countersTableName: "orders-counters",
    partitionKey: "pk",
    sortKey: "sk",
    deletedAttribute: "deleted",
    tokenAttribute: "counter_token",
    counterPrefix: "#counter#",
    countAttribute: "count",
    countedItems: "client",
    counterMode: "utilization",
    healQuietWindowSeconds: 600,
};

/** The functions whose environment carries the layout, backfill included. */
const FUNCTIONS = ["orders-consumer", "orders-redrive", "orders-settler", "orders-backfill"];

async function run(args: HybridCounterComponentArgs) {
    const { resources, result } = await runProgramWithResult(
        () => new HybridCounterComponent("orders", { backfillOnDeploy: true, ...args }),
    );
    return {
        resources,
        environment: (fn: string): Record<string, string> =>
            findResource(resources, "aws:lambda/function:Function", fn).inputs.environment.variables as Record<string, string>,
        apiEnvironment: await outputValue(result.apiEnvironment),
        clientConfig: await outputValue(result.clientConfig),
    };
}

/** Every resource with its inputs, but for the functions' environments and code (an archive differs run to run). */
function withoutEnvironments(resources: readonly RecordedResource[]) {
    return resources.map((r) => {
        const { environment: _environment, code: _code, ...inputs } = r.inputs;
        return { type: r.type, name: r.name, inputs, dependencies: r.dependencies };
    });
}

describe("HybridCounterComponent counterShards", () => {
    let one: Awaited<ReturnType<typeof run>>;
    let four: Awaited<ReturnType<typeof run>>;

    before(async () => {
        one = await run({});
        four = await run({ counterShards: 4 });
    });

    it("passes counterShards 4 to the consumer, redrive, settler and backfill functions, in HYBRID_COUNTER_COUNTER_SHARDS", () => {
        // Assess
        assert.equal(ENV.counterShards, "HYBRID_COUNTER_COUNTER_SHARDS");
        assert.deepEqual(four.environment("orders-consumer"), { ...HANDLER_ENVIRONMENT, HYBRID_COUNTER_COUNTER_SHARDS: "4" });
        assert.deepEqual(four.environment("orders-redrive"), { ...HANDLER_ENVIRONMENT, HYBRID_COUNTER_COUNTER_SHARDS: "4" });
        assert.deepEqual(four.environment("orders-settler"), { ...SETTLER_ENVIRONMENT, HYBRID_COUNTER_COUNTER_SHARDS: "4" });
        assert.deepEqual(four.environment("orders-backfill"), { ...BACKFILL_ENVIRONMENT, HYBRID_COUNTER_COUNTER_SHARDS: "4" });
    });

    it("gives the API counterShards 4 in apiEnvironment and clientConfig, which read back alike", () => {
        // Assess
        assert.deepEqual(four.apiEnvironment, { ...CLIENT_ENVIRONMENT, HYBRID_COUNTER_COUNTER_SHARDS: "4" });
        assert.deepEqual(four.clientConfig, { ...CLIENT_CONFIG, counterShards: 4 });
        // An API that builds its client from either output gets the same configuration.
        assert.deepEqual(clientConfigFromEnv(four.apiEnvironment), {
            ...layoutWithDefaults(four.clientConfig),
            tableName: "orders-table",
            countersTableName: "orders-counters",
            counterMode: "utilization",
            healQuietWindowSeconds: 600,
            counterShards: 4,
        });
    });

    it("builds an API's client over 4 shards from either output, and over one from today's", () => {
        // Prepare
        const dynamodb = new DynamoDBClient({ region: "us-east-1", endpoint: "http://127.0.0.1:9" });
        const fromOutputs = (outputs: typeof four) => [
            { ...outputs.clientConfig, dynamodb },
            { ...clientConfigFromEnv(outputs.apiEnvironment), dynamodb },
        ];

        // Act / Assess
        for (const options of fromOutputs(four)) {
            assert.equal(resolveClientOptions(options).config.counterShards, 4);
            new HybridCounterClient(options);
        }
        for (const options of fromOutputs(one)) {
            assert.equal(resolveClientOptions(options).config.counterShards, undefined);
        }
        dynamodb.destroy();
    });

    it("changes nothing but the environments: the same resources with the same inputs and dependencies as one shard", () => {
        // Assess
        assert.equal(four.resources.length, 38);
        assert.deepEqual(withoutEnvironments(four.resources), withoutEnvironments(one.resources));
        for (const fn of FUNCTIONS) {
            const { HYBRID_COUNTER_COUNTER_SHARDS: shards, ...rest } = four.environment(fn);
            assert.deepEqual([shards, rest], ["4", one.environment(fn)], fn);
        }
    });

    it("is today's component at one shard, given or not: no function, nor the API, is told a shard count", async () => {
        // Act
        const given = await run({ counterShards: 1 });

        // Assess
        assert.deepEqual(one.environment("orders-consumer"), HANDLER_ENVIRONMENT);
        assert.deepEqual(one.environment("orders-redrive"), HANDLER_ENVIRONMENT);
        assert.deepEqual(one.environment("orders-settler"), SETTLER_ENVIRONMENT);
        assert.deepEqual(one.environment("orders-backfill"), BACKFILL_ENVIRONMENT);
        assert.deepEqual(one.apiEnvironment, CLIENT_ENVIRONMENT);
        assert.deepEqual(one.clientConfig, CLIENT_CONFIG);
        assert.deepEqual(withoutEnvironments(given.resources), withoutEnvironments(one.resources));
        for (const fn of FUNCTIONS) {
            assert.deepEqual(given.environment(fn), one.environment(fn), fn);
        }
        assert.deepEqual([given.apiEnvironment, given.clientConfig], [one.apiEnvironment, one.clientConfig]);
    });

    it("passes 3 shards (not a power of two) and 16, the most, the same way", async () => {
        // Act
        const three = await run({ counterShards: 3 });
        const sixteen = await run({ counterShards: 16, settlerEnabled: false });

        // Assess
        for (const fn of FUNCTIONS) {
            assert.equal(three.environment(fn).HYBRID_COUNTER_COUNTER_SHARDS, "3", fn);
        }
        assert.deepEqual([three.apiEnvironment.HYBRID_COUNTER_COUNTER_SHARDS, three.clientConfig.counterShards], ["3", 3]);
        assert.deepEqual(sixteen.clientConfig, { ...CLIENT_CONFIG, counterShards: 16 });
        assert.equal(sixteen.apiEnvironment.HYBRID_COUNTER_COUNTER_SHARDS, "16");
    });
});
