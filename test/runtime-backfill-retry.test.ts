/**
 * A backfill transaction whose answer is lost after it committed (a 500 after the write) is sent again with the same
 * ClientRequestToken, so DynamoDB applies it once. The retry must be the same request: DynamoDB refuses a token reused
 * with other parameters (IdempotentParameterMismatchException), and the parity layer answers as DynamoDB does
 * (local/engine/transaction-window.ts). The backfill's actions carry a time stamp; a retry that stamps them anew is
 * another request.
 */
import type { DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { DeserializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { faultError } from "../local/engine/faults";
import { SEEDED_SELECTION, writeItems } from "../local/harness/seed";
import { backfill } from "../runtime/backfill/backfill";
import { counterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

/** The first TransactWriteItems of `dynamodb` commits, and its caller hears a 500 instead of the answer. */
function loseFirstTransactionAnswer(dynamodb: DynamoDBClient): () => number {
    let lost = 0;
    const middleware: DeserializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (lost === 0 && context.commandName === "TransactWriteItemsCommand") {
            lost++;
            await next(args);
            throw faultError("500-after", context.commandName, args.input);
        }
        return next(args);
    };
    dynamodb.middlewareStack.add(middleware, { step: "deserialize", name: "loseFirstTransactionAnswer" });
    return () => lost;
}

describe("a backfill transaction whose answer was lost (DynamoDB Local, parity layer)", function () {
    const engine = useEngine({ parity: true });

    it("is sent again as the same request: counted once, the run completes", async () => {
        // Prepare: three items from before the counter (no token; selected by their sort key), strict mode: the
        // transaction adds their units to best-effort, stamped with the backfill's clock; a clock that moves at every reading
        const fixture = await counterFixture(engine(), { placement: "separate", mode: "strict", layout: { selection: SEEDED_SELECTION } });
        await writeItems(
            fixture.reader,
            fixture.tableName,
            [0, 1, 2].map((i) => ({ pk: { S: "k" }, sk: { S: `order#seed-${i}` } })),
        );
        const dynamodb = engine().dynamodb({ maxAttempts: 1 });
        const lost = loseFirstTransactionAnswer(dynamodb);
        let now = 1_800_000_000_000;
        const clock = { now: () => (now += 7), sleep: async () => undefined };

        // Act
        const report = await backfill({
            config: fixture.config,
            dynamodb,
            mode: "strict",
            runId: "lost-answer",
            clock,
            readUnitsPerSecond: Infinity,
            writeUnitsPerSecond: Infinity,
        });

        // Assess: one answer lost, the retry found its transaction applied, every item counted once
        assert.equal(lost(), 1);
        assert.equal(report.status, "complete");
        assert.equal(report.total.counted, 3);
        assert.deepEqual(await fixture.client.count("k"), { bestEffort: 3, eventual: 3, value: 3 });
        fixture.close();
        dynamodb.destroy();
    });
});
