//! Metric families declared once: [`metric_families!`](crate::metric_families)
//! turns a list of fields, each with its type, how it starts, its metric
//! name and help text, into the struct of handles, its constructor and its
//! registration. The exporter and the localizer each serve a few dozen
//! families; written out, every one was listed three times (field,
//! constructor, `register` call) in two crates.

#[doc(hidden)]
pub use prometheus_client::registry::Registry;

/// Declares a struct of metric families:
///
/// ```text
/// metric_families! {
///     pub struct Families(mode: Mode) {
///         /// Probe round-trip time (the doc comment is the help text).
///         pub rtt: HistFamily<L> = hist(mode) => "skeletonhunter_probe_rtt_seconds";
///         /// Probes sent (no expression: `Default::default()`).
///         pub sent: Family<L, Counter> => "skeletonhunter_probe_sent";
///         /// A field that is not a family: no name, not registered.
///         other: Thing = Thing::new();
///     }
/// }
/// ```
///
/// gives the struct, `unregistered(mode)`, every field built from its
/// expression or its `Default`, and `register_families`, which registers the families in
/// declaration order, each under its name with its doc comment (lines
/// joined by a space) as the help text: what the code says a family is and
/// what `/metrics` says are one text.
#[macro_export]
macro_rules! metric_families {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($($arg:ident: $argty:ty),* $(,)?) {
            $(
                $(#[doc = $doc:literal])*
                $fvis:vis $field:ident: $ty:ty $(= $init:expr)? $(=> $metric:literal)?;
            )+
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                $(#[doc = concat!("\n\nServed as `", $metric, "`.")])?
                $fvis $field: $ty,
            )+
        }

        impl $name {
            /// Every field, built from its expression; nothing registered.
            $vis fn unregistered($($arg: $argty),*) -> $name {
                $name {
                    $( $field: $crate::init_or_default!($($init)?), )+
                }
            }

            /// Register every family under its name and help text, in
            /// declaration order.
            $vis fn register_families(&self, r: &mut $crate::families::Registry) {
                $( $crate::register_family!(r, self.$field, [$($doc),*] $(, $metric)?); )+
            }
        }
    };
}

/// A field's expression, or `Default::default()` without one.
#[doc(hidden)]
#[macro_export]
macro_rules! init_or_default {
    () => {
        Default::default()
    };
    ($init:expr) => {
        $init
    };
}

/// One field of [`metric_families!`](crate::metric_families): registered
/// under its name, its doc lines joined as the help, when it has a name.
#[doc(hidden)]
#[macro_export]
macro_rules! register_family {
    ($r:ident, $value:expr, [$($doc:literal),*]) => {};
    ($r:ident, $value:expr, [$($doc:literal),*], $metric:literal) => {
        $r.register($metric, concat!($($doc),*).trim(), $value.clone());
    };
}
