/** Types of scripts/control-build-fresh.js (plain JavaScript for the `octoprox` bin). */
export declare const CONTROL_BUILD_DIR: string;
export declare function controlBundlePath(name: string): string;
export declare function controlManifestPath(name: string): string;
export declare function controlBuildFresh(name: string): boolean;
