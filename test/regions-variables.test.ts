/**
 * The multi-region setting's environment variables: the component writes them (components/regions/settings.ts), the
 * runtime reads them (runtime/shared/config.ts) and the policy pack checks the consumer's (policy/regions.ts), all under
 * the same names.
 */
import { strict as assert } from "node:assert";
import { REGIONS_ENV } from "../components/regions";
import { COUNTER_REGIONS_VARIABLE } from "../policy/index";
import { ENV } from "../runtime/shared/config";

describe("the regions setting's environment variables", () => {
    it("are named alike by the component, the runtime and the policy pack", () => {
        // Assess
        assert.deepEqual(
            [REGIONS_ENV.regions, ENV.regions, COUNTER_REGIONS_VARIABLE],
            ["HYBRID_COUNTER_REGIONS", "HYBRID_COUNTER_REGIONS", "HYBRID_COUNTER_REGIONS"],
        );
        assert.deepEqual(
            [REGIONS_ENV.regionAttribute, ENV.regionAttribute],
            ["HYBRID_COUNTER_REGION_ATTRIBUTE", "HYBRID_COUNTER_REGION_ATTRIBUTE"],
        );
    });
});
