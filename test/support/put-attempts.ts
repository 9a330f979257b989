/**
 * Staging a put attempt that DynamoDB applies after the SDK gave up on it: the client's PutItem inputs are
 * recorded as they are sent, and one is sent again later, as DynamoDB would apply the attempt it still held.
 */
import {
    PutItemCommand,
    type DynamoDBClient,
    type PutItemCommandInput,
    type ServiceInputTypes,
    type ServiceOutputTypes,
} from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";

/** Records the input of every PutItem `dynamodb` sends, as it sends it. */
export function recordPuts(dynamodb: DynamoDBClient): PutItemCommandInput[] {
    const puts: PutItemCommandInput[] = [];
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === "PutItemCommand") {
            puts.push(structuredClone(args.input as PutItemCommandInput));
        }
        return next(args);
    };
    dynamodb.middlewareStack.add(middleware, { step: "initialize", name: "recordPuts" });
    return puts;
}

/** The late attempt: the exact request that was sent, applied by DynamoDB now (through `dynamodb`). */
export async function landAgain(dynamodb: DynamoDBClient, attempt: PutItemCommandInput): Promise<void> {
    await dynamodb.send(new PutItemCommand(structuredClone(attempt)));
}
