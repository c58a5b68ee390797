//! Kubernetes NetworkPolicy admission, evaluated over manifests read as
//! JSON: whether a pod may open a connection to another pod's port, as a
//! CNI that enforces NetworkPolicy decides it (ingress policies of the
//! target and egress policies of the source, each side open when no policy
//! of its kind selects the pod, else the union of the policies' rules).
//! `ipBlock` peers match no pod (pod traffic is judged by labels here).

use serde_json::Value;

/// A pod as policies see it: its namespace, the labels of that namespace,
/// and its own labels.
#[derive(Debug, Clone)]
pub struct PodRef {
    /// Its namespace.
    pub namespace: String,
    /// The labels of its namespace (at least `kubernetes.io/metadata.name`).
    pub namespace_labels: Value,
    /// Its labels.
    pub labels: Value,
}

impl PodRef {
    /// A pod with `labels` in `namespace`, whose only namespace label is the
    /// one Kubernetes sets on every namespace.
    pub fn new(namespace: &str, labels: Value) -> PodRef {
        PodRef {
            namespace: namespace.to_string(),
            namespace_labels: serde_json::json!({ "kubernetes.io/metadata.name": namespace }),
            labels,
        }
    }
}

/// A label selector (`matchLabels`, `matchExpressions`) against labels; an
/// empty or absent selector selects everything.
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_exprs = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match (e["operator"].as_str(), label(key)) {
                (Some("In"), Some(v)) => values.contains(&v),
                (Some("NotIn"), v) => v.is_none_or(|v| !values.contains(&v)),
                (Some("Exists"), v) => v.is_some(),
                (Some("DoesNotExist"), v) => v.is_none(),
                _ => false,
            }
        });
    by_labels && by_exprs
}

/// Whether a peer entry (`from`/`to` item) of a policy in `policy_ns`
/// matches `pod`.
fn peer_matches(peer: &Value, policy_ns: &str, pod: &PodRef) -> bool {
    let ns_sel = peer.get("namespaceSelector");
    let pod_sel = peer.get("podSelector");
    if ns_sel.is_none() && pod_sel.is_none() {
        return false; // ipBlock only
    }
    let ns_ok = match ns_sel {
        Some(sel) => selects(sel, &pod.namespace_labels),
        None => pod.namespace == policy_ns,
    };
    ns_ok && pod_sel.is_none_or(|sel| selects(sel, &pod.labels))
}

/// Whether a rule's `ports` admit `port`/`protocol` (absent or empty: all).
fn port_matches(ports: &Value, port: u16, protocol: &str) -> bool {
    let Some(list) = ports.as_array().filter(|l| !l.is_empty()) else {
        return true;
    };
    list.iter().any(|p| {
        let proto = p["protocol"].as_str().unwrap_or("TCP");
        let number = p["port"].as_u64();
        let end = p["endPort"].as_u64().or(number);
        proto == protocol
            && match (number, end) {
                (Some(lo), Some(hi)) => (lo..=hi).contains(&u64::from(port)),
                _ => p.get("port").is_none(),
            }
    })
}

/// The policy types a policy applies (its `policyTypes`, or by default
/// Ingress, plus Egress when it has egress rules).
fn applies(policy: &Value, kind: &str) -> bool {
    match policy["spec"]["policyTypes"].as_array() {
        Some(types) => types.iter().any(|t| t == kind),
        None => kind == "Ingress" || policy["spec"].get("egress").is_some(),
    }
}

/// Whether `policies` let one side of a connection through: `kind` is
/// "Ingress" (for `pod` the target, `peer` the source) or "Egress" (`pod`
/// the source, `peer` the target).
fn side_allows(
    policies: &[Value],
    kind: &str,
    pod: &PodRef,
    peer: &PodRef,
    port: u16,
    protocol: &str,
) -> bool {
    let (rules_key, peers_key) = match kind {
        "Ingress" => ("ingress", "from"),
        _ => ("egress", "to"),
    };
    let mut selected = policies.iter().filter(|p| {
        p["kind"] == "NetworkPolicy"
            && p["metadata"]["namespace"].as_str() == Some(pod.namespace.as_str())
            && applies(p, kind)
            && selects(&p["spec"]["podSelector"], &pod.labels)
    });
    let mut any = false;
    let admitted = selected.any(|p| {
        any = true;
        let ns = pod.namespace.as_str();
        p["spec"][rules_key]
            .as_array()
            .into_iter()
            .flatten()
            .any(|rule| {
                let peers_ok = match rule[peers_key].as_array() {
                    Some(list) if !list.is_empty() => {
                        list.iter().any(|x| peer_matches(x, ns, peer))
                    }
                    _ => true,
                };
                peers_ok && port_matches(&rule["ports"], port, protocol)
            })
    });
    admitted || !any
}

/// Whether `source` may connect to `target`'s `port`/`protocol` under
/// `policies` (each with `metadata.namespace` set).
pub fn allows(
    policies: &[Value],
    source: &PodRef,
    target: &PodRef,
    port: u16,
    protocol: &str,
) -> bool {
    side_allows(policies, "Egress", source, target, port, protocol)
        && side_allows(policies, "Ingress", target, source, port, protocol)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(ns: &str, spec: Value) -> Value {
        json!({"kind": "NetworkPolicy", "metadata": {"name": "p", "namespace": ns}, "spec": spec})
    }

    #[test]
    fn open_without_policies_and_closed_by_one() {
        let a = PodRef::new("a", json!({"app": "x"}));
        let b = PodRef::new("b", json!({"app": "y"}));
        assert!(allows(&[], &a, &b, 80, "TCP"));
        let deny = policy(
            "b",
            json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []}),
        );
        assert!(!allows(std::slice::from_ref(&deny), &a, &b, 80, "TCP"));
        let admit = policy(
            "b",
            json!({"podSelector": {"matchLabels": {"app": "y"}}, "ingress": [{
                "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "a"}},
                          "podSelector": {"matchLabels": {"app": "x"}}}],
                "ports": [{"port": 80}]}]}),
        );
        let both = [deny, admit];
        assert!(allows(&both, &a, &b, 80, "TCP"));
        assert!(!allows(&both, &a, &b, 81, "TCP"));
        assert!(!allows(&both, &a, &b, 80, "UDP"));
        let other = PodRef::new("a", json!({"app": "z"}));
        assert!(!allows(&both, &other, &b, 80, "TCP"));
    }

    #[test]
    fn pod_selector_alone_means_the_policy_namespace() {
        let b = PodRef::new("b", json!({"app": "y"}));
        let p = policy(
            "b",
            json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "x"}}}]}]}),
        );
        let here = PodRef::new("b", json!({"app": "x"}));
        let there = PodRef::new("a", json!({"app": "x"}));
        let ps = std::slice::from_ref(&p);
        assert!(allows(ps, &here, &b, 1, "TCP"));
        assert!(!allows(ps, &there, &b, 1, "TCP"));
    }

    #[test]
    fn egress_of_the_source_counts_too() {
        let a = PodRef::new("a", json!({"app": "x"}));
        let b = PodRef::new("b", json!({"app": "y"}));
        let p = policy(
            "a",
            json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]}),
        );
        let ps = std::slice::from_ref(&p);
        assert!(allows(ps, &a, &b, 53, "UDP"));
        assert!(!allows(ps, &a, &b, 9090, "TCP"));
    }
}
