/**
 * Several regions on one machine: DynamoDB Local engines, one per region, kept in step by a replicator that applies
 * each region's writes to the others last-writer-wins, as global tables version 2019.11.21 do. The invariants the
 * replicator keeps are stated at the top of replicator.ts.
 */
export {
    Replicator,
    validateReplicatorOptions,
    type ReplicaEngine,
    type ReplicatorOptions,
    type RegionReplicationStats,
} from "./replicator";
export { later, localWriteTime, canonical, itemKey, type Version } from "./versions";
