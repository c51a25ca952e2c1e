// Whether a process id names a live process on this machine: the dev session file's owner, a worker's parent,
// a preview's owner.

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is someone else's.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
