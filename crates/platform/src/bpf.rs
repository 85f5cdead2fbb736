//! The few pieces of eBPF an AF_XDP port needs, without a C toolchain: an XSKMAP, the XDP
//! program that redirects each frame to the socket of its receive queue (written as raw
//! instructions), and a BPF link that attaches it to an interface.
//!
//! The program, in pseudo-C:
//!
//! ```text
//! int xsk_redirect(struct xdp_md *ctx) {
//!     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//!
//! The low bits of `bpf_redirect_map`'s flags are the action taken when the map has no socket
//! at that key (Linux ≥ 5.3), so frames of queues without a socket reach the kernel's stack.
//!
//! The program is attached with `BPF_LINK_CREATE` (attach type `BPF_XDP`, Linux ≥ 5.9), not netlink
//! `IFLA_XDP`: the attachment belongs to the link's file descriptor, so it disappears when the
//! [`XdpLink`] is dropped or the process dies, and it fails with `EBUSY` instead of silently
//! replacing another program already on the interface.
//!
//! All `unsafe` here is the `bpf(2)` system call itself, in `sys_bpf`, over `#[repr(C)]`
//! prefixes of `union bpf_attr` (the kernel zero-fills the part we do not pass).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

// `enum bpf_cmd` (linux/bpf.h).
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_MAP_DELETE_ELEM: libc::c_int = 3;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;
// `enum bpf_map_type`, `enum bpf_prog_type`, `enum bpf_attach_type`.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// `src_reg` of a `BPF_LD_IMM64` whose immediate is a map file descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_FUNC_redirect_map`.
const HELPER_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS` from `enum xdp_action`.
pub const XDP_PASS: i32 = 2;
/// `BPF_ANY` for map updates: create or replace.
const BPF_ANY: u64 = 0;
// `XDP_FLAGS_*` (linux/if_link.h).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// Byte offset of `rx_queue_index` in `struct xdp_md` (data, data_end, data_meta,
/// ingress_ifindex, rx_queue_index).
const XDP_MD_RX_QUEUE_INDEX_OFF: i16 = 16;
/// Size of the verifier log buffer we ask for when a load fails.
const VERIFIER_LOG_BYTES: usize = 64 * 1024;

// Instruction classes, sizes, modes and operations (linux/bpf_common.h, linux/bpf.h).
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_JMP: u8 = 0x05;
const BPF_ALU64: u8 = 0x07;
const BPF_W: u8 = 0x00;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_K: u8 = 0x00;
const BPF_MOV: u8 = 0xb0;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;

/// One eBPF instruction (`struct bpf_insn`): opcode, two 4-bit registers, a 16-bit offset and
/// a 32-bit immediate.
///
/// Invariant: `dst` and `src` are below 16 (checked by the constructors' `debug_assert!`s;
/// [`Insn::encode`] masks them anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub dst: u8,
    pub src: u8,
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    /// `dst = *(u32 *)(src + off)`.
    pub fn load_mem_u32(dst: u8, src: u8, off: i16) -> Insn {
        debug_assert!(dst < 16 && src < 16);
        Insn {
            code: BPF_LDX | BPF_MEM | BPF_W,
            dst,
            src,
            off,
            imm: 0,
        }
    }

    /// `dst = map` for the map behind file descriptor `map_fd`: a two-slot `BPF_LD_IMM64` the
    /// verifier rewrites into the map's address.
    pub fn load_map_fd(dst: u8, map_fd: RawFd) -> [Insn; 2] {
        debug_assert!(dst < 16);
        [
            Insn {
                code: BPF_LD | BPF_DW | BPF_IMM,
                dst,
                src: BPF_PSEUDO_MAP_FD,
                off: 0,
                imm: map_fd,
            },
            // The upper 32 bits of the 64-bit immediate; zero for a map fd.
            Insn {
                code: 0,
                dst: 0,
                src: 0,
                off: 0,
                imm: 0,
            },
        ]
    }

    /// `dst = imm` (64-bit register, sign-extended immediate).
    pub fn mov64_imm(dst: u8, imm: i32) -> Insn {
        debug_assert!(dst < 16);
        Insn {
            code: BPF_ALU64 | BPF_MOV | BPF_K,
            dst,
            src: 0,
            off: 0,
            imm,
        }
    }

    /// `r0 = helper(r1, …, r5)`.
    pub fn call(helper: i32) -> Insn {
        Insn {
            code: BPF_JMP | BPF_CALL,
            dst: 0,
            src: 0,
            off: 0,
            imm: helper,
        }
    }

    /// `return r0`.
    pub fn exit() -> Insn {
        Insn {
            code: BPF_JMP | BPF_EXIT,
            dst: 0,
            src: 0,
            off: 0,
            imm: 0,
        }
    }

    /// The 8 bytes the kernel reads: `code`, the register byte (`dst_reg:4, src_reg:4`
    /// bit-fields, so `dst` is the low nibble on little-endian machines and the high one on
    /// big-endian ones), `off` and `imm` in native byte order.
    pub fn encode(&self) -> [u8; 8] {
        let (dst, src) = (self.dst & 0x0f, self.src & 0x0f);
        let regs = if cfg!(target_endian = "little") {
            dst | (src << 4)
        } else {
            (dst << 4) | src
        };
        let off = self.off.to_ne_bytes();
        let imm = self.imm.to_ne_bytes();
        [
            self.code, regs, off[0], off[1], imm[0], imm[1], imm[2], imm[3],
        ]
    }
}

/// The XDP program that sends every frame to the AF_XDP socket registered for its receive
/// queue in `map_fd` (an XSKMAP), and passes it to the kernel when there is none.
pub fn xsk_redirect_program(map_fd: RawFd) -> Vec<Insn> {
    let [map_lo, map_hi] = Insn::load_map_fd(1, map_fd);
    vec![
        // r2 = ctx->rx_queue_index (r1 holds the context on entry).
        Insn::load_mem_u32(2, 1, XDP_MD_RX_QUEUE_INDEX_OFF),
        // r1 = &xsks
        map_lo,
        map_hi,
        // r3 = XDP_PASS: the action when the map has no socket at r2.
        Insn::mov64_imm(3, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)
        Insn::call(HELPER_REDIRECT_MAP),
        Insn::exit(),
    ]
}

/// Marker for `#[repr(C)]` prefixes of `union bpf_attr`.
///
/// # Safety
/// Implementors are `#[repr(C)]`, contain no padding the kernel would read as a field (explicit
/// `_pad` fields are zero), and every pointer they carry as a `u64` points to memory valid for
/// what the command does with it for the duration of the call.
unsafe trait BpfAttr {}

/// `bpf(cmd, attr, sizeof(attr))`; returns the (non-negative) result or the OS error.
fn sys_bpf<T: BpfAttr>(cmd: libc::c_int, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, exclusively borrowed `T` of `size_of::<T>()` bytes; `BpfAttr`
    // guarantees its layout is a prefix of `union bpf_attr` and that the pointers inside it are
    // valid for the call. The kernel reads and may write only those bytes.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            core::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Wraps a file descriptor the kernel just returned.
fn owned_fd(rc: libc::c_long) -> io::Result<OwnedFd> {
    let raw = RawFd::try_from(rc)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bpf(2) returned a bad fd"))?;
    // SAFETY: `raw` is a fresh descriptor the bpf(2) call created for us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Copies `name` into a kernel object name (15 bytes + NUL), cutting it if needed.
fn object_name(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (o, b) in out.iter_mut().zip(name.bytes().take(15)) {
        *o = if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' {
            b
        } else {
            b'_'
        };
    }
    out
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}
// SAFETY: repr(C) prefix of the BPF_MAP_CREATE member; no pointers.
unsafe impl BpfAttr for MapCreateAttr {}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}
// SAFETY: repr(C) prefix of the map-element member (`key` is 8-aligned, hence `_pad`); callers
// point `key`/`value` at live values of the map's key and value sizes.
unsafe impl BpfAttr for MapElemAttr {}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}
// SAFETY: repr(C) prefix of the BPF_PROG_LOAD member; `load` points `insns`, `license` and
// `log_buf` at live buffers of the stated sizes.
unsafe impl BpfAttr for ProgLoadAttr {}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}
// SAFETY: repr(C) prefix of the BPF_LINK_CREATE member; no pointers.
unsafe impl BpfAttr for LinkCreateAttr {}

/// A `BPF_MAP_TYPE_XSKMAP`: key = receive queue index (u32), value = AF_XDP socket fd (u32).
///
/// Invariant: `max_entries` is the size the kernel created the map with; keys at or above it
/// are rejected before any system call.
#[derive(Debug)]
pub struct XskMap {
    fd: OwnedFd,
    max_entries: u32,
}

impl XskMap {
    /// Creates a map with room for queues `0..max_entries`. Needs `CAP_BPF`/`CAP_NET_ADMIN`.
    pub fn create(max_entries: u32) -> io::Result<Self> {
        if max_entries == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an XSKMAP needs at least one entry",
            ));
        }
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries,
            map_name: object_name("rsstack_xsks"),
            ..MapCreateAttr::default()
        };
        let fd = owned_fd(sys_bpf(BPF_MAP_CREATE, &mut attr)?)?;
        Ok(XskMap { fd, max_entries })
    }

    pub fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// Points `queue` at the bound AF_XDP socket `socket`.
    pub fn insert(&self, queue: u32, socket: BorrowedFd<'_>) -> io::Result<()> {
        self.check_key(queue)?;
        let key = queue;
        let value = u32::try_from(socket.as_raw_fd())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "negative fd"))?;
        let mut attr = MapElemAttr {
            map_fd: self.raw_u32(),
            key: (&key as *const u32) as u64,
            value: (&value as *const u32) as u64,
            flags: BPF_ANY,
            ..MapElemAttr::default()
        };
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
    }

    /// Empties slot `queue`; its frames then go to the kernel's stack (`XDP_PASS`).
    pub fn remove(&self, queue: u32) -> io::Result<()> {
        self.check_key(queue)?;
        let key = queue;
        let mut attr = MapElemAttr {
            map_fd: self.raw_u32(),
            key: (&key as *const u32) as u64,
            ..MapElemAttr::default()
        };
        sys_bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
    }

    fn check_key(&self, queue: u32) -> io::Result<()> {
        if queue >= self.max_entries {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("queue {queue} outside the XSKMAP's {}", self.max_entries),
            ));
        }
        Ok(())
    }

    fn raw_u32(&self) -> u32 {
        // An OwnedFd is never negative.
        self.fd.as_raw_fd().unsigned_abs()
    }
}

impl AsFd for XskMap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// `BPF_PROG_LOAD` failed; `verifier_log` holds what the verifier said (empty if it said
/// nothing, e.g. for a permission error).
#[derive(Debug, thiserror::Error)]
#[error("loading the XDP program failed: {os}; verifier log: {verifier_log}")]
pub struct ProgLoadError {
    pub os: io::Error,
    pub verifier_log: String,
}

impl From<ProgLoadError> for io::Error {
    fn from(e: ProgLoadError) -> io::Error {
        io::Error::new(e.os.kind(), e)
    }
}

/// A loaded XDP program (not yet attached to anything).
#[derive(Debug)]
pub struct XdpProgram {
    fd: OwnedFd,
}

impl XdpProgram {
    /// Loads [`xsk_redirect_program`] over `map`.
    pub fn load_xsk_redirect(map: &XskMap) -> Result<Self, ProgLoadError> {
        Self::load(&xsk_redirect_program(map.fd.as_raw_fd()), "rsstack_xsk")
    }

    /// Loads `insns` as an XDP program. On failure the load is retried with the verifier log on,
    /// and the log comes back in the error.
    pub fn load(insns: &[Insn], name: &str) -> Result<Self, ProgLoadError> {
        let code: Vec<[u8; 8]> = insns.iter().map(Insn::encode).collect();
        let license: &CStr = c"GPL";
        let insn_cnt = u32::try_from(code.len()).map_err(|_| ProgLoadError {
            os: io::Error::new(io::ErrorKind::InvalidInput, "too many instructions"),
            verifier_log: String::new(),
        })?;
        let attr = |log: Option<&mut Vec<u8>>| {
            let mut a = ProgLoadAttr {
                prog_type: BPF_PROG_TYPE_XDP,
                insn_cnt,
                insns: code.as_ptr() as u64,
                license: license.as_ptr() as u64,
                prog_name: object_name(name),
                expected_attach_type: 0,
                ..ProgLoadAttr::default()
            };
            if let Some(buf) = log {
                a.log_level = 1;
                a.log_size = buf.len() as u32;
                a.log_buf = buf.as_mut_ptr() as u64;
            }
            a
        };
        let first = match sys_bpf(BPF_PROG_LOAD, &mut attr(None)) {
            Ok(rc) => return owned_fd(rc).map(|fd| XdpProgram { fd }).map_err(no_log),
            Err(e) => e,
        };
        let mut log = vec![0u8; VERIFIER_LOG_BYTES];
        let second = sys_bpf(BPF_PROG_LOAD, &mut attr(Some(&mut log)));
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let verifier_log = String::from_utf8_lossy(&log[..end]).trim_end().to_string();
        match second {
            // Loaded the second time (a transient failure): keep it.
            Ok(rc) => owned_fd(rc).map(|fd| XdpProgram { fd }).map_err(no_log),
            Err(os) => Err(ProgLoadError {
                os: if os.raw_os_error() == first.raw_os_error() {
                    os
                } else {
                    first
                },
                verifier_log,
            }),
        }
    }
}

fn no_log(os: io::Error) -> ProgLoadError {
    ProgLoadError {
        os,
        verifier_log: String::new(),
    }
}

impl AsFd for XdpProgram {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Where the kernel runs an attached XDP program (`XDP_FLAGS_*_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttachMode {
    /// Generic XDP on the socket buffer, after the driver (`XDP_FLAGS_SKB_MODE`); works on
    /// every interface.
    Skb,
    /// In the driver, before any socket buffer exists (`XDP_FLAGS_DRV_MODE`); fails where the
    /// driver has no native XDP.
    Driver,
    /// The kernel chooses: native where the driver has it, generic otherwise (no flag).
    Auto,
}

impl XdpAttachMode {
    pub fn flags(self) -> u32 {
        match self {
            XdpAttachMode::Skb => XDP_FLAGS_SKB_MODE,
            XdpAttachMode::Driver => XDP_FLAGS_DRV_MODE,
            XdpAttachMode::Auto => 0,
        }
    }
}

/// An XDP program attached to an interface through a BPF link; detached when dropped.
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
    ifindex: u32,
}

impl XdpLink {
    /// Attaches `program` to interface `ifindex`. `EBUSY` when another program is attached
    /// already (we never replace one silently).
    pub fn attach(program: &XdpProgram, ifindex: u32, mode: XdpAttachMode) -> io::Result<Self> {
        let mut attr = LinkCreateAttr {
            prog_fd: program.fd.as_raw_fd().unsigned_abs(),
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: mode.flags(),
        };
        let fd = owned_fd(sys_bpf(BPF_LINK_CREATE, &mut attr)?)?;
        Ok(XdpLink { fd, ifindex })
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }
}

impl AsFd for XdpLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_like_the_kernel_macros() {
        // BPF_EXIT_INSN() and BPF_EMIT_CALL(BPF_FUNC_redirect_map).
        assert_eq!(Insn::exit().encode(), [0x95, 0, 0, 0, 0, 0, 0, 0]);
        let mut call = [0x85, 0, 0, 0, 0, 0, 0, 0];
        call[4..].copy_from_slice(&51i32.to_ne_bytes());
        assert_eq!(Insn::call(51).encode(), call);
        // BPF_LDX_MEM(BPF_W, BPF_REG_2, BPF_REG_1, 16).
        let ldx = Insn::load_mem_u32(2, 1, 16).encode();
        assert_eq!(ldx[0], 0x61);
        assert_eq!(&ldx[2..4], &16i16.to_ne_bytes());
        // BPF_MOV64_IMM(BPF_REG_3, XDP_PASS).
        let mov = Insn::mov64_imm(3, 2).encode();
        assert_eq!(mov[0], 0xb7);
        assert_eq!(&mov[4..], &2i32.to_ne_bytes());
        // BPF_LD_MAP_FD(BPF_REG_1, 7): two slots, pseudo source register 1.
        let [lo, hi] = Insn::load_map_fd(1, 7);
        assert_eq!(lo.encode()[0], 0x18);
        assert_eq!(&lo.encode()[4..], &7i32.to_ne_bytes());
        assert_eq!(hi.encode(), [0; 8]);
    }

    #[cfg(target_endian = "little")]
    #[test]
    fn register_nibbles_put_dst_low_on_little_endian() {
        assert_eq!(Insn::load_mem_u32(2, 1, 16).encode()[1], 0x12);
        assert_eq!(Insn::load_map_fd(1, 3)[0].encode()[1], 0x11);
        assert_eq!(Insn::mov64_imm(3, 0).encode()[1], 0x03);
    }

    #[test]
    fn redirect_program_reads_the_queue_before_clobbering_the_context() {
        let prog = xsk_redirect_program(9);
        assert_eq!(prog.len(), 6);
        assert_eq!(prog[0], Insn::load_mem_u32(2, 1, 16));
        assert_eq!(prog[1].imm, 9);
        assert_eq!(prog[1].src, BPF_PSEUDO_MAP_FD);
        assert_eq!(prog[3], Insn::mov64_imm(3, XDP_PASS));
        assert_eq!(prog[4], Insn::call(51));
        assert_eq!(prog[5], Insn::exit());
    }

    #[test]
    fn attr_structs_have_the_kernel_layout() {
        assert_eq!(core::mem::size_of::<MapCreateAttr>(), 44);
        assert_eq!(core::mem::size_of::<MapElemAttr>(), 32);
        assert_eq!(core::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(
            core::mem::offset_of!(ProgLoadAttr, expected_attach_type),
            68
        );
        assert_eq!(core::mem::offset_of!(LinkCreateAttr, attach_type), 8);
        assert_eq!(core::mem::offset_of!(LinkCreateAttr, flags), 12);
    }

    #[test]
    fn object_names_are_cut_and_sanitised() {
        assert_eq!(&object_name("rsstack_xsk")[..12], b"rsstack_xsk\0");
        let long = object_name("a-very-long-program-name");
        assert_eq!(&long[..15], b"a_very_long_pro");
        assert_eq!(long[15], 0);
    }

    #[test]
    fn attach_modes_map_to_the_kernel_flags() {
        assert_eq!(XdpAttachMode::Skb.flags(), 2);
        assert_eq!(XdpAttachMode::Driver.flags(), 4);
        assert_eq!(XdpAttachMode::Auto.flags(), 0);
    }

    #[test]
    fn empty_xskmap_is_rejected_before_any_system_call() {
        let err = XskMap::create(0).expect_err("zero entries");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
