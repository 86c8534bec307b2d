/**
 * What a cloud connector's form offers (GET /api/v1/connector-options): each cloud's common
 * regions (zones, locations) and sizes. A list to choose from, not a limit: a connector may
 * name any value of the right form, and the cloud's own check refuses one it does not know.
 */
import { COUNTRY_CODES } from "../../shared/countries.ts";

export const AWS_REGIONS = [
  "us-east-1",
  "us-east-2",
  "us-west-1",
  "us-west-2",
  "ca-central-1",
  "sa-east-1",
  "eu-west-1",
  "eu-west-2",
  "eu-west-3",
  "eu-central-1",
  "eu-central-2",
  "eu-north-1",
  "eu-south-1",
  "me-central-1",
  "af-south-1",
  "ap-south-1",
  "ap-southeast-1",
  "ap-southeast-2",
  "ap-northeast-1",
  "ap-northeast-2",
  "ap-northeast-3",
  "ap-east-1",
] as const;

export const AWS_INSTANCE_TYPES = [
  "t3.nano",
  "t3.micro",
  "t3.small",
  "t3a.nano",
  "t3a.micro",
  "t3a.small",
  "t4g.nano",
  "t4g.micro",
  "t4g.small",
  "c6i.large",
  "c7g.medium",
] as const;

export const GCP_ZONES = [
  "us-central1-a",
  "us-central1-b",
  "us-east1-b",
  "us-east4-a",
  "us-west1-a",
  "northamerica-northeast1-a",
  "southamerica-east1-a",
  "europe-west1-b",
  "europe-west2-a",
  "europe-west3-a",
  "europe-west4-a",
  "europe-north1-a",
  "asia-east1-a",
  "asia-northeast1-a",
  "asia-south1-a",
  "asia-southeast1-a",
  "australia-southeast1-a",
] as const;

export const GCP_MACHINE_TYPES = [
  "e2-micro",
  "e2-small",
  "e2-medium",
  "n2d-standard-2",
  "t2d-standard-1",
  "t2a-standard-1",
] as const;

export const AZURE_LOCATIONS = [
  "eastus",
  "eastus2",
  "westus2",
  "westus3",
  "centralus",
  "canadacentral",
  "brazilsouth",
  "northeurope",
  "westeurope",
  "uksouth",
  "francecentral",
  "germanywestcentral",
  "swedencentral",
  "switzerlandnorth",
  "uaenorth",
  "southafricanorth",
  "centralindia",
  "southeastasia",
  "eastasia",
  "japaneast",
  "koreacentral",
  "australiaeast",
] as const;

export const AZURE_VM_SIZES = [
  "Standard_B1ls",
  "Standard_B1s",
  "Standard_B1ms",
  "Standard_B2s",
  "Standard_B2ats_v2",
  "Standard_D2as_v5",
  "Standard_F2s_v2",
] as const;

export interface ConnectorOptions {
  aws_regions: string[];
  aws_instance_types: string[];
  gcp_zones: string[];
  gcp_machine_types: string[];
  azure_locations: string[];
  azure_vm_sizes: string[];
  countries: string[];
}

export function connectorOptions(): ConnectorOptions {
  return {
    aws_regions: [...AWS_REGIONS],
    aws_instance_types: [...AWS_INSTANCE_TYPES],
    gcp_zones: [...GCP_ZONES],
    gcp_machine_types: [...GCP_MACHINE_TYPES],
    azure_locations: [...AZURE_LOCATIONS],
    azure_vm_sizes: [...AZURE_VM_SIZES],
    countries: [...COUNTRY_CODES],
  };
}
