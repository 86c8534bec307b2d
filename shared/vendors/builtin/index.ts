/**
 * The shipped descriptors, each written from its vendor's public documentation (each file names
 * the pages read and what they left open).
 */
import type { DescriptorInput } from "../descriptor.ts";
import { brightdata } from "./brightdata.ts";
import { decodo } from "./decodo.ts";
import { iproyal } from "./iproyal.ts";
import { netnut } from "./netnut.ts";
import { oxylabs } from "./oxylabs.ts";
import { soax } from "./soax.ts";
import { webshare } from "./webshare.ts";

export const BUILTIN_DESCRIPTORS: readonly DescriptorInput[] = [
  brightdata,
  decodo,
  iproyal,
  netnut,
  oxylabs,
  soax,
  webshare,
];
