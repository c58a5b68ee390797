//! Opening RNIC ports: device list, protection domain, completion queue
//! (with hardware timestamps where offered), the UD queue pair and its
//! receive buffers; and releasing them.

use super::super::completion::{valid_mask, VerbsError};
use super::ctx::{check_rc, ctx_op, errno, failed, op_present, verbs_ctx, VerbsContextTail};
use crate::wire::rdma::{gid_is_ipv4, RdmaEndpoint, GRH_LEN};
use ibverbs_sys as sys;
use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::ptr;

/// Receive slots posted at any time, and the send ring size.
pub(super) const RECV_SLOTS: usize = 256;
pub(super) const SEND_SLOTS: usize = 256;
/// Bytes per slot: GRH + a probe packet with room for future fields.
pub(super) const SLOT_LEN: usize = GRH_LEN + 64;

/// Why RDMA probing cannot run here; logged once as
/// `RDMA probing disabled: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// Names of the RDMA devices, or why there are none. On a kernel without
/// the RDMA subsystem `ibv_get_device_list` fails with ENOSYS.
pub fn list_devices() -> Result<Vec<String>, Unavailable> {
    let mut n: c_int = 0;
    // SAFETY: plain library call; the list is freed below.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        let e = errno();
        return Err(Unavailable(format!(
            "cannot list RDMA devices (ibv_get_device_list: {e}); no RDMA subsystem or driver on this host"
        )));
    }
    let mut names = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: the list holds n valid device pointers.
        unsafe {
            let dev = *list.add(i);
            let name = sys::ibv_get_device_name(dev);
            if !name.is_null() {
                names.push(CStr::from_ptr(name).to_string_lossy().into_owned());
            }
        }
    }
    // SAFETY: list came from ibv_get_device_list.
    unsafe { sys::ibv_free_device_list(list) };
    if names.is_empty() {
        return Err(Unavailable(
            "no RDMA devices found (ibv_get_device_list returned none)".into(),
        ));
    }
    Ok(names)
}

/// One RNIC port with its UD queue pair. Not `Send`: created, used and
/// dropped on the RDMA engine thread.
pub struct Nic {
    /// Device name.
    pub name: String,
    /// Port number used.
    pub port: u8,
    /// Index of the RoCE v2 GID used.
    pub gid_index: u8,
    /// The UD endpoint peers send to.
    pub endpoint: RdmaEndpoint,
    /// (mask, hca_core_clock kHz) when the CQ delivers hardware timestamps.
    pub hw_clock: Option<(u64, u64)>,
    pub(super) ctx: *mut sys::ibv_context,
    pub(super) pd: *mut sys::ibv_pd,
    pub(super) channel: *mut sys::ibv_comp_channel,
    pub(super) cq: *mut sys::ibv_cq,
    pub(super) cq_ex: *mut sys::ibv_cq_ex,
    pub(super) qp: *mut sys::ibv_qp,
    pub(super) mr: *mut sys::ibv_mr,
    pub(super) buf: Vec<u8>,
    pub(super) send_next: usize,
    pub(super) ahs: HashMap<[u8; 16], *mut sys::ibv_ah>,
}

/// Work-request ids of receives: slot index with this tag, so a receive
/// completion can never be mistaken for a send.
pub const RECV_TAG: u64 = 0x5245_4356 << 32; // "RECV"

/// Whether a completion belongs to a receive, from its work-request id:
/// the opcode of a failed completion is undefined, the id never is.
pub fn is_recv_wr(wr_id: u64) -> bool {
    wr_id & !0xffff_ffff == RECV_TAG
}

impl Nic {
    /// Open every usable RNIC port (active, Ethernet link layer, with a
    /// RoCE v2 GID). Errors name the device and the failing verb.
    pub fn open_all(qkey: u32) -> Result<Vec<Nic>, Unavailable> {
        let names = list_devices()?;
        let mut nics = Vec::new();
        let mut problems = Vec::new();
        let mut n: c_int = 0;
        // SAFETY: as in list_devices.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(Unavailable(format!("ibv_get_device_list: {}", errno())));
        }
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds n valid device pointers.
            let dev = unsafe { *list.add(i) };
            let name = names
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("device{i}"));
            match unsafe { Nic::open(dev, &name, qkey) } {
                Ok(nic) => nics.push(nic),
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        // SAFETY: list came from ibv_get_device_list; opened contexts stay valid.
        unsafe { sys::ibv_free_device_list(list) };
        if nics.is_empty() {
            return Err(Unavailable(format!(
                "no usable RDMA port ({})",
                problems.join("; ")
            )));
        }
        for p in problems {
            tracing::warn!("RDMA device skipped: {p}");
        }
        Ok(nics)
    }

    /// # Safety
    /// `dev` must come from a live device list.
    unsafe fn open(dev: *mut sys::ibv_device, name: &str, qkey: u32) -> Result<Nic, VerbsError> {
        let ctx = sys::ibv_open_device(dev);
        if ctx.is_null() {
            return Err(VerbsError::Failed(format!(
                "ibv_open_device: {} (check permissions on /dev/infiniband/uverbs*)",
                errno()
            )));
        }
        // From here on, Drop releases whatever was created.
        let mut nic = Nic {
            name: name.to_string(),
            port: 0,
            gid_index: 0,
            endpoint: RdmaEndpoint {
                gid: [0; 16],
                qpn: 0,
                qkey,
            },
            hw_clock: None,
            ctx,
            pd: ptr::null_mut(),
            channel: ptr::null_mut(),
            cq: ptr::null_mut(),
            cq_ex: ptr::null_mut(),
            qp: ptr::null_mut(),
            mr: ptr::null_mut(),
            buf: vec![0u8; (RECV_SLOTS + SEND_SLOTS) * SLOT_LEN],
            send_next: 0,
            ahs: HashMap::new(),
        };
        let (port, gid_index, gid) = nic.find_roce_v2_gid()?;
        nic.port = port;
        nic.gid_index = gid_index;
        nic.endpoint.gid = gid;

        nic.pd = sys::ibv_alloc_pd(ctx);
        if nic.pd.is_null() {
            return Err(failed("ibv_alloc_pd"));
        }
        nic.channel = sys::ibv_create_comp_channel(ctx);
        if nic.channel.is_null() {
            return Err(failed("ibv_create_comp_channel"));
        }
        let fd = (*nic.channel).fd;
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        nic.create_cq()?;
        nic.create_qp(qkey)?;
        nic.mr = sys::ibv_reg_mr(
            nic.pd,
            nic.buf.as_mut_ptr() as *mut c_void,
            nic.buf.len(),
            sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as c_int,
        );
        if nic.mr.is_null() {
            return Err(VerbsError::Failed(format!(
                "ibv_reg_mr: {} (raise RLIMIT_MEMLOCK, e.g. ulimit -l unlimited)",
                errno()
            )));
        }
        for slot in 0..RECV_SLOTS {
            nic.post_recv(slot)?;
        }
        nic.arm()?;
        Ok(nic)
    }

    /// First active Ethernet port with a RoCE v2 GID, preferring an
    /// IPv4-mapped one (what RoCE v2 fabrics route on).
    unsafe fn find_roce_v2_gid(&self) -> Result<(u8, u8, [u8; 16]), VerbsError> {
        let mut dattr: sys::ibv_device_attr = std::mem::zeroed();
        if sys::ibv_query_device(self.ctx, &mut dattr) != 0 {
            return Err(failed("ibv_query_device"));
        }
        let query_port = ctx_op!(self.ctx, query_port);
        let mut best: Option<(u8, u8, [u8; 16])> = None;
        for port in 1..=dattr.phys_port_cnt {
            let mut gid_len = 256;
            if let Some(qp) = query_port {
                let mut pattr: sys::ibv_port_attr = std::mem::zeroed();
                if qp(
                    self.ctx,
                    port,
                    &mut pattr,
                    std::mem::size_of::<sys::ibv_port_attr>(),
                ) != 0
                {
                    continue;
                }
                if pattr.state != sys::ibv_port_state::IBV_PORT_ACTIVE
                    || pattr.link_layer != sys::IBV_LINK_LAYER_ETHERNET as u8
                {
                    continue;
                }
                gid_len = pattr.gid_tbl_len.clamp(0, 256);
            }
            for idx in 0..gid_len {
                let mut e: sys::ibv_gid_entry = std::mem::zeroed();
                let rc = sys::_ibv_query_gid_ex(
                    self.ctx,
                    port as u32,
                    idx as u32,
                    &mut e,
                    0,
                    std::mem::size_of::<sys::ibv_gid_entry>(),
                );
                if rc != 0 {
                    // Empty entries end the useful part of the table.
                    continue;
                }
                if e.gid_type != sys::IBV_GID_TYPE_ROCE_V2 {
                    continue;
                }
                let gid = e.gid.raw;
                if gid == [0; 16] {
                    continue;
                }
                let cand = (port, idx as u8, gid);
                if gid_is_ipv4(&gid) {
                    return Ok(cand);
                }
                best.get_or_insert(cand);
            }
        }
        best.ok_or(VerbsError::Missing("no active port with a RoCE v2 GID"))
    }

    /// A CQ with hardware completion timestamps when the device has them,
    /// a plain CQ (software timestamps) otherwise.
    unsafe fn create_cq(&mut self) -> Result<(), VerbsError> {
        let depth = (RECV_SLOTS + SEND_SLOTS) as u32;
        let mut clock: Option<(u64, u64)> = None;
        if let Some(qdx) = ctx_op!(self.ctx, query_device_ex) {
            let mut attr: sys::ibv_device_attr_ex = std::mem::zeroed();
            if qdx(
                self.ctx,
                ptr::null(),
                &mut attr,
                std::mem::size_of::<sys::ibv_device_attr_ex>(),
            ) == 0
                && valid_mask(attr.completion_timestamp_mask)
                && attr.hca_core_clock > 0
            {
                clock = Some((attr.completion_timestamp_mask, attr.hca_core_clock));
            }
        }
        if let (Some(c), Some(create)) = (clock, ctx_op!(self.ctx, create_cq_ex)) {
            let mut a: sys::ibv_cq_init_attr_ex = std::mem::zeroed();
            a.cqe = depth;
            a.channel = self.channel;
            a.wc_flags = (sys::IBV_WC_EX_WITH_BYTE_LEN
                | sys::IBV_WC_EX_WITH_SRC_QP
                | sys::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) as u64;
            let cq = create(self.ctx, &mut a);
            if !cq.is_null() {
                self.cq_ex = cq;
                self.cq = cq as *mut sys::ibv_cq; // ibv_cq_ex_to_cq
                self.hw_clock = Some(c);
                return Ok(());
            }
            tracing::info!(
                device = %self.name,
                "hardware CQE timestamps unavailable ({}); using software timestamps",
                errno()
            );
        }
        self.cq = sys::ibv_create_cq(self.ctx, depth as c_int, ptr::null_mut(), self.channel, 0);
        if self.cq.is_null() {
            return Err(failed("ibv_create_cq"));
        }
        Ok(())
    }

    unsafe fn create_qp(&mut self, qkey: u32) -> Result<(), VerbsError> {
        let mut init: sys::ibv_qp_init_attr = std::mem::zeroed();
        init.send_cq = self.cq;
        init.recv_cq = self.cq;
        init.cap.max_send_wr = SEND_SLOTS as u32;
        init.cap.max_recv_wr = RECV_SLOTS as u32;
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        init.qp_type = sys::ibv_qp_type::IBV_QPT_UD;
        init.sq_sig_all = 1;
        self.qp = sys::ibv_create_qp(self.pd, &mut init);
        if self.qp.is_null() {
            return Err(failed("ibv_create_qp(UD)"));
        }
        use sys::ibv_qp_attr_mask as M;
        let mut a: sys::ibv_qp_attr = std::mem::zeroed();
        a.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = self.port;
        a.qkey = qkey;
        let mask = M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_QKEY;
        if sys::ibv_modify_qp(self.qp, &mut a, mask.0 as c_int) != 0 {
            return Err(failed("ibv_modify_qp(INIT)"));
        }
        let mut a: sys::ibv_qp_attr = std::mem::zeroed();
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        if sys::ibv_modify_qp(self.qp, &mut a, M::IBV_QP_STATE.0 as c_int) != 0 {
            return Err(failed("ibv_modify_qp(RTR)"));
        }
        let mut a: sys::ibv_qp_attr = std::mem::zeroed();
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
        a.sq_psn = 0;
        let mask = M::IBV_QP_STATE | M::IBV_QP_SQ_PSN;
        if sys::ibv_modify_qp(self.qp, &mut a, mask.0 as c_int) != 0 {
            return Err(failed("ibv_modify_qp(RTS)"));
        }
        self.endpoint.qpn = (*self.qp).qp_num;
        Ok(())
    }

    pub(super) fn slot_ptr(&self, slot: usize) -> *mut u8 {
        // Slots never overlap the end: slot < RECV_SLOTS + SEND_SLOTS.
        self.buf.as_ptr().wrapping_add(slot * SLOT_LEN) as *mut u8
    }

    pub(super) unsafe fn post_recv(&mut self, slot: usize) -> Result<(), VerbsError> {
        let mut sge = self.sge(self.slot_ptr(slot), SLOT_LEN);
        let mut wr: sys::ibv_recv_wr = std::mem::zeroed();
        wr.wr_id = RECV_TAG | slot as u64;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let op = (*(*self.qp).context).ops.post_recv;
        post(
            self.qp,
            op,
            &mut wr,
            "ibv_post_recv",
            "provider has no post_recv",
        )
    }

    /// The scatter-gather entry of the `len` bytes at `p`, in the
    /// registered slot buffer.
    pub(super) unsafe fn sge(&self, p: *mut u8, len: usize) -> sys::ibv_sge {
        sys::ibv_sge {
            addr: p as u64,
            length: len as u32,
            lkey: (*self.mr).lkey,
        }
    }

    /// Request an event for the next completion.
    pub(super) fn arm(&mut self) -> Result<(), VerbsError> {
        // SAFETY: cq is live; req_notify_cq is the header's inline body.
        unsafe {
            let f = (*(*self.cq).context)
                .ops
                .req_notify_cq
                .ok_or("provider has no req_notify_cq")?;
            let rc = f(self.cq, 0);
            check_rc(rc, "ibv_req_notify_cq")?;
        }
        Ok(())
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        // SAFETY: each handle is destroyed once, children before parents.
        unsafe {
            for (_, ah) in self.ahs.drain() {
                sys::ibv_destroy_ah(ah);
            }
            release(self.qp, sys::ibv_destroy_qp);
            release(self.mr, sys::ibv_dereg_mr);
            release(self.cq, sys::ibv_destroy_cq);
            release(self.channel, sys::ibv_destroy_comp_channel);
            release(self.pd, sys::ibv_dealloc_pd);
            release(self.ctx, sys::ibv_close_device);
        }
    }
}

/// Release `handle` with `destroy` unless it was never made.
///
/// # Safety
/// `handle` is null or live, and not used after.
unsafe fn release<T>(handle: *mut T, destroy: unsafe extern "C" fn(*mut T) -> c_int) {
    if !handle.is_null() {
        // SAFETY: per the contract, a live handle released once.
        unsafe { destroy(handle) };
    }
}

/// Post `wr` on `qp` through the provider's `op` (the body of the
/// header's inline `ibv_post_send`/`ibv_post_recv`); `verb` names it in
/// errors, `missing` says the provider lacks it.
///
/// # Safety
/// `qp` is live and `wr` points at buffers registered with it.
pub(super) unsafe fn post<W>(
    qp: *mut sys::ibv_qp,
    op: Option<unsafe extern "C" fn(*mut sys::ibv_qp, *mut W, *mut *mut W) -> c_int>,
    wr: &mut W,
    verb: &str,
    missing: &'static str,
) -> Result<(), VerbsError> {
    let op = op.ok_or(missing)?;
    let mut bad: *mut W = ptr::null_mut();
    // SAFETY: per the contract.
    check_rc(unsafe { op(qp, wr, &mut bad) }, verb)
}
