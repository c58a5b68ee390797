//! Identity fields read from a YAML map keyed by kind names (`tor: asw-1`).
//! The `identity:` section and a topology-map entry take [`Kind`] names as
//! keys, so a new kind is a new key with no struct to extend; unknown and
//! repeated keys are errors worded as serde's derive words them ("unknown
//! field `rack`, expected one of …"), with the line the YAML parser adds.

use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, Visitor};
use serde::Deserialize;
use skeletonhunter_common::{Identity, Kind};
use std::marker::PhantomData;

/// The names of `kinds` followed by `extra`: the keys a section accepts,
/// for the "expected one of" list.
pub(super) const fn keys<const N: usize>(
    kinds: &[Kind],
    extra: &[&'static str],
) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < kinds.len() {
        out[i] = kinds[i].as_str();
        i += 1;
    }
    let mut j = 0;
    while j < extra.len() {
        out[i + j] = extra[j];
        j += 1;
    }
    out
}

/// Deserialize a section whose keys are `keys`: the names of `kinds`,
/// each that kind's id, and at most one other, whose value is an `X`
/// (`X::default()` when absent). An empty or null section is the default.
pub(super) fn deserialize_section<'de, D, X>(
    d: D,
    what: &'static str,
    keys: &'static [&'static str],
    kinds: &'static [Kind],
) -> Result<(Identity, X), D::Error>
where
    D: Deserializer<'de>,
    X: Deserialize<'de> + Default,
{
    d.deserialize_map(Section {
        what,
        keys,
        kinds,
        extra: PhantomData,
    })
}

struct Section<X> {
    what: &'static str,
    keys: &'static [&'static str],
    kinds: &'static [Kind],
    extra: PhantomData<X>,
}

impl<'de, X: Deserialize<'de> + Default> Visitor<'de> for Section<X> {
    type Value = (Identity, X);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.what)
    }
    fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
        Ok(Default::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut extra) = (Identity::default(), X::default());
        let mut seen: Vec<&'static str> = Vec::new();
        while let Some(known) = map.next_key_seed(Key(self.keys))? {
            if seen.contains(&known) {
                return Err(A::Error::duplicate_field(known));
            }
            seen.push(known);
            match self.kinds.iter().find(|k| k.as_str() == known) {
                Some(&kind) => id.set(kind, map.next_value::<String>()?),
                None => extra = map.next_value()?,
            }
        }
        Ok((id, extra))
    }
}

/// A key that must be one of the section's: refused while the key is read,
/// so the error carries the key's own line and column.
struct Key(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = &'static str;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = &'static str;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: Error>(self, key: &str) -> Result<&'static str, E> {
        self.0
            .iter()
            .find(|k| **k == key)
            .copied()
            .ok_or_else(|| E::unknown_field(key, self.0))
    }
}
