#!/usr/bin/env node
// The `octoprox` bin: runs the TypeScript CLI through tsx's loader, so a clone needs no build.
import { register } from "tsx/esm/api";

register();
await import("./main.ts");
