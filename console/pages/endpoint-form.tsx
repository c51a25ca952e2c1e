// Create or edit an endpoint through the REST API (`POST /v1/endpoints`, `PATCH /v1/endpoints/{id}`).
// Field errors from the API's 422 `errors` are shown beside their fields.

import { useEffect, useState } from "preact/hooks";
import { api, ApiProblem, apiWithHeaders, fieldErrors } from "../api.js";
import type { RestEndpoint } from "../endpoints-data.js";
import { envText, parseEnv } from "../forms.js";
import { Field, ProblemMessage } from "../ui.js";

export interface Template {
  id: string;
  name: string;
  imageName: string;
}

// What restarts workers (the service decides; this is what the note says before saving).
const RESTART_FIELDS = ["templateId", "computeType", "gpuTypeIds", "gpuCount", "workersMin", "workersMax", "networkVolumeId"];

function GpuOrder({ value, onChange, known, describedBy }: { value: string[]; onChange(v: string[]): void; known: string[]; describedBy?: string }) {
  const [dragged, setDragged] = useState<number | null>(null);
  const [adding, setAdding] = useState("");
  const move = (from: number, to: number) => {
    if (to < 0 || to >= value.length) return;
    const next = [...value];
    const [item] = next.splice(from, 1);
    next.splice(to, 0, item!);
    onChange(next);
  };
  const add = (id: string) => {
    const t = id.trim();
    if (t && !value.includes(t)) onChange([...value, t]);
    setAdding("");
  };
  return (
    <div class="gpu-order" aria-describedby={describedBy}>
      <ol aria-label="GPU types, first choice first">
        {value.map((g, i) => (
          <li
            key={g}
            draggable
            class={dragged === i ? "dragging" : undefined}
            onDragStart={() => setDragged(i)}
            onDragOver={(e) => e.preventDefault()}
            onDrop={(e) => {
              e.preventDefault();
              if (dragged !== null) move(dragged, i);
              setDragged(null);
            }}
            onDragEnd={() => setDragged(null)}
          >
            <span class="grip" aria-hidden="true">
              ⋮⋮
            </span>
            <span class="gpu-name">
              {i + 1}. {g}
            </span>
            <button type="button" class="small" aria-label={`Move ${g} up`} disabled={i === 0} onClick={() => move(i, i - 1)}>
              ↑
            </button>
            <button type="button" class="small" aria-label={`Move ${g} down`} disabled={i === value.length - 1} onClick={() => move(i, i + 1)}>
              ↓
            </button>
            <button type="button" class="small" aria-label={`Remove ${g}`} onClick={() => onChange(value.filter((x) => x !== g))}>
              ✕
            </button>
          </li>
        ))}
      </ol>
      <div class="inline">
        <input
          aria-label="Add a GPU type id"
          list="known-gpu-types"
          value={adding}
          placeholder="GPU type id"
          onInput={(e) => setAdding(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter") {
              e.preventDefault();
              add(adding);
            }
          }}
        />
        <datalist id="known-gpu-types">
          {known.map((g) => (
            <option key={g} value={g} />
          ))}
        </datalist>
        <button type="button" class="secondary" onClick={() => add(adding)}>
          Add GPU type
        </button>
      </div>
    </div>
  );
}

export function EndpointForm({
  existing,
  onSaved,
  onCancel,
}: {
  existing?: RestEndpoint;
  onSaved(e: RestEndpoint, restarted: boolean): void;
  onCancel(): void;
}) {
  const [templates, setTemplates] = useState<Template[]>([]);
  const [gpuTypes, setGpuTypes] = useState<string[]>([]);
  const [name, setName] = useState(existing?.name ?? "");
  const [templateId, setTemplateId] = useState(existing?.templateId ?? "");
  const [computeType, setComputeType] = useState<"CPU" | "GPU">(existing?.computeType ?? "CPU");
  const [gpuTypeIds, setGpuTypeIds] = useState<string[]>(existing?.gpuTypeIds ?? []);
  const [workersMin, setWorkersMin] = useState(String(existing?.workersMin ?? 0));
  const [workersMax, setWorkersMax] = useState(String(existing?.workersMax ?? 3));
  const [idleTimeout, setIdleTimeout] = useState(String(existing?.idleTimeout ?? 5));
  const [env, setEnv] = useState(envText(existing?.env ?? {}));
  const [errors, setErrors] = useState<Record<string, string[]>>({});
  const [problem, setProblem] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    api<Template[]>("/v1/templates")
      .then((t) => {
        setTemplates(t);
        if (!existing && t.length > 0 && !templateId) setTemplateId(t[0]!.id);
      })
      .catch(setProblem);
    api<Array<{ gpuTypes: string[] }>>("/v2/data-centers")
      .then((dcs) => setGpuTypes([...new Set(dcs.flatMap((d) => d.gpuTypes))]))
      .catch(() => undefined);
  }, []);

  const body = () => {
    const parsedEnv = parseEnv(env);
    const b: Record<string, unknown> = {
      name: name.trim(),
      templateId,
      // The compute type is fixed once the endpoint exists (the update API has no such field).
      ...(existing ? {} : { computeType }),
      gpuTypeIds: computeType === "GPU" ? gpuTypeIds : [],
      workersMin: Number(workersMin),
      workersMax: Number(workersMax),
      idleTimeout: Number(idleTimeout),
      env: parsedEnv.env,
    };
    return { b, bad: parsedEnv.bad };
  };
  // Only the fields this form sends can change.
  const sent = body().b;
  const restartChanges = existing
    ? RESTART_FIELDS.filter((f) => f in sent && JSON.stringify(sent[f]) !== JSON.stringify((existing as unknown as Record<string, unknown>)[f] ?? null))
    : [];

  const submit = async (e: Event) => {
    e.preventDefault();
    const { b, bad } = body();
    if (bad.length > 0) {
      setErrors({ env: [`lines must look like KEY=value: ${bad.join(", ")}`] });
      return;
    }
    setBusy(true);
    setErrors({});
    setProblem(null);
    try {
      const path = existing ? `/v1/endpoints/${encodeURIComponent(existing.id)}` : "/v1/endpoints";
      const { body: saved, headers } = await apiWithHeaders<RestEndpoint>(path, { method: existing ? "PATCH" : "POST", body: b });
      onSaved(saved, headers.get("svc-workers-restarted") === "true");
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 422) setErrors(fieldErrors(err.errors));
      setProblem(err);
    } finally {
      setBusy(false);
    }
  };

  const num = (label: string, field: string, value: string, set: (v: string) => void, hint?: string) => (
    <Field label={label} errors={errors[field]} hint={hint}>
      {({ id, describedBy, invalid }) => (
        <input
          id={id}
          type="number"
          inputMode="numeric"
          aria-describedby={describedBy}
          aria-invalid={invalid}
          value={value}
          onInput={(e) => set(e.currentTarget.value)}
        />
      )}
    </Field>
  );

  return (
    <form class="card form" onSubmit={submit} aria-label={existing ? `Edit endpoint ${existing.name}` : "New endpoint"}>
      <h2>{existing ? `Edit ${existing.name}` : "New endpoint"}</h2>
      <Field label="Name" errors={errors.name}>
        {({ id, describedBy, invalid }) => (
          <input id={id} aria-describedby={describedBy} aria-invalid={invalid} required value={name} onInput={(e) => setName(e.currentTarget.value)} />
        )}
      </Field>
      <Field
        label="Template"
        errors={errors.templateId}
        hint={
          templates.length === 0
            ? "No templates yet: create one on the Templates page."
            : "What the workers run (svc://<endpoint id> runs a deployed endpoint's code)."
        }
      >
        {({ id, describedBy, invalid }) => (
          <select id={id} aria-describedby={describedBy} aria-invalid={invalid} value={templateId} onChange={(e) => setTemplateId(e.currentTarget.value)}>
            {templates.map((t) => (
              <option key={t.id} value={t.id}>
                {t.name} ({t.imageName})
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Compute" errors={errors.computeType} hint={existing ? "Fixed once the endpoint exists." : undefined}>
        {({ id, describedBy }) => (
          <select
            id={id}
            aria-describedby={describedBy}
            disabled={existing !== undefined}
            value={computeType}
            onChange={(e) => setComputeType(e.currentTarget.value as "CPU" | "GPU")}
          >
            <option value="CPU">CPU</option>
            <option value="GPU">GPU</option>
          </select>
        )}
      </Field>
      {computeType === "GPU" && (
        <fieldset class={errors.gpuTypeIds ? "invalid" : undefined}>
          <legend>GPU types in priority order (drag, or use the arrows)</legend>
          <GpuOrder value={gpuTypeIds} onChange={setGpuTypeIds} known={gpuTypes} describedBy={errors.gpuTypeIds ? "gpu-errors" : undefined} />
          {errors.gpuTypeIds && (
            <small id="gpu-errors" class="field-error" role="alert">
              {errors.gpuTypeIds.join("; ")}
            </small>
          )}
        </fieldset>
      )}
      <div class="row">
        {num("Workers min", "workersMin", workersMin, setWorkersMin)}
        {num("Workers max", "workersMax", workersMax, setWorkersMax)}
        {num("Idle timeout (s)", "idleTimeout", idleTimeout, setIdleTimeout)}
      </div>
      <Field label="Environment variables (KEY=value, one a line)" errors={errors.env}>
        {({ id, describedBy, invalid }) => (
          <textarea id={id} rows={3} aria-describedby={describedBy} aria-invalid={invalid} value={env} onInput={(e) => setEnv(e.currentTarget.value)} />
        )}
      </Field>
      {existing && (
        <p class={restartChanges.length > 0 ? "notice warn" : "notice"} role="status">
          {restartChanges.length > 0
            ? `Saving restarts this endpoint's workers (changed: ${restartChanges.join(", ")}). Queued and running jobs are kept.`
            : "Name, environment and idle timeout changes apply without restarting workers."}
        </p>
      )}
      {errors[""] && <ProblemMessage error={new Error(errors[""].join("; "))} />}
      {problem && !(problem instanceof ApiProblem && problem.status === 422) && <ProblemMessage error={problem} />}
      {problem instanceof ApiProblem && problem.status === 422 && (
        <p class="field-error" role="alert">
          {problem.detail}: see the fields marked above.
        </p>
      )}
      <div class="actions">
        <button type="submit" disabled={busy}>
          {existing ? "Save changes" : "Create endpoint"}
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function TemplateForm({ onCreated }: { onCreated(name: string): void }) {
  const [name, setName] = useState("");
  const [imageName, setImageName] = useState("");
  const [errors, setErrors] = useState<Record<string, string[]>>({});
  const [problem, setProblem] = useState<unknown>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setProblem(null);
    try {
      await api("/v1/templates", { body: { name: name.trim(), imageName: imageName.trim() } });
      setName("");
      setImageName("");
      onCreated(name.trim());
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 422) setErrors(fieldErrors(err.errors));
      else setProblem(err);
    }
  };
  return (
    <form class="card form" onSubmit={submit} aria-label="New template">
      <h2>New template</h2>
      <div class="row">
        <Field label="Template name" errors={errors.name}>
          {({ id, describedBy, invalid }) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={invalid} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          )}
        </Field>
        <Field label="Image" errors={errors.imageName} hint="svc://<endpoint id> runs that deployed endpoint's code">
          {({ id, describedBy, invalid }) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={invalid} value={imageName} onInput={(e) => setImageName(e.currentTarget.value)} />
          )}
        </Field>
      </div>
      <ProblemMessage error={problem} />
      <div class="actions">
        <button type="submit">Create template</button>
      </div>
    </form>
  );
}
