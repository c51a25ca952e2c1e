// Network volumes (`/v2/network-volumes`): list, create (the API validates; its `$.field` errors are shown
// beside the fields), resize (grow only), delete (billable until deleted; the data goes).

import { useEffect, useState } from "preact/hooks";
import { api, ApiProblem, fieldErrors } from "../api.js";
import { Field, ListTable, Notice, ProblemMessage, useConfirm } from "../ui.js";

interface Volume {
  id: string;
  name: string;
  size: number;
  dataCenter: string;
  type: string;
}

interface DataCenter {
  id: string;
  name: string;
  primaryVolumeType: string;
  volumeTypes: string[];
}

function CreateVolume({ dataCenters, onCreated }: { dataCenters: DataCenter[]; onCreated(v: Volume): void }) {
  const [name, setName] = useState("");
  const [size, setSize] = useState("10");
  const [dataCenter, setDataCenter] = useState("");
  const [type, setType] = useState("");
  const [errors, setErrors] = useState<Record<string, string[]>>({});
  const [problem, setProblem] = useState<unknown>(null);
  useEffect(() => {
    if (!dataCenter && dataCenters[0]) setDataCenter(dataCenters[0].id);
  }, [dataCenters]);
  const dc = dataCenters.find((d) => d.id === dataCenter);
  const submit = async (e: Event) => {
    e.preventDefault();
    setErrors({});
    setProblem(null);
    // The size goes as typed (a number when it is one): the service's validation is the one that counts.
    const sizeValue = size.trim() !== "" && Number.isFinite(Number(size)) ? Number(size) : size;
    try {
      const created = await api<Volume>("/v2/network-volumes", { body: { name: name.trim(), size: sizeValue, dataCenter, ...(type ? { type } : {}) } });
      setName("");
      onCreated(created);
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 422) setErrors(fieldErrors(err.errors));
      setProblem(err);
    }
  };
  return (
    <form class="card form" onSubmit={submit} aria-label="New network volume" noValidate>
      <h2>New network volume</h2>
      <div class="row">
        <Field label="Volume name" errors={errors.name}>
          {({ id, describedBy, invalid }) => (
            <input id={id} aria-describedby={describedBy} aria-invalid={invalid} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          )}
        </Field>
        <Field label="Size (GB)" errors={errors.size}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              type="number"
              inputMode="numeric"
              aria-describedby={describedBy}
              aria-invalid={invalid}
              value={size}
              onInput={(e) => setSize(e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Data center" errors={errors.dataCenter}>
          {({ id, describedBy, invalid }) => (
            <select id={id} aria-describedby={describedBy} aria-invalid={invalid} value={dataCenter} onChange={(e) => setDataCenter(e.currentTarget.value)}>
              {dataCenters.map((d) => (
                <option key={d.id} value={d.id}>
                  {d.name} ({d.id})
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Type" errors={errors.type}>
          {({ id, describedBy, invalid }) => (
            <select id={id} aria-describedby={describedBy} aria-invalid={invalid} value={type} onChange={(e) => setType(e.currentTarget.value)}>
              <option value="">Default ({dc?.primaryVolumeType ?? "primary"})</option>
              {(dc?.volumeTypes ?? []).map((t) => (
                <option key={t} value={t}>
                  {t}
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <p class="hint">A volume is billable from creation until it is deleted.</p>
      {errors[""] && <ProblemMessage error={new Error(errors[""].join("; "))} />}
      {problem && !(problem instanceof ApiProblem && problem.status === 422) && <ProblemMessage error={problem} />}
      <div class="actions">
        <button type="submit">Create volume</button>
      </div>
    </form>
  );
}

function VolumeRow({ volume, onChanged, onDelete }: { volume: Volume; onChanged(): void; onDelete(v: Volume): void }) {
  const [size, setSize] = useState(String(volume.size));
  const [error, setError] = useState<string[] | undefined>();
  const [problem, setProblem] = useState<unknown>(null);
  const resize = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setProblem(null);
    try {
      await api(`/v2/network-volumes/${encodeURIComponent(volume.id)}`, { method: "PATCH", body: { size: Number(size) } });
      onChanged();
    } catch (err) {
      if (err instanceof ApiProblem && err.status === 422) setError(fieldErrors(err.errors).size ?? err.errors);
      else setProblem(err);
    }
  };
  return (
    <tr data-volume={volume.id}>
      <th scope="row">
        {volume.name}
        <div class="muted mono">{volume.id}</div>
      </th>
      <td>{volume.size} GB</td>
      <td>{volume.dataCenter}</td>
      <td>{volume.type}</td>
      <td>
        <form class="inline" onSubmit={resize} aria-label={`Resize ${volume.name}`}>
          <Field label={`New size of ${volume.name} (GB)`} errors={error}>
            {({ id, describedBy, invalid }) => (
              <input
                id={id}
                class="narrow"
                type="number"
                aria-describedby={describedBy}
                aria-invalid={invalid}
                value={size}
                onInput={(e) => setSize(e.currentTarget.value)}
              />
            )}
          </Field>
          <button type="submit" class="secondary">
            Resize
          </button>
        </form>
        <ProblemMessage error={problem} />
      </td>
      <td>
        <button class="danger" onClick={() => onDelete(volume)} aria-label={`Delete volume ${volume.name}`}>
          Delete
        </button>
      </td>
    </tr>
  );
}

export function VolumesPage() {
  const [volumes, setVolumes] = useState<Volume[] | null>(null);
  const [dataCenters, setDataCenters] = useState<DataCenter[]>([]);
  const [problem, setProblem] = useState<unknown>(null);
  const [message, setMessage] = useState<string | null>(null);
  const [dialog, confirm] = useConfirm();
  const load = async () => {
    try {
      setVolumes(await api<Volume[]>("/v2/network-volumes"));
      setProblem(null);
    } catch (err) {
      setProblem(err);
    }
  };
  useEffect(() => {
    void load();
    api<DataCenter[]>("/v2/data-centers").then(setDataCenters, setProblem);
  }, []);
  const remove = (v: Volume) =>
    confirm({
      title: `Delete volume ${v.name}?`,
      body: (
        <>
          <p>Every file on the volume is deleted; this cannot be undone.</p>
          <p>A volume is billable until it is deleted. Endpoints that mount it must be detached or deleted first.</p>
        </>
      ),
      confirmLabel: "Delete volume and its data",
      action: async () => {
        try {
          await api(`/v2/network-volumes/${encodeURIComponent(v.id)}`, { method: "DELETE" });
          setMessage(`Deleted volume ${v.name}.`);
          void load();
        } catch (err) {
          setProblem(err);
        }
      },
    });
  return (
    <section aria-labelledby="volumes-title">
      {dialog}
      <h1 id="volumes-title" tabIndex={-1}>
        Network volumes
      </h1>
      <Notice text={message} />
      <ProblemMessage error={problem} />
      {volumes === null ? (
        <p>Loading…</p>
      ) : volumes.length === 0 ? (
        <p>No network volumes.</p>
      ) : (
        <ListTable label="Network volumes" columns={["Name", "Size", "Data center", "Type", "Resize (grow only)"]} action="Delete">
          {volumes.map((v) => (
            <VolumeRow key={`${v.id}-${v.size}`} volume={v} onChanged={() => void load()} onDelete={remove} />
          ))}
        </ListTable>
      )}
      <CreateVolume
        dataCenters={dataCenters}
        onCreated={(v) => {
          setMessage(`Created volume ${v.name} (${v.size} GB).`);
          void load();
        }}
      />
    </section>
  );
}
