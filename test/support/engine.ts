/** One DynamoDB Local per test file: started before its tests, stopped after them. */
import { startEngine, type LocalEngine } from "../../local/engine";

export function useEngine(): () => LocalEngine {
    let engine: LocalEngine | undefined;
    before(async () => {
        engine = await startEngine();
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
