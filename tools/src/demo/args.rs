//! The demo's command line. Parsed by clap: a bad flag or value exits 2
//! naming it, `--help` says what each fault does.

use clap::{Parser, ValueEnum};

/// Which fault the demo injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FaultKind {
    /// `--loss` percent packet loss at ToR tor1.
    Tor,
    /// Host host-t0-h1's NIC link down.
    Host,
    /// Container t1-h0-c1 unreachable on the data plane.
    Node,
    /// On a multipath fabric (3 ToRs × 2 hosts under 3 spines, 15 probe
    /// flows per pair), everything on the link tor0-spine1 dropped.
    Link,
    /// On a fabric whose containers share a VXLAN overlay (every host also
    /// probes the others host to host), host host-t0-h1's tunnel (UDP 4789)
    /// blocked: its containers lose every other host, still reach each
    /// other, its underlay answers; the host's virtual switch is to blame.
    Overlay,
}

/// The whole system on a fabric of network namespaces: a fault, its
/// localization and the alert.
#[derive(Debug, Parser)]
#[command(
    name = "skeletonhunter-demo",
    version,
    after_help = "Run as root. The binaries skeletonhunter-exporter and \
                  skeletonhunter-localizer are taken from the directory of this program."
)]
pub struct Args {
    /// The fault to inject.
    #[arg(long, value_enum, default_value_t = FaultKind::Tor)]
    pub fault: FaultKind,
    /// Packet loss of `--fault tor`, in percent.
    #[arg(long, default_value_t = 30, value_name = "PERCENT",
          value_parser = clap::value_parser!(u32).range(1..=99))]
    pub loss: u32,
    /// Run without the localizer: show live probe metrics only.
    #[arg(long)]
    pub no_localizer: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("skeletonhunter-demo").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_are_thirty_percent_at_a_tor() {
        let a = parse(&[]).unwrap();
        assert_eq!(
            (a.fault, a.loss, a.no_localizer),
            (FaultKind::Tor, 30, false)
        );
        let a = parse(&["--fault", "overlay", "--no-localizer"]).unwrap();
        assert_eq!((a.fault, a.no_localizer), (FaultKind::Overlay, true));
    }

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        for (args, flag) in [
            (&["--fault", "spine"][..], "--fault"),
            (&["--loss", "0"][..], "--loss"),
            (&["--loss", "100"][..], "--loss"),
            (&["--loss", "ten"][..], "--loss"),
        ] {
            let e = parse(args).unwrap_err();
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::InvalidValue | ErrorKind::ValueValidation
                ),
                "{args:?}: {:?}",
                e.kind()
            );
            assert!(e.to_string().contains(flag), "{args:?}: {e}");
            // clap exits 2 for these: a usage error.
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
        assert_eq!(
            parse(&["--spine"]).unwrap_err().kind(),
            ErrorKind::UnknownArgument
        );
    }
}
