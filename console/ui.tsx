// Small shared pieces: labelled fields with their errors beside them, problem messages, a confirmation
// dialog (native <dialog>: focus stays inside, Escape closes), and formatting.

import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiProblem } from "./api.js";
import { relativeTime } from "./forms.js";

let nextId = 0;
export function useId(prefix: string): string {
  const ref = useRef<string>();
  ref.current ??= `${prefix}-${++nextId}`;
  return ref.current;
}

export function Field(props: {
  label: string;
  errors?: string[];
  hint?: string;
  children: (ids: { id: string; describedBy?: string; invalid: boolean }) => ComponentChildren;
}) {
  const id = useId("field");
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const invalid = (props.errors?.length ?? 0) > 0;
  const describedBy = [invalid ? errorId : "", props.hint ? hintId : ""].filter(Boolean).join(" ") || undefined;
  return (
    <div class={`field${invalid ? " invalid" : ""}`}>
      <label for={id}>{props.label}</label>
      {props.children({ id, describedBy, invalid })}
      {props.hint && (
        <small id={hintId} class="hint">
          {props.hint}
        </small>
      )}
      {invalid && (
        <small id={errorId} class="field-error" role="alert">
          {props.errors!.join("; ")}
        </small>
      )}
    </div>
  );
}

/** What just succeeded, announced to screen readers; nothing when there is no text. */
export function Notice({ text }: { text: string | null | undefined }) {
  if (!text) return null;
  return (
    <p class="notice ok" role="status">
      {text}
    </p>
  );
}

export function ProblemMessage({ error }: { error: unknown }) {
  if (!error) return null;
  const p = error instanceof ApiProblem ? error : undefined;
  const text = p ? `${p.status} ${p.title}: ${p.detail}` : error instanceof Error ? error.message : String(error);
  return (
    <div class="problem" role="alert">
      <p>{text}</p>
      {p && p.errors.length > 0 && (
        <ul>
          {p.errors.map((e) => (
            <li key={e}>{e}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** A modal question; resolves through onAnswer. The dangerous button is not the default focus. */
export function ConfirmDialog(props: { title: string; children: ComponentChildren; confirmLabel: string; onAnswer(confirmed: boolean): void }) {
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId("dialog");
  useEffect(() => {
    const dialog = ref.current!;
    if (!dialog.open) dialog.showModal();
    const onClose = () => props.onAnswer(dialog.returnValue === "confirm");
    dialog.addEventListener("close", onClose);
    return () => dialog.removeEventListener("close", onClose);
  }, []);
  return (
    <dialog ref={ref} aria-labelledby={titleId} class="confirm">
      <form method="dialog">
        <h2 id={titleId}>{props.title}</h2>
        <div class="dialog-body">{props.children}</div>
        <div class="actions">
          <button value="cancel" autofocus>
            Cancel
          </button>
          <button value="confirm" class="danger">
            {props.confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** A confirmation step before an action: `ask(...)` opens the dialog, the action runs on "confirm". */
export function useConfirm(): [ComponentChildren, (opts: { title: string; body: ComponentChildren; confirmLabel: string; action(): void }) => void] {
  const [pending, setPending] = useState<{ title: string; body: ComponentChildren; confirmLabel: string; action(): void } | null>(null);
  const dialog = pending && (
    <ConfirmDialog
      title={pending.title}
      confirmLabel={pending.confirmLabel}
      onAnswer={(yes) => {
        setPending(null);
        if (yes) pending.action();
      }}
    >
      {pending.body}
    </ConfirmDialog>
  );
  return [dialog, setPending];
}

/**
 * A list of records as a table: named for screen readers by `label`, a header row of `columns`, and, with `action`,
 * a last column of buttons whose header only screen readers read. It scrolls sideways inside its box rather than
 * widening the page on a narrow screen. The children are its rows.
 */
/**
 * The box a table scrolls sideways in when it is wider than the screen (a phone), and the sign that it does: a hint
 * above it, a shade at the edge with more columns, and the box a labelled region the keyboard can scroll.
 * Measured, not guessed: a table that fits shows none of it.
 */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  const box = useRef<HTMLDivElement>(null);
  const [scrolls, setScrolls] = useState(false);
  useEffect(() => {
    const el = box.current!;
    const measure = () => setScrolls(el.scrollWidth > el.clientWidth + 1);
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    // Rows that come later widen the table, not its box.
    if (el.firstElementChild) observer.observe(el.firstElementChild);
    return () => observer.disconnect();
  }, []);
  return (
    <>
      {scrolls && (
        <p class="scroll-hint" aria-hidden="true">
          Scroll sideways for more columns →
        </p>
      )}
      <div
        class="table-wrap"
        ref={box}
        data-scrolls={scrolls ? "true" : undefined}
        {...(scrolls ? { role: "region", "aria-label": `${label} (scrolls sideways)`, tabIndex: 0 } : {})}
      >
        {children}
      </div>
    </>
  );
}

export function ListTable(props: { label: string; columns: string[]; action?: string; children: ComponentChildren }) {
  return (
    <TableWrap label={props.label}>
      <table class="list" aria-label={props.label}>
        <thead>
          <tr>
            {props.columns.map((column) => (
              <th key={column} scope="col">
                {column}
              </th>
            ))}
            {props.action && (
              <th scope="col">
                <span class="sr-only">{props.action}</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>{props.children}</tbody>
      </table>
    </TableWrap>
  );
}

export function formatMs(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function formatTime(t: number | string | null | undefined): string {
  if (t === null || t === undefined) return "—";
  return new Date(t).toLocaleString();
}

/** A time as a date and, beside it, how long ago (or until): "24/11/2026, 07:05:00 (5 min ago)". */
export function Time({ t, prefix = "", never = "—" }: { t: number | null | undefined; prefix?: string; never?: string }) {
  if (t === null || t === undefined) return <>{never}</>;
  return (
    <time dateTime={new Date(t).toISOString()} data-relative={relativeTime(t, Date.now())}>
      {prefix}
      {formatTime(t)} <span class="muted">({relativeTime(t, Date.now())})</span>
    </time>
  );
}

export function Json({ value, label }: { value: unknown; label: string }) {
  return (
    <pre class="json" aria-label={label} tabIndex={0}>
      {JSON.stringify(value, null, 2)}
    </pre>
  );
}

/** Re-run `load` every `ms` while the page shows; returns a manual refresh. */
export function usePolling(load: () => Promise<void> | void, ms: number, deps: unknown[]): () => void {
  const loadRef = useRef(load);
  loadRef.current = load;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout>;
    const tick = async () => {
      try {
        await loadRef.current();
      } finally {
        if (!stopped) timer = setTimeout(tick, ms);
      }
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, deps);
  return () => void loadRef.current();
}
