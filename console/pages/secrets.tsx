// Secrets (`/v1/secrets`): names, scopes and dates, never values. Setting one sends the value once (a password
// field, cleared after); the page never reads a value back, because the API never answers one.

import { useEffect, useState } from "preact/hooks";
import { api, ApiProblem, fieldErrors } from "../api.js";
import { Field, formatTime, ListTable, Notice, ProblemMessage, useConfirm } from "../ui.js";

interface Secret {
  name: string;
  app: string | null;
  env: string | null;
  createdAt: number;
  updatedAt: number;
}

interface SetAnswer extends Secret {
  created: boolean;
  rolling: Array<{ name: string; app: string; env: string }>;
}

const scopeText = (s: { app: string | null; env: string | null }) => (s.app ? `${s.app}${s.env ? ` / ${s.env}` : " (every environment)"}` : "every app");

function SetSecret({ onSet }: { onSet(answer: SetAnswer): void }) {
  const [name, setName] = useState("");
  const [value, setValue] = useState("");
  const [app, setApp] = useState("");
  const [env, setEnv] = useState("");
  const [errors, setErrors] = useState<Record<string, string[]>>({});
  const [problem, setProblem] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setProblem(null);
    try {
      const answer = await api<SetAnswer>(`/v1/secrets/${encodeURIComponent(name.trim())}`, {
        method: "PUT",
        body: { value, ...(app.trim() ? { app: app.trim() } : {}), ...(env.trim() ? { env: env.trim() } : {}) },
      });
      setValue("");
      onSet(answer);
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 422) setErrors(fieldErrors(err.errors));
      setProblem(err);
    }
  };
  return (
    <form class="card form" onSubmit={submit} aria-label="Set a secret" noValidate>
      <h2>Set a secret</h2>
      <div class="row">
        <Field label="Name" hint="An environment variable name, e.g. HF_TOKEN">
          {({ id, describedBy }) => (
            <input id={id} aria-describedby={describedBy} autocomplete="off" value={name} onInput={(e) => setName(e.currentTarget.value)} />
          )}
        </Field>
        <Field label="Value" errors={errors.value}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              type="password"
              autocomplete="new-password"
              aria-describedby={describedBy}
              aria-invalid={invalid}
              value={value}
              onInput={(e) => setValue(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="App (optional)" errors={errors.app} hint="Only for this app; empty: every app">
          {({ id, describedBy, invalid }) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={invalid} value={app} onInput={(e) => setApp(e.currentTarget.value)} />
          )}
        </Field>
        <Field label="Environment (optional)" errors={errors.env} hint="Only for this environment of the app">
          {({ id, describedBy, invalid }) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={invalid} value={env} onInput={(e) => setEnv(e.currentTarget.value)} />
          )}
        </Field>
      </div>
      <p class="hint">
        The value is sent once and never shown again. Endpoints that list the name get it as an environment variable; their workers restart with a new value.
      </p>
      {problem && !(problem instanceof ApiProblem && problem.status === 422 && (errors.value || errors.app || errors.env)) && (
        <ProblemMessage error={problem} />
      )}
      <div class="actions">
        <button type="submit">Set secret</button>
      </div>
    </form>
  );
}

export function SecretsPage() {
  const [secrets, setSecrets] = useState<Secret[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [dialog, confirm] = useConfirm();
  const load = async () => {
    try {
      setSecrets(await api<Secret[]>("/v1/secrets"));
      setProblem(null);
    } catch (err) {
      setProblem(err);
    }
  };
  useEffect(() => void load(), []);
  const remove = (s: Secret) =>
    confirm({
      title: `Delete secret ${s.name} (${scopeText(s)})?`,
      body: <p>Endpoints that list it restart their workers without it.</p>,
      confirmLabel: "Delete secret",
      action: async () => {
        try {
          const q = new URLSearchParams();
          if (s.app) q.set("app", s.app);
          if (s.env) q.set("env", s.env);
          await api(`/v1/secrets/${encodeURIComponent(s.name)}${q.size ? `?${q}` : ""}`, { method: "DELETE" });
          setMessage(`Deleted secret ${s.name}.`);
          void load();
        } catch (err) {
          setProblem(err);
        }
      },
    });
  return (
    <section aria-labelledby="secrets-title">
      {dialog}
      <h1 id="secrets-title" tabIndex={-1}>
        Secrets
      </h1>
      <Notice text={message} />
      <ProblemMessage error={problem} />
      {secrets === null ? (
        <p>Loading…</p>
      ) : secrets.length === 0 ? (
        <p>No secrets. Values that must not be in your code (tokens, database URLs) belong here.</p>
      ) : (
        <ListTable label="Secrets" columns={["Name", "For", "Updated"]} action="Actions">
          {secrets.map((s) => (
            <tr key={`${s.name}/${s.app}/${s.env}`} data-secret={s.name}>
              <th scope="row" class="mono">
                {s.name}
              </th>
              <td>{scopeText(s)}</td>
              <td>{formatTime(s.updatedAt)}</td>
              <td>
                <button class="danger" onClick={() => remove(s)} aria-label={`Delete secret ${s.name} (${scopeText(s)})`}>
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </ListTable>
      )}
      <SetSecret
        onSet={(a) => {
          setMessage(
            `${a.created ? "Set" : "Changed"} secret ${a.name} for ${scopeText(a)}.${a.rolling.length > 0 ? ` Workers restart on ${a.rolling.map((e) => `${e.app}/${e.env}/${e.name}`).join(", ")}.` : ""}`,
          );
          void load();
        }}
      />
    </section>
  );
}
