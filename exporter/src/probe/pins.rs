//! Which live peer owns which node name. Series are keyed by `dst_node`
//! alone, so two addresses under one name would share (and mix) their
//! counters: a second exporter saying `--node b` would have its loss land on
//! the real `b`. A name is therefore owned by one live target at a time; a
//! claim on a name another address owns is refused (the claimant keeps its
//! address label and the refusal is counted as an identity conflict), and
//! the name is free again once its owner leaves the peer set.
//!
//! A name that reads as an IP address other than the claimant's own is
//! refused too: it would collide with that address's label while it is not
//! yet named.

use std::collections::HashMap;
use std::net::IpAddr;

/// Who holds a name: the target's address and its token (one per
/// [`Target`](super::Target), so a fresh target replacing one at the same
/// address takes the name over and the old one's release is a no-op).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The owner's address.
    pub addr: IpAddr,
    /// The owning target.
    pub token: u64,
}

/// Why a claim was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Another live address owns the name.
    Owned(IpAddr),
    /// The name is another address.
    OtherAddress,
}

/// The name book. Holds one entry per live named target, so it is bounded
/// by the peer set.
#[derive(Debug, Default)]
pub struct NamePins {
    owners: HashMap<String, Owner>,
    /// The name each address holds, for lookups by address (path tracing).
    by_addr: HashMap<IpAddr, String>,
    next_token: u64,
}

impl NamePins {
    /// A token for a new target.
    pub fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    /// Give `name` to `owner` unless another address holds it (or it is
    /// another address). Claiming a name one already holds succeeds.
    pub fn claim(&mut self, name: &str, owner: Owner) -> Result<(), Refusal> {
        if name
            .parse::<IpAddr>()
            .is_ok_and(|a| a != owner.addr || a.to_string() != name)
        {
            return Err(Refusal::OtherAddress);
        }
        match self.owners.get(name) {
            Some(o) if o.addr != owner.addr => return Err(Refusal::Owned(o.addr)),
            _ => {}
        }
        self.owners.insert(name.to_string(), owner);
        self.by_addr.insert(owner.addr, name.to_string());
        Ok(())
    }

    /// `owner` gives `name` up (it was relabelled or left); a no-op unless
    /// it holds the name.
    pub fn release(&mut self, name: &str, owner: Owner) {
        if self.owners.get(name) != Some(&owner) {
            return;
        }
        self.owners.remove(name);
        if self.by_addr.get(&owner.addr).map(String::as_str) == Some(name) {
            self.by_addr.remove(&owner.addr);
        }
    }

    /// The name `addr` holds.
    pub fn name(&self, addr: IpAddr) -> Option<&str> {
        self.by_addr.get(&addr).map(String::as_str)
    }

    /// Who holds `name`.
    pub fn owner(&self, name: &str) -> Option<Owner> {
        self.owners.get(name).copied()
    }

    /// Names held.
    pub fn len(&self) -> usize {
        self.owners.len()
    }

    /// Whether no name is held.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
    }
}

#[cfg(test)]
mod tests;
