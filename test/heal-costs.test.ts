/**
 * What a heal and the client's calls cost, measured on DynamoDB Local with ReturnConsumedCapacity (table and index
 * units apart). A settler's heal of one listed key that corrects it, its mark taken from the index's query: in either
 * mode it reads best-effort and the key's items and writes twice (its correction and the mark's removal), 2 RCU and
 * 2 WCU for a small partition. The client's create and delete.
 */
import { strict as assert } from "node:assert";
import type { ConsumedCapacity, DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";
import { useEngine } from "./support/engine";
import { counterFixture, type CounterFixture } from "./support/counter-fixture";
import { labelOf, refuseRequests, type Label } from "./support/heal-traffic";
import { listedAt } from "./support/heal-probes";
import { healKey } from "../runtime/heal/heal";
import { dueKeys } from "../runtime/heal/settle";

interface Metered {
    readonly label: Label;
    readonly read: number;
    readonly write: number;
    readonly index: number;
}

/** Asks every request of `client` for its consumed capacity (table and indexes apart) and records it by label. */
function meter(client: DynamoDBClient, f: CounterFixture): Metered[] {
    const metered: Metered[] = [];
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        const label = labelOf(f.config, context.commandName ?? "", args.input as Record<string, unknown>);
        const result = await next({ ...args, input: { ...args.input, ReturnConsumedCapacity: "INDEXES" } as ServiceInputTypes });
        const raw = (result.output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] }).ConsumedCapacity;
        const consumed = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
        const isRead = /^(Get|Query|Scan|BatchGet|TransactGet)/.test(context.commandName ?? "");
        const table = consumed.reduce((n, c) => n + (c.Table?.CapacityUnits ?? c.CapacityUnits ?? 0), 0);
        const index = consumed.reduce(
            (n, c) => n + Object.values(c.GlobalSecondaryIndexes ?? {}).reduce((m, i) => m + (i.CapacityUnits ?? 0), 0),
            0,
        );
        metered.push({ label, read: isRead ? table : 0, write: isRead ? 0 : table, index });
        return result;
    };
    client.middlewareStack.add(middleware, { step: "initialize", name: "heal-costs-meter" });
    return metered;
}

const total = (metered: readonly Metered[], field: "read" | "write" | "index") => metered.reduce((n, m) => n + m[field], 0);
const shown = (metered: readonly Metered[]) =>
    metered.map((m) => `${m.label} ${m.read || m.write}${m.index > 0 ? ` + ${m.index} index` : ""}`).join(", ");

describe("what healing and the client's calls cost (DynamoDB Local, consumed capacity)", function () {
    const engine = useEngine();
    let f: CounterFixture;
    let settler: DynamoDBClient | undefined;

    afterEach(() => {
        f?.close();
        settler?.destroy();
        settler = undefined;
    });

    for (const mode of ["utilization", "strict"] as const) {
        const expected = { read: 2, write: 2 };
        it(`${mode}: the settler's heal of a listed key of three small items costs ${expected.read} RCU and ${expected.write} WCU`, async () => {
            // Prepare: three old lives, listed; utilization: the third one's +1 was lost; strict: a fourth life was
            // deleted, its release lost (its old tombstone removed by the consumer)
            f = await counterFixture(engine(), { mode });
            await f.client.create("k", "a");
            await f.client.create("k", "b");
            if (mode === "utilization") {
                const refusing = refuseRequests(f.clientDynamo, f.config, (label) => label === "+1");
                await f.client.create("k", "c");
                refusing.stop();
                f.clock.advance(2 * f.config.periodMs);
            } else {
                await f.client.create("k", "c");
                await f.client.create("k", "d");
                f.clock.advance(2 * f.config.periodMs);
                await f.heal("k");
                const refusing = refuseRequests(f.clientDynamo, f.config, (label) => label === "-1");
                await f.client.delete("k", "d");
                refusing.stop();
                await f.drain();
            }
            const before = await f.snapshot("k");
            settler = engine().dynamodb();
            const [listing] = await dueKeys({ config: f.config, dynamodb: settler }, 10);
            assert.equal(listing?.key, "k", "the key is listed");
            const metered = meter(settler, f);

            // Act
            const result = await healKey("k", { config: f.config, dynamodb: settler }, listing);

            // Assess
            assert.equal(result.drift, 1, "the heal corrected the key");
            assert.deepEqual([before.bestEffort, before.clientLive, before.softDeleted], [mode === "strict" ? 4 : 2, 3, 0]);
            assert.equal(await listedAt(f, "k"), undefined, "and took it off the index");
            const cost = `${shown(metered)}: ${total(metered, "read")} RCU, ${total(metered, "write")} WCU + ${total(metered, "index")} on the index`;
            assert.deepEqual({ read: total(metered, "read"), write: total(metered, "write") }, expected, cost);
        });
    }

    it("utilization: a create costs 2 WCU (its put and +1) and a delete 3 WCU and 1 RCU (its read, claim, -1 and soft delete): 3 WCU over the API's own put and soft delete", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "utilization" });
        const metered = meter(f.clientDynamo, f);

        // Act
        await f.client.create("k", "a");
        const created = metered.splice(0);
        await f.client.delete("k", "a");
        const deleted = metered.splice(0);

        // Assess
        assert.equal(shown(created), "put 1, +1 1");
        assert.equal(shown(deleted), "read item 1, claim 1, -1 1, soft delete 1");
        const own = [...created, ...deleted].filter((m) => m.label !== "put" && m.label !== "soft delete");
        assert.equal(total(own, "write"), 3, "the counter's writes: +1, claim, -1");
        assert.equal(total([...created, ...deleted], "index"), 0);
    });

    it("strict: a create costs 2 WCU (its reservation and put) and a delete 2 WCU and 2 RCU (its read, the generation's read, soft delete and release)", async () => {
        // Prepare
        f = await counterFixture(engine(), { mode: "strict" });
        const metered = meter(f.clientDynamo, f);

        // Act
        await f.client.create("k", "a");
        const created = metered.splice(0);
        await f.client.delete("k", "a");
        const deleted = metered.splice(0);

        // Assess
        assert.equal(shown(created), "+1 1, put 1");
        assert.equal(shown(deleted), "read item 1, read generation 1, soft delete 1, -1 1");
    });
});
