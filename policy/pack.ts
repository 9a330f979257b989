/**
 * The hybrid-counter policy pack. Constructing a `PolicyPack` starts the analyzer's gRPC server for
 * the Pulumi engine, so this module does that and nothing else; the policies live in `index.ts`.
 *
 * Run it with `pulumi preview --policy-pack ./policy` (see docs/policy.md).
 */

import { PolicyPack } from "@pulumi/policy";
import { hybridCounterPolicies, POLICY_PACK_NAME } from "./index";

new PolicyPack(POLICY_PACK_NAME, {
    description:
        "Stream and retry safety for DynamoDB stream consumers: stream settings, bounded retries, failure queues, alarms and least-privilege IAM; a hybrid counter's mapping, regions and threshold topic.",
    displayName: "hybrid-counter stream safety",
    provider: "aws",
    tags: ["dynamodb", "lambda", "sqs", "reliability"],
    enforcementLevel: "advisory",
    policies: hybridCounterPolicies(),
});
