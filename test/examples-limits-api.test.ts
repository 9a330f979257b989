/**
 * The limits API's handler on DynamoDB Local: concurrent creates at a tenant's limit only ever get the
 * API's normal responses, strict mode never exceeds the limit, and the deployed bundle runs as is.
 */
import * as assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as path from "node:path";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { API_RESPONSES, ROUTES, createApiHandler, type ApiHandler, type CounterClient } from "../examples/limits-api/app/handler";
import { apiEnvironment, type ApiSettings } from "../examples/limits-api/app/settings";
import { buildApiBundle } from "../examples/limits-api/bundle";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { createCounterTable } from "../local/engine/table";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { DEFAULT_LAYOUT, clientEnvironment } from "../runtime/shared/config";
import { assertExact, counterFixture, type CounterFixture } from "./support/counter-fixture";
import { linkPackageInto } from "./support/example-link";

const LIMIT = 5;
const BURST = 40;

function event(routeKey: string, pathParameters: Record<string, string>, body?: unknown): APIGatewayProxyEventV2 {
    return {
        version: "2.0",
        routeKey,
        rawPath: "/",
        rawQueryString: "",
        headers: {},
        pathParameters,
        isBase64Encoded: false,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        requestContext: {} as APIGatewayProxyEventV2["requestContext"],
    };
}

const create = (tenant: string, id?: string, attributes?: Record<string, unknown>) =>
    event(ROUTES.create, { tenant }, id === undefined && attributes === undefined ? undefined : { id, attributes });
const remove = (tenant: string, id: string) => event(ROUTES.delete, { tenant, id });
const count = (tenant: string) => event(ROUTES.count, { tenant });

interface Answer {
    statusCode: number;
    body: Record<string, unknown>;
}

async function call(handler: ApiHandler, e: APIGatewayProxyEventV2): Promise<Answer> {
    const result = (await handler(e)) as APIGatewayProxyStructuredResultV2;
    return { statusCode: result.statusCode!, body: JSON.parse(result.body as string) as Record<string, unknown> };
}

/** "201", "409 LimitReached", ...: one line per response kind. */
function kind(answer: Answer): string {
    return typeof answer.body.error === "string" ? `${answer.statusCode} ${answer.body.error}` : String(answer.statusCode);
}

/** Every response kind the API documents. */
const NORMAL = new Set(Object.values(API_RESPONSES).map((r) => ("error" in r ? `${r.statusCode} ${r.error}` : String(r.statusCode))));

function tally(answers: readonly Answer[]): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const a of answers) {
        counts[kind(a)] = (counts[kind(a)] ?? 0) + 1;
    }
    return counts;
}

describe("examples/limits-api handler", () => {
    describe("answers (counter client stubbed)", () => {
        const stub = (overrides: Partial<CounterClient>): CounterClient => ({
            tryCreate: async () => ({ created: true, count: 1 }),
            delete: async () => ({ deleted: true }),
            count: async () => ({ value: 0 }),
            ...overrides,
        });

        it("maps a counter that cannot be read or reserved to the API's 503 TryAgain, with Retry-After", async () => {
            // Prepare
            const handler = createApiHandler({
                client: stub({ tryCreate: async () => ({ created: false, count: null, reason: "unavailable" }) }),
                limitFor: () => LIMIT,
            });
            // Act
            const result = (await handler(create("acme", "a"))) as APIGatewayProxyStructuredResultV2;
            // Assess
            assert.equal(result.statusCode, 503);
            assert.deepEqual(result.headers, { "content-type": "application/json", "Retry-After": "1" });
            assert.deepEqual(JSON.parse(result.body!), { error: "TryAgain", message: "the request could not be completed; try again" });
        });

        it("maps the client's InvalidArgumentError to 400 BadRequest with its message", async () => {
            // Prepare
            const handler = createApiHandler({
                client: stub({
                    tryCreate: async () =>
                        Promise.reject(new InvalidArgumentError("id", 'must not start with the reserved prefix "#counter#"')),
                }),
                limitFor: () => LIMIT,
            });
            // Act
            const answer = await call(handler, create("acme", "#counter#x"));
            // Assess
            assert.deepEqual(answer, {
                statusCode: 400,
                body: { error: "BadRequest", message: '[id] must not start with the reserved prefix "#counter#"' },
            });
        });

        it("answers a failed write of the item with the API's generic 500, and logs it", async () => {
            // Prepare
            const logged: unknown[] = [];
            const failure = Object.assign(new Error("Throughput exceeds the current capacity"), {
                name: "ProvisionedThroughputExceededException",
            });
            const handler = createApiHandler({
                client: stub({ tryCreate: async () => Promise.reject(failure) }),
                limitFor: () => LIMIT,
                logError: (message, error) => logged.push([message, error]),
            });
            // Act
            const answer = await call(handler, create("acme", "a"));
            // Assess
            assert.deepEqual(answer, { statusCode: 500, body: { error: "InternalError", message: "internal error" } });
            assert.deepEqual(logged, [[`${ROUTES.create} failed`, failure]]);
        });

        it("rejects a body that is not a JSON object, and an unknown route", async () => {
            // Prepare
            const handler = createApiHandler({ client: stub({}), limitFor: () => LIMIT });
            const badJson = { ...create("acme"), body: "{" };
            // Act
            const answers = [
                await call(handler, badJson),
                await call(handler, { ...create("acme"), body: "[1]" }),
                await call(handler, event("GET /", {})),
            ];
            // Assess
            assert.deepEqual(answers, [
                { statusCode: 400, body: { error: "BadRequest", message: "the body must be JSON" } },
                { statusCode: 400, body: { error: "BadRequest", message: "the body must be a JSON object" } },
                { statusCode: 404, body: { error: "NotFound", message: "no route GET /" } },
            ]);
        });
    });

    describe("on DynamoDB Local", () => {
        let engine: LocalEngine;
        const fixtures: CounterFixture[] = [];
        before(async () => {
            engine = await startEngine();
        });
        after(async () => {
            for (const f of fixtures) {
                f.close();
            }
            await engine?.stop();
        });

        async function setup(mode: "strict" | "utilization", options: Parameters<typeof counterFixture>[1] = {}) {
            const fixture = await counterFixture(engine, { ...options, mode });
            fixtures.push(fixture);
            const handler = createApiHandler({ client: fixture.client, limitFor: (tenant) => (tenant === "big" ? 1000 : LIMIT) });
            return { fixture, handler };
        }

        it("strict: a burst of concurrent creates gets exactly LIMIT 201s and 409 LimitReached for the rest; the table never holds more", async () => {
            // Prepare
            const { fixture, handler } = await setup("strict");
            // Act
            const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => call(handler, create("acme", `item-${i}`))));
            const before = await fixture.snapshot("acme");
            await fixture.emulator.drain();
            const after = await assertExact(fixture);
            // Assess
            assert.deepEqual(tally(answers), { "201": LIMIT, "409 LimitReached": BURST - LIMIT });
            for (const answer of answers.filter((a) => a.statusCode === 409)) {
                assert.deepEqual(answer.body, {
                    error: "LimitReached",
                    message: `tenant acme has reached its limit of ${LIMIT} items`,
                    limit: LIMIT,
                });
            }
            assert.equal(before.live, LIMIT);
            assert.equal(before.bestEffort, LIMIT);
            assert.deepEqual(after.get("acme"), { bestEffort: LIMIT, eventual: LIMIT, live: LIMIT, counted: LIMIT, softDeleted: 0 });
        });

        it("strict: deleting frees exactly one slot, and count reports the tenant's usage", async () => {
            // Prepare
            const { fixture, handler } = await setup("strict");
            for (let i = 0; i < LIMIT; i++) {
                assert.equal((await call(handler, create("acme", `item-${i}`))).statusCode, 201);
            }
            // Act
            const full = await call(handler, count("acme"));
            const deleted = await call(handler, remove("acme", "item-0"));
            const deletedAgain = await call(handler, remove("acme", "item-0"));
            const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => call(handler, create("acme", `again-${i}`))));
            await fixture.emulator.drain();
            const after = await assertExact(fixture);
            const counted = await call(handler, count("acme"));
            // Assess
            assert.deepEqual(full, { statusCode: 200, body: { tenant: "acme", count: LIMIT, limit: LIMIT, remaining: 0 } });
            assert.deepEqual(deleted, { statusCode: 200, body: { tenant: "acme", id: "item-0", deleted: true } });
            assert.deepEqual(deletedAgain, {
                statusCode: 404,
                body: { error: "NotFound", message: "item item-0 does not exist", id: "item-0" },
            });
            assert.deepEqual(tally(burst), { "201": 1, "409 LimitReached": 9 });
            assert.equal(after.get("acme")!.live, LIMIT);
            assert.deepEqual(counted, { statusCode: 200, body: { tenant: "acme", count: LIMIT, limit: LIMIT, remaining: 0 } });
        });

        it("strict: an existing id gets 409 AlreadyExists and gives its slot back", async () => {
            // Prepare
            const { fixture, handler } = await setup("strict");
            assert.equal((await call(handler, create("acme", "same"))).statusCode, 201);
            // Act
            const answers: Answer[] = [];
            for (let i = 0; i < 3; i++) {
                answers.push(await call(handler, create("acme", "same")));
            }
            // Concurrent duplicates each hold a slot while they try, so some may see the tenant full instead.
            const concurrent = await Promise.all(Array.from({ length: 8 }, () => call(handler, create("acme", "same"))));
            const s = await fixture.snapshot("acme");
            // Assess
            assert.deepEqual(
                answers.map((a) => a.body),
                Array(3).fill({ error: "AlreadyExists", message: "item same already exists", id: "same" }),
            );
            assert.deepEqual(
                Object.keys(tally(concurrent)).filter((k) => k !== "409 AlreadyExists" && k !== "409 LimitReached"),
                [],
                JSON.stringify(tally(concurrent)),
            );
            assert.deepEqual([s.live, s.bestEffort], [1, 1]);
        });

        it("utilization: concurrent creates get only 201 or 409 LimitReached, every 201 is a live item, and the count ends exact", async () => {
            // Prepare
            const { fixture, handler } = await setup("utilization");
            // Act
            const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => call(handler, create("acme", `item-${i}`))));
            await fixture.emulator.drain();
            const after = await assertExact(fixture);
            const next = await call(handler, create("acme", "one-more"));
            const counted = await call(handler, count("acme"));
            // Assess
            const created = answers.filter((a) => a.statusCode === 201).length;
            assert.deepEqual(tally(answers), { "201": created, ...(created < BURST ? { "409 LimitReached": BURST - created } : {}) });
            assert.ok(created >= LIMIT, `only ${created} of ${BURST} creates succeeded under a limit of ${LIMIT}`);
            assert.equal(after.get("acme")!.live, created);
            assert.deepEqual(next.body, {
                error: "LimitReached",
                message: `tenant acme has reached its limit of ${LIMIT} items`,
                limit: LIMIT,
            });
            assert.deepEqual(counted.body, { tenant: "acme", count: created, limit: LIMIT, remaining: 0 });
        });

        it("strict under injected throttling, conflicts and 500s: every answer is a normal one and the limit still holds", async () => {
            // Prepare
            const { fixture, handler } = await setup("strict", { clientFaults: { rate: 0.3, seed: 7 } });
            // Act
            const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => call(handler, create("acme", `item-${i}`))));
            const s = await fixture.snapshot("acme");
            // Assess
            const kinds = Object.keys(tally(answers));
            assert.deepEqual(
                kinds.filter((k) => !NORMAL.has(k)),
                [],
                `unexpected answers: ${JSON.stringify(tally(answers))}`,
            );
            const created = answers.filter((a) => a.statusCode === 201).length;
            assert.ok(s.live <= LIMIT, `live ${s.live} > limit ${LIMIT}`);
            assert.ok(created <= s.live, `${created} answered 201 but only ${s.live} items are live`);
            assert.ok(s.live <= s.bestEffort, `best-effort ${s.bestEffort} < live ${s.live}`);
            assert.ok(
                fixture.clientFaults!.injected.throttle +
                    fixture.clientFaults!.injected.conflict +
                    fixture.clientFaults!.injected["500-before"] +
                    fixture.clientFaults!.injected["500-after"] >
                    0,
            );
        });
    });

    describe("the deployed bundle", () => {
        let engine: LocalEngine;
        let outDir: string;
        const saved: Record<string, string | undefined> = {};
        let unlink: () => void = () => undefined;
        before(async () => {
            unlink = linkPackageInto(path.join(__dirname, "..", "examples", "limits-api"));
            engine = await startEngine();
            mkdirSync(path.join(__dirname, "..", "examples", "limits-api", "dist"), { recursive: true });
            // Inside the repository, so that the bundle's external AWS SDK resolves from its node_modules.
            outDir = mkdtempSync(path.join(__dirname, "..", "examples", "limits-api", "dist", "test-"));
        });
        after(async () => {
            for (const [name, value] of Object.entries(saved)) {
                if (value === undefined) {
                    delete process.env[name];
                } else {
                    process.env[name] = value;
                }
            }
            rmSync(outDir, { recursive: true, force: true });
            unlink();
            await engine?.stop();
        });

        it("is the same bytes for the same source, leaves the AWS SDK to the runtime and holds no local paths", () => {
            // Act
            const first = readFileSync(buildApiBundle(path.join(outDir, "a")));
            const second = readFileSync(buildApiBundle(path.join(outDir, "b")));
            // Assess
            assert.ok(first.equals(second));
            const text = first.toString("utf8");
            assert.ok(text.includes('require("@aws-sdk/client-dynamodb")'));
            assert.ok(!text.includes("DynamoDBClient=class"), "the DynamoDB client is bundled");
            assert.ok(!text.includes(path.resolve(__dirname, "..")), "the bundle holds an absolute path");
        });

        it("serves create, count and delete from the environment the program sets, against a real table", async () => {
            // Prepare
            const tableName = `limits-api-bundle-${process.pid}`;
            const reader = engine.dynamodb();
            await createCounterTable(reader, tableName);
            reader.destroy();
            const settings: ApiSettings = { mode: "strict", defaultLimit: 2, tenantLimits: { big: 3 } };
            const env: Record<string, string> = {
                ...apiEnvironment(clientEnvironment({ tableName, ...DEFAULT_LAYOUT }), settings),
                AWS_ENDPOINT_URL_DYNAMODB: engine.endpoint,
                AWS_REGION: "us-east-1",
                AWS_ACCESS_KEY_ID: "hybridcounterlocal",
                AWS_SECRET_ACCESS_KEY: "hybridcounterlocal",
            };
            for (const [name, value] of Object.entries(env)) {
                saved[name] = process.env[name];
                process.env[name] = value;
            }
            const bundle = buildApiBundle(path.join(outDir, "run"));
            // eslint-disable-next-line @typescript-eslint/no-require-imports -- a built bundle, loaded as Lambda loads it
            const { handler } = require(bundle) as { handler: ApiHandler };
            // Act
            const answers = [];
            for (const tenant of ["small", "big"]) {
                for (let i = 0; i < 4; i++) {
                    answers.push(kind(await call(handler, create(tenant, `item-${i}`))));
                }
            }
            const counted = await call(handler, count("big"));
            const deleted = await call(handler, remove("big", "item-0"));
            // Assess
            assert.deepEqual(answers, ["201", "201", "409 LimitReached", "409 LimitReached", "201", "201", "201", "409 LimitReached"]);
            assert.deepEqual(counted.body, { tenant: "big", count: 3, limit: 3, remaining: 0 });
            assert.equal(deleted.statusCode, 200);
        });
    });
});
