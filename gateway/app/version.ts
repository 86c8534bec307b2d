/**
 * The release the gateway runs: package.json's version, imported as a module so the compiled
 * binary carries it (the gateway reads no file of the checkout at run time). The control plane
 * reads the same field its own way (control/core/version.ts).
 */
import manifest from "../../package.json" with { type: "json" };

export const VERSION: string = typeof manifest.version === "string" ? manifest.version : "unknown";
