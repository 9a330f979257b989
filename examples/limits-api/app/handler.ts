/**
 * The limits API: create, delete and count a tenant's items, and set a tenant's limit.
 *
 * Pure request handling: the counter client is passed in, so the same code runs in Lambda (app/lambda.ts) and in
 * tests against DynamoDB Local. The limits are the counter's own, stored with the counter (`setLimit`,
 * `setDefaultLimit`): a create runs under the tenant's stored limit, else the stored default. Every response is one
 * of {@link API_RESPONSES}: a full tenant gets the API's ordinary "limit reached" answer, and a counter that cannot
 * be read gets the ordinary "try again" answer. The counter adds no new kind of error.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from "aws-lambda";
import { randomUUID } from "node:crypto";
import { limitProblem, type StoreLimitsEvent } from "./settings";

/** The HTTP API's routes (API Gateway route keys). */
export const ROUTES = Object.freeze({
    create: "POST /tenants/{tenant}/items",
    delete: "DELETE /tenants/{tenant}/items/{id}",
    count: "GET /tenants/{tenant}/count",
    setLimit: "PUT /tenants/{tenant}/limit",
});

/**
 * Every response this API returns: status and `error` code (none for successes). A client of the API
 * handles exactly these.
 */
export const API_RESPONSES = Object.freeze({
    created: { statusCode: 201 },
    deleted: { statusCode: 200 },
    counted: { statusCode: 200 },
    limitSet: { statusCode: 200 },
    badRequest: { statusCode: 400, error: "BadRequest" },
    notFound: { statusCode: 404, error: "NotFound" },
    alreadyExists: { statusCode: 409, error: "AlreadyExists" },
    limitReached: { statusCode: 409, error: "LimitReached" },
    internalError: { statusCode: 500, error: "InternalError" },
    tryAgain: { statusCode: 503, error: "TryAgain" },
});

/**
 * The methods of `HybridCounterClient` (hybrid-counter/runtime) the API uses; a HybridCounterClient is one.
 * Declared here so this module needs nothing but types to be tested.
 */
export interface CounterClient {
    /** With no `limit`, the key's stored limit applies, else the stored default. */
    tryCreate(
        key: string,
        id: string,
        limit?: number,
        attributes?: Record<string, unknown>,
    ): Promise<{ readonly created: boolean; readonly count: number | null; readonly reason?: "limit" | "exists" | "unavailable" }>;
    delete(key: string, id: string): Promise<{ readonly deleted: boolean }>;
    count(key: string): Promise<{ readonly value: number }>;
    getLimit(key: string): Promise<{ readonly limit: number | undefined }>;
    setLimit(key: string, limit: number | null): Promise<void>;
    setDefaultLimit(limit: number | null): Promise<void>;
}

export interface ApiHandlerDeps {
    readonly client: CounterClient;
    /** Ids for items created without one. @default randomUUID */
    readonly newId?: () => string;
    /** Where unexpected errors are logged. @default console.error */
    readonly logError?: (message: string, error: unknown) => void;
}

export type ApiHandler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

/** The body of `POST /tenants/{tenant}/items`: an optional id and the item's own attributes. */
interface CreateBody {
    readonly id?: string;
    readonly attributes?: Record<string, unknown>;
}

class BadRequest extends Error {}

export function createApiHandler(deps: ApiHandlerDeps): ApiHandler {
    const newId = deps.newId ?? randomUUID;
    const logError = deps.logError ?? ((message: string, error: unknown) => console.error(message, error));

    return async (event) => {
        try {
            switch (event.routeKey) {
                case ROUTES.create:
                    return await create(deps.client, event, newId);
                case ROUTES.delete: {
                    const tenant = pathParameter(event, "tenant");
                    const id = pathParameter(event, "id");
                    const { deleted } = await deps.client.delete(tenant, id);
                    return deleted
                        ? respond(API_RESPONSES.deleted.statusCode, { tenant, id, deleted: true })
                        : failure("notFound", `item ${id} does not exist`, { id });
                }
                case ROUTES.count: {
                    const tenant = pathParameter(event, "tenant");
                    const [{ value }, { limit }] = await Promise.all([deps.client.count(tenant), deps.client.getLimit(tenant)]);
                    return respond(API_RESPONSES.counted.statusCode, {
                        tenant,
                        count: value,
                        limit: limit ?? null,
                        remaining: limit === undefined ? null : Math.max(0, limit - value),
                    });
                }
                case ROUTES.setLimit: {
                    const tenant = pathParameter(event, "tenant");
                    const limit = parseLimitBody(event);
                    await deps.client.setLimit(tenant, limit);
                    return respond(API_RESPONSES.limitSet.statusCode, { tenant, limit });
                }
                default:
                    return failure("notFound", `no route ${event.routeKey}`);
            }
        } catch (error) {
            if (error instanceof BadRequest || isInvalidArgument(error)) {
                return failure("badRequest", (error as Error).message);
            }
            // The error of the item's own write (or read), as the API answered before it had a counter.
            logError(`${event.routeKey} failed`, error);
            return failure("internalError", "internal error");
        }
    };
}

/** `POST /tenants/{tenant}/items`: a create under the tenant's stored limit (else the stored default). */
async function create(
    client: CounterClient,
    event: APIGatewayProxyEventV2,
    newId: () => string,
): Promise<APIGatewayProxyStructuredResultV2> {
    const tenant = pathParameter(event, "tenant");
    const body = parseCreateBody(event);
    const id = body.id ?? newId();
    const result = await client.tryCreate(tenant, id, undefined, body.attributes);
    if (result.created) {
        return respond(API_RESPONSES.created.statusCode, { tenant, id, count: result.count });
    }
    switch (result.reason) {
        case "limit": {
            // A refusal is the rare path: it reads the limit once more, to name it.
            const { limit } = await client.getLimit(tenant);
            return failure("limitReached", `tenant ${tenant} has reached its limit of ${limit} items`, { limit: limit ?? null });
        }
        case "exists":
            return failure("alreadyExists", `item ${id} already exists`, { id });
        default:
            // The counter could not be read or reserved: nothing was created, the caller retries.
            return failure("tryAgain", "the request could not be completed; try again", {}, { "Retry-After": "1" });
    }
}

/**
 * Stores the limits the program deploys with (app/settings.ts): the default, then each tenant's own. Run again with
 * the same event, it stores the same values.
 */
export async function storeLimits(client: CounterClient, event: StoreLimitsEvent): Promise<{ stored: number }> {
    await client.setDefaultLimit(event.defaultLimit);
    for (const [tenant, limit] of Object.entries(event.tenantLimits)) {
        await client.setLimit(tenant, limit);
    }
    return { stored: 1 + Object.keys(event.tenantLimits).length };
}

/** The client rejects bad keys, ids and attributes with InvalidArgumentError before writing anything. */
function isInvalidArgument(error: unknown): boolean {
    return error instanceof Error && error.name === "InvalidArgumentError";
}

function pathParameter(event: APIGatewayProxyEventV2, name: string): string {
    const value = event.pathParameters?.[name];
    if (value === undefined || value.length === 0) {
        throw new BadRequest(`path parameter ${name} is required`);
    }
    return value;
}

/** The body as a JSON object; undefined when there is none. */
function jsonBody(event: APIGatewayProxyEventV2): Record<string, unknown> | undefined {
    if (event.body === undefined || event.body.length === 0) {
        return undefined;
    }
    const text = event.isBase64Encoded ? Buffer.from(event.body, "base64").toString("utf8") : event.body;
    let parsed: unknown;
    try {
        parsed = JSON.parse(text);
    } catch {
        throw new BadRequest("the body must be JSON");
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new BadRequest("the body must be a JSON object");
    }
    return parsed as Record<string, unknown>;
}

/** The body of `PUT /tenants/{tenant}/limit`: `{"limit": <non-negative integer>}`, or `{"limit": null}` to remove it. */
function parseLimitBody(event: APIGatewayProxyEventV2): number | null {
    const limit = jsonBody(event)?.limit;
    if (limit === null) {
        return null;
    }
    const problem = limitProblem("limit", limit);
    if (problem !== undefined) {
        throw new BadRequest(`${problem} (or null to remove the tenant's own limit)`);
    }
    return limit as number;
}

function parseCreateBody(event: APIGatewayProxyEventV2): CreateBody {
    const parsed = jsonBody(event);
    if (parsed === undefined) {
        return {};
    }
    const { id, attributes } = parsed;
    if (id !== undefined && typeof id !== "string") {
        throw new BadRequest("id must be a string");
    }
    if (attributes !== undefined && (attributes === null || typeof attributes !== "object" || Array.isArray(attributes))) {
        throw new BadRequest("attributes must be an object");
    }
    return { id, attributes: attributes as Record<string, unknown> | undefined };
}

function respond(statusCode: number, body: object, headers: Record<string, string> = {}): APIGatewayProxyStructuredResultV2 {
    return { statusCode, headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) };
}

function failure(
    kind: Exclude<keyof typeof API_RESPONSES, "created" | "deleted" | "counted" | "limitSet">,
    message: string,
    extra: object = {},
    headers: Record<string, string> = {},
): APIGatewayProxyStructuredResultV2 {
    const { statusCode, error } = API_RESPONSES[kind];
    return respond(statusCode, { error, message, ...extra }, headers);
}
