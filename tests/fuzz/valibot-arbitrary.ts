/**
 * Values for a valibot schema, read from the schema itself: mostly of the shape it asks for (its
 * keys, types, picklists, literals, lengths, ranges and patterns), now and then a wrong value or
 * key anywhere, so a property reaches the checks and transforms deep inside a schema rather than
 * stopping at its first key. New schemas are covered as they are declared: nothing here names
 * one. Only JSON values (what a body or a feed section can carry).
 */
import fc from "fast-check";

/** A valibot schema or action, as its public object shape has it. */
interface Node {
  readonly kind: string;
  readonly type: string;
  readonly [key: string]: unknown;
}

const MAX_DEPTH = 5;

/** Any JSON value, the wrong answer to every schema. */
export const jsonJunk: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, "", " ", "\u00e9", [], {}),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.jsonValue({ maxDepth: 2 }),
);

/** A schema's actions, those of the schemas it pipes included, in order. */
function actionsOf(schema: Node): Node[] {
  const pipe = schema.pipe as Node[] | undefined;
  if (!pipe) return [];
  return [...actionsOf(pipe[0]), ...pipe.slice(1)];
}

function requirement(actions: Node[], type: string): unknown {
  return actions.find((action) => action.type === type)?.requirement;
}

function stringFor(actions: Node[]): fc.Arbitrary<string> {
  const pattern = requirement(actions, "regex") as RegExp | undefined;
  if (pattern) {
    return fc.oneof(
      { weight: 4, arbitrary: fc.stringMatching(new RegExp(pattern.source)) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
    );
  }
  if (actions.some((action) => action.type === "uuid")) return fc.uuid();
  if (actions.some((action) => action.type === "email")) return fc.emailAddress();
  if (actions.some((action) => action.type === "iso_timestamp")) {
    return fc.date({ noInvalidDate: true, min: new Date(0), max: new Date(4e12) }).map((date) =>
      date.toISOString()
    );
  }
  if (actions.some((action) => action.type === "url")) return fc.webUrl();
  const min = (requirement(actions, "min_length") as number | undefined) ??
    (requirement(actions, "length") as number | undefined) ?? 0;
  const max = (requirement(actions, "max_length") as number | undefined) ??
    (requirement(actions, "length") as number | undefined) ?? 24;
  const length = { minLength: min, maxLength: Math.max(min, Math.min(max, min + 24)) };
  return fc.oneof(
    { weight: 4, arbitrary: fc.string(length) },
    { weight: 1, arbitrary: fc.string({ ...length, unit: "grapheme" }) },
    {
      weight: 1,
      arbitrary: fc.constantFrom("", " ", "  x  ", "a".repeat(Math.min(max + 1, 4096))),
    },
  );
}

function numberFor(actions: Node[]): fc.Arbitrary<number> {
  const min = requirement(actions, "min_value") as number | undefined;
  const max = requirement(actions, "max_value") as number | undefined;
  const integer = actions.some((action) =>
    action.type === "integer" || action.type === "safe_integer"
  );
  const range = {
    min: min ?? (integer ? -10 : -1e6),
    max: max ?? (integer ? 1e6 : 1e6),
  };
  return fc.oneof(
    { weight: 4, arbitrary: fc.integer({ min: Math.ceil(range.min), max: Math.floor(range.max) }) },
    {
      weight: 1,
      arbitrary: fc.double({ ...range, noNaN: true, noDefaultInfinity: true }),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        range.min - 1,
        range.max + 1,
        0,
        -0,
        0.5,
        Number.MAX_SAFE_INTEGER + 2,
        1e308,
      ),
    },
  );
}

/**
 * Texts that custom checks (a country code, a CIDR block, a URL) take, by the field's name: a
 * random string rarely passes them, and the checks after them would go untried.
 */
const HINTS: readonly [RegExp, fc.Arbitrary<string>][] = [
  [/countr/, fc.constantFrom("us", "GB", "de", "uk")],
  [/cidr/, fc.constantFrom("10.0.0.0/8", "192.168.1.7", "2001:db8::/32", "::1")],
  [
    /url$/,
    fc.constantFrom(
      "http://user:pass@10.0.0.1:8080",
      "socks5://proxy.test:1080",
      "https://example.com/health",
    ),
  ],
];

function hinted(key: string, schema: Node, depth: number): fc.Arbitrary<unknown> {
  const base = valueFor(schema, depth);
  const hint = HINTS.find(([pattern]) => pattern.test(key))?.[1];
  if (!hint) return base;
  return fc.oneof(base, hint, fc.array(hint, { minLength: 1, maxLength: 3 }));
}

function objectFor(schema: Node, depth: number): fc.Arbitrary<unknown> {
  const entries = schema.entries as Record<string, Node>;
  const keys = Object.keys(entries);
  const values: Record<string, fc.Arbitrary<unknown>> = {};
  for (const key of keys) values[key] = hinted(key, entries[key], depth + 1);
  return fc.tuple(
    fc.record(values),
    // Now and then a key left out, or one the schema does not know.
    fc.oneof(
      { weight: 6, arbitrary: fc.constant([]) },
      {
        weight: 1,
        arbitrary: fc.array(fc.constantFrom(...(keys.length > 0 ? keys : ["x"])), { maxLength: 2 }),
      },
    ),
    fc.oneof(
      { weight: 10, arbitrary: fc.constant(undefined) },
      {
        weight: 1,
        arbitrary: fc.tuple(fc.constantFrom("extra", "__proto__", "constructor", "id"), jsonJunk),
      },
    ),
  ).map(([record, dropped, extra]) => {
    const out: Record<string, unknown> = { ...record };
    for (const key of dropped) delete out[key];
    // Optional entries come out undefined: as from JSON, they are left out instead.
    for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
    if (extra) Object.defineProperty(out, extra[0], { value: extra[1], enumerable: true });
    return out;
  });
}

function shaped(schema: Node, depth: number): fc.Arbitrary<unknown> {
  const actions = actionsOf(schema);
  switch (schema.type) {
    case "string":
      return stringFor(actions);
    case "number":
      return numberFor(actions);
    case "boolean":
      return fc.boolean();
    case "null":
      return fc.constant(null);
    case "literal":
      return fc.constant(schema.literal);
    case "picklist":
    case "enum": {
      const options = schema.options as readonly unknown[];
      return options.length > 0 ? fc.constantFrom(...options) : jsonJunk;
    }
    case "object":
    case "strict_object":
    case "loose_object":
    case "object_with_rest":
      return objectFor(schema, depth);
    case "array": {
      const min = (requirement(actions, "min_length") as number | undefined) ?? 0;
      const max = (requirement(actions, "max_length") as number | undefined) ?? 3;
      return fc.array(valueFor(schema.item as Node, depth + 1), {
        minLength: min,
        maxLength: Math.max(min, Math.min(max, min + 3)),
      });
    }
    case "tuple":
    case "strict_tuple":
    case "loose_tuple":
      return fc.tuple(...(schema.items as Node[]).map((item) => valueFor(item, depth + 1)));
    case "record":
      return fc.dictionary(
        shaped(schema.key as Node, depth + 1) as fc.Arbitrary<string>,
        valueFor(schema.value as Node, depth + 1),
        { maxKeys: 3 },
      );
    case "optional":
    case "exact_optional":
    case "undefinedable":
      return fc.option(valueFor(schema.wrapped as Node, depth + 1), { nil: undefined, freq: 4 });
    case "nullable":
      return fc.option(valueFor(schema.wrapped as Node, depth + 1), { nil: null, freq: 4 });
    case "nullish":
      return fc.oneof(
        fc.constantFrom(null, undefined),
        valueFor(schema.wrapped as Node, depth + 1),
      );
    case "non_nullable":
    case "non_optional":
    case "non_nullish":
      return valueFor(schema.wrapped as Node, depth + 1);
    case "union":
    case "variant":
      return fc.oneof(...(schema.options as Node[]).map((option) => valueFor(option, depth + 1)));
    case "never":
      // A field that must not be sent (a read-only one): left out.
      return fc.constant(undefined);
    case "lazy":
      return valueFor((schema.getter as (input: unknown) => Node)(undefined), depth + 1);
    default:
      // unknown, any, never and the rest: any JSON.
      return fc.jsonValue({ maxDepth: 2 });
  }
}

/** Values for `schema`: mostly of its shape, now and then anything at all. */
export function valueFor(schema: unknown, depth = 0): fc.Arbitrary<unknown> {
  const node = schema as Node;
  if (depth > MAX_DEPTH) return jsonJunk;
  return fc.oneof(
    { weight: 40, arbitrary: shaped(node, depth) },
    { weight: 1, arbitrary: jsonJunk },
  );
}

/** The keys a schema's object names (for "does the issue name a real field"). */
export function schemaKeys(schema: unknown): readonly string[] {
  let node = schema as Node;
  while (node.wrapped) node = node.wrapped as Node;
  const entries = node.entries as Record<string, unknown> | undefined;
  return entries ? Object.keys(entries) : [];
}
