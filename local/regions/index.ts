/**
 * Several regions on one machine: DynamoDB Local engines, one per region, kept in step by a replicator that applies
 * each region's writes to the others last-writer-wins, as global tables version 2019.11.21 do, and the TTL DynamoDB
 * Local does not run, swept in each replica, its deletes replicated like any write. The invariants the replicator keeps
 * are stated at the top of replicator.ts; the sweep's at the top of ttl-sweep.ts.
 */
export {
    Replicator,
    validateReplicatorOptions,
    type ReplicaEngine,
    type ReplicatorOptions,
    type RegionReplicationStats,
} from "./replicator";
export { later, localWriteTime, canonical, itemKey, type Version } from "./versions";
export { TtlSweep, type TtlSweepOptions } from "./ttl-sweep";
