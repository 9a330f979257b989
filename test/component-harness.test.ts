import * as assert from "node:assert/strict";
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import {
    findResource,
    IDENTITY_INVOKES,
    MOCK_ACCOUNT_ID,
    outputValue,
    runProgram,
    runProgramWithResult,
} from "../local/deployment/pulumi-mocks";

class Parent extends pulumi.ComponentResource {
    readonly queueArn: pulumi.Output<string>;
    constructor(name: string, opts?: pulumi.ComponentResourceOptions) {
        super("test:index:Parent", name, {}, opts);
        const queue = new aws.sqs.Queue(`${name}-queue`, {}, { parent: this });
        new aws.sqs.QueuePolicy(
            `${name}-policy`,
            { queueUrl: queue.url, policy: queue.arn.apply((arn) => JSON.stringify({ Resource: arn })) },
            { parent: this },
        );
        this.queueArn = queue.arn;
        this.registerOutputs({ queueArn: this.queueArn });
    }
}

describe("Pulumi mocks harness", () => {
    it("records every resource with deterministic state, parent, dependencies and URN", async () => {
        // Prepare / Act
        const resources = await runProgram(() => new Parent("p"));

        // Assess
        assert.deepEqual(
            resources.map((r) => `${r.type} ${r.name} ${r.custom}`),
            ["test:index:Parent p false", "aws:sqs/queue:Queue p-queue true", "aws:sqs/queuePolicy:QueuePolicy p-policy true"],
        );
        const parent = findResource(resources, "test:index:Parent", "p");
        const queue = findResource(resources, "aws:sqs/queue:Queue", "p-queue");
        const policy = findResource(resources, "aws:sqs/queuePolicy:QueuePolicy", "p-policy");
        assert.equal(parent.urn, "urn:pulumi:test::hybrid-counter-test::test:index:Parent::p");
        assert.equal(queue.urn, "urn:pulumi:test::hybrid-counter-test::test:index:Parent$aws:sqs/queue:Queue::p-queue");
        assert.equal(queue.parent, parent.urn);
        assert.equal(queue.id, `https://sqs.us-east-1.amazonaws.com/${MOCK_ACCOUNT_ID}/p-queue`);
        assert.equal(queue.state.arn, `arn:aws:sqs:us-east-1:${MOCK_ACCOUNT_ID}:p-queue`);
        assert.deepEqual(policy.inputs, {
            queueUrl: `https://sqs.us-east-1.amazonaws.com/${MOCK_ACCOUNT_ID}/p-queue`,
            policy: JSON.stringify({ Resource: `arn:aws:sqs:us-east-1:${MOCK_ACCOUNT_ID}:p-queue` }),
        });
        assert.deepEqual(policy.dependencies, [queue.urn]);
    });

    it("returns the program's result, whose outputs can be awaited", async () => {
        // Prepare / Act
        const run = await runProgramWithResult(() => new Parent("q"));

        // Assess
        assert.equal(await outputValue(run.result.queueArn), `arn:aws:sqs:us-east-1:${MOCK_ACCOUNT_ID}:q-queue`);
    });

    it("throws for an invoke it was not told about", async () => {
        // Prepare
        let caught: unknown;

        // Act
        const run = await runProgramWithResult(async () => {
            try {
                await aws.getRegion({});
            } catch (error) {
                caught = error;
            }
        });

        // Assess
        assert.ok(caught instanceof Error);
        assert.deepEqual(
            run.invokes.map((i) => i.token),
            ["aws:index/getRegion:getRegion"],
        );
    });

    it("answers the invokes it was given", async () => {
        // Prepare / Act
        const run = await runProgramWithResult(() => aws.getCallerIdentity({}), { invokes: IDENTITY_INVOKES });

        // Assess
        assert.equal(run.result.accountId, MOCK_ACCOUNT_ID);
        assert.deepEqual(
            run.invokes.map((i) => i.token),
            ["aws:index/getCallerIdentity:getCallerIdentity"],
        );
    });
});
