/** Half of a deliberate import circle, for test/import-cycles.test.ts. */
import { a } from "./cycle-a";

export const b = (): string => (a.length > 0 ? "b" : "");
