/**
 * IAM documents of the component, as pure functions of resolved ARNs.
 *
 * Least privilege, action by action, each checked against the calls the runtime makes (runtime/):
 * - The consumer and the redrive apply stream records (runtime/stream/apply.ts, progress.ts): on the counters
 *   table they read eventual items and limit items (GetItem, BatchGetItem), write each key's eventual item and
 *   each stream shard's progress (UpdateItem), and write and drop days of usage (PutItem, DeleteItem); on the
 *   user's table they flag items that should count (UpdateItem) and remove settled tombstones (DeleteItem,
 *   runtime/shared/item-writes.ts). Both re-read ranges Lambda gave up on from the stream (GetShardIterator,
 *   GetRecords: runtime/stream/reader.ts). They send what can never count to the fatal queue, and threshold
 *   events to the threshold topic when there is one (`sns:Publish` covers PublishBatch).
 * - A stream event source mapping reads with the function's role: DescribeStream, GetShardIterator and
 *   GetRecords on the stream, and ListStreams, which has no resource type and so needs `"*"`.
 * - Lambda sends a stream mapping's on-failure record to its SQS destination with the function's role:
 *   "Your execution role must have permissions for the destination: For SQS destinations: sqs:SendMessage"
 *   (AWS Lambda Developer Guide, https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html).
 * - An SQS event source mapping polls with the function's role: ReceiveMessage, DeleteMessage and
 *   GetQueueAttributes on the queue.
 * - DynamoDB has no `dynamodb:TransactWriteItems` IAM action: "Permissions for Put, Update, Delete, and Get
 *   actions are governed by the permissions used for the underlying PutItem, UpdateItem, DeleteItem, and
 *   GetItem operations" (Amazon DynamoDB Developer Guide, "Using IAM with DynamoDB transactions"). The API's
 *   client moves room between a strict key's shards and regions in transactions of Update and ConditionCheck
 *   actions (runtime/shards/caps.ts, runtime/regions/caps.ts), and reads caps in TransactGetItems (Get).
 * - The API's role gets exactly what HybridCounterClient calls (apiPolicy): on the user's table, the put,
 *   the claim and soft delete, the read of an item in doubt, the removal of a tombstone; on the counters table,
 *   best-effort writes and reads (GetItem, UpdateItem, Query), limits (BatchGetItem, PutItem, DeleteItem), usage
 *   (Query) and cap transactions (ConditionCheckItem).
 * - Sending to or receiving from a queue encrypted with a customer managed key needs kms:GenerateDataKey
 *   and kms:Decrypt on that key. The threshold topic the component creates uses the AWS managed SNS key, whose
 *   key policy lets every principal of the account use it through SNS.
 * - X-Ray's PutTraceSegments and PutTelemetryRecords have no resource type either, so they need `"*"`;
 *   they are granted only when tracing is on.
 */

export interface PolicyStatement {
    Sid: string;
    Effect: "Allow" | "Deny";
    Action: string[];
    /** Absent only in a trust policy, where IAM forbids it. */
    Resource?: string | string[];
    Principal?: string | Record<string, string | string[]>;
    Condition?: Record<string, Record<string, string | string[]>>;
}

export interface PolicyDocument {
    Version: "2012-10-17";
    Statement: PolicyStatement[];
}

/** Trust policy of every execution role. */
export function lambdaAssumeRolePolicy(): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "LambdaAssumeRole",
                Effect: "Allow",
                Principal: { Service: "lambda.amazonaws.com" },
                Action: ["sts:AssumeRole"],
            },
        ],
    };
}

/** What the consumer's and the redrive's documents name. */
export interface StreamFunctionPolicyInputs {
    readonly tableArn: string;
    readonly countersTableArn: string;
    readonly streamArn: string;
    readonly firstDlqArn: string;
    readonly fatalDlqArn: string;
    readonly logGroupArn: string;
    /** The threshold topic, when there is one: the function may publish to it. */
    readonly thresholdTopicArn?: string;
    readonly queueKmsKeyArn?: string;
    readonly tracing: boolean;
}

export type ConsumerPolicyInputs = StreamFunctionPolicyInputs;
export type RedrivePolicyInputs = StreamFunctionPolicyInputs;

const COUNTERS_TABLE_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
];
const USER_TABLE_ACTIONS = ["dynamodb:UpdateItem", "dynamodb:DeleteItem"];
const API_TABLE_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"];
const API_COUNTERS_TABLE_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
];

/** The two table statements both stream functions share: count in the counters table, flag and remove items in the user's. */
function countingStatements(p: { tableArn: string; countersTableArn: string }): PolicyStatement[] {
    return [
        { Sid: "CountInCountersTable", Effect: "Allow", Action: COUNTERS_TABLE_ACTIONS, Resource: p.countersTableArn },
        { Sid: "FlagAndRemoveItems", Effect: "Allow", Action: USER_TABLE_ACTIONS, Resource: p.tableArn },
    ];
}

/** A function's right to publish threshold events, when there is a topic. */
export function publishStatements(thresholdTopicArn: string | undefined): PolicyStatement[] {
    return thresholdTopicArn === undefined
        ? []
        : [{ Sid: "PublishThresholdEvents", Effect: "Allow", Action: ["sns:Publish"], Resource: thresholdTopicArn }];
}

/** What the API's role needs to run HybridCounterClient: exactly the client's calls, on the two tables. */
export function apiPolicy(p: { tableArn: string; countersTableArn: string }): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            { Sid: "WriteResourceItems", Effect: "Allow", Action: API_TABLE_ACTIONS, Resource: p.tableArn },
            { Sid: "ReadAndWriteCounters", Effect: "Allow", Action: API_COUNTERS_TABLE_ACTIONS, Resource: p.countersTableArn },
        ],
    };
}

const MAPPING_STREAM_ACTIONS = ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"];
const RANGE_READ_ACTIONS = ["dynamodb:GetShardIterator", "dynamodb:GetRecords"];
const XRAY_ACTIONS = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"];

/** A function's right to write its own log group. */
export function logStatement(logGroupArn: string): PolicyStatement {
    // `${arn}:*` covers the group's log streams, which is where CreateLogStream and PutLogEvents act.
    return { Sid: "WriteOwnLogs", Effect: "Allow", Action: ["logs:CreateLogStream", "logs:PutLogEvents"], Resource: `${logGroupArn}:*` };
}

/** A function's right to send X-Ray traces (when tracing is on). */
export function tracingStatement(): PolicyStatement {
    // X-Ray write actions support no resource-level permissions.
    return { Sid: "WriteTraces", Effect: "Allow", Action: XRAY_ACTIONS, Resource: "*" };
}

/** Inline policy of the stream consumer's execution role. */
export function consumerPolicy(p: ConsumerPolicyInputs): PolicyDocument {
    const statements: PolicyStatement[] = [
        // The mapping reads the stream with this role; the consumer re-reads the ranges Lambda gave up on.
        { Sid: "ReadOwnStream", Effect: "Allow", Action: MAPPING_STREAM_ACTIONS, Resource: p.streamArn },
        // ListStreams has no resource type: it is the one stream action that must be granted on "*".
        { Sid: "ListStreams", Effect: "Allow", Action: ["dynamodb:ListStreams"], Resource: "*" },
        ...countingStatements(p),
        // Lambda delivers the mapping's on-failure record to the first DLQ with this role.
        { Sid: "SendFailedBatchesToFirstDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: p.firstDlqArn },
        { Sid: "SendPoisonRecordsToFatalDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: p.fatalDlqArn },
        ...publishStatements(p.thresholdTopicArn),
        logStatement(p.logGroupArn),
    ];
    return roleDocument(statements, p);
}

/** Inline policy of the redrive function's execution role. */
export function redrivePolicy(p: RedrivePolicyInputs): PolicyDocument {
    const statements: PolicyStatement[] = [
        // The redrive re-reads a range Lambda gave up on, and every range of its shard still open below it.
        { Sid: "ReadOwnStream", Effect: "Allow", Action: RANGE_READ_ACTIONS, Resource: p.streamArn },
        ...countingStatements(p),
        {
            Sid: "ConsumeFirstDlq",
            Effect: "Allow",
            Action: ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
            Resource: p.firstDlqArn,
        },
        { Sid: "SendExpiredRangesToFatalDlq", Effect: "Allow", Action: ["sqs:SendMessage"], Resource: p.fatalDlqArn },
        ...publishStatements(p.thresholdTopicArn),
        logStatement(p.logGroupArn),
    ];
    return roleDocument(statements, p);
}

/** A role's document: its own statements, then the queue key's and X-Ray's when they are in use. */
function roleDocument(statements: PolicyStatement[], p: { queueKmsKeyArn?: string; tracing: boolean }): PolicyDocument {
    const optional: PolicyStatement[] = [];
    if (p.queueKmsKeyArn !== undefined) {
        optional.push({
            Sid: "UseQueueKey",
            Effect: "Allow",
            Action: ["kms:GenerateDataKey", "kms:Decrypt"],
            Resource: p.queueKmsKeyArn,
        });
    }
    if (p.tracing) {
        optional.push(tracingStatement());
    }
    return { Version: "2012-10-17", Statement: [...statements, ...optional] };
}

/**
 * Queue policy that refuses every request not made over TLS. It is a Deny, so its `sqs:*` grants nothing:
 * listing actions instead would leave any action SQS adds later open to plain HTTP.
 */
export function denyInsecureTransportPolicy(queueArn: string): PolicyDocument {
    return {
        Version: "2012-10-17",
        Statement: [
            {
                Sid: "DenyInsecureTransport",
                Effect: "Deny",
                Principal: "*",
                Action: ["sqs:*"],
                Resource: queueArn,
                Condition: { Bool: { "aws:SecureTransport": "false" } },
            },
        ],
    };
}
