//! The extended `verbs_context` of rdma-core: ops that `verbs.h` reaches
//! through memory right before `ibv_context`.

use super::super::completion::VerbsError;
use ibverbs_sys as sys;
use std::os::raw::{c_int, c_void};

/// The tail of `struct verbs_context` (rdma-core `verbs.h`), from
/// `query_port` to the embedded `ibv_context`. The struct "grows up": new
/// ops are added at its start, so offsets measured back from `context`
/// are ABI-stable, and the header's `verbs_get_ctx_op` checks `sz` to
/// know which ops a provider fills.
#[repr(C)]
pub(super) struct VerbsContextTail {
    pub(super) query_port: Option<
        unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::ibv_port_attr, usize) -> c_int,
    >,
    pub(super) _ops_a: [*mut c_void; 23],
    pub(super) query_rt_values:
        Option<unsafe extern "C" fn(*mut sys::ibv_context, *mut sys::ibv_values_ex) -> c_int>,
    pub(super) create_cq_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_cq_init_attr_ex,
        ) -> *mut sys::ibv_cq_ex,
    >,
    pub(super) _priv: *mut c_void,
    pub(super) query_device_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *const c_void,
            *mut sys::ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    pub(super) _ops_b: [*mut c_void; 10],
    pub(super) _abi_placeholder3: u64,
    pub(super) sz: usize,
    pub(super) context: sys::ibv_context,
}

/// The extended context of `ctx`, if the provider has one.
///
/// # Safety
/// `ctx` must be a live context from `ibv_open_device`.
pub(super) unsafe fn verbs_ctx(ctx: *mut sys::ibv_context) -> Option<*mut VerbsContextTail> {
    // __VERBS_ABI_IS_EXTENDED is ((void *)UINTPTR_MAX).
    if (*ctx).abi_compat as usize != usize::MAX {
        return None;
    }
    let off = std::mem::offset_of!(VerbsContextTail, context);
    Some((ctx as *mut u8).sub(off) as *mut VerbsContextTail)
}

/// Whether the provider's extended context is large enough to hold the op
/// at byte offset `op_offset` of [`VerbsContextTail`] (the header's
/// `verbs_get_ctx_op` test).
pub(super) fn op_present(sz: usize, op_offset: usize) -> bool {
    sz >= std::mem::size_of::<VerbsContextTail>() - op_offset
}

macro_rules! ctx_op {
    ($ctx:expr, $field:ident) => {{
        match verbs_ctx($ctx) {
            Some(v) if op_present((*v).sz, std::mem::offset_of!(VerbsContextTail, $field)) => {
                (*v).$field
            }
            _ => None,
        }
    }};
}

pub(super) fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// `what` failed: the error the verb left in errno.
pub(super) fn failed(what: &str) -> VerbsError {
    VerbsError::Failed(format!("{what}: {}", errno()))
}

/// `Ok` for a zero return code, else `what` failed with the error number
/// it returned (the header's inline ops return it instead of setting
/// errno).
pub(super) fn check_rc(rc: c_int, what: &str) -> Result<(), VerbsError> {
    match rc {
        0 => Ok(()),
        _ => Err(VerbsError::Failed(format!(
            "{what}: {}",
            std::io::Error::from_raw_os_error(rc)
        ))),
    }
}
pub(super) use ctx_op;
