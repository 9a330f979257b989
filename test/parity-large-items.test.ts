/**
 * Items near DynamoDB's 400 KB limit, behind the parity layer (local/engine/parity.ts), through the pipeline the
 * component deploys: the consumer's writes never carry a user's item (one UpdateItem of the key's eventual item per
 * batch, no transaction), so a key of large items counts as a key of small ones, whatever their sum: no request of the
 * consumer comes near DynamoDB's 4 MB per transaction or 400 KB per item.
 */
import type { ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { deployLocally } from "../local/deployment/deployment";
import { startPipeline } from "../local/deployment/pipeline";
import { startLocalSqs, type LocalSqs } from "../local/aws/sqs";
import { snapshotKey } from "../local/harness/observe";
import { HybridCounterClient } from "../runtime/client/client";
import { useEngine } from "./support/engine";

const KB = 1024;

describe("large items behind the parity layer: the consumer's writes carry no item", function () {
    // About the items' sizes only: at 1,000 WCU/s per key, writing 4.5 MB to one key would only add seconds of throttling
    // (the partition limit has its own tests in parity.test.ts).
    const engine = useEngine({ parity: { partitionWriteUnitsPerSecond: 1_000_000, partitionReadUnitsPerSecond: 1_000_000 } });
    let sqs: LocalSqs;
    before(async () => {
        sqs = await startLocalSqs();
    });
    after(async () => {
        await sqs.stop();
    });

    it("counts 12 items of 380 KB on one key, and their deletes, with one write of the eventual item per batch and no transaction", async () => {
        // Prepare
        const admin = engine().dynamodb();
        const consumerDynamo = engine().dynamodb();
        const streams = engine().streams();
        const deployment = await deployLocally(admin, "large-items");
        // Every request the consumer's client sends: the command, its table, and the sort key of the item it names.
        const sent: Array<{ command: string; table: string; sortKey: string }> = [];
        const record: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            const input = args.input as { TableName?: string; Key?: Record<string, { S?: string }> };
            sent.push({ command: context.commandName ?? "", table: input.TableName ?? "", sortKey: input.Key?.["sk"]?.S ?? "" });
            return next(args);
        };
        consumerDynamo.middlewareStack.add(record, { step: "initialize", name: "commandsSent" });
        let batches = 0;
        const pipeline = await startPipeline(deployment, {
            sqs,
            streams,
            functions: { kind: "source", dynamodb: consumerDynamo },
            onInvoked: (event) => (batches += (event.Records ?? []).length > 0 ? 1 : 0),
        });
        const client = new HybridCounterClient({ ...deployment.clientConfig, dynamodb: admin });
        const payload = "x".repeat(380 * KB);

        // Act
        for (let i = 0; i < 12; i++) {
            await client.create("big", `r${i}`, { payload });
        }
        await pipeline.drain();
        const created = await snapshotKey(admin, deployment.clientLayout, "big");
        const createBatches = batches;
        const eventualWrites = () => sent.filter((r) => r.command === "UpdateItemCommand" && r.sortKey === "#counter#eventual").length;
        const createWrites = eventualWrites();
        for (let i = 0; i < 12; i++) {
            await client.delete("big", `r${i}`);
        }
        await pipeline.drain();
        const deleted = await snapshotKey(admin, deployment.clientLayout, "big");

        // Assess
        assert.deepEqual([created.eventual, created.live, created.counted], [12, 12, 12]);
        assert.deepEqual([deleted.eventual, deleted.live, deleted.counted, deleted.softDeleted], [0, 0, 0, 12]);
        assert.deepEqual(
            sent.filter((r) => r.command === "TransactWriteItemsCommand" || r.table === deployment.clientLayout.tableName),
            [],
            "no transaction, and no request of the user's items (the client wrote the counted flag with each)",
        );
        assert.ok(createBatches >= 1);
        assert.equal(createWrites, createBatches, "one write of the key's eventual item per batch");
        assert.equal(eventualWrites(), batches);
        assert.deepEqual([await pipeline.depth(pipeline.queues.first), await pipeline.depth(pipeline.queues.fatal)], [0, 0]);
        pipeline.close();
        for (const c of [admin, consumerDynamo, streams]) {
            c.destroy();
        }
    });
});
