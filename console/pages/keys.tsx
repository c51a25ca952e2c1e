// API keys (`/v1/keys`, admin keys only): create with scopes (the secret is shown once, with a copy
// button), list, revoke.

import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiProblem, fieldErrors } from "../api.js";
import { KEY_EXPIRIES, scopesOf } from "../forms.js";
import { Field, ListTable, Notice, ProblemMessage, Time, useConfirm } from "../ui.js";

interface KeyInfo {
  id: string;
  name: string | null;
  userId: string;
  scopes: string[];
  /** Epoch milliseconds, as every record's times. */
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  /** The key this console is signed in with. */
  inUse?: boolean;
}

const FIXED_SCOPES = [
  { scope: "admin", help: "everything you own, including keys" },
  { scope: "management:read", help: "read volumes, endpoints, templates" },
  { scope: "management:write", help: "read and change them" },
  { scope: "jobs:*", help: "the job API and logs of all your endpoints" },
];

function NewSecret({ secret, onDone }: { secret: KeyInfo & { key: string }; onDone(): void }) {
  const [copied, setCopied] = useState<string | null>(null);
  const inputRef = useRef<HTMLInputElement>(null);
  useEffect(() => inputRef.current?.focus(), []);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret.key);
      setCopied("Copied to the clipboard.");
    } catch {
      // No clipboard permission (e.g. plain http on another host): select it for Ctrl+C.
      inputRef.current?.select();
      setCopied("Selected: press Ctrl+C (⌘C) to copy.");
    }
  };
  return (
    <div class="card secret" role="region" aria-label="New API key">
      <h2>Key {secret.name ?? secret.id} created</h2>
      <p class="notice warn">This is the only time the key is shown. Copy it now and keep it somewhere safe.</p>
      <div class="inline">
        <label for="new-key-secret">API key</label>
        <input id="new-key-secret" class="mono wide" ref={inputRef} readOnly value={secret.key} onFocus={(e) => e.currentTarget.select()} />
        <button type="button" onClick={() => void copy()}>
          Copy
        </button>
      </div>
      {copied && (
        <p role="status" class="hint">
          {copied}
        </p>
      )}
      <p class="hint">Scopes: {secret.scopes.join(", ")}</p>
      <button class="secondary" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

export function KeysPage() {
  const [keys, setKeys] = useState<KeyInfo[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [name, setName] = useState("");
  const [ticked, setTicked] = useState<string[]>(["jobs:*"]);
  const [endpointIds, setEndpointIds] = useState("");
  const [expiry, setExpiry] = useState<number | "">("");
  const [errors, setErrors] = useState<Record<string, string[]>>({});
  const [secret, setSecret] = useState<(KeyInfo & { key: string }) | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [dialog, confirm] = useConfirm();
  const load = async () => {
    try {
      setKeys(await api<KeyInfo[]>("/v1/keys"));
      setProblem(null);
    } catch (err) {
      setProblem(err);
    }
  };
  useEffect(() => void load(), []);
  const create = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setProblem(null);
    setMessage(null);
    try {
      const created = await api<KeyInfo & { key: string }>("/v1/keys", {
        body: { ...(name.trim() ? { name: name.trim() } : {}), scopes: scopesOf(ticked, endpointIds), ...(expiry === "" ? {} : { expiresInSeconds: expiry }) },
      });
      setSecret(created);
      setName("");
      setEndpointIds("");
      setExpiry("");
      void load();
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 422) setErrors(fieldErrors(err.errors));
      else setProblem(err);
    }
  };
  const revoke = (k: KeyInfo) =>
    confirm({
      title: `Revoke key ${k.name ?? k.id}?`,
      body: (
        <p>
          Every request with this key is refused from now on (401). Scripts and services that use it stop working.
          {k.inUse && " This is the key this console is signed in with: you will be signed out."}
        </p>
      ),
      confirmLabel: "Revoke key",
      action: async () => {
        try {
          await api(`/v1/keys/${encodeURIComponent(k.id)}`, { method: "DELETE" });
          setMessage(`Revoked key ${k.name ?? k.id}.`);
          void load();
        } catch (err) {
          setProblem(err);
        }
      },
    });
  return (
    <section aria-labelledby="keys-title">
      {dialog}
      <h1 id="keys-title" tabIndex={-1}>
        API keys
      </h1>
      <Notice text={message} />
      <ProblemMessage error={problem} />
      {secret && <NewSecret secret={secret} onDone={() => setSecret(null)} />}
      {keys &&
        (keys.length === 0 ? (
          <p>No keys.</p>
        ) : (
          <ListTable label="API keys" columns={["Name", "Scopes", "Created", "Expires", "State"]} action="Revoke">
            {keys.map((k) => (
              <tr key={k.id} data-key={k.id} class={k.inUse ? "selected" : undefined}>
                <th scope="row">
                  {k.name ?? <span class="muted">(no name)</span>}
                  {k.inUse && <span class="badge status-in_progress">signed in with this key</span>}
                  <div class="muted mono">{k.id}</div>
                </th>
                <td>{k.scopes.join(", ")}</td>
                <td>
                  <Time t={k.createdAt} />
                </td>
                <td>
                  <Time t={k.expiresAt} never="never" />
                </td>
                <td>
                  {k.revokedAt !== null ? <Time t={k.revokedAt} prefix="revoked " /> : k.expiresAt !== null && k.expiresAt <= Date.now() ? "expired" : "active"}
                </td>
                <td>
                  {k.revokedAt === null && (
                    <button class="danger" onClick={() => revoke(k)} aria-label={`Revoke key ${k.name ?? k.id}`}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </ListTable>
        ))}
      <form class="card form" onSubmit={create} aria-label="New API key">
        <h2>New API key</h2>
        <Field label="Key name" errors={errors.name}>
          {({ id, describedBy, invalid }) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={invalid} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          )}
        </Field>
        <fieldset class={errors.scopes ? "invalid" : undefined} aria-describedby={errors.scopes ? "scope-errors" : undefined}>
          <legend>Scopes</legend>
          {FIXED_SCOPES.map((s) => (
            <label key={s.scope} class="check">
              <input
                type="checkbox"
                checked={ticked.includes(s.scope)}
                onChange={(e) => setTicked(e.currentTarget.checked ? [...ticked, s.scope] : ticked.filter((x) => x !== s.scope))}
              />{" "}
              <span class="mono">{s.scope}</span> <span class="muted">— {s.help}</span>
            </label>
          ))}
          <Field label="Job API of these endpoints only (ids, comma-separated)" hint="Each becomes a jobs:<endpoint id> scope.">
            {({ id, describedBy }) => (
              <input id={id} aria-describedby={describedBy} value={endpointIds} onInput={(e) => setEndpointIds(e.currentTarget.value)} />
            )}
          </Field>
          {errors.scopes && (
            <small id="scope-errors" class="field-error" role="alert">
              {errors.scopes.join("; ")}
            </small>
          )}
        </fieldset>
        <Field label="Expires" errors={errors.expiresInSeconds} hint="After this, the service refuses the key (401).">
          {({ id, describedBy, invalid }) => (
            <select
              id={id}
              aria-describedby={describedBy}
              aria-invalid={invalid}
              value={String(expiry)}
              onChange={(e) => setExpiry(e.currentTarget.value === "" ? "" : Number(e.currentTarget.value))}
            >
              {KEY_EXPIRIES.map((x) => (
                <option key={x.label} value={String(x.seconds)}>
                  {x.label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <div class="actions">
          <button type="submit">Create key</button>
        </div>
      </form>
    </section>
  );
}
