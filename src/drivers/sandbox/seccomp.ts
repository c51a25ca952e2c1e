// The seccomp filter sandboxed workers run under, as classic BPF (what `bwrap --seccomp FD` loads), generated
// here rather than with libseccomp so that svc needs no native module. It follows Flatpak's approach: check the
// architecture, then answer EPERM to the system calls an unprivileged handler has no use for and that widen what
// a hostile one can reach (debugging other processes, the kernel's keyrings, BPF, namespaces and mounts, kernel
// modules). Everything else is allowed: Node, native addons and the handlers' own subprocesses keep working. Pure.

/** The architectures a filter can be generated for: their audit id and system call numbers. */
export type SeccompArch = "x64" | "arm64";

const AUDIT_ARCH: Record<SeccompArch, number> = {
  x64: 0xc000003e, // AUDIT_ARCH_X86_64
  arm64: 0xc00000b7, // AUDIT_ARCH_AARCH64
};

/** Denied calls, by name: [x86_64 number, arm64 (asm-generic) number]; -1 where the arch has no such call. */
const DENIED: Record<string, [number, number]> = {
  // Reading or writing another process's memory.
  ptrace: [101, 117],
  process_vm_readv: [310, 270],
  process_vm_writev: [311, 271],
  // The kernel's keyrings are shared by every process of a uid.
  keyctl: [250, 219],
  add_key: [248, 217],
  request_key: [249, 218],
  // Kernel attack surface an unprivileged program does not need.
  bpf: [321, 280],
  perf_event_open: [298, 241],
  userfaultfd: [323, 282],
  kexec_load: [246, 104],
  kexec_file_load: [320, 294],
  init_module: [175, 105],
  finit_module: [313, 273],
  delete_module: [176, 106],
  lookup_dcookie: [212, 18],
  iopl: [172, -1],
  ioperm: [173, -1],
  syslog: [103, 116],
  acct: [163, 89],
  quotactl: [179, 60],
  swapon: [167, 224],
  swapoff: [168, 225],
  reboot: [169, 142],
  // New namespaces and mounts: the sandbox's view of the machine is fixed once it starts.
  unshare: [272, 97],
  setns: [308, 268],
  mount: [165, 40],
  umount2: [166, 39],
  pivot_root: [155, 41],
  chroot: [161, 51],
  open_tree: [428, 428],
  move_mount: [429, 429],
  fsopen: [430, 430],
  fsconfig: [431, 431],
  fsmount: [432, 432],
  fspick: [433, 433],
  mount_setattr: [442, 442],
  // File handles bypass the mount view (they need a capability outside, but cost nothing to refuse).
  name_to_handle_at: [303, 264],
  open_by_handle_at: [304, 265],
};

const CLONE: [number, number] = [56, 220];
const CLONE3 = 435;

/** CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME */
export const CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080;

// struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
const OFFSET_NR = 0;
const OFFSET_ARCH = 4;
/** The low 32 bits of args[0] on a little-endian machine (both supported arches are). */
const OFFSET_ARG0_LOW = 16;

// Classic BPF opcodes.
const LD_W_ABS = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K = 0x06; // BPF_RET | BPF_K

export const SECCOMP_RET_ALLOW = 0x7fff0000;
const SECCOMP_RET_ERRNO = 0x00050000;
export const EPERM = 1;
export const ENOSYS = 38;
/** x32 system calls on x86_64 carry this bit: another ABI, refused whole. */
const X32_SYSCALL_BIT = 0x40000000;

export interface BpfInstruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

const ins = (code: number, jt: number, jf: number, k: number): BpfInstruction => ({ code, jt, jf, k });
const ret = (k: number) => ins(RET_K, 0, 0, k >>> 0);
const errno = (e: number) => SECCOMP_RET_ERRNO | e;

/** The names of the denied calls (docs, the isolation description). */
export const DENIED_SYSCALLS: readonly string[] = [...Object.keys(DENIED), "clone with namespace flags", "clone3 (ENOSYS: callers fall back to clone)"];

/** The architecture of this process as a seccomp arch, or undefined where no filter can be generated. */
export function seccompArch(arch: string = process.arch): SeccompArch | undefined {
  return arch === "x64" || arch === "arm64" ? arch : undefined;
}

/** The filter's program. */
export function seccompProgram(arch: SeccompArch): BpfInstruction[] {
  const index = arch === "x64" ? 0 : 1;
  const program: BpfInstruction[] = [
    ins(LD_W_ABS, 0, 0, OFFSET_ARCH),
    // Another architecture's calls (i386 on x86_64) have other numbers: none of them is allowed.
    ins(JEQ_K, 1, 0, AUDIT_ARCH[arch]),
    ret(errno(EPERM)),
    ins(LD_W_ABS, 0, 0, OFFSET_NR),
  ];
  if (arch === "x64") program.push(ins(JGE_K, 0, 1, X32_SYSCALL_BIT), ret(errno(EPERM)));
  for (const numbers of Object.values(DENIED)) {
    const nr = numbers[index]!;
    if (nr < 0) continue;
    program.push(ins(JEQ_K, 0, 1, nr), ret(errno(EPERM)));
  }
  // clone3 passes its flags in memory, where a filter cannot look: ENOSYS makes libc fall back to clone.
  program.push(ins(JEQ_K, 0, 1, CLONE3), ret(errno(ENOSYS)));
  // clone: threads and processes yes, new namespaces no (the flags are its first argument on both arches).
  program.push(
    ins(JEQ_K, 0, 3, CLONE[index]),
    ins(LD_W_ABS, 0, 0, OFFSET_ARG0_LOW),
    ins(JSET_K, 0, 1, CLONE_NAMESPACE_FLAGS),
    ret(errno(EPERM)),
    ret(SECCOMP_RET_ALLOW),
  );
  return program;
}

/** The program as `struct sock_filter[]` bytes (little-endian), what bwrap reads from its --seccomp fd. */
export function encodeProgram(program: BpfInstruction[]): Buffer {
  const bytes = Buffer.alloc(program.length * 8);
  program.forEach((instruction, i) => {
    bytes.writeUInt16LE(instruction.code, i * 8);
    bytes.writeUInt8(instruction.jt, i * 8 + 2);
    bytes.writeUInt8(instruction.jf, i * 8 + 3);
    bytes.writeUInt32LE(instruction.k >>> 0, i * 8 + 4);
  });
  return bytes;
}

/**
 * Run `program` on one system call as the kernel would (the subset of classic BPF it uses), for tests: the
 * action it returns. Throws on a jump out of the program or an opcode it does not use.
 */
export function evaluate(program: BpfInstruction[], call: { nr: number; arch: number; args?: number[] }): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(call.nr, OFFSET_NR);
  data.writeUInt32LE(call.arch >>> 0, OFFSET_ARCH);
  (call.args ?? []).forEach((arg, i) => data.writeBigUInt64LE(BigInt(arg), 16 + i * 8));
  let acc = 0;
  for (let pc = 0; pc < program.length; pc++) {
    const { code, jt, jf, k } = program[pc]!;
    switch (code) {
      case LD_W_ABS:
        acc = data.readUInt32LE(k);
        break;
      case JEQ_K:
        pc += acc === k >>> 0 ? jt : jf;
        break;
      case JGE_K:
        pc += acc >= k >>> 0 ? jt : jf;
        break;
      case JSET_K:
        pc += (acc & k) !== 0 ? jt : jf;
        break;
      case RET_K:
        return k >>> 0;
      default:
        throw new Error(`opcode ${code} at ${pc}`);
    }
  }
  throw new Error("the program ran off its end");
}

/** The audit id of an arch (tests). */
export function auditArch(arch: SeccompArch): number {
  return AUDIT_ARCH[arch];
}

/** The number of a denied call on an arch (tests). */
export function deniedNumber(name: string, arch: SeccompArch): number | undefined {
  const n = DENIED[name]?.[arch === "x64" ? 0 : 1];
  return n === undefined || n < 0 ? undefined : n;
}
