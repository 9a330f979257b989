/**
 * The user's table, as the component works with it: the one it creates, or the one it attaches to (`table` or
 * `tableArn`), whose settings are checked once they resolve (attached-table.ts).
 */
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { CounterTableLayout } from "../runtime/shared/config";
import type { HybridCounterComponentArgs } from "./args";
import { attachedTableProblems, type AttachedTableSettings } from "./attached-table";
import { counterItemsTtl, healIndex, healIndexAttributes, type DescribedIndex } from "./counters-table";
import { HYBRID_COUNTER_DEFAULTS as D } from "./defaults";
import { tableRegionProblems } from "./regions";
import type { ResolvedArgs } from "./resolved";
import { HybridCounterArgsError, layoutFromArgs } from "./validation";

/** The settings of the user's table the component works with, whether it created it or attaches to it. */
export interface UserTable {
    readonly name: pulumi.Output<string>;
    readonly arn: pulumi.Output<string>;
    readonly streamArn: pulumi.Output<string>;
    readonly settings: pulumi.Output<AttachedTableSettings>;
}

/** The user's table, the layout it makes, and (for an attached table) the outcome of its check. */
export interface TableSetup {
    readonly table: UserTable;
    readonly layout: pulumi.Output<CounterTableLayout>;
    /**
     * For an attached table: whether its settings passed. The stream mapping is registered with it as `enabled`, and
     * the backfill sends "skip" unless it is true, so a wrong table is never read. Undefined for a created table.
     */
    readonly usable?: pulumi.Output<boolean>;
    /** For an attached table: resolves once it passed, rejects with the problems (component.ts `ready()`). */
    readonly check?: Promise<void>;
}

/** Creates the user's table, or reads the one the args attach, and checks it. */
export function setUpUserTable(name: string, args: HybridCounterComponentArgs, r: ResolvedArgs, parent: pulumi.Resource): TableSetup {
    if (args.table === undefined && args.tableArn === undefined) {
        return { table: createdTable(name, args, r, parent), layout: pulumi.output(layoutFromArgs(args)) };
    }
    const table = attachedTable(args, parent);
    // The layout: the table's keys are the layout's unless the args give them. The settings are checked apart from
    // the stream ARN, so that the check also runs during preview, when a same-program table's settings are known but
    // its stream ARN is not.
    const layout = table.settings.apply((s) => layoutFromArgs(args, { hashKey: s.hashKey, rangeKey: s.rangeKey }));
    const given = { partitionKey: args.partitionKey, sortKey: args.sortKey, sameTable: r.sameTable };
    const settingsProblems = table.settings.apply((s) => attachedTableProblems(s, given, r.regions));
    // In a multi-region counter the table read must also be the replica in `current` (its ARN's region): known only
    // once the ARN resolves. The replicas were checked as seen from `current`; read in another region they say
    // nothing of the members, so only the region is named then.
    const setting = r.regions;
    const problems =
        setting === undefined
            ? settingsProblems
            : pulumi.all([settingsProblems, table.arn]).apply(([list, arn]) => {
                  const wrongRegion = tableRegionProblems(arn, setting);
                  return wrongRegion.length === 0 ? list : [...list.filter((p) => !p.startsWith("[regions.members]")), ...wrongRegion];
              });
    // No resource input and no output ever rejects (a rejected Output is a burst of unhandled rejections under
    // mocks): the stream mapping is registered disabled, so a wrong table is never read, and the one rejection is
    // ready()'s, which fails `pulumi up` with the problems.
    const check = new Promise<void>((resolve, reject) => {
        problems.apply((list) => (list.length > 0 ? reject(new HybridCounterArgsError(list)) : resolve()));
    });
    return { table, layout, usable: problems.apply((list) => list.length === 0), check };
}

type Described<T> = pulumi.Output<T | undefined>;

/** The user's table attached by resource or by ARN (read with getTableOutput). */
function attachedTable(args: HybridCounterComponentArgs, parent: pulumi.Resource): UserTable {
    const source =
        args.table ??
        aws.dynamodb.getTableOutput({ name: pulumi.output(args.tableArn!).apply((arn) => arn.split(":table/")[1]!) }, { parent });
    // A Table's `replicas` are its own (or, read with Table.get, its description's); getTable reads them from the
    // description, without their consistency mode. TableReplica resources are not visible here: the policy pack
    // reports those (policy/regions.ts).
    const replicas = source.replicas as Described<Array<{ regionName?: string; consistencyMode?: string }>>;
    const settings = pulumi
        .all([
            source.streamEnabled as Described<boolean>,
            source.streamViewType as Described<string>,
            source.hashKey as Described<string>,
            source.rangeKey as Described<string>,
            source.attributes as Described<Array<{ name: string; type: string }>>,
            replicas,
            source.globalSecondaryIndexes as Described<DescribedIndex[]>,
        ])
        .apply(([streamEnabled, streamViewType, hashKey, rangeKey, attributes, replicaList, indexes]) => ({
            streamEnabled,
            streamViewType,
            hashKey,
            rangeKey,
            attributes: attributes?.map((a) => ({ name: a.name, type: a.type })),
            replicaRegions: (replicaList ?? []).map((replica) => replica.regionName ?? "(unnamed region)"),
            strongReplicaRegions: (replicaList ?? [])
                .filter((replica) => replica.consistencyMode?.toUpperCase() === "STRONG")
                .map((replica) => replica.regionName ?? "(unnamed region)"),
            globalSecondaryIndexes: indexes ?? [],
        }));
    return { name: source.name, arn: source.arn, streamArn: source.streamArn, settings };
}

/** The table the component creates: its settings pass by construction. */
function createdTable(name: string, args: HybridCounterComponentArgs, r: ResolvedArgs, parent: pulumi.Resource): UserTable {
    const layout = layoutFromArgs(args);
    const billingMode = args.billingMode ?? D.billingMode;
    const capacity = billingMode === "PROVISIONED" ? { readCapacity: args.readCapacity, writeCapacity: args.writeCapacity } : {};
    const table = new aws.dynamodb.Table(
        `${name}-table`,
        {
            name: args.tableName,
            attributes: [
                { name: layout.partitionKey, type: "S" },
                { name: layout.sortKey, type: "S" },
                // In the same-table placement the counter items, and so the heal index, live here.
                ...(r.sameTable ? healIndexAttributes() : []),
            ],
            hashKey: layout.partitionKey,
            rangeKey: layout.sortKey,
            ...(r.sameTable ? { globalSecondaryIndexes: [{ ...healIndex(), ...capacity }] } : {}),
            billingMode,
            ...capacity,
            streamEnabled: true,
            streamViewType: D.streamViewType,
            pointInTimeRecovery: { enabled: true },
            serverSideEncryption: { enabled: true, ...(args.tableKmsKeyArn !== undefined ? { kmsKeyArn: args.tableKmsKeyArn } : {}) },
            ...(r.sameTable ? { ttl: counterItemsTtl() } : {}),
            deletionProtectionEnabled: args.deletionProtection ?? D.deletionProtection,
            tags: args.tags,
        },
        { parent },
    );
    const settings = pulumi.output<AttachedTableSettings>({
        streamEnabled: true,
        streamViewType: D.streamViewType,
        hashKey: layout.partitionKey,
        rangeKey: layout.sortKey,
    });
    return { name: table.name, arn: table.arn, streamArn: table.streamArn, settings };
}
