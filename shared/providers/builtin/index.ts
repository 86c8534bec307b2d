/** The shipped descriptors, each written from its vendor's public documentation. */
import type { DescriptorInput } from "../descriptor.ts";
import { oxylabs } from "./oxylabs.ts";

export const BUILTIN_DESCRIPTORS: readonly DescriptorInput[] = [oxylabs];
