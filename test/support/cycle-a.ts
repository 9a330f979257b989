/** Half of a deliberate import circle, for test/import-cycles.test.ts. */
import { b } from "./cycle-b";

export const a = (): string => b();
