/** The root program's stack configuration, read into component args (a pure function). */
import * as assert from "node:assert/strict";
import { CONFIG_KEYS, DEFAULT_COMPONENT_NAME, StackConfigError, stackSettingsFromConfig } from "../stack/config";

describe("root program: stackSettingsFromConfig", () => {
    it("gives the default component name and no args for an empty stack", () => {
        // Act
        const settings = stackSettingsFromConfig({});
        // Assess
        assert.deepEqual(settings, { name: DEFAULT_COMPONENT_NAME, args: {} });
        assert.equal(DEFAULT_COMPONENT_NAME, "counter");
    });

    it("parses integers, booleans, strings, enums, the thresholds list and the tags object, and ignores other namespaces", () => {
        // Prepare
        const config = {
            "aws:region": "eu-west-1",
            "other-project:batchSize": "not read",
            "hybrid-counter:name": "orders",
            "hybrid-counter:tableName": "orders-counter",
            "hybrid-counter:deletionProtection": "true",
            "hybrid-counter:billingMode": "PROVISIONED",
            "hybrid-counter:readCapacity": "5",
            "hybrid-counter:writeCapacity": "10",
            "hybrid-counter:batchSize": "250",
            "hybrid-counter:maximumBatchingWindowInSeconds": "0",
            "hybrid-counter:parallelizationFactor": "1",
            "hybrid-counter:counterShards": "4",
            "hybrid-counter:counterMode": "strict",
            "hybrid-counter:healQuietWindowSeconds": "900",
            "hybrid-counter:maximumRetryAttempts": "3",
            "hybrid-counter:maximumRecordAgeInSeconds": "3600",
            "hybrid-counter:redriveMaxReceiveCount": "7",
            "hybrid-counter:createAlarmTopic": "false",
            "hybrid-counter:alarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:ops",
            "hybrid-counter:thresholds": "[0.5, 0.75, 1]",
            "hybrid-counter:createThresholdTopic": "true",
            "hybrid-counter:thresholdTopicArn": "arn:aws:sns:eu-west-1:123456789012:limits",
            "hybrid-counter:usageRetentionDays": "30",
            "hybrid-counter:logRetentionInDays": "90",
            "hybrid-counter:tracing": "true",
            "hybrid-counter:architecture": "x86_64",
            "hybrid-counter:consumerMemorySize": "512",
            "hybrid-counter:tags": '{"team":"payments","cost-center":"42"}',
        };
        // Act
        const settings = stackSettingsFromConfig(config);
        // Assess
        assert.deepEqual(settings, {
            name: "orders",
            args: {
                tableName: "orders-counter",
                deletionProtection: true,
                billingMode: "PROVISIONED",
                readCapacity: 5,
                writeCapacity: 10,
                batchSize: 250,
                maximumBatchingWindowInSeconds: 0,
                parallelizationFactor: 1,
                counterShards: 4,
                counterMode: "strict",
                healQuietWindowSeconds: 900,
                maximumRetryAttempts: 3,
                maximumRecordAgeInSeconds: 3600,
                redriveMaxReceiveCount: 7,
                createAlarmTopic: false,
                alarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:ops",
                thresholds: [0.5, 0.75, 1],
                createThresholdTopic: true,
                thresholdTopicArn: "arn:aws:sns:eu-west-1:123456789012:limits",
                usageRetentionDays: 30,
                logRetentionInDays: 90,
                tracing: true,
                architecture: "x86_64",
                consumerMemorySize: 512,
                tags: { team: "payments", "cost-center": "42" },
            },
        });
        // Every documented key was exercised.
        assert.deepEqual(
            Object.keys(CONFIG_KEYS).sort(),
            Object.keys(config)
                .filter((k) => k.startsWith("hybrid-counter:"))
                .map((k) => k.slice(15))
                .sort(),
        );
    });

    it("keeps a negative integer for the component's own validation to name", () => {
        // Act
        const settings = stackSettingsFromConfig({ "hybrid-counter:maximumRetryAttempts": "-1" });
        // Assess
        assert.deepEqual(settings.args, { maximumRetryAttempts: -1 });
    });

    it("lists every unknown key and malformed value at once, naming each", () => {
        // Prepare
        const config = {
            "hybrid-counter:batchsize": "10",
            "hybrid-counter:batchSize": "ten",
            "hybrid-counter:maximumRetryAttempts": "1.5",
            "hybrid-counter:createAlarmTopic": "yes",
            "hybrid-counter:architecture": "arm",
            "hybrid-counter:billingMode": "ON_DEMAND",
            "hybrid-counter:tags": '{"team":1}',
            "hybrid-counter:tableName": "",
            "hybrid-counter:counterMode": "exact",
            "hybrid-counter:thresholds": '["0.8"]',
        };
        // Act
        const attempt = () => stackSettingsFromConfig(config);
        // Assess
        assert.throws(attempt, (error: unknown) => {
            assert.ok(error instanceof StackConfigError);
            assert.deepEqual(error.problems, [
                '[hybrid-counter:architecture] must be arm64 or x86_64; found "arm"',
                '[hybrid-counter:batchSize] must be an integer; found "ten"',
                `[hybrid-counter:batchsize] is not a setting of this program (known: ${Object.keys(CONFIG_KEYS).join(", ")})`,
                '[hybrid-counter:billingMode] must be PAY_PER_REQUEST or PROVISIONED; found "ON_DEMAND"',
                '[hybrid-counter:counterMode] must be utilization or strict; found "exact"',
                '[hybrid-counter:createAlarmTopic] must be true or false; found "yes"',
                '[hybrid-counter:maximumRetryAttempts] must be an integer; found "1.5"',
                '[hybrid-counter:tableName] must not be empty; found ""',
                '[hybrid-counter:tags] must be an object of tag names to strings; found "{\\"team\\":1}"',
                '[hybrid-counter:thresholds] must be a JSON list of numbers; found "[\\"0.8\\"]"',
            ]);
            return true;
        });
    });

    it("rejects tags that are not an object", () => {
        // Act
        const attempts = ['["a"]', "null", "team=payments"].map((raw) => () => stackSettingsFromConfig({ "hybrid-counter:tags": raw }));
        // Assess
        for (const attempt of attempts) {
            assert.throws(attempt, /\[hybrid-counter:tags\] must be an object of tag names to strings/);
        }
    });
});
