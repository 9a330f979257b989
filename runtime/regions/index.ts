/**
 * Counting per region on a global table (docs/design/global-tables.md): each write is counted once, by the region
 * that owns its life, into counter items that region alone writes.
 *
 * Ownership. `owner(image)` is the image's stamp (`hc_region`, written by the client on create and never changed by
 * it) when the stamp names a member region, else the home region. Every image has exactly one owner.
 *
 * Keys. Every counter item region R writes carries `@R#` after the counter prefix (`regionalCounterPrefix`):
 * `<counterPrefix>@R#best-effort`, `...#eventual`, `...#item#<id>`, the settler's cursor, backfill runs; R's heal-index
 * marks are `R#<shard>`. No two regions write one counter item, so the counters table's last-writer-wins loses nothing.
 * With no regions configured every key is the single-region one, byte for byte.
 *
 * Eventual, per region. E_R: eventual_R(k) == R's markers of k that are "counted" == items of k in R's replica, as
 * R's consumer has applied its stream, that are live, selected and owned by R. R's consumer sets R's marker of an item
 * counted iff the record's new image is live, selected and owned by R; a record neither of whose images R owns leaves
 * the marker as it is. Once replication and every stream have drained, every item has one owner in every replica, so
 * the sum over regions of eventual_R(k) is the number of live selected items of k.
 *
 * Strict mode's bound across regions (no cross-region call on the request path):
 *
 *     Q:  sum over regions of q_R  <=  L            where q_R = base_R(L)
 *     A:  best-effort_R  <=  q_R + c_R                (c_R: what create() without a limit added in R)
 *     B:  live lives of k  <=  sum over regions of best-effort_R  (+ the other writers' items, as in one region)
 *
 * - Q: base_R(L) splits L over the sorted member list, floor(L / M) each and one more for the first L mod M
 *   (quotas.ts): the bases sum to exactly L, and every region computes its own from L and the configuration alone.
 * - A: R's client admits a life only by a conditional write on R's own best-effort item(s) under the limit q_R,
 *   exactly as one region admits under L (unsharded: `count < q_R`; sharded: the reservation of
 *   runtime/shards/reservation.ts keeps q_R over R's shards, its stored quotas armed under q_R, so a changed q_R is a
 *   changed limit for it and rearms). Releases and heals only lower a count, or raise it to the lives R's replica
 *   shows R owning (the one-region exception for other writers' items).
 * - B: a life's unit is taken in its creating region before its put, and given back only by that region (a delete of
 *   a life R owns, in R; R's heal once R's replica shows the life gone). A delete made in S of R's life moves no unit:
 *   R's unit stays until R sees the delete replicated and heals. A life whose stamp another region's concurrent create
 *   overwrote (last-writer-wins) keeps both units until the loser's heal: an overcount, the safe side.
 * - So live lives <= sum best-effort_R <= sum q_R + c <= L + c: the key never passes L through tryCreate, in any
 *   region, whatever replication does. A region cut off from the others keeps admitting under its own q_R (no other
 *   region's quota is needed to admit), so nothing it does can pass L; its unused quota is stranded meanwhile.
 * Ways it could break, and why it does not: two regions computing different M (a member list changed in one region
 *   first): the lists are deployed together, and a region removed from `members` must be fenced first (its quota
 *   is then not admitting); a limit that differs between regions' calls: each region admits under base_R of the L its
 *   call carries, so two limits L1 < L2 in flight bound the key by the sum of the bases under each region's latest
 *   limit (at most L2), as one region's key is bounded by the limit of its latest call.
 *
 * Tried against the engine (test/regions-strict.test.ts): three regions' clients creating and deleting one key at once,
 * deletes of other regions' lives included, with faults (throttling, conflicts, 500s before and after the write), their
 * consumers and heals between rounds: the live lives never pass L, every region stays within q_R, and every live life
 * holds a unit in its owner's best-effort. Admitting under L instead of q_R in each region passes L in the first round.
 *
 * Grants between regions (moving unused quota off the request path) are designed (docs/design/global-tables.md) and not
 * built: without them each region admits up to its base quota, which keeps the bound and may refuse a call in a region
 * whose quota is used while another region's is not.
 */
export {
    DEFAULT_REGION_ATTRIBUTE,
    REGIONS_MAX,
    REGION_NAME_MAX_BYTES,
    normalizedRegions,
    parseRegions,
    regionCounterPrefix,
    regionNameProblem,
    regionalCounterPrefix,
    regionsJson,
    regionsProblems,
    type RegionMember,
    type RegionsConfig,
    type RegionsContext,
} from "./config";
export { homeRegion, isMember, memberRegions, ownerOf, ownsImage, regionAttributeOf, stampOf, type OwnershipScope } from "./ownership";
export { baseQuota, baseQuotas } from "./quotas";
