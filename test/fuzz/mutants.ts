/**
 * Mutants for the checker: middleware that rewrites one command's input on its way to DynamoDB Local, so
 * that the system under test is the one the package ships but for the change the mutant makes.
 */
import type { DynamoDBClient, ServiceInputTypes, ServiceOutputTypes } from "@aws-sdk/client-dynamodb";
import type { InitializeMiddleware } from "@smithy/types";

/** Adds middleware to `client` that rewrites the input of every `command` it sends. */
export function rewrite<I>(client: DynamoDBClient, command: string, change: (input: I) => void): void {
    const middleware: InitializeMiddleware<ServiceInputTypes, ServiceOutputTypes> = (next, context) => async (args) => {
        if (context.commandName === command) {
            change(args.input as I);
        }
        return next(args);
    };
    client.middlewareStack.add(middleware, { step: "initialize", name: `fuzzMutant:${command}` });
}
