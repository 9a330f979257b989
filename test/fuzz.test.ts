/**
 * The model-based checker in the suite: a fixed set of seeds, each a random history of concurrent
 * callers, consumer invocations, redeliveries, redrives, reconciliations and injected faults, run on
 * DynamoDB Local and checked against the contract (test/fuzz/run.ts says what is checked). A failing
 * seed is shrunk and printed as a reproduction. `npm run fuzz` runs many more.
 */
import type {
    DynamoDBClient,
    ServiceInputTypes,
    ServiceOutputTypes,
    TransactWriteItemsCommandInput,
    UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { generateHistory, type History } from "./fuzz/history";
import { runHistory } from "./fuzz/run";
import { reproduction, shrinkHistory } from "./fuzz/shrink";
import { useEngine } from "./support/engine";

/** Seeds that run in every `npm test`: both modes, every fault rate the generator picks. */
const SEEDS = [101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112];
const OPS = 150;

/** Adds middleware that rewrites the input of one command. */
function rewrite<I>(client: DynamoDBClient, command: string, change: (input: I) => void): void {
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === command) {
            change(args.input as I);
        }
        return next(args);
    };
    client.middlewareStack.add(middleware, { step: "initialize", name: "fuzzMutant" });
}

describe("model-based checker", function () {
    this.timeout(240_000);
    const engine = useEngine();

    for (const seed of SEEDS) {
        it(`seed ${seed} keeps the contract`, async () => {
            // Prepare
            const history = generateHistory({ seed, ops: OPS });

            // Act
            const result = await runHistory(engine(), history);

            // Assess
            if (result.violations.length > 0) {
                const shrunk = await shrinkHistory(engine(), history, result.violations[0]!, { deadlineMs: 60_000 });
                const again = await runHistory(engine(), shrunk);
                assert.fail(reproduction(shrunk, again.violations.length > 0 ? again.violations : result.violations));
            }
            assert.equal(result.stats.events, OPS);
            assert.ok(result.stats.requests > OPS / 2, `only ${result.stats.requests} requests ran`);
        });
    }

    it("every seed's history is the same history again", () => {
        // Prepare / Act
        const a = generateHistory({ seed: 7, ops: 60 });
        const b = generateHistory({ seed: 7, ops: 60 });
        const c = generateHistory({ seed: 8, ops: 60 });

        // Assess
        assert.deepEqual(a, b);
        assert.notDeepEqual(a, c);
    });

    it("catches a best-effort write applied twice", async () => {
        // Prepare: a mutant that doubles every best-effort increment.
        const history: History = { ...generateHistory({ seed: 5, ops: 40, mode: "utilization", faultRate: 0 }) };
        const mutate = ({ api }: { api: DynamoDBClient }) =>
            rewrite<UpdateItemCommandInput>(api, "UpdateItemCommand", (input) => {
                const delta = input.ExpressionAttributeValues?.[":delta"];
                if (delta?.N === "1") {
                    delta.N = "2";
                }
            });

        // Act
        const result = await runHistory(engine(), history, { mutate });

        // Assess
        const overcount = result.violations.find((v) => /best-effort \d+ > live \d+/.test(v));
        assert.ok(overcount, `the checker missed the overcount: ${result.violations.join("; ")}`);
    });

    it("catches an eventual counter that counts a creation twice", async () => {
        // Prepare: a mutant consumer whose transactions add twice the net change.
        const history = generateHistory({ seed: 6, ops: 40, mode: "utilization", faultRate: 0 });
        const mutate = ({ pipeline }: { pipeline: DynamoDBClient }) =>
            rewrite<TransactWriteItemsCommandInput>(pipeline, "TransactWriteItemsCommand", (input) => {
                for (const action of input.TransactItems ?? []) {
                    const delta = action.Update?.ExpressionAttributeValues?.[":delta"];
                    if (delta?.N !== undefined) {
                        delta.N = String(2 * Number(delta.N));
                    }
                }
            });

        // Act
        const result = await runHistory(engine(), history, { mutate });

        // Assess
        assert.ok(
            result.violations.some((v) => /eventual \d+ != (\d+ items counted|live \d+)/.test(v)),
            `the checker missed the double count: ${result.violations.join("; ")}`,
        );
    });
});
