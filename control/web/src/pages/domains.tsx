/**
 * What a project's block rules found per site (GET …/domains, docs/blocking.md): a row per site,
 * the most blocked first, with the answers judged, blocked and rate-limited, the requests sent
 * again, the blocked attempts' bytes and cost, the cost per good answer, the shadow rules' findings and, where the project
 * escalates, the tier the site is served from; a row opens its escalation line and its
 * connectors beneath it. The project's rules are summed up above, with a link to edit them.
 */
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import type { Project } from "../../../api/answers/projects.ts";
import {
  blockedSpendText,
  costPerSuccessText,
  type DomainSiteAnswer,
  type DomainsPageAnswer,
} from "../../../api/answers/domains.ts";
import { formatBytes, formatCount } from "../ui/format.ts";
import { Select } from "../ui/forms.tsx";
import { ErrorNote } from "../ui/status.tsx";
import { useApi } from "../ui/use-api.ts";

const RANGES = [
  ["1", "Today"],
  ["7", "7 days"],
] as const;

const REFRESH_MS = 10_000;

function shadowOf(site: DomainSiteAnswer): string {
  if (site.shadow.length === 0) return "–";
  return site.shadow.map((s) => `${s.rule}: ${s.verdict} ${formatCount(s.count)}`).join(", ");
}

function tierOf(site: DomainSiteAnswer): string {
  const escalation = site.escalation;
  if (escalation === null) return "–";
  return escalation.tier_connectors.join(" + ") || `tier ${escalation.tier}`;
}

function RulesSummary({ project }: { project: Project }) {
  const rules = project.block_rules;
  if (rules.length === 0) {
    return (
      <p class="muted" data-testid="no-block-rules">
        This project has no block rules: nothing is judged.{" "}
        <a href={`/projects/${project.id}/settings`}>Add some in Settings</a>.
      </p>
    );
  }
  return (
    <p class="muted" data-testid="block-rules-summary">
      Rules, in order: {rules.map((rule, index) => (
        <Fragment key={rule.name}>
          {index > 0 ? ", " : ""}
          <code>{rule.name}</code>
          {rule.mode === "on" ? "" : ` (${rule.mode})`}
        </Fragment>
      ))}. <a href={`/projects/${project.id}/settings`}>Edit in Settings</a>.
    </p>
  );
}

export function Domains({ project }: { project: Project }) {
  const [days, setDays] = useState("1");
  const [open, setOpen] = useState<string | null>(null);
  const page = useApi<DomainsPageAnswer>(`/projects/${project.id}/domains`, { days }, REFRESH_MS);
  const data = page.data;

  return (
    <section class="domains">
      <header class="toolbar">
        <h2>Domains</h2>
        <div class="toolbar-filters">
          <label>
            Range <Select name="days" value={days} onChange={setDays} options={RANGES} />
          </label>
        </div>
      </header>
      <RulesSummary project={project} />
      <ErrorNote error={page.error} />
      {data && data.sites.length === 0
        ? <p class="muted">Nothing judged from {data.from} to {data.to}.</p>
        : (
          <table class="data" aria-label="Sites">
            <thead>
              <tr>
                <th>Site</th>
                <th>Judged</th>
                <th>Blocked</th>
                <th>Rate-limited</th>
                <th>Retries</th>
                <th>Blocked bytes</th>
                <th>Spend on blocked</th>
                <th>Cost per good answer</th>
                <th>Shadow rules</th>
                <th>Cooled exits</th>
                <th>Tier</th>
              </tr>
            </thead>
            <tbody>
              {(data?.sites ?? []).map((site) => (
                <Fragment key={site.site}>
                  <tr class={open === site.site ? "selected" : undefined}>
                    <td>
                      <button
                        type="button"
                        class="link"
                        aria-expanded={open === site.site}
                        onClick={() => setOpen(open === site.site ? null : site.site)}
                      >
                        {site.site}
                      </button>
                    </td>
                    <td>{formatCount(site.judged)}</td>
                    <td>{formatCount(site.blocked)}</td>
                    <td>{formatCount(site.rate_limited)}</td>
                    <td>{formatCount(site.retries)}</td>
                    <td>{formatBytes(site.blocked_bytes)}</td>
                    <td>{blockedSpendText(site)}</td>
                    <td>{costPerSuccessText(site)}</td>
                    <td>{shadowOf(site)}</td>
                    <td>{formatCount(site.cooldowns)}</td>
                    <td title={site.escalation?.summary}>{tierOf(site)}</td>
                  </tr>
                  {open === site.site
                    ? (
                      <tr class="details">
                        <td colSpan={11}>
                          {site.escalation === null
                            ? null
                            : <p data-testid="escalation-summary">{site.escalation.summary}</p>}
                          <table class="data" aria-label={`Connectors on ${site.site}`}>
                            <thead>
                              <tr>
                                <th>Connector</th>
                                <th>Good</th>
                                <th>Blocked</th>
                                <th>Rate-limited</th>
                                <th>Retries</th>
                                <th>Blocked bytes</th>
                                <th>Spend on blocked</th>
                                <th>Cost per good answer</th>
                              </tr>
                            </thead>
                            <tbody>
                              {site.connectors.map((connector) => (
                                <tr key={connector.connector_id}>
                                  <td>{connector.connector_name ?? connector.connector_id}</td>
                                  <td>{formatCount(connector.ok)}</td>
                                  <td>{formatCount(connector.blocked)}</td>
                                  <td>{formatCount(connector.rate_limited)}</td>
                                  <td>{formatCount(connector.retries)}</td>
                                  <td>{formatBytes(connector.blocked_bytes)}</td>
                                  <td>
                                    {connector.blocked_spend === null
                                      ? "–"
                                      : `${connector.blocked_spend.toFixed(4)} ${
                                        connector.currency ?? ""
                                      }`}
                                  </td>
                                  <td>
                                    {connector.cost_per_success === null
                                      ? "–"
                                      : `${connector.cost_per_success.toFixed(6)} ${
                                        connector.currency ?? ""
                                      }`}
                                  </td>
                                </tr>
                              ))}
                            </tbody>
                          </table>
                        </td>
                      </tr>
                    )
                    : null}
                </Fragment>
              ))}
            </tbody>
          </table>
        )}
      {data && data.more > 0
        ? <p class="muted">{formatCount(data.more)} more sites not shown.</p>
        : null}
    </section>
  );
}
