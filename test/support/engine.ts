/** One DynamoDB Local per test file: started before its tests, stopped after them. */
import { startEngine, type EngineOptions, type LocalEngine } from "../../local/engine/engine";

let announced = false;

/** The parity layer (local/engine/parity.ts) is on unless the options or HYBRID_COUNTER_PARITY=off say otherwise. */
export function useEngine(options: EngineOptions = {}): () => LocalEngine {
    let engine: LocalEngine | undefined;
    before(async () => {
        engine = await startEngine(options);
        if (!announced) {
            announced = true;
            process.stderr.write(
                `DynamoDB Local ${engine.parity ? "behind the parity layer (AWS limits enforced)" : "without the parity layer (HYBRID_COUNTER_PARITY=off)"}\n`,
            );
        }
    });
    after(async () => {
        await engine?.stop();
    });
    return () => {
        if (!engine) {
            throw new Error("the engine is started in the before hook");
        }
        return engine;
    };
}
