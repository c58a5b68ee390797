//! The thin libibverbs layer: open RNICs, one UD queue pair per RNIC, post
//! sends and receives, and poll completions with their timestamps.
//!
//! Only this file is `unsafe`; it turns verbs into [`Completion`]s and
//! takes [`Packet`](super::packet::Packet) bytes, and the exchange logic
//! lives in pure modules. Several verbs used here are `static inline` in
//! `verbs.h` (`ibv_create_cq_ex`, `ibv_query_rt_values_ex`,
//! `ibv_query_device_ex`, `ibv_poll_cq`, `ibv_post_send`, ...), which
//! bindgen cannot bind; they are re-implemented below exactly as the header
//! does: through the context's op table or the extended `verbs_context`
//! that sits in memory right before `ibv_context`.

use super::clock::{best_sample, valid_mask, ClockSample};
use super::engine::{Completion, Rnic};
use super::packet::{gid_is_ipv4, RdmaEndpoint, GRH_LEN};
use ibverbs_sys as sys;
use std::collections::HashMap;
use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::ptr;

/// Receive slots posted at any time, and the send ring size.
const RECV_SLOTS: usize = 256;
const SEND_SLOTS: usize = 256;
/// Bytes per slot: GRH + a probe packet with room for future fields.
const SLOT_LEN: usize = GRH_LEN + 64;

/// Why RDMA probing cannot run here; logged once as
/// `RDMA probing disabled: <reason>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The tail of `struct verbs_context` (rdma-core `verbs.h`), from
/// `query_port` to the embedded `ibv_context`. The struct "grows up": new
/// ops are added at its start, so offsets measured back from `context`
/// are ABI-stable, and the header's `verbs_get_ctx_op` checks `sz` to
/// know which ops a provider fills.
#[repr(C)]
struct VerbsContextTail {
    query_port: Option<
        unsafe extern "C" fn(*mut sys::ibv_context, u8, *mut sys::ibv_port_attr, usize) -> c_int,
    >,
    _ops_a: [*mut c_void; 23],
    query_rt_values:
        Option<unsafe extern "C" fn(*mut sys::ibv_context, *mut sys::ibv_values_ex) -> c_int>,
    create_cq_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *mut sys::ibv_cq_init_attr_ex,
        ) -> *mut sys::ibv_cq_ex,
    >,
    _priv: *mut c_void,
    query_device_ex: Option<
        unsafe extern "C" fn(
            *mut sys::ibv_context,
            *const c_void,
            *mut sys::ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    _ops_b: [*mut c_void; 10],
    _abi_placeholder3: u64,
    sz: usize,
    context: sys::ibv_context,
}

/// The extended context of `ctx`, if the provider has one.
///
/// # Safety
/// `ctx` must be a live context from `ibv_open_device`.
unsafe fn verbs_ctx(ctx: *mut sys::ibv_context) -> Option<*mut VerbsContextTail> {
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
fn op_present(sz: usize, op_offset: usize) -> bool {
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

fn errno() -> std::io::Error {
    std::io::Error::last_os_error()
}

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
    pub name: String,
    pub port: u8,
    pub gid_index: u8,
    pub endpoint: RdmaEndpoint,
    /// (mask, hca_core_clock kHz) when the CQ delivers hardware timestamps.
    pub hw_clock: Option<(u64, u64)>,
    ctx: *mut sys::ibv_context,
    pd: *mut sys::ibv_pd,
    channel: *mut sys::ibv_comp_channel,
    cq: *mut sys::ibv_cq,
    cq_ex: *mut sys::ibv_cq_ex,
    qp: *mut sys::ibv_qp,
    mr: *mut sys::ibv_mr,
    buf: Vec<u8>,
    send_next: usize,
    ahs: HashMap<[u8; 16], *mut sys::ibv_ah>,
}

/// Work-request ids of receives: slot index with this tag, so a receive
/// completion can never be mistaken for a send.
const RECV_TAG: u64 = 0x5245_4356 << 32; // "RECV"

/// Whether a completion belongs to a receive, from its work-request id:
/// the opcode of a failed completion is undefined, the id never is.
fn is_recv_wr(wr_id: u64) -> bool {
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
    unsafe fn open(dev: *mut sys::ibv_device, name: &str, qkey: u32) -> Result<Nic, String> {
        let ctx = sys::ibv_open_device(dev);
        if ctx.is_null() {
            return Err(format!(
                "ibv_open_device: {} (check permissions on /dev/infiniband/uverbs*)",
                errno()
            ));
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
            return Err(format!("ibv_alloc_pd: {}", errno()));
        }
        nic.channel = sys::ibv_create_comp_channel(ctx);
        if nic.channel.is_null() {
            return Err(format!("ibv_create_comp_channel: {}", errno()));
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
            return Err(format!(
                "ibv_reg_mr: {} (raise RLIMIT_MEMLOCK, e.g. ulimit -l unlimited)",
                errno()
            ));
        }
        for slot in 0..RECV_SLOTS {
            nic.post_recv(slot)?;
        }
        nic.arm()?;
        Ok(nic)
    }

    /// First active Ethernet port with a RoCE v2 GID, preferring an
    /// IPv4-mapped one (what RoCE v2 fabrics route on).
    unsafe fn find_roce_v2_gid(&self) -> Result<(u8, u8, [u8; 16]), String> {
        let mut dattr: sys::ibv_device_attr = std::mem::zeroed();
        if sys::ibv_query_device(self.ctx, &mut dattr) != 0 {
            return Err(format!("ibv_query_device: {}", errno()));
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
        best.ok_or_else(|| "no active port with a RoCE v2 GID".to_string())
    }

    /// A CQ with hardware completion timestamps when the device has them,
    /// a plain CQ (software timestamps) otherwise.
    unsafe fn create_cq(&mut self) -> Result<(), String> {
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
            return Err(format!("ibv_create_cq: {}", errno()));
        }
        Ok(())
    }

    unsafe fn create_qp(&mut self, qkey: u32) -> Result<(), String> {
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
            return Err(format!("ibv_create_qp(UD): {}", errno()));
        }
        use sys::ibv_qp_attr_mask as M;
        let mut a: sys::ibv_qp_attr = std::mem::zeroed();
        a.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = self.port;
        a.qkey = qkey;
        let mask = M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_QKEY;
        if sys::ibv_modify_qp(self.qp, &mut a, mask.0 as c_int) != 0 {
            return Err(format!("ibv_modify_qp(INIT): {}", errno()));
        }
        let mut a: sys::ibv_qp_attr = std::mem::zeroed();
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        if sys::ibv_modify_qp(self.qp, &mut a, M::IBV_QP_STATE.0 as c_int) != 0 {
            return Err(format!("ibv_modify_qp(RTR): {}", errno()));
        }
        let mut a: sys::ibv_qp_attr = std::mem::zeroed();
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
        a.sq_psn = 0;
        let mask = M::IBV_QP_STATE | M::IBV_QP_SQ_PSN;
        if sys::ibv_modify_qp(self.qp, &mut a, mask.0 as c_int) != 0 {
            return Err(format!("ibv_modify_qp(RTS): {}", errno()));
        }
        self.endpoint.qpn = (*self.qp).qp_num;
        Ok(())
    }

    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        // Slots never overlap the end: slot < RECV_SLOTS + SEND_SLOTS.
        self.buf.as_ptr().wrapping_add(slot * SLOT_LEN) as *mut u8
    }

    unsafe fn post_recv(&mut self, slot: usize) -> Result<(), String> {
        let mut sge = sys::ibv_sge {
            addr: self.slot_ptr(slot) as u64,
            length: SLOT_LEN as u32,
            lkey: (*self.mr).lkey,
        };
        let mut wr: sys::ibv_recv_wr = std::mem::zeroed();
        wr.wr_id = RECV_TAG | slot as u64;
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        let post = (*(*self.qp).context)
            .ops
            .post_recv
            .ok_or("provider has no post_recv")?;
        let rc = post(self.qp, &mut wr, &mut bad);
        if rc != 0 {
            return Err(format!(
                "ibv_post_recv: {}",
                std::io::Error::from_raw_os_error(rc)
            ));
        }
        Ok(())
    }

    /// The received bytes of receive completion `c` (GRH slot included),
    /// and re-post its buffer afterwards with [`Nic::repost`].
    fn recv_slot(&self, c: &Completion) -> Option<&[u8]> {
        if !is_recv_wr(c.wr_id) {
            return None;
        }
        let slot = (c.wr_id & 0xffff_ffff) as usize;
        if slot >= RECV_SLOTS {
            return None;
        }
        let len = (c.byte_len as usize).min(SLOT_LEN);
        self.buf.get(slot * SLOT_LEN..slot * SLOT_LEN + len)
    }

    /// Give a receive buffer back to the QP.
    fn repost(&mut self, c: &Completion) -> Result<(), String> {
        let slot = (c.wr_id & 0xffff_ffff) as usize;
        if !is_recv_wr(c.wr_id) || slot >= RECV_SLOTS {
            return Ok(());
        }
        // SAFETY: the slot's buffer is ours again once its completion was read.
        unsafe { self.post_recv(slot) }
    }

    unsafe fn ah_for(&mut self, gid: [u8; 16]) -> Result<*mut sys::ibv_ah, String> {
        if let Some(ah) = self.ahs.get(&gid) {
            return Ok(*ah);
        }
        let mut a: sys::ibv_ah_attr = std::mem::zeroed();
        a.is_global = 1;
        a.port_num = self.port;
        a.grh.dgid.raw = gid;
        a.grh.sgid_index = self.gid_index;
        a.grh.hop_limit = 64;
        let ah = sys::ibv_create_ah(self.pd, &mut a);
        if ah.is_null() {
            return Err(format!("ibv_create_ah: {}", errno()));
        }
        // Bound the cache: peers come and go.
        if self.ahs.len() >= 4096 {
            for (_, old) in self.ahs.drain() {
                sys::ibv_destroy_ah(old);
            }
        }
        self.ahs.insert(gid, ah);
        Ok(ah)
    }

    /// Post one UD send of `payload` to `to` with work-request id `wr_id`.
    fn send(&mut self, to: &RdmaEndpoint, payload: &[u8], wr_id: u64) -> Result<(), String> {
        let payload = &payload[..payload.len().min(SLOT_LEN)];
        // SAFETY: all pointers are owned by self and live; the send slot is
        // reused only after SEND_SLOTS further sends, more than the send
        // queue can hold, so its previous send has completed.
        unsafe {
            let ah = self.ah_for(to.gid)?;
            let slot = RECV_SLOTS + self.send_next % SEND_SLOTS;
            let p = self.slot_ptr(slot);
            ptr::copy_nonoverlapping(payload.as_ptr(), p, payload.len());
            let mut sge = sys::ibv_sge {
                addr: p as u64,
                length: payload.len() as u32,
                lkey: (*self.mr).lkey,
            };
            let mut wr: sys::ibv_send_wr = std::mem::zeroed();
            wr.wr_id = wr_id;
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND;
            wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
            wr.wr.ud.ah = ah;
            wr.wr.ud.remote_qpn = to.qpn;
            wr.wr.ud.remote_qkey = to.qkey;
            let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
            let post = (*(*self.qp).context)
                .ops
                .post_send
                .ok_or("provider has no post_send")?;
            let rc = post(self.qp, &mut wr, &mut bad);
            if rc != 0 {
                return Err(format!(
                    "ibv_post_send: {}",
                    std::io::Error::from_raw_os_error(rc)
                ));
            }
            // Advance only on success: the last SEND_SLOTS posted sends
            // then own distinct slots, and a successful post proves (the
            // send queue being SEND_SLOTS deep and completing in order)
            // that the send which used this slot before has completed.
            self.send_next = self.send_next.wrapping_add(1);
        }
        Ok(())
    }

    /// The completion channel's fd, to wait on with poll(2).
    pub fn event_fd(&self) -> c_int {
        // SAFETY: channel is live for the lifetime of self.
        unsafe { (*self.channel).fd }
    }

    /// Request an event for the next completion.
    fn arm(&mut self) -> Result<(), String> {
        // SAFETY: cq is live; req_notify_cq is the header's inline body.
        unsafe {
            let f = (*(*self.cq).context)
                .ops
                .req_notify_cq
                .ok_or("provider has no req_notify_cq")?;
            let rc = f(self.cq, 0);
            if rc != 0 {
                return Err(format!(
                    "ibv_req_notify_cq: {}",
                    std::io::Error::from_raw_os_error(rc)
                ));
            }
        }
        Ok(())
    }

    /// Consume pending channel events and re-arm; then the caller drains
    /// the CQ (the order that cannot lose a completion).
    fn ack_events(&mut self) -> Result<(), String> {
        // SAFETY: non-blocking fd; events are acked one by one.
        unsafe {
            loop {
                let mut cq: *mut sys::ibv_cq = ptr::null_mut();
                let mut cq_ctx: *mut c_void = ptr::null_mut();
                if sys::ibv_get_cq_event(self.channel, &mut cq, &mut cq_ctx) != 0 {
                    break;
                }
                sys::ibv_ack_cq_events(cq, 1);
            }
        }
        self.arm()
    }

    /// Read up to `max` completions into `out`.
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<(), String> {
        // SAFETY: cq/cq_ex are live; the op-table calls are the header's
        // inline bodies of ibv_poll_cq / ibv_start_poll & co.
        unsafe {
            if !self.cq_ex.is_null() {
                let cq = self.cq_ex;
                let start = (*cq).start_poll.ok_or("cq_ex without start_poll")?;
                let mut attr: sys::ibv_poll_cq_attr = std::mem::zeroed();
                let rc = start(cq, &mut attr);
                if rc == libc::ENOENT {
                    return Ok(());
                }
                if rc != 0 {
                    return Err(format!(
                        "ibv_start_poll: {}",
                        std::io::Error::from_raw_os_error(rc)
                    ));
                }
                let mut n = 0;
                loop {
                    let ok = (*cq).status == sys::ibv_wc_status::IBV_WC_SUCCESS;
                    out.push(Completion {
                        wr_id: (*cq).wr_id,
                        ok,
                        status: (*cq).status,
                        is_recv: is_recv_wr((*cq).wr_id),
                        byte_len: if ok {
                            (*cq).read_byte_len.map(|f| f(cq)).unwrap_or(0)
                        } else {
                            0
                        },
                        src_qp: if ok {
                            (*cq).read_src_qp.map(|f| f(cq)).unwrap_or(0)
                        } else {
                            0
                        },
                        hw_ts: if ok {
                            (*cq).read_completion_ts.map(|f| f(cq))
                        } else {
                            None
                        },
                    });
                    n += 1;
                    let next = (*cq).next_poll.ok_or("cq_ex without next_poll")?;
                    if n >= max || next(cq) != 0 {
                        break;
                    }
                }
                if let Some(end) = (*cq).end_poll {
                    end(cq);
                }
            } else {
                let poll = (*(*self.cq).context)
                    .ops
                    .poll_cq
                    .ok_or("provider has no poll_cq")?;
                let mut wcs: [sys::ibv_wc; 16] = std::mem::zeroed();
                let want = max.min(wcs.len()) as c_int;
                let k = poll(self.cq, want, wcs.as_mut_ptr());
                if k < 0 {
                    return Err("ibv_poll_cq failed".into());
                }
                for wc in &wcs[..k as usize] {
                    let status = wc.error().map(|(s, _)| s).unwrap_or(0);
                    out.push(Completion {
                        wr_id: wc.wr_id(),
                        ok: wc.is_valid(),
                        status,
                        is_recv: is_recv_wr(wc.wr_id()),
                        byte_len: wc.len() as u32,
                        src_qp: wc.src_qp,
                        hw_ts: None,
                    });
                }
            }
        }
        Ok(())
    }

    /// A simultaneous (NIC counter, wall clock) reading through
    /// `ibv_query_rt_values_ex`; `None` when the provider lacks it.
    fn clock_sample(&self) -> Option<ClockSample> {
        let (mask, _) = self.hw_clock?;
        // SAFETY: ctx is live; query_rt_values is the header's inline body.
        let op = unsafe { ctx_op!(self.ctx, query_rt_values) }?;
        let ctx = self.ctx;
        best_sample(
            5,
            super::super::wall_ns,
            || {
                let mut v = sys::ibv_values_ex {
                    comp_mask: sys::IBV_VALUES_MASK_RAW_CLOCK,
                    ..Default::default()
                };
                // SAFETY: v is a valid out-parameter.
                let rc = unsafe { op(ctx, &mut v) };
                if rc != 0 || v.comp_mask & sys::IBV_VALUES_MASK_RAW_CLOCK == 0 {
                    return None;
                }
                // Providers return the raw cycle count in the timespec
                // (mlx5: all of it in tv_nsec).
                Some(
                    (v.raw_clock.tv_sec as u64)
                        .wrapping_mul(1_000_000_000)
                        .wrapping_add(v.raw_clock.tv_nsec as u64),
                )
            },
            mask,
        )
    }
}

impl Rnic for Nic {
    fn name(&self) -> &str {
        &self.name
    }
    fn endpoint(&self) -> RdmaEndpoint {
        self.endpoint
    }
    fn hw_clock(&self) -> Option<(u64, u64)> {
        self.hw_clock
    }
    fn send(&mut self, to: &RdmaEndpoint, payload: &[u8], wr_id: u64) -> Result<(), String> {
        Nic::send(self, to, payload, wr_id)
    }
    fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<(), String> {
        Nic::poll(self, out, max)
    }
    fn recv_slot(&self, c: &Completion) -> Option<&[u8]> {
        Nic::recv_slot(self, c)
    }
    fn repost(&mut self, c: &Completion) -> Result<(), String> {
        Nic::repost(self, c)
    }
    fn ack_events(&mut self) -> Result<(), String> {
        Nic::ack_events(self)
    }
    fn clock_sample(&self) -> Option<ClockSample> {
        Nic::clock_sample(self)
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        // SAFETY: each handle is destroyed once, children before parents.
        unsafe {
            for (_, ah) in self.ahs.drain() {
                sys::ibv_destroy_ah(ah);
            }
            if !self.qp.is_null() {
                sys::ibv_destroy_qp(self.qp);
            }
            if !self.mr.is_null() {
                sys::ibv_dereg_mr(self.mr);
            }
            if !self.cq.is_null() {
                sys::ibv_destroy_cq(self.cq);
            }
            if !self.channel.is_null() {
                sys::ibv_destroy_comp_channel(self.channel);
            }
            if !self.pd.is_null() {
                sys::ibv_dealloc_pd(self.pd);
            }
            if !self.ctx.is_null() {
                sys::ibv_close_device(self.ctx);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mirror of `struct verbs_context` must end exactly where the
    /// header's does: `sz` right before the embedded context, which is last.
    #[test]
    fn verbs_context_tail_layout() {
        let size = std::mem::size_of::<VerbsContextTail>();
        let ctx_off = std::mem::offset_of!(VerbsContextTail, context);
        assert_eq!(ctx_off + std::mem::size_of::<sys::ibv_context>(), size);
        assert_eq!(
            std::mem::offset_of!(VerbsContextTail, sz) + std::mem::size_of::<usize>(),
            ctx_off
        );
        // 38 op pointers + priv + placeholder + sz before the context (x86_64/aarch64).
        assert_eq!(ctx_off, 8 * (1 + 23 + 2 + 1 + 1 + 10 + 1 + 1));
    }

    #[test]
    fn receive_ids_never_collide_with_send_ids() {
        use super::super::exchange::RESPONDER_WR_BIT;
        assert!(is_recv_wr(RECV_TAG | 5));
        assert!(!is_recv_wr(1), "prober sequence numbers");
        assert!(!is_recv_wr(RESPONDER_WR_BIT | 7), "responder ids");
        assert!(!is_recv_wr(RESPONDER_WR_BIT | RECV_TAG | 7));
    }

    #[test]
    fn op_presence_follows_sz() {
        let size = std::mem::size_of::<VerbsContextTail>();
        let off = std::mem::offset_of!(VerbsContextTail, create_cq_ex);
        assert!(op_present(size, off));
        assert!(op_present(size - off, off));
        assert!(!op_present(size - off - 1, off));
    }

    #[test]
    fn listing_devices_reports_a_reason_or_names() {
        // On a host without RDMA this is the error the exporter logs; with
        // devices it is their names. Either way, never a panic.
        match list_devices() {
            Ok(names) => assert!(!names.is_empty()),
            Err(e) => assert!(!e.0.is_empty()),
        }
    }
}
