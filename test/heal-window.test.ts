/**
 * Settings that break the heal's assumption A4 (issue 19, item 7), and the client's counters table
 * (item 11): the quiet window's floor is derived from the client deadline, the request lifetime and the
 * clock skew, and every party that reads a window or a deadline refuses a pair that breaks it.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { HybridCounterClient, type HybridCounterClientOptions } from "../runtime/client/client";
import { clientConfigFromEnv, clientEnvironment, DEFAULT_LAYOUT, ENV } from "../runtime/shared/config";
import { ConfigurationError } from "../runtime/shared/errors";
import {
    CLOCK_SKEW_MS,
    largestCoveredDeadlineMs,
    quietWindowFloorMs,
    REQUEST_LIFETIME_MS,
    smallestQuietWindowSeconds,
    windowCovers,
} from "../runtime/heal/heal-window";
import { SETTLER_ENV, settlerConfigFromEnv } from "../runtime/heal/settler-config";

/** Never sends: construction is pure. */
const dynamodb = new DynamoDBClient({
    region: "us-east-1",
    endpoint: "http://127.0.0.1:9",
    credentials: { accessKeyId: "x", secretAccessKey: "x" },
});

function problemsOf(build: () => unknown): readonly string[] {
    try {
        build();
    } catch (error) {
        assert.ok(error instanceof ConfigurationError, String(error));
        return error.problems;
    }
    return [];
}

const base = { tableName: "orders", countersTableName: "orders-counters", dynamodb } satisfies HybridCounterClientOptions;

describe("the quiet window's floor (heal assumption A4)", () => {
    it("is the deadline + 300 s request lifetime + 60 s skew, and a window must be strictly above it", () => {
        assert.equal(REQUEST_LIFETIME_MS, 300_000);
        assert.equal(CLOCK_SKEW_MS, 60_000);
        assert.equal(quietWindowFloorMs(10_000), 370_000);
        assert.equal(windowCovers(370_000, 10_000), false);
        assert.equal(windowCovers(370_001, 10_000), true);
        assert.equal(smallestQuietWindowSeconds(10_000), 371);
        assert.equal(smallestQuietWindowSeconds(60_000), 421);
        assert.equal(smallestQuietWindowSeconds(10_500), 371);
        assert.equal(largestCoveredDeadlineMs(600_000), 239_999);
        assert.equal(windowCovers(600_000, largestCoveredDeadlineMs(600_000)), true);
        assert.equal(windowCovers(600_000, largestCoveredDeadlineMs(600_000) + 1), false);
    });

    it("the client refuses a deadlineMs the deployed window does not cover, naming [deadlineMs]", () => {
        // The figures: a window of 320 s cannot cover the default 10 s deadline.
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...base, healQuietWindowSeconds: 320 })),
            [
                "[deadlineMs] must be below [healQuietWindowSeconds] (320 s) - 300 s request lifetime - 60 s clock skew: the settler's heal would not wait for this client's last write (deadlineMs 10000 needs a window of at least 371 s)",
            ],
        );
        assert.equal(problemsOf(() => new HybridCounterClient({ ...base, healQuietWindowSeconds: 370 })).length, 1);
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...base, healQuietWindowSeconds: 371 })),
            [],
        );
        assert.equal(problemsOf(() => new HybridCounterClient({ ...base, healQuietWindowSeconds: 420, deadlineMs: 60_000 })).length, 1);
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...base, healQuietWindowSeconds: 600, deadlineMs: 60_000 })),
            [],
        );
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...base, healQuietWindowSeconds: 0 })),
            ["[healQuietWindowSeconds] must be a positive integer (the component's clientConfig value)"],
        );
    });

    it("the environment the component gives an API carries the window, and a client built from it checks its deadline", () => {
        const env = {
            ...clientEnvironment({ ...DEFAULT_LAYOUT, tableName: "orders", countersTableName: "orders-counters" }),
            [ENV.healQuietWindowSeconds]: "400",
        };
        const config = clientConfigFromEnv(env);
        assert.equal(config.healQuietWindowSeconds, 400);
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...config, dynamodb, deadlineMs: 39_999 })),
            [],
        );
        assert.match(problemsOf(() => new HybridCounterClient({ ...config, dynamodb, deadlineMs: 40_000 })).join(), /^\[deadlineMs\]/);
        assert.throws(
            () => clientConfigFromEnv({ ...env, [ENV.healQuietWindowSeconds]: "soon" }),
            (e: unknown) =>
                e instanceof ConfigurationError && e.problems.includes(`[${ENV.healQuietWindowSeconds}] must be a positive integer`),
        );
    });

    it("the settler refuses a window that does not cover the client deadline its environment names", () => {
        const env = {
            ...clientEnvironment({ ...DEFAULT_LAYOUT, tableName: "orders", countersTableName: "orders-counters" }),
            [ENV.fatalQueueUrl]: "https://sqs.local/000000000000/fatal",
            [SETTLER_ENV.mode]: "strict",
            [SETTLER_ENV.keyBudget]: "200",
            [SETTLER_ENV.quietWindowMs]: "420000",
            [SETTLER_ENV.clientDeadlineMs]: "60000",
        };
        assert.throws(
            () => settlerConfigFromEnv(env),
            (e: unknown) =>
                e instanceof ConfigurationError &&
                e.problems.join() ===
                    `[${SETTLER_ENV.quietWindowMs}] must be above [${SETTLER_ENV.clientDeadlineMs}] + 300 s request lifetime + 60 s clock skew (420000 ms)`,
        );
        assert.equal(settlerConfigFromEnv({ ...env, [SETTLER_ENV.quietWindowMs]: "420001" }).quietWindowMs, 420_001);
    });
});

describe("the client's counters table (no silent same-table default)", () => {
    it("refuses a client without countersTableName, naming it and the way to ask for the same table", () => {
        const { countersTableName: _, ...without } = base;
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient(without as HybridCounterClientOptions)),
            [
                "[countersTableName] must be set: the counters table the component deploys (its clientConfig's countersTableName), or the same name as [tableName] for the same-table placement",
            ],
        );
    });

    it("takes the same-table placement only when asked for by name", () => {
        assert.deepEqual(
            problemsOf(() => new HybridCounterClient({ ...base, countersTableName: base.tableName })),
            [],
        );
    });
});
