//! String-labelled enums: the label values, flag and configuration
//! spellings both binaries expose (`protocol="udp"`, `reason="too_large"`,
//! `metrics.histograms: native`), declared by
//! [`labelled_enum!`](crate::labelled_enum). A variant's label is its name
//! in snake_case (`TorMesh` is `tor_mesh`), the rule serde's
//! `rename_all = "snake_case"` follows, so the spelling written to a
//! metric, the one parsed back from a flag and the variant cannot drift
//! apart, and every such enum has the same `as_str`, `Display`, Prometheus
//! label encoding, `ALL` and parse instead of a hand-written table each.

use std::fmt;

/// A value that is none of a labelled enum's spellings; it names what was
/// parsed and every spelling accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLabel {
    /// What the value was to be ("protocol", "histogram mode").
    pub what: &'static str,
    /// The value as given.
    pub given: String,
    /// Every spelling accepted, in declaration order.
    pub accepted: &'static [&'static str],
}

impl fmt::Display for UnknownLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} {:?} (expected ", self.what, self.given)?;
        let n = self.accepted.len();
        for (i, label) in self.accepted.iter().enumerate() {
            let sep = match i {
                0 => "",
                _ if i + 1 == n => " or ",
                _ => ", ",
            };
            write!(f, "{sep}{label}")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for UnknownLabel {}

/// The length of `name` (an ASCII CamelCase identifier) in snake_case: one
/// `_` more before every upper-case letter but the first.
pub const fn snake_len(name: &str) -> usize {
    let b = name.as_bytes();
    let mut n = b.len();
    let mut i = 1;
    while i < b.len() {
        if b[i].is_ascii_uppercase() {
            n += 1;
        }
        i += 1;
    }
    n
}

/// `name` (an ASCII CamelCase identifier) in snake_case; `N` is
/// [`snake_len`]`(name)`. Digits stay with what precedes them
/// (`NoIpv6Socket` is `no_ipv6_socket`, `RttP50` is `rtt_p50`).
pub const fn snake_case<const N: usize>(name: &str) -> [u8; N] {
    let b = name.as_bytes();
    let mut out = [0u8; N];
    let (mut i, mut j) = (0, 0);
    while i < b.len() {
        if b[i].is_ascii_uppercase() && i > 0 {
            out[j] = b'_';
            j += 1;
        }
        out[j] = b[i].to_ascii_lowercase();
        i += 1;
        j += 1;
    }
    out
}

/// The snake_case label of a variant name, as a `&'static str` computed at
/// compile time.
#[doc(hidden)]
#[macro_export]
macro_rules! snake_label {
    ($variant:ident) => {{
        const BYTES: [u8; $crate::label::snake_len(stringify!($variant))] =
            $crate::label::snake_case(stringify!($variant));
        const LABEL: &str = match ::std::str::from_utf8(&BYTES) {
            Ok(s) => s,
            Err(_) => panic!("a variant name is ASCII"),
        };
        LABEL
    }};
}

/// Declares a fieldless enum whose variants are labelled by their names in
/// snake_case, with:
/// - `as_str` (a `const fn`), `Display` and `EncodeLabelValue`, all the
///   label;
/// - `LABELS`, every label in declaration order, and `from_label`, the
///   variant of a label;
/// - `ALL`, every variant in declaration order, unless the enum is
///   declared after `without_all;` (its own `ALL` means something
///   narrower);
/// - after `parse "what";`, `FromStr` with an [`UnknownLabel`] error
///   naming `what` and the labels.
#[macro_export]
macro_rules! labelled_enum {
    (parse $what:literal; $(#[$meta:meta])* $vis:vis enum $name:ident $body:tt) => {
        $crate::labelled_enum!($(#[$meta])* $vis enum $name $body);
        impl ::std::str::FromStr for $name {
            type Err = $crate::label::UnknownLabel;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::from_label(s).ok_or_else(|| $crate::label::UnknownLabel {
                    what: $what,
                    given: s.to_string(),
                    accepted: &Self::LABELS,
                })
            }
        }
    };
    (without_all; $(#[$meta:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        $crate::labelled_enum!(@labels $(#[$meta])* $vis enum $name { $($body)* });
    };
    (
        @labels
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every label, in declaration order.
            pub const LABELS: [&'static str; [$(stringify!($variant)),+].len()] =
                [$($name::$variant.as_str()),+];

            /// The label: the metric label value, flag or configuration
            /// spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $crate::snake_label!($variant) ),+
                }
            }

            /// The variant labelled `label`, if any.
            pub fn from_label(label: &str) -> Option<Self> {
                [$($name::$variant),+]
                    .into_iter()
                    .find(|v| v.as_str() == label)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::label::EncodeLabelValue for $name {
            fn encode(
                &self,
                encoder: &mut $crate::label::LabelValueEncoder<'_>,
            ) -> Result<(), ::std::fmt::Error> {
                ::std::fmt::Write::write_str(encoder, self.as_str())
            }
        }
    };
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident ),+ $(,)? }) => {
        $crate::labelled_enum!(@labels $(#[$meta])* $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        });
        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$(stringify!($variant)),+].len()] = [$($name::$variant),+];
        }
    };
}

#[doc(hidden)]
pub use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

#[cfg(test)]
mod tests {
    crate::labelled_enum! {
        parse "example";
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Example {
            Udp,
            TorMesh,
            NoIpv6Socket,
            RttP50,
        }
    }

    #[test]
    fn labels_are_the_names_in_snake_case_and_parse_back() {
        assert_eq!(
            Example::LABELS,
            ["udp", "tor_mesh", "no_ipv6_socket", "rtt_p50"]
        );
        for e in Example::ALL {
            assert_eq!(e.to_string().parse::<Example>(), Ok(e));
        }
        assert_eq!(
            "Udp".parse::<Example>().unwrap_err().to_string(),
            "unknown example \"Udp\" (expected udp, tor_mesh, no_ipv6_socket or rtt_p50)"
        );
    }
}
