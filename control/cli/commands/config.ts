import type { Command } from "commander";
export function registerConfig(_program: Command): void {}
