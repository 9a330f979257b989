/**
 * Strict mode: a life that may have two items gives its slot back once (runtime/shared/strict-ledger.ts), staged on
 * DynamoDB Local. The create's first put attempt commits and its answer is lost; before the call marks and
 * inspects, another caller deletes the life and it is removed without a trace on the marker (reconcile's purge
 * while the consumer lags, or TTL). The call must not put the life again, and no later delete may give its slot
 * back a second time.
 */
import {
    DeleteItemCommand,
    GetItemCommand,
    type ServiceInputTypes,
    type ServiceOutputTypes,
    type UpdateItemCommandInput,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { strict as assert } from "node:assert";
import { HybridCounterClient } from "../runtime/client/client";
import { reconcileKey } from "../runtime/heal/reconcile";
import { markerSortKey } from "../runtime/shared/config";
import type { FatalMessage } from "../runtime/stream/fatal";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { useEngine } from "./support/engine";

/** A 500 after the write committed: the client cannot tell whether it did. */
function lostResponse(): Error {
    return Object.assign(new Error("response lost after commit"), {
        name: "InternalServerError",
        $metadata: { httpStatusCode: 500 },
        $fault: "server",
    });
}

function otherCaller(fixture: CounterFixture, dynamodb: HybridCounterClient["dynamodb"]): HybridCounterClient {
    return new HybridCounterClient({
        ...fixture.layout,
        tableName: fixture.tableName,
        countersTableName: fixture.countersTableName,
        dynamodb,
        mode: "strict",
    });
}

describe("strict mode: a life that may have two items gives its slot back once", function () {
    const engine = useEngine();

    for (const remover of ["reconcile", "TTL"] as const) {
        it(`a life deleted and removed by ${remover} while its create is in doubt is not put again, nor released twice`, async () => {
            // Prepare: the first put attempt commits and its answer is lost; at the call's next write, another caller
            // deletes the life (releasing its slot) and it is removed, leaving no life on the marker.
            const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate" });
            const other = otherCaller(fixture, engine().dynamodb());
            const parked: FatalMessage[] = [];
            let puts = 0;
            let staged = false;
            const stage: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
                if (context.commandName === "PutItemCommand" && ++puts === 1) {
                    await next(args);
                    throw lostResponse();
                }
                const input = args.input as UpdateItemCommandInput;
                if (!staged && context.commandName === "UpdateItemCommand" && input.Key?.sk?.S === markerSortKey(fixture.layout, "x")) {
                    staged = true;
                    assert.deepEqual(await other.delete("k", "x"), { deleted: true });
                    if (remover === "reconcile") {
                        await reconcileKey("k", {
                            config: fixture.config,
                            dynamodb: fixture.consumerDynamo,
                            fatal: { park: async (m: FatalMessage) => (parked.push(m), true) },
                        });
                    } else {
                        await fixture.reader.send(
                            new DeleteItemCommand({ TableName: fixture.tableName, Key: { pk: { S: "k" }, sk: { S: "x" } } }),
                        );
                    }
                }
                return next(args);
            };
            fixture.clientDynamo.middlewareStack.add(stage, { step: "initialize", name: "stage" });

            // Act: the call goes on; then the pipeline drains and two creates try the key at limit 1.
            const answer = await fixture.client.tryCreate("k", "x", 1);
            const afterCall = await fixture.observe("k");
            await fixture.emulator.drain();
            const y = await other.tryCreate("k", "y", 1);
            const z = await other.tryCreate("k", "z", 1);
            await fixture.emulator.drain();

            // Assess: the call's life existed (it answers created) and is not put again; one slot for one live item.
            assert.equal(staged, true);
            assert.equal(puts, 1, "the put is not repeated over a life a delete gave back");
            assert.equal(answer.created, true);
            assert.equal(afterCall.clientLive, 0);
            assert.deepEqual([y.created, z.created], [true, false]);
            const end = await fixture.observe("k");
            assert.equal(end.clientLive, 1);
            assert.equal(end.bestEffort, 1);
            assert.equal(parked.length, 0);
            fixture.close();
        });
    }

    it("a put whose attempts never land leaves a marker reconcile takes for no marker, not a bad one", async () => {
        // Prepare: every put attempt fails in doubt, so the call marks the life and gives up.
        const fixture = await counterFixture(engine(), { mode: "strict", placement: "separate" });
        const dynamodb = engine().dynamodb();
        const lose: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
            if (context.commandName === "PutItemCommand") {
                throw lostResponse();
            }
            return next(args);
        };
        dynamodb.middlewareStack.add(lose, { step: "initialize", name: "lose" });
        const caller = otherCaller(fixture, dynamodb);
        const answer = await caller.tryCreate("k", "x", 3).catch((error: Error) => error.name);
        const marker = await fixture.reader.send(
            new GetItemCommand({
                TableName: fixture.countersTableName,
                Key: { pk: { S: "k" }, sk: { S: markerSortKey(fixture.layout, "x") } },
                ConsistentRead: true,
            }),
        );

        // Act
        const parked: FatalMessage[] = [];
        const fatal = { park: async (m: FatalMessage) => (parked.push(m), true) };
        const runs = [
            await reconcileKey("k", { config: fixture.config, dynamodb: fixture.consumerDynamo, fatal }),
            await reconcileKey("k", { config: fixture.config, dynamodb: fixture.consumerDynamo, fatal }),
        ];

        // Assess: the mark is there, and nothing is parked or counted for it.
        assert.equal(answer, "InternalServerError");
        assert.notEqual(marker.Item, undefined, "the call marked the life before its repeat");
        assert.equal(parked.length, 0);
        assert.deepEqual(
            runs.map((r) => r.incomplete),
            [false, false],
        );
        fixture.close();
    });
});
