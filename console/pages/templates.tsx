// Templates (`/v1/templates`): what a console endpoint's workers run. The list and the form to create one.

import { useEffect, useState } from "preact/hooks";
import { api } from "../api.js";
import { ListTable, Notice, ProblemMessage } from "../ui.js";
import { TemplateForm, type Template } from "./endpoint-form.js";

export function TemplatesPage() {
  const [templates, setTemplates] = useState<Template[] | null>(null);
  const [problem, setProblem] = useState<unknown>(null);
  const [created, setCreated] = useState<string | null>(null);
  const load = async () => {
    try {
      setTemplates(await api<Template[]>("/v1/templates"));
      setProblem(null);
    } catch (err) {
      setProblem(err);
    }
  };
  useEffect(() => void load(), []);
  return (
    <section aria-labelledby="templates-title">
      <h1 id="templates-title" tabIndex={-1}>
        Templates
      </h1>
      <p class="muted">
        A template names what an endpoint's workers run. <a href="#/endpoints">New endpoint</a> on the Endpoints page picks one.
      </p>
      <Notice text={created && `Created template ${created}.`} />
      <ProblemMessage error={problem} />
      {templates === null ? (
        !problem && <p>Loading…</p>
      ) : templates.length === 0 ? (
        <p>No templates yet: create one below.</p>
      ) : (
        <ListTable label="Templates" columns={["Name", "Image"]}>
          {templates.map((t) => (
            <tr key={t.id} data-template={t.id}>
              <th scope="row">
                {t.name}
                <div class="muted mono">{t.id}</div>
              </th>
              <td class="mono">{t.imageName}</td>
            </tr>
          ))}
        </ListTable>
      )}
      <TemplateForm
        onCreated={(name) => {
          setCreated(name);
          void load();
        }}
      />
    </section>
  );
}
