"""An orders table with a per-tenant hybrid counter: the Python twin of examples/existing-program.

`pulumi package add ../..` generates the `pulumi_hybrid_counter` SDK from the component's schema; the
keyword arguments are the TypeScript args in snake_case, and the enums are classes of the SDK.
"""
import pulumi
import pulumi_aws as aws
import pulumi_hybrid_counter as hybrid_counter

# The table the orders service already owns: streams on, with new and old images.
orders = aws.dynamodb.Table(
    "orders",
    attributes=[
        aws.dynamodb.TableAttributeArgs(name="tenantId", type="S"),
        aws.dynamodb.TableAttributeArgs(name="orderId", type="S"),
    ],
    hash_key="tenantId",
    range_key="orderId",
    billing_mode="PAY_PER_REQUEST",
    point_in_time_recovery=aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=True),
    stream_enabled=True,
    stream_view_type="NEW_AND_OLD_IMAGES",
)

counter = hybrid_counter.HybridCounterComponent(
    "orders-counter",
    table=orders,
    partition_key="tenantId",
    sort_key="orderId",
    architecture=hybrid_counter.Architecture.ARM64,
    batch_size=200,
    maximum_retry_attempts=5,
    create_alarm_topic=True,
    disabled_alarms=[hybrid_counter.AlarmName.CONSUMER_THROTTLES],
    thresholds=[0.5, 0.9, 1],
    create_threshold_topic=True,
    tags={"service": "orders"},
)

pulumi.export("counterClientConfig", counter.client_config)
pulumi.export("counterDashboardName", counter.dashboard_name)
pulumi.export("counterAlarmTopicArn", counter.alarm_topic_arn)
pulumi.export("counterThresholdTopicArn", counter.threshold_topic_arn)
