import {
    CreateTableCommand,
    DeleteItemCommand,
    PutItemCommand,
    ScanCommand,
    UpdateItemCommand,
    type AttributeValue,
    type DynamoDBClient,
} from "@aws-sdk/client-dynamodb";
import { strict as assert } from "node:assert";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { seededRandom } from "../local/engine/faults";
import { canonical, Replicator, TtlSweep, validateReplicatorOptions, type ReplicaEngine } from "../local/regions";

const REGIONS = ["r-a", "r-b", "r-c"] as const;
/** The user's table (a stream of both images, as the component declares it) and a table with no stream, as a counters table may be. */
const USERS = "users";
const COUNTERS = "counters";

describe("the replicator over DynamoDB Local engines (local/regions/replicator.ts)", function () {
    let engines: LocalEngine[] = [];
    let clients: DynamoDBClient[] = [];
    let replicas: ReplicaEngine[] = [];
    let run = 0;
    let users = USERS;
    let counters = COUNTERS;

    before(async () => {
        engines = await Promise.all(REGIONS.map(() => startEngine({ parity: false })));
        clients = engines.map((e) => e.dynamodb({ direct: true }));
        replicas = engines.map((e, i) => ({ region: REGIONS[i]!, dynamodb: clients[i]!, streams: e.streams() }));
    });
    after(async () => {
        clients.forEach((c) => c.destroy());
        await Promise.all(engines.map((e) => e.stop()));
    });
    // Fresh tables for every test: a replicator reads its tables' streams from their first record.
    beforeEach(async () => {
        run++;
        users = `${USERS}-${run}`;
        counters = `${COUNTERS}-${run}`;
        for (const client of clients) {
            await client.send(
                new CreateTableCommand({
                    TableName: users,
                    BillingMode: "PAY_PER_REQUEST",
                    AttributeDefinitions: [
                        { AttributeName: "pk", AttributeType: "S" },
                        { AttributeName: "sk", AttributeType: "S" },
                    ],
                    KeySchema: [
                        { AttributeName: "pk", KeyType: "HASH" },
                        { AttributeName: "sk", KeyType: "RANGE" },
                    ],
                    StreamSpecification: { StreamEnabled: true, StreamViewType: "NEW_AND_OLD_IMAGES" },
                }),
            );
            await client.send(
                new CreateTableCommand({
                    TableName: counters,
                    BillingMode: "PAY_PER_REQUEST",
                    AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
                    KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
                }),
            );
        }
    });

    const region = (name: (typeof REGIONS)[number]) => clients[REGIONS.indexOf(name)]!;
    const put = (name: (typeof REGIONS)[number], pk: string, sk: string, extra: Record<string, AttributeValue> = {}) =>
        region(name).send(new PutItemCommand({ TableName: users, Item: { pk: { S: pk }, sk: { S: sk }, ...extra } }));
    const scan = async (client: DynamoDBClient, table: string): Promise<string[]> => {
        const items = (await client.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [];
        return items.map((i) => canonical(i)).sort();
    };
    const everywhere = async (table: string) => Promise.all(clients.map((c) => scan(c, table)));
    /** Waits until the replicator has read `n` records from `name`'s streams. */
    const readFrom = async (replicator: Replicator, name: string, n: number) => {
        const deadline = Date.now() + 30_000;
        while (replicator.regionStats(name).read < n) {
            assert.ok(Date.now() < deadline, `the replicator did not read ${n} records of ${name}`);
            await new Promise((r) => setTimeout(r, 10));
        }
    };

    it("refuses options that cannot replicate, naming the field", () => {
        const problems = validateReplicatorOptions({
            engines: [replicas[0]!, { ...replicas[1]!, region: replicas[0]!.region }],
            tables: [],
            delayMs: -1,
            lanes: 0,
        });
        assert.deepEqual(problems, [
            "[engines] regions must be distinct (got r-a, r-a)",
            "[tables] must name at least one table",
            "[delayMs] must be a number of milliseconds, 0 or more (got -1)",
            "[lanes] must be an integer from 1 to 64 (got 0)",
        ]);
    });

    it("converges: every region's writes (puts, updates, the table without a stream of its own) reach every region", async () => {
        const replicator = await Replicator.start({ engines: replicas, tables: [users, counters], delayMs: 30 });
        try {
            for (const [i, name] of REGIONS.entries()) {
                for (let j = 0; j < 5; j++) {
                    await put(name, `tenant-${j}`, `${name}-item-${j}`, { n: { N: String(i * 10 + j) } });
                }
                await region(name).send(
                    new UpdateItemCommand({
                        TableName: counters,
                        Key: { id: { S: `${name}#best-effort` } },
                        UpdateExpression: "ADD #c :one",
                        ExpressionAttributeNames: { "#c": "count" },
                        ExpressionAttributeValues: { ":one": { N: "1" } },
                    }),
                );
            }
            await replicator.drain();
            const [a, b, c] = await everywhere(users);
            assert.equal(a!.length, 15);
            assert.deepEqual(b, a);
            assert.deepEqual(c, a);
            const [ca, cb, cc] = await everywhere(counters);
            assert.equal(ca!.length, 3);
            assert.deepEqual(cb, ca);
            assert.deepEqual(cc, ca);
            for (const name of REGIONS) {
                const s = replicator.regionStats(name);
                // 5 items and 1 counter made here; 12 made elsewhere applied here, each back once in this region's stream.
                assert.equal(s.sent, 6, name);
                assert.equal(s.applied, 12, name);
                assert.equal(s.echoes, 12, name);
                assert.equal(s.read, 18, name);
                assert.equal(s.lost + s.superseded + s.unchanged, 0, name);
            }
        } finally {
            await replicator.stop();
        }
    });

    it("sends no echo: a replicated write is recognised in its target's stream and not sent on", async () => {
        const replicator = await Replicator.start({ engines: replicas, tables: [users, counters] });
        try {
            await put("r-a", "tenant-0", "x", { v: { S: "a" } });
            await replicator.drain();
            await replicator.drain();
            assert.deepEqual(replicator.regionStats("r-a"), {
                read: 1,
                sent: 1,
                echoes: 0,
                superseded: 0,
                applied: 0,
                unchanged: 0,
                lost: 0,
                retries: 0,
            });
            for (const name of ["r-b", "r-c"] as const) {
                const s = replicator.regionStats(name);
                assert.deepEqual([s.read, s.sent, s.applied, s.echoes], [1, 0, 1, 1], name);
            }
            assert.equal(replicator.backlog, 0);
        } finally {
            await replicator.stop();
        }
    });

    it("resolves concurrent writes to one item last-writer-wins: the later time, then the region name on a tie", async () => {
        let clock = 1_000_000;
        const replicator = await Replicator.start({ engines: replicas, tables: [users], delayMs: 1_000, now: () => clock });
        try {
            // A tie: both writes read at the same time on the replicator's clock. r-b's name sorts last: it wins.
            await put("r-a", "tenant-0", "tie", { v: { S: "from-a" } });
            await put("r-b", "tenant-0", "tie", { v: { S: "from-b" } });
            await readFrom(replicator, "r-a", 1);
            await readFrom(replicator, "r-b", 1);
            // The later write wins whatever the names: r-b writes first, r-a a millisecond later on the clock.
            await put("r-b", "tenant-0", "later", { v: { S: "from-b" } });
            await readFrom(replicator, "r-b", 2);
            clock += 1;
            await put("r-a", "tenant-0", "later", { v: { S: "from-a" } });
            await readFrom(replicator, "r-a", 2);
            // Nothing is applied before the delay has passed on the replicator's clock.
            assert.equal(replicator.regionStats("r-c").applied, 0);
            clock += 1_000;
            await replicator.drain({ timeoutMs: 20_000 });
            const [a, b, c] = await everywhere(users);
            const expected = [
                canonical({ pk: { S: "tenant-0" }, sk: { S: "later" }, v: { S: "from-a" } }),
                canonical({ pk: { S: "tenant-0" }, sk: { S: "tie" }, v: { S: "from-b" } }),
            ].sort();
            assert.deepEqual(a, expected);
            assert.deepEqual(b, expected);
            assert.deepEqual(c, expected);
            // r-a lost "tie" to r-b and r-b lost "later" to r-a: each applied the other's winning version once and
            // refused the losing one; r-c applied both versions of both items in some order, the loser refused or replaced.
            assert.equal(replicator.regionStats("r-a").lost, 1);
            assert.equal(replicator.regionStats("r-b").lost, 1);
            assert.equal(replicator.regionStats("r-a").applied, 1);
            assert.equal(replicator.regionStats("r-b").applied, 1);
            const c3 = replicator.regionStats("r-c");
            assert.equal(c3.applied + c3.lost, 4);
        } finally {
            await replicator.stop();
        }
    });

    it("replicates deletes, and a delete and a later re-create of one id converge", async () => {
        const replicator = await Replicator.start({ engines: replicas, tables: [users], delayMs: 10 });
        try {
            await put("r-a", "tenant-0", "gone", { v: { S: "1" } });
            await put("r-a", "tenant-0", "back", { v: { S: "1" } });
            await replicator.drain();
            await region("r-b").send(new DeleteItemCommand({ TableName: users, Key: { pk: { S: "tenant-0" }, sk: { S: "gone" } } }));
            await region("r-c").send(new DeleteItemCommand({ TableName: users, Key: { pk: { S: "tenant-0" }, sk: { S: "back" } } }));
            await replicator.drain();
            await put("r-b", "tenant-0", "back", { v: { S: "2" } });
            await replicator.drain();
            const expected = [canonical({ pk: { S: "tenant-0" }, sk: { S: "back" }, v: { S: "2" } })];
            for (const items of await everywhere(users)) {
                assert.deepEqual(items, expected);
            }
        } finally {
            await replicator.stop();
        }
    });

    it("cuts a paused region off both ways, and catches it up on resume", async () => {
        const replicator = await Replicator.start({ engines: replicas, tables: [users], delayMs: 10 });
        try {
            replicator.pause("r-c");
            await put("r-a", "tenant-0", "from-a");
            await put("r-c", "tenant-0", "from-c");
            await replicator.drain();
            const [a, b, c] = await everywhere(users);
            const item = (sk: string) => canonical({ pk: { S: "tenant-0" }, sk: { S: sk } });
            assert.deepEqual(a, [item("from-a")]);
            assert.deepEqual(b, [item("from-a")]);
            assert.deepEqual(c, [item("from-c")]);
            assert.equal(replicator.backlog, 3, "r-a's write waits for r-c, r-c's for r-a and r-b");
            replicator.resume("r-c");
            await replicator.drain();
            for (const items of await everywhere(users)) {
                assert.deepEqual(items, [item("from-a"), item("from-c")]);
            }
            assert.equal(replicator.backlog, 0);
        } finally {
            await replicator.stop();
        }
    });

    it("converges under concurrent random writes, updates and deletes of a few items in every region", async () => {
        const replicator = await Replicator.start({ engines: replicas, tables: [users], delayMs: 5, lanes: 4 });
        try {
            const random = seededRandom(7);
            const ops = Array.from({ length: 300 }, (_, i) => ({
                region: REGIONS[Math.floor(random() * 3)]!,
                sk: `item-${Math.floor(random() * 6)}`,
                kind: random(),
                i,
            }));
            // Three writers per region at a time: writes to one item from several regions race the replication.
            const next = { i: 0 };
            await Promise.all(
                Array.from({ length: 9 }, async () => {
                    for (let op = ops[next.i++]; op !== undefined; op = ops[next.i++]) {
                        const key = { pk: { S: "tenant-0" }, sk: { S: op.sk } };
                        if (op.kind < 0.25) {
                            await region(op.region).send(new DeleteItemCommand({ TableName: users, Key: key }));
                        } else if (op.kind < 0.5) {
                            await region(op.region).send(
                                new UpdateItemCommand({
                                    TableName: users,
                                    Key: key,
                                    UpdateExpression: "ADD #n :one SET #w = :w",
                                    ExpressionAttributeNames: { "#n": "n", "#w": "writer" },
                                    ExpressionAttributeValues: { ":one": { N: "1" }, ":w": { S: op.region } },
                                }),
                            );
                        } else {
                            await put(op.region, "tenant-0", op.sk, { op: { N: String(op.i) }, writer: { S: op.region } });
                        }
                    }
                }),
            );
            await replicator.drain();
            const [a, b, c] = await everywhere(users);
            assert.deepEqual(b, a);
            assert.deepEqual(c, a);
            const total = REGIONS.reduce((n, r) => n + replicator.regionStats(r).sent, 0);
            assert.ok(total > 0 && total <= 300, `writes sent: ${total}`);
        } finally {
            await replicator.stop();
        }
    });

    describe("the counters table's TTL, run in every replica (local/regions/ttl-sweep.ts)", () => {
        const expires = "hc_expires";
        const counter = (id: string, extra: Record<string, AttributeValue> = {}) => ({ id: { S: id }, ...extra });
        const putCounter = (name: (typeof REGIONS)[number], item: Record<string, AttributeValue>) =>
            region(name).send(new PutItemCommand({ TableName: counters, Item: item }));
        const sweep = (name: (typeof REGIONS)[number], skewMs: number, client = region(name)) =>
            new TtlSweep({ dynamodb: client, table: counters, attribute: expires, now: () => Date.now() + skewMs });

        it("deletes an item whose expiry passed, in the region whose copy expired, and the delete reaches every region; never an item still live anywhere", async () => {
            // Prepare: each region's own items (their regional prefix), two of them expired, as the counters table holds them:
            // a day of usage past its retention, a stream shard's progress two days on, an eventual item (no expiry).
            const nowSeconds = Math.floor(Date.now() / 1000);
            const expiredA = counter("#counter#@r-a#usage#2026-01-01", { [expires]: { N: String(nowSeconds - 10) }, creates: { N: "3" } });
            const expiredB = counter("#counter#@r-b#usage#2026-01-02", { [expires]: { N: String(nowSeconds - 5) }, creates: { N: "1" } });
            const progressB = counter("#counter#@r-b#shard#s-1", { [expires]: { N: String(nowSeconds + 48 * 3600) } });
            const eventualC = counter("#counter#@r-c#eventual", { count: { N: "3" } });
            const replicator = await Replicator.start({ engines: replicas, tables: [users, counters], delayMs: 20 });
            try {
                await putCounter("r-a", expiredA);
                await putCounter("r-b", expiredB);
                await putCounter("r-b", progressB);
                await putCounter("r-c", eventualC);
                await replicator.drain();
                // Act: r-a's replica sweeps first (its clock on time), then r-b's (a minute behind) and r-c's (a minute ahead).
                const [a, b, c] = [sweep("r-a", 0), sweep("r-b", -60_000), sweep("r-c", 60_000)];
                const first = await a.sweep();
                await replicator.drain();
                const later = [await b.sweep(), await c.sweep()];
                await replicator.drain();

                // Assess: r-a's copies of both expired items went, and the deletes replicated; the live items stayed everywhere.
                assert.deepEqual([first, ...later], [2, 0, 0]);
                const live = [canonical(progressB), canonical(eventualC)].sort();
                for (const items of await everywhere(counters)) {
                    assert.deepEqual(items, live);
                }
                assert.equal(replicator.regionStats("r-a").sent, 1 + 2, "r-a's own item, then its two TTL deletes");
            } finally {
                await replicator.stop();
            }
        });

        it("leaves an item rewritten with a later expiry between the sweep's scan and its delete", async () => {
            // Prepare: an expired item, and a writer that extends its expiry just before the sweep's delete reaches it.
            const nowSeconds = Math.floor(Date.now() / 1000);
            await putCounter("r-a", counter("#counter#@r-a#shard#s-2", { [expires]: { N: String(nowSeconds - 1) } }));
            const swept = engines[0]!.dynamodb({ direct: true });
            swept.middlewareStack.add(
                (next, context) => async (args) => {
                    if (context.commandName === "DeleteItemCommand") {
                        await region("r-a").send(
                            new UpdateItemCommand({
                                TableName: counters,
                                Key: { id: { S: "#counter#@r-a#shard#s-2" } },
                                UpdateExpression: "SET #e = :later",
                                ExpressionAttributeNames: { "#e": expires },
                                ExpressionAttributeValues: { ":later": { N: String(nowSeconds + 3600) } },
                            }),
                        );
                    }
                    return next(args);
                },
                { step: "initialize", name: "rewriteBeforeDelete" },
            );

            // Act
            const deleted = await sweep("r-a", 0, swept).sweep();

            // Assess
            assert.equal(deleted, 0);
            assert.deepEqual(await scan(region("r-a"), counters), [
                canonical(counter("#counter#@r-a#shard#s-2", { [expires]: { N: String(nowSeconds + 3600) } })),
            ]);
            swept.destroy();
        });
    });
});
