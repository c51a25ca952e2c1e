// The svc web console: a single page served by the service under /console/. Routes live in the URL hash
// (#/endpoints, #/endpoints/{id}, #/endpoints/{id}/jobs/{jobId}, #/gpus, #/models, #/templates, #/volumes, #/keys, #/apps, #/secrets, #/usage) so the service serves one file.

import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import "./style.css";
import { api, ApiProblem, onSignedOut, storedKey, storeKey } from "./api.js";
import { Field, ProblemMessage } from "./ui.js";
import { EndpointsPage } from "./pages/endpoints.js";
import { EndpointPage } from "./pages/endpoint.js";
import { VolumesPage } from "./pages/volumes.js";
import { KeysPage } from "./pages/keys.js";
import { AppsPage } from "./pages/apps.js";
import { SecretsPage } from "./pages/secrets.js";
import { TemplatesPage } from "./pages/templates.js";
import { GpusPage } from "./pages/gpus.js";
import { ModelsPage } from "./pages/models.js";
import { UsagePage } from "./pages/usage.js";

function useHashRoute(): string[] {
  const parse = () => location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(parse);
  useEffect(() => {
    const onChange = () => setRoute(parse());
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

function SignIn({ onSignedIn, reason }: { onSignedIn(): void; reason?: string }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // Any authenticated route proves the key; /v1/apps is open to every user key.
      await api("/v1/apps", { key: key.trim() });
      storeKey(key.trim());
      onSignedIn();
    } catch (err) {
      setError(err instanceof ApiProblem && err.status === 401 ? new Error("The service refused this API key (unknown, expired or revoked).") : err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin" id="main">
      <h1>svc console</h1>
      <form onSubmit={submit} aria-describedby="signin-note">
        {reason && <p class="notice">{reason}</p>}
        <Field label="API key">
          {({ id, describedBy }) => (
            <input
              id={id}
              aria-describedby={describedBy}
              type="password"
              autocomplete="off"
              required
              value={key}
              onInput={(e) => setKey(e.currentTarget.value)}
            />
          )}
        </Field>
        <p id="signin-note" class="hint">
          The key stays in this browser tab only (session storage) and is sent to this service alone. Where to find one: the admin key <code>svc server</code>{" "}
          generated is in its data directory's <code>admin-key</code> file; a CLI already logged in to this service prints its key with{" "}
          <code>svc whoami --key</code>; an admin makes others with <code>svc keys create</code>.
        </p>
        <ProblemMessage error={error} />
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}

/** Who the signed-in key acts as (`GET /v1/me`): the user and the key's name or id, beside Sign out. */
function WhoAmI() {
  const [me, setMe] = useState<{ userId: string; keyId: string; key: { name: string | null } | null; scopes: string[] } | null>(null);
  useEffect(() => {
    // Not knowing is no reason to stop the page: the header just says nothing.
    api<{ userId: string; keyId: string; key: { name: string | null } | null; scopes: string[] }>("/v1/me").then(setMe, () => setMe(null));
  }, []);
  if (!me) return null;
  return (
    <span class="whoami muted" title={`scopes: ${me.scopes.join(", ")}`}>
      {me.userId} · key {me.key?.name ?? me.keyId}
    </span>
  );
}

const NAV = [
  { path: "endpoints", label: "Endpoints" },
  { path: "gpus", label: "GPUs" },
  { path: "models", label: "Models" },
  { path: "templates", label: "Templates" },
  { path: "apps", label: "Apps" },
  { path: "volumes", label: "Network volumes" },
  { path: "keys", label: "API keys" },
  { path: "secrets", label: "Secrets" },
  { path: "usage", label: "Usage" },
];

function App() {
  const [signedIn, setSignedIn] = useState(storedKey() !== null);
  const [reason, setReason] = useState<string | undefined>();
  const route = useHashRoute();
  const mainRef = useRef<HTMLElement>(null);
  const [menuOpen, setMenuOpen] = useState(false);
  useEffect(
    () =>
      onSignedOut(() => {
        storeKey(null);
        setReason("The service no longer accepts the key you signed in with. Sign in again.");
        setSignedIn(false);
      }),
    [],
  );
  // Move focus to the new page's heading so keyboard and screen-reader users know where they are. A job opened
  // on an endpoint's page is the same page: its job view takes focus and stays beside what was clicked.
  const isJob = route[0] === "endpoints" && route[2] === "jobs" && route[3] !== undefined;
  useEffect(() => {
    if (!isJob) mainRef.current?.querySelector<HTMLElement>("h1")?.focus();
  }, [route.join("/")]);
  if (!signedIn) return <SignIn reason={reason} onSignedIn={() => setSignedIn(true)} />;
  const section = route[0] ?? "endpoints";
  let page;
  // Keyed by id: another endpoint starts with fresh state (no notices or job of the previous one).
  if (section === "endpoints" && route[1]) page = <EndpointPage key={route[1]} id={route[1]} jobId={isJob ? route[3] : undefined} />;
  else if (section === "gpus") page = <GpusPage />;
  else if (section === "models") page = <ModelsPage />;
  else if (section === "volumes") page = <VolumesPage />;
  else if (section === "keys") page = <KeysPage />;
  else if (section === "apps") page = <AppsPage />;
  else if (section === "secrets") page = <SecretsPage />;
  else if (section === "templates") page = <TemplatesPage />;
  else if (section === "usage") page = <UsagePage />;
  else page = <EndpointsPage />;
  const current = NAV.find((n) => n.path === section) ?? NAV[0];
  return (
    <>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), mainRef.current?.focus())}>
        Skip to content
      </a>
      <header class={`top${menuOpen ? " menu-open" : ""}`}>
        <span class="brand">svc console</span>
        {/* On a phone the sections fold behind this button (a fifth of the screen otherwise); wider, it is hidden. */}
        <button type="button" class="menu-toggle secondary" aria-expanded={menuOpen} aria-controls="sections" onClick={() => setMenuOpen(!menuOpen)}>
          Menu<span class="sr-only">: sections</span>
          <span class="menu-current"> · {current.label}</span>
        </button>
        <div class="menu" id="sections">
          <nav aria-label="Sections">
            <ul>
              {NAV.map((n) => (
                <li key={n.path}>
                  <a href={`#/${n.path}`} aria-current={section === n.path ? "page" : undefined} onClick={() => setMenuOpen(false)}>
                    {n.label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          <WhoAmI />
          <button
            class="secondary sign-out"
            onClick={() => {
              storeKey(null);
              setReason(undefined);
              setSignedIn(false);
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      <main id="main" ref={mainRef} tabIndex={-1}>
        {page}
      </main>
    </>
  );
}

const root = document.getElementById("app")!;
// Preact keeps foreign children: drop the "Loading…" placeholder first.
root.textContent = "";
render(<App />, root);
