/**
 * Runs a backfill in a process of its own, so a test can kill it with SIGKILL midway (a real crash: no
 * cleanup, no final checkpoint). Argument: JSON { endpoint, options } (options without the client).
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { backfill, type BackfillOptions } from "../../runtime/backfill/backfill";

const { endpoint, options } = JSON.parse(process.argv[2] ?? "{}") as { endpoint: string; options: Omit<BackfillOptions, "dynamodb"> };
const dynamodb = new DynamoDBClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "hybridcounterlocal", secretAccessKey: "hybridcounterlocal" },
});
backfill({ ...options, dynamodb }).then(
    (report) => process.stdout.write(`${JSON.stringify(report)}\n`),
    (error: unknown) => {
        process.stderr.write(`${String(error)}\n`);
        process.exit(1);
    },
);
