/**
 * The repository's own Pulumi program (`main` in Pulumi.yaml): one HybridCounterComponent with its own
 * table, configured from stack config, with every output exported.
 *
 *     pulumi config set aws:region eu-west-1
 *     pulumi config set hybrid-counter:batchSize 200
 *     pulumi config set hybrid-counter:createAlarmTopic true
 *     pulumi config set hybrid-counter:counterMode strict
 *     pulumi up
 */
import * as pulumi from "@pulumi/pulumi";
import { HybridCounterComponent } from "../index";
import { stackSettingsFromConfig } from "./config";

const { name, args } = stackSettingsFromConfig(pulumi.runtime.allConfig());
const counter = new HybridCounterComponent(name, args);

export const tableName = counter.tableName;
export const tableArn = counter.tableArn;
export const tableStreamArn = counter.tableStreamArn;
export const countersTableName = counter.countersTableName;
export const countersTableArn = counter.countersTableArn;
export const consumerFunctionName = counter.consumerFunctionName;
export const consumerFunctionArn = counter.consumerFunctionArn;
export const redriveFunctionName = counter.redriveFunctionName;
export const redriveFunctionArn = counter.redriveFunctionArn;
export const firstDlqUrl = counter.firstDlqUrl;
export const firstDlqArn = counter.firstDlqArn;
export const fatalDlqUrl = counter.fatalDlqUrl;
export const fatalDlqArn = counter.fatalDlqArn;
export const alarmArns = counter.alarmArns;
export const alarmTopicArn = counter.alarmTopicArn;
export const thresholdTopicArn = counter.thresholdTopicArn;
export const dashboardName = counter.dashboardName;
export const clientConfig = counter.clientConfig;
export const apiEnvironment = counter.apiEnvironment;
export const apiPolicyDocument = counter.apiPolicyDocument;
export const thresholds = counter.thresholds;
export const usageRetentionDays = counter.usageRetentionDays;
