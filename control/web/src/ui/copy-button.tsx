/**
 * A small "Copy" button for a text shown beside it (a hash, a command, a certificate): it says
 * "Copied" for a moment. Without a clipboard (an insecure origin) the text stays selectable.
 */
import { useState } from "preact/hooks";

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
      setTimeout(() => setCopied(false), 1_500);
    } catch {
      // No clipboard here (an insecure origin): the text stays selectable beside the button.
    }
  };
  return (
    <button type="button" class="link" onClick={copy} aria-label={`Copy ${label}`}>
      {copied ? "Copied" : "Copy"}
    </button>
  );
}
