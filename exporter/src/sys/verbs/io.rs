//! Using an open RNIC port: post sends and receives, poll completions,
//! re-arm the completion channel, read the NIC clock.

use super::super::completion::{Completion, VerbsError};
use super::ctx::{check_rc, ctx_op, failed, op_present, verbs_ctx, VerbsContextTail};
use super::device::{is_recv_wr, post, Nic, RECV_SLOTS, SEND_SLOTS, SLOT_LEN};
use crate::wire::rdma::RdmaEndpoint;
use ibverbs_sys as sys;
use std::os::raw::{c_int, c_void};
use std::ptr;

impl Nic {
    /// The received bytes of receive completion `c` (GRH slot included),
    /// and re-post its buffer afterwards with [`Nic::repost`].
    pub fn recv_slot(&self, c: &Completion) -> Option<&[u8]> {
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
    pub fn repost(&mut self, c: &Completion) -> Result<(), VerbsError> {
        let slot = (c.wr_id & 0xffff_ffff) as usize;
        if !is_recv_wr(c.wr_id) || slot >= RECV_SLOTS {
            return Ok(());
        }
        // SAFETY: the slot's buffer is ours again once its completion was read.
        unsafe { self.post_recv(slot) }
    }

    unsafe fn ah_for(&mut self, gid: [u8; 16]) -> Result<*mut sys::ibv_ah, VerbsError> {
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
            return Err(failed("ibv_create_ah"));
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
    pub fn send(
        &mut self,
        to: &RdmaEndpoint,
        payload: &[u8],
        wr_id: u64,
    ) -> Result<(), VerbsError> {
        let payload = &payload[..payload.len().min(SLOT_LEN)];
        // SAFETY: all pointers are owned by self and live; the send slot is
        // reused only after SEND_SLOTS further sends, more than the send
        // queue can hold, so its previous send has completed.
        unsafe {
            let ah = self.ah_for(to.gid)?;
            let slot = RECV_SLOTS + self.send_next % SEND_SLOTS;
            let p = self.slot_ptr(slot);
            ptr::copy_nonoverlapping(payload.as_ptr(), p, payload.len());
            let mut sge = self.sge(p, payload.len());
            let mut wr: sys::ibv_send_wr = std::mem::zeroed();
            wr.wr_id = wr_id;
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.opcode = sys::ibv_wr_opcode::IBV_WR_SEND;
            wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
            wr.wr.ud.ah = ah;
            wr.wr.ud.remote_qpn = to.qpn;
            wr.wr.ud.remote_qkey = to.qkey;
            let op = (*(*self.qp).context).ops.post_send;
            post(
                self.qp,
                op,
                &mut wr,
                "ibv_post_send",
                "provider has no post_send",
            )?;
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

    /// Consume pending channel events and re-arm; then the caller drains
    /// the CQ (the order that cannot lose a completion).
    pub fn ack_events(&mut self) -> Result<(), VerbsError> {
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
    pub fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> Result<(), VerbsError> {
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
                check_rc(rc, "ibv_start_poll")?;
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
                    return Err(VerbsError::Failed("ibv_poll_cq failed".into()));
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

    /// One raw NIC counter reading through `ibv_query_rt_values_ex`;
    /// `None` without hardware timestamps or when the provider lacks it.
    pub fn raw_clock(&self) -> Option<u64> {
        self.hw_clock?;
        // SAFETY: ctx is live; query_rt_values is the header's inline body.
        let op = unsafe { ctx_op!(self.ctx, query_rt_values) }?;
        let mut v = sys::ibv_values_ex {
            comp_mask: sys::IBV_VALUES_MASK_RAW_CLOCK,
            ..Default::default()
        };
        // SAFETY: ctx is live and v is a valid out-parameter.
        let rc = unsafe { op(self.ctx, &mut v) };
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
    }
}
