//! When a pair turns anomalous: loss over a window of probes.

use std::collections::HashMap;
use std::net::IpAddr;

/// Detects a pair turning anomalous from its cumulative sent/lost
/// counters: over the last `window` probes, loss at or above `threshold`
/// (a ratio). Edge-triggered: it fires when the pair becomes anomalous,
/// not on every check while it stays so.
#[derive(Debug, Clone)]
pub struct AnomalyDetector {
    /// Probes per window.
    pub window: u64,
    /// Loss ratio at or above which a window is anomalous.
    pub threshold: f64,
    state: HashMap<IpAddr, (u64, u64, bool)>,
}

impl AnomalyDetector {
    /// A detector with no history.
    pub fn new(window: u64, threshold: f64) -> AnomalyDetector {
        AnomalyDetector {
            window: window.max(1),
            threshold,
            state: HashMap::new(),
        }
    }

    /// Feed the current counters of `peer`; true when it just turned
    /// anomalous. Counters that went backwards (series recreated) restart
    /// the window.
    pub fn update(&mut self, peer: IpAddr, sent: u64, lost: u64) -> bool {
        let e = self.state.entry(peer).or_insert((sent, lost, false));
        if sent < e.0 || lost < e.1 {
            *e = (sent, lost, false);
            return false;
        }
        let ds = sent - e.0;
        if ds < self.window {
            return false;
        }
        let dl = lost - e.1;
        let anomalous = dl as f64 >= self.threshold * ds as f64;
        let turned = anomalous && !e.2;
        *e = (sent, lost, anomalous);
        turned
    }

    /// Whether the last full window of `peer` was anomalous.
    pub fn is_anomalous(&self, peer: IpAddr) -> bool {
        self.state.get(&peer).is_some_and(|s| s.2)
    }

    /// Drop the history of `peer` (it left).
    pub fn forget(&mut self, peer: IpAddr) {
        self.state.remove(&peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anomaly_detector_is_edge_triggered() {
        let mut d = AnomalyDetector::new(10, 0.2);
        let p: IpAddr = "198.18.2.2".parse().unwrap();
        assert!(!d.update(p, 0, 0));
        assert!(!d.update(p, 10, 0), "healthy window");
        assert!(!d.update(p, 15, 5), "window not full yet");
        assert!(d.update(p, 20, 5), "50% loss over the window");
        assert!(d.is_anomalous(p));
        assert!(!d.update(p, 30, 10), "still anomalous: no new trigger");
        assert!(d.is_anomalous(p));
        assert!(!d.update(p, 40, 10), "recovered");
        assert!(!d.is_anomalous(p));
        assert!(d.update(p, 50, 13), "anomalous again");
        // Counters reset (series recreated): restart quietly.
        assert!(!d.update(p, 3, 3));
    }
}
