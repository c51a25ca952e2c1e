// How the CLI finds a network volume a user names: by id, or by a name exactly one of their volumes has. The
// provider's REST API lets two volumes share a name, so the CLI keeps names unique itself: `svc volume create`
// refuses a name the user already has (or, with --reuse, gives back that volume). Pure.

import { UserError } from "../errors.js";
import { didYouMean } from "./suggest.js";

export interface NamedVolume {
  id: string;
  name: string;
  size?: number;
}

/**
 * The volume `ref` names among `volumes`: the one with that id, else the only one with that name; undefined when
 * none. A name several volumes share is refused, naming their ids, rather than one of them guessed.
 */
export function findVolume<V extends NamedVolume>(volumes: readonly V[], ref: string): V | undefined {
  const byId = volumes.find((v) => v.id === ref);
  if (byId) return byId;
  const named = volumes.filter((v) => v.name === ref);
  if (named.length > 1) {
    throw new UserError(`${named.length} network volumes are named "${ref}" (${named.map((v) => v.id).join(", ")})`, {
      hint: "Name the volume by id, or rename one (`svc volume update <id> --name <new name>`).",
    });
  }
  return named[0];
}

/** "No network volume ... among yours", with the closest name when `ref` looks like a typo of one. */
export function noSuchVolume(volumes: readonly NamedVolume[], ref: string): UserError {
  return new UserError(
    `No network volume "${ref}" among yours${didYouMean(
      ref,
      volumes.map((v) => v.name),
    )}`,
    {
      hint: "List them with `svc volume list`; name one by id or name.",
    },
  );
}

/**
 * What `svc volume create --name <name>` does given the user's volumes: undefined to create one; the existing
 * volume when `reuse` is set and one has that name; refused (exit code 1) when one has it and `reuse` is not set,
 * since from then on commands that take the name could not tell the two apart.
 */
export function volumeToReuse<V extends NamedVolume>(volumes: readonly V[], name: string, reuse: boolean): V | undefined {
  const named = volumes.filter((v) => v.name === name);
  if (named.length === 0) return undefined;
  if (reuse && named.length === 1) return named[0];
  const which = named.map((v) => `${v.id}${v.size === undefined ? "" : `, ${v.size} GB`}`).join("; ");
  throw new UserError(`You already have a network volume named "${name}" (${which}); nothing was created`, {
    hint: `Use it as it is (\`svc volume cp <file> ${name}:<path>\`), pass --reuse to print it instead of creating another, or choose another --name.`,
  });
}
