/**
 * A per-tenant order counter on a DynamoDB global table in three regions, in one program: one provider per region,
 * the orders table created in the home region with a replica in each other region, and one HybridCounterComponent
 * per region, each created with that region's provider.
 *
 * - The home region's component (us-east-1) attaches to the table it is given, creates the counters table with a
 *   replica in every other member and runs the backfill on deploy (items from before the counter belong to it).
 * - Each member region's component attaches to the orders table's replica in its region (read with
 *   `aws.dynamodb.Table.get` through that region's provider) and to the home's counters table, by name.
 * - Each region's consumer counts only the writes its own region's clients created (the stamp `hc_region`), so a
 *   write is counted once, wherever it is replicated to.
 *
 * The same layout as several stacks, one per region: docs/deploying.md ("A global table").
 */
import * as aws from "@pulumi/aws";
import { HybridCounterComponent, RegionRole, type HybridCounterClientConfig } from "hybrid-counter";
import type * as pulumi from "@pulumi/pulumi";

/** The regions, the first one home: it counts the items no client stamped. */
const home = "us-east-1";
const members = [
    { region: home, role: RegionRole.Home },
    { region: "eu-west-1", role: RegionRole.Member },
    { region: "ap-southeast-2", role: RegionRole.Member },
];
const tags = { service: "orders" };

const providers = new Map(members.map(({ region }) => [region, new aws.Provider(region, { region })]));
const providerOf = (region: string): aws.Provider => providers.get(region)!;

// The orders table: a global table (version 2019.11.21), one item per order, with a replica in each other region.
const orders = new aws.dynamodb.Table(
    "orders",
    {
        name: "orders",
        attributes: [
            { name: "tenantId", type: "S" },
            { name: "orderId", type: "S" },
        ],
        hashKey: "tenantId",
        rangeKey: "orderId",
        billingMode: "PAY_PER_REQUEST",
        pointInTimeRecovery: { enabled: true },
        serverSideEncryption: { enabled: true },
        // A replicated table has a stream in every region; the consumer reads new and old images.
        streamEnabled: true,
        streamViewType: "NEW_AND_OLD_IMAGES",
        replicas: members.filter((m) => m.region !== home).map((m) => ({ regionName: m.region, pointInTimeRecovery: true })),
        tags,
    },
    { provider: providerOf(home) },
);

// The home region: creates the counters table (replicated to every member) and backfills the existing orders.
const homeCounter = new HybridCounterComponent(
    `orders-counter-${home}`,
    {
        table: orders,
        regions: { current: home, members },
        backfillOnDeploy: true,
        createAlarmTopic: true,
        tags,
    },
    { provider: providerOf(home) },
);

/** Every region's client configuration: give each region's API its own (it stamps the region it runs in). */
const clientConfigs: Record<string, pulumi.Output<HybridCounterClientConfig>> = { [home]: homeCounter.clientConfig };

for (const { region } of members.filter((m) => m.region !== home)) {
    const provider = providerOf(region);
    // The orders table's replica in this region: same name, its own ARN and its own stream.
    const replica = aws.dynamodb.Table.get(`orders-${region}`, orders.name, {}, { provider });
    const counter = new HybridCounterComponent(
        `orders-counter-${region}`,
        {
            table: replica,
            regions: { current: region, members, countersTableName: homeCounter.countersTableName },
            // The same args as the home region's: a member region never backfills on deploy.
            backfillOnDeploy: true,
            createAlarmTopic: true,
            tags,
        },
        { provider },
    );
    clientConfigs[region] = counter.clientConfig;
}

export const ordersTableName = orders.name;
export const countersTableName = homeCounter.countersTableName;
export const clientConfig = clientConfigs;
