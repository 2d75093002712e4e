/** Sign-in: the API key is read from the field once, sent, and cleared; nothing keeps it. */
import { html } from "htm/preact";
import { useRef, useState } from "preact/hooks";
import { type Session, signIn } from "./api.ts";
import { messageOf } from "./format.ts";

export const SignIn = ({
  onSignedIn,
  announce,
}: {
  readonly onSignedIn: (session: Session) => void;
  readonly announce: (message: string, isError?: boolean) => void;
}) => {
  const field = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    const input = field.current;
    if (input === null) return;
    const key = input.value.trim();
    if (key === "") {
      announce("Paste an API key (sk_test_…, sk_live_…, or a restricted rk_… key to read only).", true);
      return;
    }
    setBusy(true);
    announce("Signing in…");
    try {
      const session = await signIn(key);
      input.value = "";
      onSignedIn(session);
    } catch (error) {
      input.value = "";
      announce(messageOf(error), true);
      input.focus();
    } finally {
      setBusy(false);
    }
  };

  return html`<section class="card sign-in" aria-labelledby="sign-in-title">
    <h1 id="sign-in-title">Sign in to the console</h1>
    <form onSubmit=${submit}>
      <label for="api-key">API key</label>
      <input
        id="api-key"
        name="api-key"
        type="password"
        autocomplete="off"
        spellcheck=${false}
        placeholder="sk_test_…"
        ref=${field}
      />
      <p class="hint">The key is exchanged for a session cookie and is not kept in this browser.</p>
      <button type="submit" disabled=${busy}>Sign in</button>
    </form>
  </section>`;
};
