import { strict as assert } from "node:assert";
import { ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { startEngine } from "../local/engine/engine";

describe("local engine", () => {
    it("starts DynamoDB Local on a loopback port and stops it", async () => {
        const engine = await startEngine();
        const client = engine.dynamodb();
        const tables = await client.send(new ListTablesCommand({}));
        assert.deepEqual(tables.TableNames, []);
        assert.match(engine.endpoint, /^http:\/\/127\.0\.0\.1:\d+$/);
        client.destroy();
        await engine.stop();
        await assert.rejects(client.send(new ListTablesCommand({})));
    });
});
