/**
 * The United States' states and the District of Columbia by their ISO 3166-2 subdivision code
 * (`US-NY` as `NY`, what a client sends with `-st-`), with their English names. Vendors write a
 * state by its name in their own spelling (Oxylabs `us_new_york`, SOAX `new+york`), so the
 * templates' `us_state` filter reads this table; the outlying areas (`PR`, `GU`, …) are left
 * out, since every vendor takes those as countries of their own.
 *
 * Runs unchanged on Node and Deno.
 */
export const US_STATES: Readonly<Record<string, string>> = {
  AL: "Alabama",
  AK: "Alaska",
  AZ: "Arizona",
  AR: "Arkansas",
  CA: "California",
  CO: "Colorado",
  CT: "Connecticut",
  DE: "Delaware",
  DC: "District of Columbia",
  FL: "Florida",
  GA: "Georgia",
  HI: "Hawaii",
  ID: "Idaho",
  IL: "Illinois",
  IN: "Indiana",
  IA: "Iowa",
  KS: "Kansas",
  KY: "Kentucky",
  LA: "Louisiana",
  ME: "Maine",
  MD: "Maryland",
  MA: "Massachusetts",
  MI: "Michigan",
  MN: "Minnesota",
  MS: "Mississippi",
  MO: "Missouri",
  MT: "Montana",
  NE: "Nebraska",
  NV: "Nevada",
  NH: "New Hampshire",
  NJ: "New Jersey",
  NM: "New Mexico",
  NY: "New York",
  NC: "North Carolina",
  ND: "North Dakota",
  OH: "Ohio",
  OK: "Oklahoma",
  OR: "Oregon",
  PA: "Pennsylvania",
  RI: "Rhode Island",
  SC: "South Carolina",
  SD: "South Dakota",
  TN: "Tennessee",
  TX: "Texas",
  UT: "Utah",
  VT: "Vermont",
  VA: "Virginia",
  WA: "Washington",
  WV: "West Virginia",
  WI: "Wisconsin",
  WY: "Wyoming",
};

/**
 * A state's name as vendors spell it in a username: lower case, `_` between words (`NY` as
 * `new_york`); undefined for a code that is no state of the table.
 */
export function usStateSlug(code: string): string | undefined {
  const name = Object.hasOwn(US_STATES, code.toUpperCase())
    ? US_STATES[code.toUpperCase()]
    : undefined;
  return name?.toLowerCase().replaceAll(" ", "_");
}
