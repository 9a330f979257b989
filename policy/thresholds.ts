/**
 * Stack policy: a hybrid counter's function that sends threshold events to a topic can publish there, and a topic of
 * this stack that receives them is encrypted at rest.
 *
 * Why (runtime/limits/publish.ts): the consumer, the redrive and the settler publish a key's threshold crossings to
 * the topic their `HYBRID_COUNTER_THRESHOLD_TOPIC_ARN` names. A function whose role cannot publish there keeps its
 * events unsent on the key's eventual item, and the settler retries them on every run, so nobody ever hears of a key
 * that reached its limit; that is a silent failure, hence mandatory. The events name the keys (tenants, accounts), so
 * a topic of this stack that carries them is encrypted (`kmsMasterKeyId`; the component uses the AWS managed SNS key).
 *
 * The topic is the one the function's environment was computed from (its property dependency), or, for a topic this
 * stack does not hold, the ARN itself: only the role is checked then. The role's documents are read as
 * consumer-iam-no-wildcard-actions reads them (inline, RolePolicy, attached Policy resources); a grant through an AWS
 * managed policy, which the stack does not show, is not seen.
 */

import type { PolicyResource } from "@pulumi/policy";
import { ExemptionConfig, stackPolicy } from "./config";
import { dependenciesOf, TYPES } from "./graph";
import { asList, documentsOf, parseDocument } from "./iam";
import { COUNTER_CONSUMER_VARIABLE } from "./parallelization";
import { isUnknown, read, show, UNKNOWN } from "./unknowns";

/** The variable a counter's function reads the threshold topic from (runtime/shared/config.ts, `ENV.thresholdTopicArn`). */
export const COUNTER_THRESHOLD_TOPIC_VARIABLE = "HYBRID_COUNTER_THRESHOLD_TOPIC_ARN";

/** `*` and `?` in an IAM pattern, as a regular expression over the whole value. */
function globMatches(pattern: string, value: string): boolean {
    const source = pattern
        .replace(/[.+^${}()|[\]\\]/g, "\\$&")
        .replace(/\*/g, ".*")
        .replace(/\?/g, ".");
    return new RegExp(`^${source}$`, "i").test(value);
}

/** Does a statement's `Action`/`NotAction` (or `Resource`/`NotResource`) pair cover `value`? */
function covers(statement: Record<string, unknown>, listed: "Action" | "Resource", value: string): boolean {
    const patterns = (key: string) => asList(statement[key]).filter((p): p is string => typeof p === "string");
    const not = `Not${listed}`;
    if (statement[not] !== undefined) {
        return !patterns(not).some((p) => globMatches(p, value));
    }
    return patterns(listed).some((p) => globMatches(p, value));
}

/**
 * Does an IAM document allow `sns:Publish` on `topicArn`: an Allow statement whose actions (patterns included, or
 * everything a `NotAction` leaves) cover it, on resources that cover the topic?
 */
export function allowsPublish(document: Record<string, unknown>, topicArn: string): boolean {
    return asList(document.Statement).some((statement) => {
        if (typeof statement !== "object" || statement === null) {
            return false;
        }
        const s = statement as Record<string, unknown>;
        return s.Effect === "Allow" && covers(s, "Action", "sns:Publish") && covers(s, "Resource", topicArn);
    });
}

/** The function's role's documents, parsed; unknown (`undefined`) while any of them is unknown during preview. */
function roleDocuments(fn: PolicyResource, resources: readonly PolicyResource[]): Array<Record<string, unknown>> | undefined {
    const documents: Array<Record<string, unknown>> = [];
    for (const role of dependenciesOf(fn, "role", TYPES.role)) {
        for (const { text } of documentsOf(role, resources).documents) {
            const parsed = isUnknown(text) ? text : read(() => parseDocument(text));
            if (isUnknown(parsed)) {
                return undefined;
            }
            if (parsed !== undefined) {
                documents.push(parsed);
            }
        }
    }
    return documents;
}

export type CounterThresholdTopicConfig = ExemptionConfig;

export const counterThresholdTopic = stackPolicy<CounterThresholdTopicConfig>({
    name: "counter-threshold-topic",
    description:
        `A hybrid counter's function that names a threshold topic (${COUNTER_THRESHOLD_TOPIC_VARIABLE}) may publish to it (sns:Publish on the topic), ` +
        "and a topic of this stack that receives the events is encrypted at rest. Without the grant, threshold events are never sent: " +
        "they stay on the keys' eventual items and the settler retries them on every run.",
    remediationSteps:
        "Grant the function's role sns:Publish on the topic (the component grants it on the topic it is given or creates), " +
        'and set kmsMasterKeyId on the topic (for example "alias/aws/sns").',
    enforcementLevel: "mandatory",
    config: {},
    check: (args, _config, reportViolation) => {
        const named: Array<{ fn: PolicyResource; variables: Record<string, unknown> }> = [];
        for (const fn of args.resources.filter((r) => r.type === TYPES.function)) {
            const variables = read(() => (fn.props.environment?.variables ?? {}) as Record<string, unknown>);
            if (!isUnknown(variables) && COUNTER_CONSUMER_VARIABLE in variables && COUNTER_THRESHOLD_TOPIC_VARIABLE in variables) {
                named.push({ fn, variables });
            }
        }
        if (named.length === 0) {
            args.notApplicable("no hybrid counter's function in this stack names a threshold topic");
        }
        const reportedTopics = new Set<string>();
        for (const { fn, variables } of named) {
            const value = read(() => variables[COUNTER_THRESHOLD_TOPIC_VARIABLE]);
            for (const topic of dependenciesOf(fn, "environment", TYPES.topic)) {
                const key = read(() => topic.props.kmsMasterKeyId as unknown);
                if (!isUnknown(key) && (typeof key !== "string" || key.length === 0) && !reportedTopics.has(topic.urn)) {
                    reportedTopics.add(topic.urn);
                    reportViolation(
                        `topic '${topic.name}' receives the threshold events of function '${fn.name}' ([${COUNTER_THRESHOLD_TOPIC_VARIABLE}]) ` +
                            `but has [kmsMasterKeyId] ${show(key)}: the events name the keys; encrypt the topic`,
                        topic.urn,
                    );
                }
            }
            if (isUnknown(value) || typeof value !== "string" || value.length === 0) {
                continue;
            }
            const documents = roleDocuments(fn, args.resources);
            // A document whose statements are unknown during preview is checked during the update.
            const allowed = documents === undefined ? UNKNOWN : read(() => documents.some((d) => allowsPublish(d, value)));
            if (allowed === false) {
                reportViolation(
                    `function '${fn.name}' sends threshold events to ${value} ([${COUNTER_THRESHOLD_TOPIC_VARIABLE}]), but no policy of its role ` +
                        "allows sns:Publish there: the events would never be sent",
                    fn.urn,
                );
            }
        }
    },
});
