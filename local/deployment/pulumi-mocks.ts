/**
 * A Pulumi mocks harness for tests: records every resource the program registers, answers with
 * deterministic ids and outputs, and throws for every invoke it was not told how to answer.
 *
 * Usage:
 *
 *     const resources = await runProgram(() => new HybridCounterComponent("orders", {}));
 *     const table = findResource(resources, "aws:dynamodb/table:Table", "orders-table");
 *
 * Notes on what mocks can and cannot show (see FACTS.md):
 * - `newResource` receives no dependencies. This harness also reads the registration request, so
 *   `RecordedResource.parent` and `RecordedResource.dependencies` are filled where the SDK sent them.
 * - Archive inputs (`AssetArchive`, `FileArchive`) arrive without their path or contents.
 */
import * as pulumi from "@pulumi/pulumi";

/** The account, region and partition every mocked ARN, URL and identity uses. */
export const MOCK_ACCOUNT_ID = "123456789012";
export const MOCK_REGION = "us-east-1";
export const MOCK_PARTITION = "aws";
export const MOCK_PROJECT = "hybrid-counter-test";
export const MOCK_STACK = "test";

/** One resource registration, as the engine would have seen it. */
export interface RecordedResource {
    /** Type token, e.g. `aws:sqs/queue:Queue` or `hybrid-counter:index:HybridCounterComponent`. */
    type: string;
    /** Logical name. */
    name: string;
    /** Inputs as the provider would receive them (Outputs resolved, unknowns absent). */
    inputs: Record<string, any>;
    /** Physical id the mock returned ("" for component resources). */
    id: string;
    /** URN the mock monitor assigned. */
    urn: string;
    /** True for provider-managed (custom) resources, false for components. */
    custom: boolean;
    /** Provider reference (`<provider urn>::<provider id>`) if the resource has an explicit provider. */
    provider?: string;
    /** State returned by the mock: the inputs plus plausible computed outputs (arn, name, url, ...). */
    state: Record<string, any>;
    /** True for a resource the program reads (`Resource.get(name, id)`): its properties are `state`, as read. */
    read?: boolean;
    /** URN of the parent resource, if the SDK sent one. */
    parent?: string;
    /** URNs of every resource this one depends on (explicit `dependsOn` plus input dependencies). */
    dependencies: string[];
}

/** One invoke the program made. */
export interface RecordedInvoke {
    token: string;
    inputs: Record<string, any>;
    provider?: string;
}

/** Answers one invoke token. */
export type InvokeHandler = (inputs: Record<string, any>) => Record<string, any>;

export interface MockOptions {
    /** Run as a preview (`pulumi preview`) instead of an update. @default false */
    readonly preview?: boolean;
    /** Project name. @default MOCK_PROJECT */
    readonly project?: string;
    /** Stack name. @default MOCK_STACK */
    readonly stack?: string;
    /**
     * The invokes the program may make, by token. Any other invoke throws, so that a program which
     * starts depending on a data source fails its tests until the tests decide what it returns.
     * @default {} (every invoke throws)
     */
    readonly invokes?: Readonly<Record<string, InvokeHandler>>;
    /**
     * The state of resources the program reads with `Resource.get(name, id)` (not managed by it), by type.
     * A read of a type not given answers with the mock state of an empty resource. `region` is the region of the
     * read's explicit AWS provider (MOCK_REGION without one).
     * @default {}
     */
    readonly reads?: Readonly<Record<string, (id: string, region: string) => Record<string, any>>>;
    /**
     * Pulumi reports a failed resource registration (for example an input whose Output rejected) as an
     * unhandled promise rejection, which is how the engine learns of it. By default `runProgram` rethrows
     * the first such error after the run settles; with `captureErrors` the run returns them in `errors`.
     * @default false
     */
    readonly captureErrors?: boolean;
}

/** What a run of a program under mocks recorded. */
export interface MockRecorder {
    /** Every resource registered so far, in registration order. */
    readonly resources: RecordedResource[];
    /** Every invoke made so far, including the ones that threw. */
    readonly invokes: RecordedInvoke[];
}

/** The result of `runProgramWithResult`. */
export interface ProgramRun<T> {
    readonly result: T;
    readonly resources: RecordedResource[];
    readonly invokes: RecordedInvoke[];
    /** Registration errors Pulumi raised during the run (only with `captureErrors`; otherwise they are thrown). */
    readonly errors: unknown[];
}

/** Invoke handlers for the three common identity data sources, answering with the MOCK_* constants. */
export const IDENTITY_INVOKES: Readonly<Record<string, InvokeHandler>> = Object.freeze({
    "aws:index/getRegion:getRegion": () => ({
        id: MOCK_REGION,
        name: MOCK_REGION,
        region: MOCK_REGION,
        endpoint: `ec2.${MOCK_REGION}.amazonaws.com`,
        description: "US East (N. Virginia)",
    }),
    "aws:index/getCallerIdentity:getCallerIdentity": () => ({
        id: MOCK_ACCOUNT_ID,
        accountId: MOCK_ACCOUNT_ID,
        arn: `arn:${MOCK_PARTITION}:iam::${MOCK_ACCOUNT_ID}:user/test`,
        userId: "AIDATESTTESTTESTTEST",
    }),
    "aws:index/getPartition:getPartition": () => ({
        id: MOCK_PARTITION,
        partition: MOCK_PARTITION,
        dnsSuffix: "amazonaws.com",
        reverseDnsPrefix: "com.amazonaws",
    }),
});

/** Thrown by the mock `call` for an invoke the test did not declare. */
export class UnexpectedInvokeError extends Error {
    constructor(readonly token: string) {
        super(`unexpected invoke ${token}: declare it in MockOptions.invokes if the program really needs it`);
        this.name = "UnexpectedInvokeError";
    }
}

/**
 * Computed outputs a real provider would add for a few resource types. Everything not listed gets
 * `arn`, `id` and `name`. All values derive from the logical name (or an explicit `name` input).
 */
export function mockState(
    type: string,
    name: string,
    inputs: Record<string, any>,
    region: string = MOCK_REGION,
): { id: string; state: Record<string, any> } {
    const physicalName: string = typeof inputs.name === "string" && inputs.name.length > 0 ? inputs.name : name;
    const regional = (service: string, resource: string) => `arn:${MOCK_PARTITION}:${service}:${region}:${MOCK_ACCOUNT_ID}:${resource}`;
    const global = (service: string, resource: string) => `arn:${MOCK_PARTITION}:${service}::${MOCK_ACCOUNT_ID}:${resource}`;
    const base = { ...inputs, name: physicalName };
    switch (type) {
        case "aws:dynamodb/table:Table": {
            const arn = regional("dynamodb", `table/${physicalName}`);
            const streamOn = inputs.streamEnabled === true;
            return {
                id: physicalName,
                state: {
                    ...base,
                    arn,
                    streamArn: streamOn ? `${arn}/stream/2024-01-01T00:00:00.000` : "",
                    streamLabel: streamOn ? "2024-01-01T00:00:00.000" : "",
                },
            };
        }
        case "aws:sqs/queue:Queue": {
            const url = `https://sqs.${region}.amazonaws.com/${MOCK_ACCOUNT_ID}/${physicalName}`;
            return { id: url, state: { ...base, arn: regional("sqs", physicalName), url } };
        }
        case "aws:lambda/function:Function": {
            const arn = regional("lambda", `function:${physicalName}`);
            return {
                id: physicalName,
                state: {
                    ...base,
                    arn,
                    qualifiedArn: `${arn}:$LATEST`,
                    invokeArn: `arn:${MOCK_PARTITION}:apigateway:${region}:lambda:path/2015-03-31/functions/${arn}/invocations`,
                    version: "$LATEST",
                },
            };
        }
        case "aws:lambda/eventSourceMapping:EventSourceMapping": {
            const uuid = `${name}-uuid`;
            return { id: uuid, state: { ...inputs, uuid, arn: regional("lambda", `event-source-mapping:${uuid}`) } };
        }
        case "aws:iam/role:Role":
            return { id: physicalName, state: { ...base, arn: global("iam", `role/${physicalName}`), uniqueId: `AROA${physicalName}` } };
        case "aws:iam/policy:Policy":
            return { id: global("iam", `policy/${physicalName}`), state: { ...base, arn: global("iam", `policy/${physicalName}`) } };
        case "aws:iam/rolePolicy:RolePolicy":
            return { id: `${inputs.role}:${physicalName}`, state: base };
        case "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            return { id: `${inputs.role}-${name}`, state: { ...inputs } };
        case "aws:cloudwatch/logGroup:LogGroup":
            return { id: physicalName, state: { ...base, arn: regional("logs", `log-group:${physicalName}`) } };
        case "aws:cloudwatch/metricAlarm:MetricAlarm":
            return { id: physicalName, state: { ...base, arn: regional("cloudwatch", `alarm:${physicalName}`) } };
        case "aws:cloudwatch/dashboard:Dashboard": {
            const dashboardName: string = inputs.dashboardName ?? name;
            return {
                id: dashboardName,
                state: { ...inputs, dashboardName, dashboardArn: global("cloudwatch", `dashboard/${dashboardName}`) },
            };
        }
        case "aws:sns/topic:Topic": {
            const arn = regional("sns", physicalName);
            return { id: arn, state: { ...base, arn } };
        }
        case "aws:sqs/queuePolicy:QueuePolicy":
            return { id: String(inputs.queueUrl ?? name), state: { ...inputs } };
        case "aws:cloudwatch/eventRule:EventRule":
            return { id: physicalName, state: { ...base, arn: regional("events", `rule/${physicalName}`) } };
        case "aws:kms/key:Key":
            return { id: `${name}-key-id`, state: { ...inputs, keyId: `${name}-key-id`, arn: regional("kms", `key/${name}-key-id`) } };
        default: {
            if (type.startsWith("pulumi:providers:")) {
                return { id: `${name}-provider-id`, state: { ...inputs } };
            }
            const match = /^aws:([^/]+)\/([^:]+):/.exec(type);
            if (match) {
                return { id: `${name}-id`, state: { ...base, arn: regional(match[1], `${match[2].toLowerCase()}/${physicalName}`) } };
            }
            return { id: `${name}-id`, state: { ...inputs } };
        }
    }
}

interface RegistrationRequest {
    getType(): string;
    getName(): string;
    getParent(): string;
    getDependenciesList(): string[];
}

interface RegistrationResponse {
    getUrn(): string;
}

interface MonitorLike {
    registerResource(req: RegistrationRequest, callback: (err: unknown, response: RegistrationResponse | undefined) => void): unknown;
}

interface Registration {
    type: string;
    name: string;
    parent?: string;
    dependencies: string[];
    urn?: string;
}

let activeRegistrations: Registration[] = [];

/**
 * Sets Pulumi mocks that record every resource and invoke. Returns the recorder the mocks write to;
 * call `settle()` (or use `runProgram`) before reading it.
 */
export async function setupPulumiMocks(options: MockOptions = {}): Promise<MockRecorder> {
    const recorder: MockRecorder = { resources: [], invokes: [] };
    const invokes = options.invokes ?? {};
    // An explicit AWS provider's region, by the id the mock gave it: its resources' ARNs and URLs are in that region.
    const providerRegions = new Map<string, string>();
    const regionOf = (provider: string | undefined): string =>
        (provider === undefined ? undefined : providerRegions.get(provider.slice(provider.lastIndexOf("::") + 2))) ?? MOCK_REGION;
    const mocks: pulumi.runtime.Mocks = {
        newResource(args: pulumi.runtime.MockResourceArgs): pulumi.runtime.MockResourceResult {
            const inputs: Record<string, any> = { ...(args.inputs ?? {}) };
            const custom = args.custom ?? true;
            if (args.type === "pulumi:providers:aws" && typeof inputs.region === "string") {
                providerRegions.set(`${args.name}-provider-id`, inputs.region);
            }
            const read = args.id ? options.reads?.[args.type] : undefined;
            const { id, state } =
                read && args.id
                    ? { id: args.id, state: read(args.id, regionOf(args.provider)) }
                    : custom
                      ? mockState(args.type, args.name, inputs, regionOf(args.provider))
                      : { id: "", state: { ...inputs } };
            recorder.resources.push({
                type: args.type,
                name: args.name,
                inputs,
                id,
                urn: "",
                custom,
                ...(args.provider ? { provider: args.provider } : {}),
                state,
                ...(read && args.id ? { read: true } : {}),
                dependencies: [],
            });
            return { id: custom ? id : undefined, state };
        },
        call(args: pulumi.runtime.MockCallArgs): pulumi.runtime.MockCallResult {
            recorder.invokes.push({
                token: args.token,
                inputs: { ...(args.inputs ?? {}) },
                ...(args.provider ? { provider: args.provider } : {}),
            });
            const handler = Object.prototype.hasOwnProperty.call(invokes, args.token) ? invokes[args.token] : undefined;
            if (!handler) {
                throw new UnexpectedInvokeError(args.token);
            }
            return handler(args.inputs ?? {});
        },
    };
    await pulumi.runtime.setMocks(mocks, options.project ?? MOCK_PROJECT, options.stack ?? MOCK_STACK, options.preview ?? false);
    activeRegistrations = [];
    captureRegistrations(activeRegistrations);
    Object.defineProperty(recorder, registrationsKey, { value: activeRegistrations, enumerable: false });
    return recorder;
}

const registrationsKey = Symbol("registrations");

/**
 * Wraps the mock monitor's registerResource to read what `newResource` does not receive: the parent,
 * the dependencies and the URN the monitor assigns.
 */
function captureRegistrations(into: Registration[]): void {
    const monitor = pulumi.runtime.getMonitor() as unknown as MonitorLike | undefined;
    if (!monitor || typeof monitor.registerResource !== "function") {
        return;
    }
    const original = monitor.registerResource.bind(monitor);
    monitor.registerResource = (req, callback) => {
        const registration: Registration = {
            type: req.getType(),
            name: req.getName(),
            parent: req.getParent() || undefined,
            dependencies: [...new Set(req.getDependenciesList())],
        };
        into.push(registration);
        return original(req, (err, response) => {
            if (!err && response) {
                registration.urn = response.getUrn();
            }
            callback(err, response);
        });
    };
}

/**
 * Waits until every resource registration the program started has completed (including those that
 * waited on other resources' outputs), then fills in URNs, parents and dependencies.
 */
export async function settle(recorder: MockRecorder): Promise<void> {
    // The SDK chains every outstanding RPC onto one promise; `waitForRPCs` waits until the chain stops growing.
    const waitForRPCs = (pulumi.runtime as unknown as { waitForRPCs?: () => Promise<void> }).waitForRPCs;
    if (typeof waitForRPCs === "function") {
        await waitForRPCs();
    }
    // Give apply callbacks queued by the last registrations a turn.
    for (let i = 0; i < 5; i++) {
        await new Promise<void>((resolve) => setImmediate(resolve));
    }
    if (typeof waitForRPCs === "function") {
        await waitForRPCs();
    }
    const registrations = (recorder as unknown as Record<symbol, Registration[] | undefined>)[registrationsKey] ?? [];
    const unused = [...registrations];
    for (const resource of recorder.resources) {
        const index = unused.findIndex((r) => r.type === resource.type && r.name === resource.name);
        if (index < 0) {
            continue;
        }
        const [registration] = unused.splice(index, 1);
        resource.urn = registration.urn ?? resource.urn;
        resource.parent = registration.parent;
        resource.dependencies = registration.dependencies;
    }
    for (const resource of recorder.resources) {
        if (resource.urn === "") {
            resource.urn = `urn:pulumi:${pulumi.getStack()}::${pulumi.getProject()}::${resource.type}::${resource.name}`;
        }
    }
}

/**
 * Runs `program` (a callback that constructs resources) under fresh mocks and returns every recorded
 * resource once all registrations have settled. If the program throws, the error propagates.
 */
export async function runProgram(program: () => unknown, options: MockOptions = {}): Promise<RecordedResource[]> {
    return (await runProgramWithResult(program, options)).resources;
}

/** Like `runProgram`, and also returns what the program returned (e.g. the component) and the invokes made. */
export async function runProgramWithResult<T>(program: () => T | Promise<T>, options: MockOptions = {}): Promise<ProgramRun<T>> {
    const recorder = await setupPulumiMocks(options);
    const errors: unknown[] = [];
    const record = (reason: unknown) => {
        errors.push(reason);
    };
    // Take the process's unhandled-rejection listeners (mocha's among them) aside while the program runs,
    // so that Pulumi's registration errors reach this run instead of failing whichever test is current.
    const previous = process.listeners("unhandledRejection");
    process.removeAllListeners("unhandledRejection");
    process.on("unhandledRejection", record);
    let result: T;
    try {
        result = await program();
        await settle(recorder);
    } finally {
        process.removeListener("unhandledRejection", record);
        for (const listener of previous) {
            process.on("unhandledRejection", listener);
        }
    }
    if (errors.length > 0 && !options.captureErrors) {
        throw errors[0];
    }
    return { result, resources: recorder.resources, invokes: recorder.invokes, errors };
}

/**
 * The value of an Output once known. Only for runs that are not previews: an unknown value (preview)
 * would never resolve, so this rejects after `timeoutMs` instead of hanging the test.
 */
export function outputValue<T>(output: pulumi.Input<T>, timeoutMs = 10_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`output did not resolve within ${timeoutMs} ms (unknown value?)`)), timeoutMs);
        pulumi.output(output).apply((value) => {
            clearTimeout(timer);
            resolve(value as T);
            return value;
        });
    });
}

/** Every recorded resource of `type`, in registration order. */
export function resourcesOfType(resources: readonly RecordedResource[], type: string): RecordedResource[] {
    return resources.filter((r) => r.type === type);
}

/** The one recorded resource with this type and logical name; throws if there is none or more than one. */
export function findResource(resources: readonly RecordedResource[], type: string, name: string): RecordedResource {
    const matches = resources.filter((r) => r.type === type && r.name === name);
    if (matches.length !== 1) {
        const seen = resources.map((r) => `${r.type} ${r.name}`).join("\n  ");
        throw new Error(`expected exactly one ${type} named ${name}, found ${matches.length}; recorded:\n  ${seen}`);
    }
    return matches[0];
}

/** The recorded resource whose URN is `urn`, if any. */
export function resourceByUrn(resources: readonly RecordedResource[], urn: string): RecordedResource | undefined {
    return resources.find((r) => r.urn === urn);
}
