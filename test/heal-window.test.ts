/**
 * The time bounds the ledger and the tombstones rest on (runtime/heal/heal-window.ts): a period must exceed the client
 * deadline + a request's 300 s lifetime + twice the 60 s clock skew, and the client refuses a deadline the deployed
 * period does not cover. Pure (the client is only constructed).
 */
import { strict as assert } from "node:assert";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import {
    CLOCK_SKEW_MS,
    MAX_CLIENT_DEADLINE_MS,
    MIN_CLIENT_DEADLINE_MS,
    periodCovers,
    periodFloorMs,
    REQUEST_LIFETIME_MS,
    settledAfterMs,
    smallestPeriodSeconds,
    tombstoneSettledAfterMs,
} from "../runtime/heal/heal-window";
import { HybridCounterClient } from "../runtime/client/client";
import { DEFAULT_DEADLINE_MS } from "../runtime/client/options";
import { ConfigurationError, DEFAULT_PERIOD_SECONDS } from "../runtime/shared/config";
import { TOMBSTONE_SETTLED_MS } from "../runtime/stream/effects";

describe("the period's floor", () => {
    it("is the deadline + 300 s + 2 x 60 s, and a period must be strictly above it", () => {
        assert.equal(REQUEST_LIFETIME_MS, 300_000);
        assert.equal(CLOCK_SKEW_MS, 60_000);
        assert.equal(periodFloorMs(10_000), 430_000);
        assert.equal(periodFloorMs(60_000), 480_000);
        assert.equal(periodCovers(430_000, 10_000), false);
        assert.equal(periodCovers(430_001, 10_000), true);
    });

    it("asks at least 431 s for the 10 s default deadline, 481 s for the longest, and the default period covers both", () => {
        assert.equal(DEFAULT_DEADLINE_MS, 10_000);
        assert.equal(smallestPeriodSeconds(DEFAULT_DEADLINE_MS), 431);
        assert.equal(smallestPeriodSeconds(MAX_CLIENT_DEADLINE_MS), 481);
        assert.equal(smallestPeriodSeconds(MIN_CLIENT_DEADLINE_MS), 421);
        assert.equal(periodCovers(DEFAULT_PERIOD_SECONDS * 1000, MAX_CLIENT_DEADLINE_MS), true);
    });

    it("ends a call's writes a deadline + 300 s + 60 s after its token, and settles a tombstone a deadline + 300 s + 2 x 60 s after its time: the consumer and the heal use the longest deadline", () => {
        assert.equal(settledAfterMs(10_000), 370_000);
        assert.equal(tombstoneSettledAfterMs(10_000), 430_000);
        assert.equal(TOMBSTONE_SETTLED_MS, tombstoneSettledAfterMs(MAX_CLIENT_DEADLINE_MS));
        assert.equal(TOMBSTONE_SETTLED_MS, 480_000);
    });
});

describe("the client refuses a deadline the deployed period does not cover", () => {
    const dynamodb = new DynamoDBClient({ region: "us-east-1" });
    after(() => dynamodb.destroy());
    const options = (healQuietWindowSeconds: number, deadlineMs?: number) => ({
        tableName: "orders",
        countersTableName: "orders-counters",
        dynamodb,
        healQuietWindowSeconds,
        ...(deadlineMs === undefined ? {} : { deadlineMs }),
    });
    const problems = (build: () => unknown): readonly string[] => {
        try {
            build();
        } catch (error) {
            assert.ok(error instanceof ConfigurationError, String(error));
            return error.problems;
        }
        return [];
    };

    it("the 10 s default deadline under a 430 s period, naming [deadlineMs] and the period it needs", () => {
        assert.deepEqual(
            problems(() => new HybridCounterClient(options(430))),
            [
                "[deadlineMs] 10000 needs [healQuietWindowSeconds] of at least 431 s (deadline + 300 s request lifetime + twice the 60 s clock skew); the counter's is 430 s",
            ],
        );
        assert.deepEqual(
            problems(() => new HybridCounterClient(options(431))),
            [],
        );
    });

    it("a longer deadline than the period covers, and a deadline outside 100..60000 ms", () => {
        assert.deepEqual(
            problems(() => new HybridCounterClient(options(481, 60_000))),
            [],
        );
        assert.deepEqual(
            problems(() => new HybridCounterClient(options(480, 60_000))),
            [
                "[deadlineMs] 60000 needs [healQuietWindowSeconds] of at least 481 s (deadline + 300 s request lifetime + twice the 60 s clock skew); the counter's is 480 s",
            ],
        );
        for (const bad of [99, 60_001, 1.5]) {
            assert.deepEqual(
                problems(() => new HybridCounterClient(options(600, bad))),
                ["[deadlineMs] must be an integer from 100 to 60000"],
                String(bad),
            );
        }
    });
});
