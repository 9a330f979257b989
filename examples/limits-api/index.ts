/**
 * The limits API: an HTTP API (API Gateway HTTP API -> one Lambda function) that creates, deletes and
 * counts a tenant's items, refuses creations beyond the tenant's limit, and sets a tenant's limit. The counter is a
 * HybridCounterComponent in strict mode (a tenant never holds more than its limit); the function gets the
 * component's `apiEnvironment` and builds its client from that alone. The limits are stored with the counter: the
 * program stores the configured ones when it deploys (an invocation of the function), and `PUT /tenants/{t}/limit`
 * changes a tenant's.
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HybridCounterComponent } from "hybrid-counter";
import { ROUTES } from "./app/handler";
import { storeLimitsEvent } from "./app/settings";
import { buildApiBundle } from "./bundle";

const config = new pulumi.Config();
// Checked before anything is created: a bad limit fails `pulumi preview` with its name.
const limits = storeLimitsEvent({
    defaultLimit: config.getNumber("tenantLimit") ?? 100,
    tenantLimits: config.getObject<Record<string, number>>("tenantLimits") ?? {},
});
const tags = { service: "limits-api", stack: pulumi.getStack() };

const counter = new HybridCounterComponent("items", {
    counterMode: "strict",
    createAlarmTopic: config.getBoolean("createAlarmTopic") ?? false,
    tags,
});

// ------------------------------------------------------------------ the API function
const logs = new aws.cloudwatch.LogGroup("api-logs", { retentionInDays: 30, tags });
const role = new aws.iam.Role("api-role", {
    assumeRolePolicy: JSON.stringify({
        Version: "2012-10-17",
        Statement: [{ Effect: "Allow", Principal: { Service: "lambda.amazonaws.com" }, Action: "sts:AssumeRole" }],
    }),
    tags,
});
// What HybridCounterClient calls, as the component states it (apiPolicyDocument), and the function's own logs.
const policy = new aws.iam.RolePolicy("api-policy", {
    role: role.id,
    policy: pulumi.all([counter.apiPolicyDocument, logs.arn]).apply(([apiPolicy, logGroupArn]) =>
        JSON.stringify({
            Version: "2012-10-17",
            Statement: [
                ...(JSON.parse(apiPolicy) as { Statement: unknown[] }).Statement,
                {
                    Sid: "WriteOwnLogs",
                    Effect: "Allow",
                    Action: ["logs:CreateLogStream", "logs:PutLogEvents"],
                    Resource: `${logGroupArn}:*`,
                },
            ],
        }),
    ),
});
const fn = new aws.lambda.Function(
    "api",
    {
        code: new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.FileAsset(buildApiBundle()) }),
        handler: "index.handler",
        runtime: "nodejs22.x",
        architectures: ["arm64"],
        memorySize: 256,
        timeout: 10,
        role: role.arn,
        environment: { variables: counter.apiEnvironment },
        loggingConfig: { logFormat: "Text", logGroup: logs.name },
        tags,
    },
    { dependsOn: [policy, logs] },
);

// ------------------------------------------------------------------ the HTTP API
const api = new aws.apigatewayv2.Api("api", { protocolType: "HTTP", tags });
const integration = new aws.apigatewayv2.Integration("api-integration", {
    apiId: api.id,
    integrationType: "AWS_PROXY",
    integrationUri: fn.invokeArn,
    payloadFormatVersion: "2.0",
});
for (const [route, routeKey] of Object.entries(ROUTES)) {
    new aws.apigatewayv2.Route(`api-${route}`, { apiId: api.id, routeKey, target: pulumi.interpolate`integrations/${integration.id}` });
}
const stage = new aws.apigatewayv2.Stage("api-stage", {
    apiId: api.id,
    name: "$default",
    autoDeploy: true,
    defaultRouteSettings: { throttlingBurstLimit: 100, throttlingRateLimit: 50 },
    tags,
});
new aws.lambda.Permission("api-invoke", {
    action: "lambda:InvokeFunction",
    function: fn.name,
    principal: "apigateway.amazonaws.com",
    sourceArn: pulumi.interpolate`${api.executionArn}/*/*`,
});

// The configured limits, stored with the counter once per change (the function's storeLimits).
new aws.lambda.Invocation("api-limits", { functionName: fn.name, input: JSON.stringify(limits) }, { dependsOn: [counter] });

export const url = stage.invokeUrl;
export const functionName = fn.name;
export const clientConfig = counter.clientConfig;
export const counterDashboardName = counter.dashboardName;
export const fatalDlqUrl = counter.fatalDlqUrl;
// What `npx hybrid-counter fatal replay --config` applies a batch with, as the functions do.
export const thresholds = counter.thresholds;
export const usageRetentionDays = counter.usageRetentionDays;
