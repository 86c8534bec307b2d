/**
 * A project's block rules and retry budget: what they are, the presets shipped with them, how an
 * operator's rule is read (one reading for the api, a configuration file and the gateway) and how
 * the gateway holds a project's rules once compiled. docs/blocking.md says what each does.
 *
 * A rule judges an answer from the target. It matches when every condition it names holds: its
 * `status` lists the answer's status; its `header` is on the answer (with the value or pattern it
 * names); one of its `body_contains` markers is in the body's first bytes (decoded, compared
 * without case); the target's host is under one of its `domains` (none: every host). The first
 * rule in order that matches gives the verdict; a rule in `shadow` mode only records what it
 * would have given, and judging goes on to the next; a rule `off` is skipped.
 *
 * Runs unchanged on Node and Deno.
 */
import { readBypassEntry } from "../tls/bypass.ts";
import type { EscalationPolicy } from "./escalation.ts";

export const VERDICTS = ["ok", "blocked", "rate_limited"] as const;
export type Verdict = (typeof VERDICTS)[number];

export const RULE_MODES = ["on", "shadow", "off"] as const;
export type RuleMode = (typeof RULE_MODES)[number];

/** Bounds an operator's input is held to (each refused past it, naming the field). */
export const BLOCK_RULE_LIMITS = {
  rules: 50,
  nameChars: 64,
  statuses: 50,
  markers: 20,
  markerChars: 256,
  patternChars: 512,
  valueChars: 512,
  domains: 100,
  coolDownSecondsMax: 7 * 86_400,
  /** The most of an answer's body judged: `block_body_bytes`' ceiling. */
  bodyBytesMax: 65_536,
  retryAttemptsMax: 10,
  retryTotalSecondsMax: 600,
} as const;

/** A project's `block_body_bytes` when it sets none. */
export const DEFAULT_BODY_BYTES = 8_192;

/** A header condition: present (neither), equal to `value` (no case), or matching `pattern`. */
export interface HeaderCondition {
  name: string;
  value?: string;
  pattern?: string;
}

/** A rule as stored, carried in the feed and answered by the api. */
export interface BlockRule {
  name: string;
  mode: RuleMode;
  /** A shipped rule this one uses: its conditions and verdict come from it. */
  preset?: PresetName;
  status?: number[];
  header?: HeaderCondition;
  body_contains?: string[];
  domains?: string[];
  verdict: Verdict;
  cool_down_seconds: number;
}

/** How a project retries a judged answer on another exit. */
export interface RetryPolicy {
  /** Exits tried in all (1: no retry). */
  attempts: number;
  /** The methods retried; any but GET, HEAD, OPTIONS and TRACE is the project's opt-in. */
  methods: string[];
  /** From the request's first attempt: no further attempt starts after it. */
  max_total_seconds: number;
  /** A sticky session whose exit was blocked moves to another (else it keeps its exit). */
  rebind_sticky: boolean;
}

/** Methods RFC 9110 calls safe: retried without an opt-in. */
export const SAFE_METHODS: readonly string[] = ["GET", "HEAD", "OPTIONS", "TRACE"];

export const DEFAULT_RETRY: Readonly<RetryPolicy> = Object.freeze({
  attempts: 3,
  methods: ["GET", "HEAD"],
  max_total_seconds: 30,
  rebind_sticky: false,
});

/** A request body held for a retry (methods with bodies, when opted in): at most this much. */
export const RETRY_BODY_MAX_BYTES = 65_536;

export const PRESET_NAMES = [
  "rate-limit-429",
  "service-unavailable-retry-after",
  "cloudflare-challenge",
  "aws-waf",
  "akamai-denied",
  "datadome",
  "perimeterx",
  "captcha-page",
] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

/** What a preset gives a rule that uses it. */
export interface Preset {
  about: string;
  status?: number[];
  header?: HeaderCondition;
  body_contains?: string[];
  verdict: Verdict;
  cool_down_seconds: number;
}

/** The shipped rules: an operator uses one by name, copies it, or leaves it out. */
export const PRESETS: Readonly<Record<PresetName, Preset>> = {
  "rate-limit-429": {
    about: "429 Too Many Requests, from any site",
    status: [429],
    verdict: "rate_limited",
    cool_down_seconds: 60,
  },
  "service-unavailable-retry-after": {
    about: "503 with a Retry-After field: a site shedding this exit's load",
    status: [503],
    header: { name: "retry-after" },
    verdict: "rate_limited",
    cool_down_seconds: 60,
  },
  "cloudflare-challenge": {
    about: "Cloudflare's managed or JavaScript challenge (the cf-mitigated: challenge field)",
    header: { name: "cf-mitigated", value: "challenge" },
    verdict: "blocked",
    cool_down_seconds: 600,
  },
  "aws-waf": {
    about: "AWS WAF's CAPTCHA or challenge action (x-amzn-waf-action)",
    header: { name: "x-amzn-waf-action", pattern: "^(captcha|challenge)$" },
    verdict: "blocked",
    cool_down_seconds: 600,
  },
  "akamai-denied": {
    about: "Akamai's Access Denied page (403 with its reference number)",
    status: [403],
    body_contains: ["Access Denied", "errors.edgesuite.net"],
    verdict: "blocked",
    cool_down_seconds: 600,
  },
  "datadome": {
    about: "DataDome's block (403 with the x-datadome field)",
    status: [403],
    header: { name: "x-datadome" },
    verdict: "blocked",
    cool_down_seconds: 600,
  },
  "perimeterx": {
    about: "HUMAN (PerimeterX) Press & Hold page (403 with its captcha script)",
    status: [403],
    body_contains: ["px-captcha", "_pxCaptcha"],
    verdict: "blocked",
    cool_down_seconds: 600,
  },
  "captcha-page": {
    about: "a 403 or 429 page naming a captcha (g-recaptcha, hcaptcha, turnstile)",
    status: [403, 429],
    body_contains: ["g-recaptcha", "hcaptcha", "cf-turnstile", "captcha"],
    verdict: "blocked",
    cool_down_seconds: 600,
  },
};

/** A header field name: RFC 9110's token. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const RULE_NAME = /^[a-z0-9][a-z0-9_.-]*$/;
const METHOD = /^[A-Z][A-Z0-9_-]*$/;

/** A refusal at a path under the field (`[2].header.pattern`) and why. */
export interface RuleIssue {
  path: string;
  message: string;
}

type Input = Record<string, unknown>;

const isObject = (value: unknown): value is Input =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const isInteger = (value: unknown, min: number, max: number): value is number =>
  typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;

/** Whether `text` compiles as a JavaScript regular expression (the gateway's flag: `i`). */
export function patternError(text: string): string | undefined {
  try {
    new RegExp(text, "i");
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : "does not compile";
  }
}

function readHeader(raw: unknown, at: string, issues: RuleIssue[]): HeaderCondition | undefined {
  if (!isObject(raw)) {
    issues.push({ path: at, message: "must be an object with a name, and a value or a pattern" });
    return undefined;
  }
  for (const key of Object.keys(raw)) {
    if (key !== "name" && key !== "value" && key !== "pattern") {
      issues.push({ path: `${at}.${key}`, message: "is not a field of a header condition" });
    }
  }
  const { name, value, pattern } = raw;
  if (typeof name !== "string" || !TOKEN.test(name) || name.length > 128) {
    issues.push({
      path: `${at}.name`,
      message: "must be a header field name (letters, digits and !#$%&'*+.^_`|~-)",
    });
    return undefined;
  }
  const header: HeaderCondition = { name: name.toLowerCase() };
  if (value !== undefined && pattern !== undefined) {
    issues.push({ path: `${at}.pattern`, message: "must not be given with value: one or neither" });
  }
  if (value !== undefined) {
    if (typeof value !== "string" || value.length > BLOCK_RULE_LIMITS.valueChars) {
      issues.push({
        path: `${at}.value`,
        message: `must be text of at most ${BLOCK_RULE_LIMITS.valueChars} characters`,
      });
    } else header.value = value.trim();
  }
  if (pattern !== undefined) {
    if (
      typeof pattern !== "string" || pattern.length === 0 ||
      pattern.length > BLOCK_RULE_LIMITS.patternChars
    ) {
      issues.push({
        path: `${at}.pattern`,
        message: `must be a regular expression of 1-${BLOCK_RULE_LIMITS.patternChars} characters`,
      });
    } else {
      const error = patternError(pattern);
      if (error !== undefined) {
        issues.push({
          path: `${at}.pattern`,
          message: `is not a valid regular expression: ${error}`,
        });
      } else header.pattern = pattern;
    }
  }
  return header;
}

function readStatuses(raw: unknown, at: string, issues: RuleIssue[]): number[] | undefined {
  if (
    !Array.isArray(raw) || raw.length === 0 || raw.length > BLOCK_RULE_LIMITS.statuses ||
    !raw.every((code) => isInteger(code, 100, 599))
  ) {
    issues.push({
      path: at,
      message: `must be a list of 1-${BLOCK_RULE_LIMITS.statuses} HTTP status codes (100-599)`,
    });
    return undefined;
  }
  return [...new Set(raw as number[])];
}

function readMarkers(raw: unknown, at: string, issues: RuleIssue[]): string[] | undefined {
  const { markers, markerChars } = BLOCK_RULE_LIMITS;
  if (
    !Array.isArray(raw) || raw.length === 0 || raw.length > markers ||
    !raw.every((m) => typeof m === "string" && m.length > 0 && m.length <= markerChars)
  ) {
    issues.push({
      path: at,
      message: `must be a list of 1-${markers} texts of 1-${markerChars} characters`,
    });
    return undefined;
  }
  return [...new Set(raw as string[])];
}

function readDomains(raw: unknown, at: string, issues: RuleIssue[]): string[] | undefined {
  if (!Array.isArray(raw) || raw.length > BLOCK_RULE_LIMITS.domains) {
    issues.push({
      path: at,
      message: `must be a list of at most ${BLOCK_RULE_LIMITS.domains} host names or .suffixes`,
    });
    return undefined;
  }
  const out: string[] = [];
  raw.forEach((entry, index) => {
    const read = typeof entry === "string"
      ? readBypassEntry(entry)
      : { ok: false as const, message: "must be text" };
    if (read.ok) out.push(read.entry);
    else issues.push({ path: `${at}[${index}]`, message: read.message });
  });
  return [...new Set(out)];
}

/** The fields a rule using a preset may set besides it: the rest is the preset's. */
const PRESET_OWN = new Set(["name", "mode", "preset", "domains", "cool_down_seconds"]);
const RULE_FIELDS = new Set([
  ...PRESET_OWN,
  "status",
  "header",
  "body_contains",
  "verdict",
]);

/** One rule as an operator wrote it; undefined with `issues` told when it is refused. */
export function readBlockRule(
  raw: unknown,
  at: string,
  issues: RuleIssue[],
): BlockRule | undefined {
  const before = issues.length;
  if (!isObject(raw)) {
    issues.push({ path: at, message: "must be an object" });
    return undefined;
  }
  for (const key of Object.keys(raw)) {
    if (!RULE_FIELDS.has(key)) {
      issues.push({ path: `${at}.${key}`, message: "is not a rule field" });
    }
  }
  const presetName = raw.preset;
  let preset: Preset | undefined;
  if (presetName !== undefined) {
    if (
      typeof presetName !== "string" || !(PRESET_NAMES as readonly string[]).includes(presetName)
    ) {
      issues.push({ path: `${at}.preset`, message: `must be one of ${PRESET_NAMES.join(", ")}` });
      return undefined;
    }
    preset = PRESETS[presetName as PresetName];
    for (const key of Object.keys(raw)) {
      // The verdict a rule is answered with: taken back when it is the preset's own.
      if (key === "verdict" && raw.verdict === preset.verdict) continue;
      if (RULE_FIELDS.has(key) && !PRESET_OWN.has(key)) {
        issues.push({
          path: `${at}.${key}`,
          message:
            `comes from the preset ${presetName}: copy its fields into a rule of your own to change it`,
        });
      }
    }
  }
  const name = raw.name ?? presetName;
  if (
    typeof name !== "string" || name.length > BLOCK_RULE_LIMITS.nameChars || !RULE_NAME.test(name)
  ) {
    issues.push({
      path: `${at}.name`,
      message:
        `must be 1-${BLOCK_RULE_LIMITS.nameChars} characters: lower-case letters, digits, _ . and -, starting with a letter or digit`,
    });
  }
  const mode = raw.mode ?? "on";
  if (!(RULE_MODES as readonly unknown[]).includes(mode)) {
    issues.push({ path: `${at}.mode`, message: `must be one of ${RULE_MODES.join(", ")}` });
  }
  const rule: Partial<BlockRule> = { name: name as string, mode: mode as RuleMode };
  if (preset !== undefined) {
    rule.preset = presetName as PresetName;
  } else {
    if (raw.status !== undefined) rule.status = readStatuses(raw.status, `${at}.status`, issues);
    if (raw.header !== undefined) rule.header = readHeader(raw.header, `${at}.header`, issues);
    if (raw.body_contains !== undefined) {
      rule.body_contains = readMarkers(raw.body_contains, `${at}.body_contains`, issues);
    }
    if (raw.status === undefined && raw.header === undefined && raw.body_contains === undefined) {
      issues.push({
        path: at,
        message: "must name a condition: status, header or body_contains (or use a preset)",
      });
    }
    if (!(VERDICTS as readonly unknown[]).includes(raw.verdict)) {
      issues.push({ path: `${at}.verdict`, message: `must be one of ${VERDICTS.join(", ")}` });
    }
    rule.verdict = raw.verdict as Verdict;
  }
  if (raw.domains !== undefined) {
    const domains = readDomains(raw.domains, `${at}.domains`, issues);
    if (domains !== undefined && domains.length > 0) rule.domains = domains;
  }
  const coolDown = raw.cool_down_seconds ?? preset?.cool_down_seconds ?? 300;
  if (!isInteger(coolDown, 0, BLOCK_RULE_LIMITS.coolDownSecondsMax)) {
    issues.push({
      path: `${at}.cool_down_seconds`,
      message: `must be a whole number of seconds, 0-${BLOCK_RULE_LIMITS.coolDownSecondsMax}`,
    });
  }
  rule.cool_down_seconds = coolDown as number;
  if (preset !== undefined) rule.verdict = preset.verdict;
  return issues.length === before ? rule as BlockRule : undefined;
}

/** A project's list, in order; names unique. */
export function readBlockRules(raw: unknown, issues: RuleIssue[]): BlockRule[] | undefined {
  if (!Array.isArray(raw) || raw.length > BLOCK_RULE_LIMITS.rules) {
    issues.push({
      path: "",
      message: `must be a list of at most ${BLOCK_RULE_LIMITS.rules} rules`,
    });
    return undefined;
  }
  const before = issues.length;
  const rules: BlockRule[] = [];
  const names = new Set<string>();
  raw.forEach((entry, index) => {
    const rule = readBlockRule(entry, `[${index}]`, issues);
    if (rule === undefined) return;
    if (names.has(rule.name)) {
      issues.push({ path: `[${index}].name`, message: `repeats the rule name ${rule.name}` });
    }
    names.add(rule.name);
    rules.push(rule);
  });
  return issues.length === before ? rules : undefined;
}

/** A project's retry policy as written; undefined with `issues` told when refused. */
export function readRetryPolicy(raw: unknown, issues: RuleIssue[]): RetryPolicy | undefined {
  const before = issues.length;
  if (!isObject(raw)) {
    issues.push({ path: "", message: "must be an object (attempts, methods, max_total_seconds)" });
    return undefined;
  }
  const known = new Set(["attempts", "methods", "max_total_seconds", "rebind_sticky"]);
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) issues.push({ path: `.${key}`, message: "is not a retry field" });
  }
  const attempts = raw.attempts ?? DEFAULT_RETRY.attempts;
  if (!isInteger(attempts, 1, BLOCK_RULE_LIMITS.retryAttemptsMax)) {
    issues.push({
      path: ".attempts",
      message:
        `must be a whole number, 1-${BLOCK_RULE_LIMITS.retryAttemptsMax} (exits tried in all)`,
    });
  }
  const methods = raw.methods ?? DEFAULT_RETRY.methods;
  let upper: string[] = [];
  if (
    !Array.isArray(methods) || methods.length > 20 ||
    !methods.every((m) => typeof m === "string" && METHOD.test(m.toUpperCase()) && m.length <= 32)
  ) {
    issues.push({ path: ".methods", message: "must be a list of HTTP method names" });
  } else {
    upper = [...new Set(methods.map((m: string) => m.toUpperCase()))];
    const tunnel = upper.indexOf("CONNECT");
    if (tunnel >= 0) {
      issues.push({
        path: `.methods[${tunnel}]`,
        message: "CONNECT is a tunnel, not a request: its answers are judged inside it",
      });
    }
  }
  const total = raw.max_total_seconds ?? DEFAULT_RETRY.max_total_seconds;
  if (!isInteger(total, 1, BLOCK_RULE_LIMITS.retryTotalSecondsMax)) {
    issues.push({
      path: ".max_total_seconds",
      message: `must be a whole number of seconds, 1-${BLOCK_RULE_LIMITS.retryTotalSecondsMax}`,
    });
  }
  const rebind = raw.rebind_sticky ?? DEFAULT_RETRY.rebind_sticky;
  if (typeof rebind !== "boolean") {
    issues.push({ path: ".rebind_sticky", message: "must be true or false" });
  }
  if (issues.length !== before) return undefined;
  return {
    attempts: attempts as number,
    methods: upper,
    max_total_seconds: total as number,
    rebind_sticky: rebind as boolean,
  };
}

/** `block_body_bytes`: how much of a body the body markers are looked for in. */
export function bodyBytesIssue(value: unknown): string | undefined {
  return isInteger(value, 1, BLOCK_RULE_LIMITS.bodyBytesMax)
    ? undefined
    : `must be a whole number of bytes, 1-${BLOCK_RULE_LIMITS.bodyBytesMax}`;
}

/** A rule as the gateway applies it: the preset expanded, text lowered, the pattern compiled. */
export interface CompiledRule {
  name: string;
  shadow: boolean;
  statuses?: ReadonlySet<number>;
  header?: { name: string; value?: string; pattern?: RegExp };
  /** Lower-cased markers. */
  markers?: readonly string[];
  domains?: readonly string[];
  verdict: Verdict;
  coolDownMs: number;
}

/** A project's judging: its rules (none off), how much body to read, its retry policy. */
export interface CompiledBlocking {
  rules: readonly CompiledRule[];
  /** Whether any rule looks in the body (else no body byte is held). */
  readsBody: boolean;
  /** Whether any rule is scoped to domains (else every rule applies to every host). */
  scoped: boolean;
  bodyBytes: number;
  retry: Readonly<RetryPolicy>;
  /** retry.methods as a set. */
  retriedMethods: ReadonlySet<string>;
  /** Cost-aware escalation between the project's connector tiers; undefined: none. */
  escalation?: Readonly<EscalationPolicy>;
}

/**
 * The gateway's form of a project's rules (already validated by the api; one that would not
 * compile is skipped here, never thrown). Undefined when no rule is on or in shadow: nothing is
 * judged and nothing held.
 */
export function compileBlocking(
  rules: readonly BlockRule[],
  retry: RetryPolicy | null,
  bodyBytes: number | null,
  escalation: EscalationPolicy | null = null,
): CompiledBlocking | undefined {
  const compiled: CompiledRule[] = [];
  for (const rule of rules) {
    if (rule.mode === "off") continue;
    const preset = rule.preset === undefined ? undefined : PRESETS[rule.preset];
    if (rule.preset !== undefined && preset === undefined) continue;
    const source = preset ?? rule;
    const header = source.header;
    let pattern: RegExp | undefined;
    if (header?.pattern !== undefined) {
      if (patternError(header.pattern) !== undefined) continue;
      pattern = new RegExp(header.pattern, "i");
    }
    compiled.push({
      name: rule.name,
      shadow: rule.mode === "shadow",
      ...(source.status === undefined ? {} : { statuses: new Set(source.status) }),
      ...(header === undefined ? {} : {
        header: {
          name: header.name.toLowerCase(),
          ...(header.value === undefined ? {} : { value: header.value.toLowerCase() }),
          ...(pattern === undefined ? {} : { pattern }),
        },
      }),
      ...(source.body_contains === undefined
        ? {}
        : { markers: source.body_contains.map((m) => m.toLowerCase()) }),
      ...(rule.domains === undefined || rule.domains.length === 0
        ? {}
        : { domains: Object.freeze([...rule.domains]) }),
      verdict: source.verdict,
      coolDownMs: rule.cool_down_seconds * 1000,
    });
  }
  if (compiled.length === 0) return undefined;
  const policy = retry ?? DEFAULT_RETRY;
  return Object.freeze({
    rules: Object.freeze(compiled),
    readsBody: compiled.some((rule) => rule.markers !== undefined),
    scoped: compiled.some((rule) => rule.domains !== undefined),
    bodyBytes: Math.min(bodyBytes ?? DEFAULT_BODY_BYTES, BLOCK_RULE_LIMITS.bodyBytesMax),
    retry: policy,
    retriedMethods: new Set(policy.methods),
    ...(escalation === null ? {} : { escalation: Object.freeze({ ...escalation }) }),
  });
}
