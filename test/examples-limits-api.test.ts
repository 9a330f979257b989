/**
 * The limits API's handler: its answers with the counter client stubbed; on DynamoDB Local, concurrent creates at a
 * tenant's stored limit only ever get the API's normal responses and the strict counter never exceeds the limit; and
 * the deployed bundle runs as is, from the environment the program sets.
 */
import * as assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as path from "node:path";
import { QueryCommand, type DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import {
    API_RESPONSES,
    ROUTES,
    createApiHandler,
    storeLimits,
    type ApiHandler,
    type CounterClient,
} from "../examples/limits-api/app/handler";
import { ApiSettingsError, isStoreLimitsEvent, storeLimitsEvent, validateLimitSettings } from "../examples/limits-api/app/settings";
import { buildApiBundle } from "../examples/limits-api/bundle";
import { startEngine, type LocalEngine } from "../local/engine/engine";
import { createCounterTable, createCountersTable } from "../local/engine/table";
import { injectFaults, seededRandom, type FaultStats } from "../local/engine/faults";
import { HybridCounterClient } from "../runtime/client/client";
import { InvalidArgumentError } from "../runtime/shared/errors";
import { DEFAULT_LAYOUT, clientEnvironment, type CounterConfig } from "../runtime/shared/config";
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
const setLimit = (tenant: string, limit: unknown) => event(ROUTES.setLimit, { tenant }, { limit });

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
            getLimit: async () => ({ limit: LIMIT }),
            setLimit: async () => undefined,
            setDefaultLimit: async () => undefined,
            ...overrides,
        });

        it("maps a counter that cannot be read or reserved to the API's 503 TryAgain, with Retry-After", async () => {
            // Prepare
            const handler = createApiHandler({
                client: stub({ tryCreate: async () => ({ created: false, count: null, reason: "unavailable" }) }),
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
            const handler = createApiHandler({ client: stub({}) });
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

        it("creates under the stored limit (no limit of its own), and names the limit only when it refuses", async () => {
            // Prepare
            const calls: unknown[][] = [];
            const handler = createApiHandler({
                client: stub({
                    tryCreate: async (...args) => {
                        calls.push(["tryCreate", ...args]);
                        return args[1] === "full" ? { created: false, count: LIMIT, reason: "limit" } : { created: true, count: 3 };
                    },
                    getLimit: async (key) => {
                        calls.push(["getLimit", key]);
                        return { limit: LIMIT };
                    },
                }),
            });
            // Act
            const created = await call(handler, create("acme", "a", { colour: "red" }));
            const refused = await call(handler, create("acme", "full"));
            // Assess
            assert.deepEqual(created, { statusCode: 201, body: { tenant: "acme", id: "a", count: 3 } });
            assert.deepEqual(refused, {
                statusCode: 409,
                body: { error: "LimitReached", message: `tenant acme has reached its limit of ${LIMIT} items`, limit: LIMIT },
            });
            assert.deepEqual(calls, [
                ["tryCreate", "acme", "a", undefined, { colour: "red" }],
                ["tryCreate", "acme", "full", undefined, undefined],
                ["getLimit", "acme"],
            ]);
        });

        it("counts against the stored limit, and reports none when no limit is stored", async () => {
            // Prepare
            const limited = createApiHandler({ client: stub({ count: async () => ({ value: 7 }), getLimit: async () => ({ limit: 5 }) }) });
            const unlimited = createApiHandler({
                client: stub({ count: async () => ({ value: 7 }), getLimit: async () => ({ limit: undefined }) }),
            });
            // Act / Assess
            assert.deepEqual(await call(limited, count("acme")), {
                statusCode: 200,
                body: { tenant: "acme", count: 7, limit: 5, remaining: 0 },
            });
            assert.deepEqual(await call(unlimited, count("acme")), {
                statusCode: 200,
                body: { tenant: "acme", count: 7, limit: null, remaining: null },
            });
        });

        it("sets and removes a tenant's limit, and refuses a limit that is not a non-negative integer", async () => {
            // Prepare
            const stored: Array<[string, number | null]> = [];
            const handler = createApiHandler({ client: stub({ setLimit: async (key, limit) => void stored.push([key, limit]) }) });
            // Act
            const answers = [
                await call(handler, setLimit("acme", 25)),
                await call(handler, setLimit("acme", null)),
                await call(handler, setLimit("acme", -1)),
                await call(handler, setLimit("acme", "10")),
            ];
            // Assess
            const refusal = (found: string) => ({
                statusCode: 400,
                body: {
                    error: "BadRequest",
                    message: `[limit] must be a non-negative integer; found ${found} (or null to remove the tenant's own limit)`,
                },
            });
            assert.deepEqual(answers, [
                { statusCode: 200, body: { tenant: "acme", limit: 25 } },
                { statusCode: 200, body: { tenant: "acme", limit: null } },
                refusal("-1"),
                refusal('"10"'),
            ]);
            assert.deepEqual(stored, [
                ["acme", 25],
                ["acme", null],
            ]);
        });
    });

    describe("the limits the program stores", () => {
        it("are checked, naming each bad value, before the program creates anything", () => {
            // Act / Assess
            assert.throws(
                () => storeLimitsEvent({ defaultLimit: -1, tenantLimits: { big: 1.5, ok: 3 } }),
                (error: unknown) =>
                    error instanceof ApiSettingsError &&
                    error.message ===
                        "invalid limits-api settings: [defaultLimit] must be a non-negative integer; found -1; " +
                            "[tenantLimits.big] must be a non-negative integer; found 1.5",
            );
            assert.deepEqual(validateLimitSettings({ defaultLimit: 0, tenantLimits: {} }), { defaultLimit: 0, tenantLimits: {} });
        });

        it("travel as the event the function tells from an HTTP request, and are stored default first", async () => {
            // Prepare
            const stored: unknown[][] = [];
            const client = {
                setDefaultLimit: async (limit: number | null) => void stored.push(["default", limit]),
                setLimit: async (key: string, limit: number | null) => void stored.push([key, limit]),
            } as unknown as CounterClient;
            const limitsEvent = storeLimitsEvent({ defaultLimit: 100, tenantLimits: { big: 5000, small: 10 } });
            // Act
            const result = await storeLimits(client, limitsEvent);
            // Assess
            assert.deepEqual(limitsEvent, { action: "storeLimits", defaultLimit: 100, tenantLimits: { big: 5000, small: 10 } });
            assert.deepEqual([isStoreLimitsEvent(limitsEvent), isStoreLimitsEvent(create("acme"))], [true, false]);
            assert.deepEqual(result, { stored: 3 });
            assert.deepEqual(stored, [
                ["default", 100],
                ["big", 5000],
                ["small", 10],
            ]);
        });
    });

    describe("on DynamoDB Local", () => {
        let engine: LocalEngine;
        const clients: DynamoDBClient[] = [];
        let tables = 0;
        before(async () => {
            engine = await startEngine();
        });
        after(async () => {
            for (const c of clients) {
                c.destroy();
            }
            await engine?.stop();
        });

        /** The two tables the component creates, and the API's handler over a strict client built as the function builds it. */
        async function setup(clientFaults?: { rate: number; seed: number }) {
            const tableName = `limits-api-${process.pid}-${++tables}`;
            const countersTableName = `${tableName}-counters`;
            const admin = engine.dynamodb();
            const dynamodb = engine.dynamodb();
            clients.push(admin, dynamodb);
            await createCounterTable(admin, tableName);
            await createCountersTable(admin, countersTableName, DEFAULT_LAYOUT, { healIndex: true });
            // The component's clientConfig for a strict counter: the client takes its mode from it.
            const client = new HybridCounterClient({
                ...DEFAULT_LAYOUT,
                tableName,
                countersTableName,
                counterMode: "strict",
                healQuietWindowSeconds: 600,
                dynamodb,
            });
            await client.setLimit("acme", LIMIT);
            // Faults, when asked for, from the first request of the test on.
            const faults: FaultStats | undefined =
                clientFaults && injectFaults(dynamodb, { ...clientFaults, random: seededRandom(clientFaults.seed) });
            const live = async (tenant: string) => {
                const page = await admin.send(
                    new QueryCommand({
                        TableName: tableName,
                        KeyConditionExpression: "pk = :pk",
                        ExpressionAttributeValues: { ":pk": { S: tenant } },
                        ConsistentRead: true,
                    }),
                );
                return (page.Items ?? []).filter((item) => item.deleted?.BOOL !== true).length;
            };
            return { handler: createApiHandler({ client }), client, live, faults };
        }

        it("strict: a burst of concurrent creates gets exactly LIMIT 201s and 409 LimitReached for the rest; the table never holds more", async () => {
            // Prepare
            const { handler, live } = await setup();
            // Act
            const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => call(handler, create("acme", `item-${i}`))));
            const counted = await call(handler, count("acme"));
            // Assess
            assert.deepEqual(tally(answers), { "201": LIMIT, "409 LimitReached": BURST - LIMIT });
            for (const answer of answers.filter((a) => a.statusCode === 409)) {
                assert.deepEqual(answer.body, {
                    error: "LimitReached",
                    message: `tenant acme has reached its limit of ${LIMIT} items`,
                    limit: LIMIT,
                });
            }
            assert.equal(await live("acme"), LIMIT);
            assert.deepEqual(counted.body, { tenant: "acme", count: LIMIT, limit: LIMIT, remaining: 0 });
        });

        it("strict: deleting frees exactly one slot, and count reports the tenant's usage", async () => {
            // Prepare
            const { handler, live } = await setup();
            for (let i = 0; i < LIMIT; i++) {
                assert.equal((await call(handler, create("acme", `item-${i}`))).statusCode, 201);
            }
            // Act
            const full = await call(handler, count("acme"));
            const deleted = await call(handler, remove("acme", "item-0"));
            const deletedAgain = await call(handler, remove("acme", "item-0"));
            const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => call(handler, create("acme", `again-${i}`))));
            const counted = await call(handler, count("acme"));
            // Assess
            assert.deepEqual(full, { statusCode: 200, body: { tenant: "acme", count: LIMIT, limit: LIMIT, remaining: 0 } });
            assert.deepEqual(deleted, { statusCode: 200, body: { tenant: "acme", id: "item-0", deleted: true } });
            assert.deepEqual(deletedAgain, {
                statusCode: 404,
                body: { error: "NotFound", message: "item item-0 does not exist", id: "item-0" },
            });
            assert.deepEqual(tally(burst), { "201": 1, "409 LimitReached": 9 });
            assert.equal(await live("acme"), LIMIT);
            assert.deepEqual(counted, { statusCode: 200, body: { tenant: "acme", count: LIMIT, limit: LIMIT, remaining: 0 } });
        });

        it("strict: an existing id gets 409 AlreadyExists and gives its slot back", async () => {
            // Prepare
            const { handler, client, live } = await setup();
            assert.equal((await call(handler, create("acme", "same"))).statusCode, 201);
            // Act
            const answers: Answer[] = [];
            for (let i = 0; i < 3; i++) {
                answers.push(await call(handler, create("acme", "same")));
            }
            // Concurrent duplicates each hold a slot while they try, so some may see the tenant full instead.
            const concurrent = await Promise.all(Array.from({ length: 8 }, () => call(handler, create("acme", "same"))));
            const value = await client.count("acme");
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
            assert.deepEqual([await live("acme"), value.bestEffort], [1, 1]);
        });

        it("strict: a tenant without its own limit runs under the stored default, and a limit set through the API applies at once", async () => {
            // Prepare
            const { handler, client, live } = await setup();
            await storeLimits(client, storeLimitsEvent({ defaultLimit: 2, tenantLimits: {} }));
            // Act
            const underDefault = await Promise.all(Array.from({ length: 6 }, (_, i) => call(handler, create("globex", `item-${i}`))));
            const raised = await call(handler, setLimit("globex", 3));
            const afterRaise = await Promise.all(Array.from({ length: 4 }, (_, i) => call(handler, create("globex", `more-${i}`))));
            // Assess
            assert.deepEqual(tally(underDefault), { "201": 2, "409 LimitReached": 4 });
            assert.deepEqual(raised, { statusCode: 200, body: { tenant: "globex", limit: 3 } });
            assert.deepEqual(tally(afterRaise), { "201": 1, "409 LimitReached": 3 });
            assert.equal(await live("globex"), 3);
        });

        it("strict under injected throttling, conflicts and 500s: every answer is a normal one and the limit still holds", async () => {
            // Prepare
            const { handler, client, live, faults } = await setup({ rate: 0.3, seed: 7 });
            // Act
            const answers = await Promise.all(Array.from({ length: BURST }, (_, i) => call(handler, create("acme", `item-${i}`))));
            const items = await live("acme");
            const { bestEffort } = await client.count("acme").catch(() => ({ bestEffort: Number.NaN }));
            // Assess
            const kinds = Object.keys(tally(answers));
            assert.deepEqual(
                kinds.filter((k) => !NORMAL.has(k)),
                [],
                `unexpected answers: ${JSON.stringify(tally(answers))}`,
            );
            const created = answers.filter((a) => a.statusCode === 201).length;
            assert.ok(items <= LIMIT, `live ${items} > limit ${LIMIT}`);
            assert.ok(created <= items, `${created} answered 201 but only ${items} items are live`);
            assert.ok(Number.isNaN(bestEffort) || items <= bestEffort, `best-effort ${bestEffort} < live ${items}`);
            assert.ok(
                faults!.injected.throttle + faults!.injected.conflict + faults!.injected["500-before"] + faults!.injected["500-after"] > 0,
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

        it("stores the limits and serves create, count and delete from the environment the program sets, against real tables", async () => {
            // Prepare
            const tableName = `limits-api-bundle-${process.pid}`;
            const countersTableName = `${tableName}-counters`;
            const reader = engine.dynamodb();
            await createCounterTable(reader, tableName);
            await createCountersTable(reader, countersTableName, DEFAULT_LAYOUT, { healIndex: true });
            reader.destroy();
            // The component's apiEnvironment for a strict counter, and nothing else.
            const config: CounterConfig = { ...DEFAULT_LAYOUT, tableName, countersTableName, mode: "strict", periodMs: 600_000 };
            const env: Record<string, string> = {
                ...clientEnvironment(config),
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
            const { handler: invoke } = require(bundle) as { handler: (event: unknown) => Promise<unknown> };
            const handler: ApiHandler = (e) => invoke(e) as ReturnType<ApiHandler>;
            // Act
            const stored = await invoke(storeLimitsEvent({ defaultLimit: 2, tenantLimits: { big: 3 } }));
            const answers = [];
            for (const tenant of ["small", "big"]) {
                for (let i = 0; i < 4; i++) {
                    answers.push(kind(await call(handler, create(tenant, `item-${i}`))));
                }
            }
            const counted = await call(handler, count("big"));
            const deleted = await call(handler, remove("big", "item-0"));
            // Assess
            assert.deepEqual(stored, { stored: 2 });
            assert.deepEqual(answers, ["201", "201", "409 LimitReached", "409 LimitReached", "201", "201", "201", "409 LimitReached"]);
            assert.deepEqual(counted.body, { tenant: "big", count: 3, limit: 3, remaining: 0 });
            assert.equal(deleted.statusCode, 200);
        });
    });
});
