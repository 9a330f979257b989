/** hybrid-counter: the Pulumi component. The runtime is at `hybrid-counter/runtime`, the policies at `hybrid-counter/policy`. */
export * from "./components";
