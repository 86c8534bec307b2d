/**
 * The answers the OpenAPI document names (`#/components/schemas/<name>`): where a route's
 * answer is, or holds, one of these schemas, the document refers to it instead of repeating it.
 */
import type { AnySchema } from "../../model/validation.ts";
import { TrafficConfigAnswer, TrafficUsageAnswer, UsageAnswer } from "./common.ts";
import { ConnectorAnswer, PoolAnswer } from "./connectors.ts";
import { CredentialAnswer } from "./credentials.ts";
import { DistributionKeyAnswer } from "./distribution-keys.ts";
import {
  DeviceSeriesAnswer,
  FailureExampleAnswer,
  FailureReportAnswer,
  SeriesAnswer,
  SplitRowAnswer,
  SystemPointAnswer,
} from "./metrics.ts";
import { MitmCaptureAnswer } from "./mitm-captures.ts";
import { ProjectAnswer } from "./projects.ts";
import { ProviderAnswer, ProviderFieldAnswer, ProviderTypeAnswer } from "./providers.ts";
import { ProxyAnswer, UploadReportAnswer } from "./proxies.ts";
import { SequenceAnswer } from "./sequences.ts";
import { SystemStatsAnswer } from "./system.ts";
import { TokenAnswer, UserAnswer } from "./users.ts";
import { DeviceAnswer, WireguardSettingsAnswer } from "./wireguard.ts";
import { OpenvpnDeviceAnswer, OpenvpnSettingsAnswer } from "./openvpn.ts";

export const NAMED_ANSWERS: Readonly<Record<string, AnySchema>> = {
  Usage: UsageAnswer,
  TrafficConfig: TrafficConfigAnswer,
  TrafficUsage: TrafficUsageAnswer,
  Project: ProjectAnswer,
  Connector: ConnectorAnswer,
  Pool: PoolAnswer,
  Credential: CredentialAnswer,
  Proxy: ProxyAnswer,
  UploadReport: UploadReportAnswer,
  User: UserAnswer,
  Token: TokenAnswer,
  DistributionKey: DistributionKeyAnswer,
  Sequence: SequenceAnswer,
  ProviderField: ProviderFieldAnswer,
  ProviderType: ProviderTypeAnswer,
  Provider: ProviderAnswer,
  Series: SeriesAnswer,
  DeviceSeries: DeviceSeriesAnswer,
  SplitRow: SplitRowAnswer,
  FailureReport: FailureReportAnswer,
  FailureExample: FailureExampleAnswer,
  MitmCapture: MitmCaptureAnswer,
  SystemPoint: SystemPointAnswer,
  SystemStats: SystemStatsAnswer,
  WireguardSettings: WireguardSettingsAnswer,
  Device: DeviceAnswer,
  OpenvpnSettings: OpenvpnSettingsAnswer,
  OpenvpnDevice: OpenvpnDeviceAnswer,
};
