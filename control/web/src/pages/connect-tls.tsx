/**
 * The Connect page's TLS interception part: the install's CA (GET /system/tls-ca), a download of
 * it as PEM and DER (fetched with the signed-in user's token, since a plain link would carry
 * none), its SPKI hash, and lines that make curl, Python requests, Node and Playwright's
 * Chromium trust it through this project's gateway address and login. The project's own mode
 * is said first: with interception off, tunnels pass raw and clients need not trust anything.
 */
import { useState } from "preact/hooks";
import type { Project } from "../../../api/answers/projects.ts";
import type { TlsCaStatus } from "../../../api/answers/tls-ca.ts";
import { CopyButton } from "../ui/copy-button.tsx";
import { saveAnswer } from "../ui/download.ts";
import { ErrorNote } from "../ui/status.tsx";
import { Time } from "../ui/time.tsx";
import { useApi } from "../ui/use-api.ts";

/** The file names the lines use, as the API's download names them. */
export const CA_PEM_FILE = "octoprox-ca.pem";
export const CA_DER_FILE = "octoprox-ca.cer";

interface Where {
  host: string;
  httpPort: string;
  username: string;
  password: string;
}

/** The lines, in the order shown: each a title and the text to copy. */
export function tlsLines(where: Where, spki: string): [string, string][] {
  const proxy = `http://${where.username}:${where.password}@${where.host}:${where.httpPort}`;
  const server = `http://${where.host}:${where.httpPort}`;
  return [
    ["curl", `curl --cacert ${CA_PEM_FILE} -x '${proxy}' https://example.com/`],
    [
      "Python (requests)",
      `import requests\n\nproxies = {"http": "${proxy}", "https": "${proxy}"}\n` +
      `r = requests.get("https://example.com/", proxies=proxies, verify="${CA_PEM_FILE}")\n` +
      "print(r.status_code)",
    ],
    [
      "Node",
      `# Every TLS connection the process makes trusts the CA too (read once, at start):\n` +
      `NODE_EXTRA_CA_CERTS=./${CA_PEM_FILE} node app.mjs\n\n` +
      `// app.mjs, through the gateway with undici's ProxyAgent (npm install undici):\n` +
      `import { fetch, ProxyAgent } from "undici";\n` +
      `const dispatcher = new ProxyAgent("${proxy}");\n` +
      `const r = await fetch("https://example.com/", { dispatcher });\n` +
      "console.log(r.status);",
    ],
    [
      "Playwright (Chromium)",
      `const browser = await chromium.launch({\n` +
      `  proxy: { server: "${server}", username: "${where.username}", password: "${where.password}" },\n` +
      `  // Chromium takes certificates whose chain holds this key, without a trust store:\n` +
      `  args: ["--ignore-certificate-errors-spki-list=${spki}"],\n` +
      `});`,
    ],
  ];
}

export function TlsInterception({ project, where }: { project: Project; where: Where }) {
  const status = useApi<TlsCaStatus>("/system/tls-ca");
  const [failure, setFailure] = useState<string | undefined>();
  const data = status.data;
  // Both CAs' hashes while a rotation's overlap lasts: Chromium's flag takes a list.
  const spkiList = data?.spki_list ?? data?.current?.spki_sha256 ?? "";
  const mode = project.tls_mitm_mode;
  const download = (path: string, name: string) => () => {
    setFailure(undefined);
    saveAnswer(path, name).catch((error: Error) =>
      setFailure(`The download failed: ${error.message}`)
    );
  };
  return (
    <section class="tls-interception" aria-label="TLS interception">
      <h3>TLS interception</h3>
      <p data-mitm-mode={mode}>
        This project's interception: <strong>{mode}</strong>. {mode === "off"
          ? "HTTPS tunnels pass through untouched: clients need not trust anything of the " +
            "gateway's. Turn it on in the project's settings to route, retry and meter each " +
            "request inside HTTPS."
          : "The gateway answers HTTPS tunnels with certificates its CA signs, so each request " +
            "inside is routed, retried and metered: clients must trust the CA below. A client " +
            "may keep one tunnel raw with -mitm-off in its username (or X-Octoprox-Mitm: off)."}
      </p>
      <ErrorNote error={status.error} />
      {data && !data.configured
        ? <p class="warning-text">This install has no TLS interception CA.</p>
        : null}
      {data?.error ? <div class="form-error" role="alert">{data.error}</div> : null}
      {data?.current
        ? (
          <>
            <p>
              The install's CA, <code>{data.current.subject}</code>, valid until{" "}
              <Time value={data.current.not_after} />:{" "}
              <button type="button" onClick={download(data.download.pem, CA_PEM_FILE)}>
                Download PEM ({CA_PEM_FILE})
              </button>{" "}
              <button
                type="button"
                class="secondary"
                onClick={download(data.download.der, CA_DER_FILE)}
              >
                Download DER ({CA_DER_FILE})
              </button>
            </p>
            {failure ? <div class="form-error" role="alert">{failure}</div> : null}
            {data.rotation?.in_overlap
              ? (
                <p class="warning-text" data-rotation="overlap">
                  The CA was rotated: until <Time value={data.rotation.overlap_until} />{" "}
                  gateways sign with the previous one, and the PEM download holds both, so a client
                  given it trusts the gateways before and after. Fetch it again now. DER holds the
                  new CA alone: add it beside the one you have.
                </p>
              )
              : null}
            <p>
              SPKI SHA-256: <code data-testid="spki">{spkiList}</code>{" "}
              <CopyButton text={spkiList} label="the SPKI hash" />
            </p>
            {tlsLines(where, spkiList).map(([title, line]) => (
              <div key={title} class="example" data-example={`TLS ${title}`}>
                <h4>
                  {title} <CopyButton text={line} label={`the ${title} lines`} />
                </h4>
                <pre><code>{line}</code></pre>
              </div>
            ))}
          </>
        )
        : null}
    </section>
  );
}
