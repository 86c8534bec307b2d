/**
 * An API answer saved as a file (a CA certificate, a device's WireGuard config): fetched with
 * the signed-in user's token, since a plain link would carry none, then handed to the browser as
 * a download under `name`.
 */
import { ApiError, token } from "../api/client.ts";

export async function saveAnswer(path: string, name: string): Promise<void> {
  const url = URL.createObjectURL(await fetchAnswer(path));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/**
 * An answer's body as it came (an image, a file), fetched with the token. A refusal is an
 * ApiError in the API's words (`{error}`), or its status when it has none.
 */
export async function fetchAnswer(path: string): Promise<Blob> {
  const bearer = token();
  const response = await fetch(path, {
    headers: bearer ? { authorization: `Bearer ${bearer}` } : {},
  });
  if (!response.ok) {
    const answer = await response.json().catch(() => ({})) as { error?: unknown };
    throw new ApiError(
      response.status,
      typeof answer.error === "string" ? answer.error : `${response.status} ${response.statusText}`,
    );
  }
  return await response.blob();
}
