import type { Command } from "commander";
export function registerBackup(_program: Command): void {}
