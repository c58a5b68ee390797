use super::ctx::{op_present, VerbsContextTail};
use super::list_devices;
use ibverbs_sys as sys;

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
