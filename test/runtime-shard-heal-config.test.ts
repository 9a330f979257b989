/**
 * Where the settler and the CLI learn a key's shard count: the settler from its environment, the CLI from
 * `--counter-shards` or the clientConfig's `counterShards`. Pure.
 */
import { strict as assert } from "node:assert";
import { resolveTarget, UsageError } from "../cli/context";
import { ENV } from "../runtime/shared/config";
import { SETTLER_ENV, settlerConfigFromEnv, settlerEnvironment } from "../runtime/heal/settler-config";
import { mergeOldest } from "../runtime/heal/settle";

describe("the shard count of the settler and the CLI", () => {
    it("the settler reads the shard count the component sets beside its own variables", () => {
        const env = {
            [ENV.tableName]: "items",
            [ENV.fatalQueueUrl]: "https://sqs/fatal",
            [ENV.counterShards]: "3",
            ...settlerEnvironment({ countersTableName: "counters", mode: "utilization", quietWindowMs: 600_000, keyBudget: 200 }),
        };
        assert.equal(settlerConfigFromEnv(env).counterShards, 3);
        assert.equal(settlerConfigFromEnv({ ...env, [ENV.counterShards]: "1" }).counterShards, undefined);
        assert.throws(() => settlerConfigFromEnv({ ...env, [SETTLER_ENV.countersTableName]: "" }), /needs a counters table of its own/);
    });

    it("the CLI takes --counter-shards, or counterShards from --config, and refuses a count it cannot use", () => {
        const config = JSON.stringify({ clientConfig: { tableName: "items", countersTableName: "counters", counterShards: 3 } });
        assert.equal(resolveTarget({ config: "c.json" }, () => config).table.counterShards, 3);
        assert.equal(resolveTarget({ config: "c.json", counterShards: "5" }, () => config).table.counterShards, 5);
        assert.equal(resolveTarget({ table: "items", countersTable: "counters" }, () => "").table.counterShards, undefined);
        assert.equal(
            resolveTarget({ table: "items", countersTable: "counters", counterShards: "1" }, () => "").table.counterShards,
            undefined,
        );
        assert.throws(
            () => resolveTarget({ table: "items", counterShards: "3" }, () => ""),
            (error: unknown) =>
                error instanceof UsageError &&
                error.message ===
                    "--counter-shards: above 1 needs a counters table of its own: a key's shards are partition keys of the counters table",
        );
        assert.throws(
            () => resolveTarget({ table: "items", countersTable: "counters", counterShards: "17" }, () => ""),
            (error: unknown) =>
                error instanceof UsageError && error.message === "--counter-shards: must be an integer from 1 to 16 (got 17)",
        );
        assert.throws(
            () =>
                resolveTarget({ config: "c.json" }, () =>
                    JSON.stringify({ tableName: "items", countersTableName: "c", counterShards: "3" }),
                ),
            (error: unknown) => error instanceof UsageError && error.message === '--config: must be an integer from 1 to 16 (got "3")',
        );
    });

    it("the heal index's entries of one key's shards take one slot of the budget, at the key's oldest entry", () => {
        const shards = [
            {
                entries: [
                    { key: "a", dueAt: 1 },
                    { key: "a", dueAt: 2 },
                    { key: "b", dueAt: 3 },
                ],
                more: false,
            },
            {
                entries: [
                    { key: "a", dueAt: 4 },
                    { key: "c", dueAt: 5 },
                ],
                more: false,
            },
        ];
        assert.deepEqual(mergeOldest(shards, 2), { keys: ["a", "b"], exhausted: true });
        assert.deepEqual(mergeOldest(shards, 3), { keys: ["a", "b", "c"], exhausted: false });
        // A key's later entries after the budget is full do not count as keys left out.
        assert.deepEqual(
            mergeOldest(
                [
                    {
                        entries: [
                            { key: "a", dueAt: 1 },
                            { key: "a", dueAt: 2 },
                        ],
                        more: false,
                    },
                ],
                1,
            ),
            {
                keys: ["a"],
                exhausted: false,
            },
        );
    });
});
